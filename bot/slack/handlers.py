"""The listeners for `/flagbot` and `@flagbot` (in a thread: acts there). Plain async functions.

Each acks first (Slack's 3 s), with an ephemeral answer when the command is refused (a usage
error, a role missing), and hands the work to a background task. Every command is audited with
who, what and the outcome; a command or an event seen twice acts once (the keys are in the
store: also after a restart, in Socket Mode and HTTP mode alike). Buttons are `bot.slack.buttons`;
deciding and starting a command, whoever asked, is `bot.slack.running`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bot.app.channels import answers_in, needs_name, pointer
from bot.app.flag_list import FlagList, cached_flag_list, packaged_flag_list, read_flag_list
from bot.commands import CommandError, Invocation
from bot.commands.registry import get_command
from bot.commands.target_catalog import UnknownTargetError
from bot.redaction import redact
from bot.slack.dispatch import check, check_stored, flag_note, parse, threaded, words_of
from bot.slack.rbac import Decision
from bot.slack.running import decide_for, error_reporter, start
from bot.slack.services import SlackServices
from bot.slack.text import typed_text
from bot.slack.threads import Where, thread_target

log = logging.getLogger(__name__)
MENTION = re.compile(r"^\s*<@[A-Z0-9]+(?:\|[^>]*)?>\s*")


def delivery_id(payload: dict[str, Any], request: AsyncBoltRequest, field: str) -> str:
    """What is the same in every delivery of one command or event, and in a replay of its
    signed request: Slack's `field` (a command's `trigger_id`, an event's `event_id`); else
    the request's `X-Slack-Signature` (an HMAC of its timestamp and body); else the payload's
    hash (Socket Mode has no signature)."""
    ident = payload.get(field)
    if isinstance(ident, str) and ident:
        return ident
    signatures = request.headers.get("x-slack-signature") or []
    if signatures and signatures[0]:
        return "sig:" + signatures[0]
    whole = json.dumps(payload, sort_keys=True, default=str).encode("utf-8", "surrogatepass")
    return "body:" + hashlib.sha256(whole).hexdigest()


ALREADY_DELIVERED = (
    "this command reached flagbot before (Slack delivered it again, or the request was replayed); "
    "it was acted on then and is not run twice"
)


async def on_command(
    ack: AsyncAck,
    command: dict[str, Any],
    client: AsyncWebClient,
    context: AsyncBoltContext,
    request: AsyncBoltRequest,
) -> None:
    """`/flagbot TEXT`: a mutating command opens an investigation thread; others answer.
    A command delivered twice (a redelivery, a replayed request) acts once, across restarts."""
    services: SlackServices = context["flagbot"]
    services.request_seen()
    text, user, channel = typed_text(command.get("text", "")), command["user_id"], command["channel_id"]
    if not await services.first_delivery("command", delivery_id(command, request, "trigger_id"), user):
        await ack(response_type="ephemeral", text=ALREADY_DELIVERED)
        return
    if not answers_in(services.settings, channel, command.get("channel_name")):
        await ack(response_type="ephemeral", text=pointer(services.settings))
        return
    where = Where(channel)
    try:
        words = words_of(text)
        flags = cached_flag_list(services.settings, words)  # no SSH before the ack
    except (CommandError, UnknownTargetError) as exc:
        await ack(response_type="ephemeral", text=redact(_refusal_text(exc)))
        return
    if flags is None:  # the host's list is not known yet: what no list can take is refused now
        refusal = await _refused_whatever_the_list(services, client, text, words, user, channel)
        if refusal is not None:
            await ack(response_type="ephemeral", text=redact(refusal))
            return
        services.spawn(
            _checked_on_the_host(services, client, text, words, user, where),
            on_error=error_reporter(client, where, user),
        )
        await ack(response_type="ephemeral", text=checking_text(words, services.settings.default_target))
        return
    accepted = await _accepted(services, client, text, flags, user, channel)
    if isinstance(accepted, str):
        await ack(response_type="ephemeral", text=redact(accepted))
        return
    invocation, decision, notes = accepted
    # before the ack: once Slack has its answer, the run is already registered
    await start(services, client, invocation, decision, text=text, user=user, where=where, notes=notes)
    said = _started_text(invocation, decision, notes)
    if said:
        await ack(response_type="ephemeral", text=said)
    else:
        await ack()


def _refusal_text(exc: Exception) -> str:
    return exc.render() if isinstance(exc, CommandError) else CommandError(str(exc)).render()


def checking_text(words: list[str], default_target: str | None) -> str:
    """The ack of a command whose flags wait for the host's own list."""
    named = next((word.split("=", 1)[1] for word in words if word.startswith("target=")), default_target)
    return (
        f"checking `{words[0]}` against the SGLang that {named} runs (its flag list is read from the "
        "host); the answer follows: the run's thread when it starts, or a message only you see"
    )


def _started_text(invocation: Invocation, decision: Decision, notes: list[str]) -> str | None:
    """What the ack (or, after a host check, the follow-up) says of an accepted command."""
    if decision.needs != "none" and threaded(invocation):
        head = f"`{invocation.name}` needs {decision.needs}: see the card"
    elif threaded(invocation):
        head = f"starting `{invocation.name}`: follow it in the thread"
    else:
        return "\n".join(notes) or None
    return "\n".join([head, *notes])


async def _refused_whatever_the_list(
    services: SlackServices, client: AsyncWebClient, text: str, words: list[str], user: str, channel: str
) -> str | None:
    """A refusal no SGLang version's list would change, found with the packaged list while the
    host's is not known: the words' shape, the target, an option, the user's role or the target's
    change rules. None when the words may stand, or only a flag list could refuse them."""
    try:
        invocation = parse(services.settings, text, packaged_flag_list(services.settings, words))
        check(services.settings, invocation)
        await check_stored(services, invocation)
    except CommandError as exc:
        return None if exc.flag_list else exc.render()
    except UnknownTargetError as exc:
        return _refusal_text(exc)
    decision = await decide_for(services, client, invocation, user, channel, audit_allowed=False)
    return None if decision.allowed else decision.reason


