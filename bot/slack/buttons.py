"""The buttons under a card: Revert, Cancel, Isolate, Re-run, Keep, Approve / Deny, a proposed
hypothesis; and Run when free under a refusal for a busy target. Each is authorised like the command it stands for, acted on once (the click's key is
taken only after it is authorised), on the experiment's own target, and the thread is told who
clicked it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.app.ask import AlreadyDecidedError, answer
from bot.app.decisions import button_command
from bot.app.flag_list import flag_list
from bot.commands import Invocation
from bot.slack.approvals import decide as decide_approval
from bot.slack.card import ActionValue
from bot.slack.dispatch import check_stored, parse, words_of
from bot.slack.proposals import proposal
from bot.slack.proposals import record as record_hypothesis
from bot.slack.rbac import audit_decision, decide_click, roles_on
from bot.slack.render import parse_action_value
from bot.slack.render_tables import context as context_block
from bot.slack.run_when_free import RUN_WHEN_FREE_ACTION, parse_run_when_free
from bot.slack.running import decide_for, error_reporter, start
from bot.slack.services import SlackServices
from bot.slack.threads import Where
from bot.store.experiments import get_experiment
from bot.store.loop_models import Experiment


async def on_action(
    ack: AsyncAck,
    body: dict[str, Any],
    action: dict[str, Any],
    client: AsyncWebClient,
    context: AsyncBoltContext,
) -> None:
    """A button: authorised like the command it stands for, acted on once, the thread told who did it.

    The idempotency key is taken only after the click is authorised, so a refused click does not
    use up the button for someone who may press it.
    """
    await ack()
    services: SlackServices = context["flagbot"]
    services.request_seen()
    user = body["user"]["id"]
    channel = body["channel"]["id"]
    message = body.get("message") or {}
    where = Where(channel, message.get("thread_ts") or message.get("ts"))
    services.spawn(
        _clicked(services, client, action, user, message, where), on_error=error_reporter(client, where, user)
    )


async def _clicked(
    services: SlackServices,
    client: AsyncWebClient,
    action: dict[str, Any],
    user: str,
    message: dict[str, Any],
    where: Where,
) -> None:
    channel, root = where.channel, where.thread_ts
    if action.get("action_id") == RUN_WHEN_FREE_ACTION:  # its value holds words, not an experiment
        await _run_when_free(services, client, action, user, where)
        return
    try:
        value = parse_action_value(str(action.get("value", "")))
    except ValueError as exc:
        await client.chat_postEphemeral(
            channel=channel, user=user, thread_ts=root, text=f"this button cannot be used: {exc}"
        )
        return
    if value.action in ("approve", "deny"):
        await decide_approval(services, client, value.experiment_id, value.action, user=user)
        return
    if not await _may_click(services, client, value, user, where):
        return
    words = await _button_words(services, action["action_id"], value)
    invocation = await _read(services, words) if words is not None else None
    decision = None
    if invocation is not None:
        await check_stored(services, invocation)
        decision = await decide_for(services, client, invocation, user, channel)
        if not decision.allowed:
            await client.chat_postEphemeral(channel=channel, user=user, thread_ts=root, text=decision.reason)
            return
    if value.action == "keep":
        await _kept_experiment(services, value.experiment_id)
    if not await services.first_time(f"click:{value.nonce}", user):
        return
    when = datetime.now(UTC).strftime("%H:%M:%S UTC")
    label = action.get("text", {}).get("text", action["action_id"])
    hypothesis_id = None
    if value.action == "test_hypothesis" and invocation is not None and words is not None:
        hypothesis_id, words = await _hypothesis_words(services, value, invocation, words, user)
        invocation = await _read(services, words)
        label = f"{label} (hypothesis #{hypothesis_id}: `{words}`)"
        await _mark_tested(
            client,
            channel,
            message,
            str(action.get("block_id", "")),
            f"<@{user}> ran it at {when} as hypothesis #{hypothesis_id}",
        )
    await client.chat_postMessage(
        channel=channel, thread_ts=root, text=f"<@{user}> clicked {label} at {when}"
    )
    if value.action == "keep" and not await _answered(services, client, value, user, where):
        return
    if invocation is None or words is None or decision is None:
        return
    await start(
        services,
        client,
        invocation,
        decision,
        text=words,
        user=user,
        where=where,
        hypothesis_id=hypothesis_id,
    )


async def _run_when_free(
    services: SlackServices, client: AsyncWebClient, action: dict[str, Any], user: str, where: Where
) -> None:
    """ "Run when free" (`bot.slack.run_when_free`): the refused words again with `wait=`, for
    the requester only, read and authorised again as if typed, and acted on once."""
    try:
        value = parse_run_when_free(str(action.get("value", "")))
    except ValueError as exc:
        await client.chat_postEphemeral(
            channel=where.channel,
            user=user,
            thread_ts=where.thread_ts,
            text=f"this button cannot be used: {exc}",
        )
        return
    if user != value.requester:
        await client.chat_postEphemeral(
            channel=where.channel,
            user=user,
            thread_ts=where.thread_ts,
            text=f"only <@{value.requester}>, who asked, can use this button; send the command yourself with wait=DURATION",
        )
        return
    invocation = await _read(services, value.words)
    await check_stored(services, invocation)
    decision = await decide_for(services, client, invocation, user, where.channel)
    if not decision.allowed:
        await client.chat_postEphemeral(
            channel=where.channel, user=user, thread_ts=where.thread_ts, text=decision.reason
        )
        return
    if not await services.first_time(f"click:{value.nonce}", user):
        return
    when = datetime.now(UTC).strftime("%H:%M:%S UTC")
    await client.chat_postMessage(
        channel=where.channel,
        thread_ts=where.thread_ts,
        text=f"<@{user}> clicked Run when free at {when}: `{value.words}`",
    )
    await start(services, client, invocation, decision, text=value.words, user=user, where=where)


async def _read(services: SlackServices, text: str) -> Invocation:
    """A button's command read with its target's flag list (the cached host list, else the host's
    answer: a click is acknowledged before this runs)."""
    return parse(services.settings, text, await flag_list(services.settings, words_of(text)))


async def _may_click(
    services: SlackServices, client: AsyncWebClient, value: ActionValue, user: str, where: Where
) -> bool:
    """Every other button changes the target or records the team's decision (Keep): someone
    without the operator role on the experiment's target is refused, audited, before anything the
    button names is done (a missing experiment must not answer in place of the refusal, and Keep
    must not be recorded). The experiment is read only for its target; a missing one is decided
    with the global roles."""
    row = await services.store.run(get_experiment, services.store.store, value.experiment_id)
    roles, table = await roles_on(client, services.settings, user, row.target if row is not None else None)
    decision = decide_click(value.action, roles, actor=user, table=table)
    if decision.allowed:
        return True
    services.spawn(
        audit_decision(
            services.store,
            decision,
            actor=f"slack:{user}",
            target=row.target if row is not None else None,
            command=value.action,
            roles=roles,
            channel=where.channel,
            detail={"experiment_id": value.experiment_id, "button": True},
        )
    )
    await client.chat_postEphemeral(
        channel=where.channel, user=user, thread_ts=where.thread_ts, text=decision.reason
    )
    return False


async def _hypothesis_words(
    services: SlackServices, value: ActionValue, invocation: Invocation, words: str, user: str
) -> tuple[int, str]:
    """Record the clicked proposal as a hypothesis; its id, and the words linked to it (a try
    names it with `hypothesis=`, so an approval that runs the words later keeps the link)."""
    row, chosen = await proposal(services, value.experiment_id, value.item or 0)
    expectations = [str(e) for e in invocation.expectations]
    hypothesis_id = await record_hypothesis(services, row, chosen, expectations, user=user)
    return hypothesis_id, words + (f" hypothesis={hypothesis_id}" if invocation.name == "try" else "")


async def _mark_tested(
    client: AsyncWebClient, channel: str, message: dict[str, Any], block_id: str, text: str
) -> None:
    """The clicked proposal's button (its `actions` block) is replaced, in place, by who ran it
    and when (a later click finds none); the other proposals of the message keep theirs."""
    if not message.get("ts"):
        return
    blocks = [
        context_block(text) if b.get("type") == "actions" and b.get("block_id") == block_id else b
        for b in message.get("blocks") or []
    ]
    await client.chat_update(
        channel=channel,
        ts=message["ts"],
        blocks=blocks,
        text=message.get("text") or text,
    )


async def _kept_experiment(services: SlackServices, experiment_id: int) -> Experiment:
    """The experiment a Keep names; LookupError (before the click is used up) when it is gone."""
    row = await services.store.run(get_experiment, services.store.store, experiment_id)
    if row is None:
        raise LookupError(f"no experiment #{experiment_id}: nothing to keep")
    return row


async def _answered(
    services: SlackServices, client: AsyncWebClient, value: ActionValue, user: str, where: Where
) -> bool:
    """Keep records the team's decision (`bot.app.ask`: one answer wins; a Revert answer is
    recorded by the revert run itself, after any approval). False (the thread told why) when the
    decision was taken already: nothing more happens."""
    try:
        done = await answer(services.context, value.experiment_id, "keep", actor=f"slack:{user}")
    except AlreadyDecidedError as exc:
        await client.chat_postMessage(channel=where.channel, thread_ts=where.thread_ts, text=str(exc))
        return False
    await client.chat_postMessage(channel=where.channel, thread_ts=where.thread_ts, text=done.text())
    return True


async def _button_words(services: SlackServices, action_id: str, value: ActionValue) -> str | None:
    """The command a button stands for, as the application layer decides it for the stored
    experiment (`bot.app.decisions.button_command`: on the experiment's own target; Keep only
    records the decision); a proposed hypothesis runs the command the ranking proposed."""
    experiment_id = value.experiment_id
    if action_id == "flagbot_test_hypothesis":
        row, chosen = await proposal(services, experiment_id, value.item or 0)
        return f"{chosen.command} target={row.target}"
    if action_id not in (
        "flagbot_revert",
        "flagbot_cancel",
        "flagbot_isolate",
        "flagbot_rerun",
        "flagbot_force",
    ):
        return None
    return await button_command(services.context, experiment_id, value.action)
