"""What identifies one Slack delivery (bot.slack.handlers.delivery_id): the same for a retry and
a byte-for-byte replay, different for another command."""

from __future__ import annotations

from slack_bolt.request.async_request import AsyncBoltRequest

from bot.slack.handlers import delivery_id

FORM = "command=%2Fflagbot&text=help&user_id=U1&channel_id=C1"


def _request(signature: str | None = None, retry: str | None = None) -> AsyncBoltRequest:
    headers = {"content-type": ["application/x-www-form-urlencoded"]}
    if signature is not None:
        headers["x-slack-signature"] = [signature]
    if retry is not None:
        headers["x-slack-retry-num"] = [retry]
    return AsyncBoltRequest(body=FORM, headers=headers)


def test_slacks_own_id_comes_first_and_a_retry_keeps_it() -> None:
    payload = {"trigger_id": "123.456.abc", "text": "help"}
    assert delivery_id(payload, _request("v0=aa"), "trigger_id") == "123.456.abc"
    assert delivery_id(payload, _request("v0=aa", retry="1"), "trigger_id") == "123.456.abc"


def test_without_it_the_signature_then_the_payload_identify_the_delivery() -> None:
    payload = {"text": "help", "user_id": "U1"}
    assert delivery_id(payload, _request("v0=aa"), "trigger_id") == "sig:v0=aa"
    assert delivery_id(payload, _request("v0=bb"), "trigger_id") == "sig:v0=bb"
    hashed = delivery_id(payload, _request(), "trigger_id")
    assert hashed.startswith("body:") and hashed == delivery_id(dict(payload), _request(), "trigger_id")
    assert hashed != delivery_id({**payload, "text": "status"}, _request(), "trigger_id")
    assert delivery_id({"text": "\ud800"}, _request(), "trigger_id").startswith(
        "body:"
    )  # no UnicodeEncodeError