async def _accepted(
    services: SlackServices,
    client: AsyncWebClient,
    text: str,
    flags: FlagList,
    user: str,
    channel: str,
    *,
    stored_checked: bool = False,
) -> tuple[Invocation, Decision, list[str]] | str:
    """The command read with `flags`, checked and authorised; or the refusal to show the user.
    `stored_checked`: the store's checks are left to the run, which asks them before it opens
    its thread (`run_in_thread`, `rollback_or_reconcile`): after a "checking" ack, where
    `check_stored` already answered for these words unless the packaged list could not read them."""
    try:
        invocation = parse(services.settings, text, flags)
        check(services.settings, invocation)
        if not stored_checked:
            await check_stored(services, invocation)
    except CommandError as exc:  # a list's refusal says which list it was
        return exc.render() + (f"\nflags checked against the {flags.note}" if exc.flag_list else "")
    decision = await decide_for(services, client, invocation, user, channel)
    if not decision.allowed:
        return decision.reason
    return invocation, decision, flag_note(flags, invocation)


async def _checked_on_the_host(
    services: SlackServices,
    client: AsyncWebClient,
    text: str,
    words: list[str],
    user: str,
    where: Where,
) -> None:
    """After a "checking" ack: read the host's list, then answer as the ack would have (the
    refusal, or the run started, naming the list used), only to the user until a thread opens."""
    flags = await read_flag_list(services.settings, words)
    accepted = await _accepted(services, client, text, flags, user, where.channel, stored_checked=True)
    if isinstance(accepted, str):
        await client.chat_postEphemeral(channel=where.channel, user=user, text=redact(accepted))
        return
    invocation, decision, notes = accepted
    await start(services, client, invocation, decision, text=text, user=user, where=where, notes=notes)
    said = _started_text(invocation, decision, notes)
    if said:
        await client.chat_postEphemeral(channel=where.channel, user=user, text=said)


async def on_mention(
    body: dict[str, Any],
    event: dict[str, Any],
    client: AsyncWebClient,
    context: AsyncBoltContext,
    request: AsyncBoltRequest,
) -> None:
    """`@flagbot COMMAND` (in an investigation thread: acts there). Redelivered events act once.

    Bolt acknowledges an event when its listener returns, so everything is done after it."""
    services: SlackServices = context["flagbot"]
    services.request_seen()
    where = Where(event["channel"], event.get("thread_ts") or event.get("ts"))
    services.spawn(
        _mentioned(services, client, event, where, delivery_id(body, request, "event_id")),
        on_error=error_reporter(client, where, event.get("user", "")),
    )


async def _mentioned(
    services: SlackServices, client: AsyncWebClient, event: dict[str, Any], where: Where, ident: str
) -> None:
    user, channel = event.get("user", ""), event["channel"]
    if not await services.first_delivery("event", ident, user):
        return
    if not await _answers_in(services, client, channel):
        await client.chat_postEphemeral(
            channel=channel, user=user, thread_ts=where.thread_ts, text=pointer(services.settings)
        )
        return
    text = typed_text(MENTION.sub("", event.get("text", ""), count=1))
    refusal: str | None = None
    try:
        if event.get("thread_ts"):  # a follow-up in a thread acts on the thread's target
            text = await _in_thread(services, text, channel, str(event["thread_ts"]))
        words = words_of(text)
        flags = cached_flag_list(services.settings, words)
        if flags is None:
            refusal = await _refused_whatever_the_list(services, client, text, words, user, channel)
    except (CommandError, UnknownTargetError) as exc:
        refusal = _refusal_text(exc)
    if refusal is not None:
        await client.chat_postEphemeral(channel=channel, user=user, thread_ts=where.thread_ts, text=refusal)
        return
    if flags is None:  # the answer waits for the host's own list: say so meanwhile
        await client.chat_postEphemeral(
            channel=channel,
            user=user,
            thread_ts=where.thread_ts,
            text=checking_text(words, services.settings.default_target),
        )
        flags = await read_flag_list(services.settings, words)
    accepted = await _accepted(services, client, text, flags, user, channel)
    if isinstance(accepted, str):
        await client.chat_postEphemeral(channel=channel, user=user, thread_ts=where.thread_ts, text=accepted)
        return
    invocation, decision, notes = accepted
    await start(services, client, invocation, decision, text=text, user=user, where=where, notes=notes)


async def _answers_in(services: SlackServices, client: AsyncWebClient, channel: str) -> bool:
    """`bot.app.channels.answers_in` for a mention, whose event names the channel by id only."""
    name = None
    if needs_name(services.settings, channel):
        info = await client.conversations_info(channel=channel)
        name = str((info.get("channel") or {}).get("name") or "") or None
    return answers_in(services.settings, channel, name)


async def _in_thread(services: SlackServices, text: str, channel: str, thread_ts: str) -> str:
    """The text a mention in a thread stands for: without `target=`, the target of the thread's
    runs (never the default target in a thread flagbot opened for another one). Decided on the
    words, before they are read with the target's flag list."""
    words = words_of(text)
    spec = get_command(words[0])
    if spec is None or (spec.option("target") is None and not spec.free_options):
        return text
    if any(word.startswith("target=") or word.split("=", 1)[0] == "--target" for word in words[1:]):
        return text
    target = await thread_target(services.store, channel, thread_ts)
    if target is None:  # not a thread flagbot opened: as typed in the channel
        return text
    return f"{text} target={target}"
