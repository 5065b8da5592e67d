"""The listeners: `/flagbot`, `@flagbot` in a thread, and the buttons. Plain async functions.

Each acks first (Slack's 3 s), with an ephemeral answer when the command is refused (a usage
error, a role missing), and hands the work to a background task. Every command and click is
audited with who, what and the outcome; a command, a click or an event seen twice acts once
(the keys are in the store: also after a restart, in Socket Mode and HTTP mode alike).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bot.app.change_rights import invocation_refusal
from bot.app.errors import AppError
from bot.app.flag_list import FlagList, cached_flag_list, flag_list, packaged_flag_list, read_flag_list
from bot.app.playbooks import PlaybookEffects, playbook_effects, runs_playbook
from bot.app.runs import cancel, cancel_candidate
from bot.app.targets import requested_target
from bot.commands import CommandError, Invocation
from bot.commands.registry import get_command
from bot.commands.target_catalog import UnknownTargetError
from bot.config.redaction import redact
from bot.loop.run_state import RunState
from bot.loop.snapshot_values import snapshot_value
from bot.slack.approvals import decide as decide_approval
from bot.slack.approvals import request_approval
from bot.slack.card import ActionValue
from bot.slack.dispatch import (
    answer,
    check,
    check_stored,
    flag_note,
    parse,
    start_thread,
    threaded,
    words_of,
)
from bot.slack.proposals import proposal
from bot.slack.proposals import record as record_hypothesis
from bot.slack.rate_limit import limit_reads
from bot.slack.rbac import (
    Decision,
    Role,
    audit_decision,
    command_label,
    decide,
    decide_click,
    groups_of,
    roles_of,
)
from bot.slack.render import messages, parse_action_value, render_block
from bot.slack.render_tables import context as context_block
from bot.slack.services import SlackServices
from bot.slack.text import typed_text
from bot.slack.threads import Where, thread_target
from bot.store.experiments import get_experiment
from bot.store.loop_models import Experiment
from bot.store.records import audit
from bot.store.snapshots import get_snapshot
from bot.target.errors import TargetError
from bot.target.evidence import Evidence

log = logging.getLogger(__name__)
MENTION = re.compile(r"^\s*<@[A-Z0-9]+(?:\|[^>]*)?>\s*")


async def _roles(services: SlackServices, client: AsyncWebClient, user: str) -> frozenset[Role]:
    rbac = services.settings.slack.rbac
    groups = await groups_of(client, user, rbac.group_ids())
    return roles_of(user, groups, rbac)


async def _decide(
    services: SlackServices,
    client: AsyncWebClient,
    invocation: Invocation,
    user: str,
    channel: str,
    *,
    audit_allowed: bool = True,
) -> Decision:
    """RBAC's decision for this user and command; audited after the ack (it must not cost Slack's 3 s).
    A read over the user's `read_commands_per_minute` is refused here too (bot.slack.rate_limit).
    `audit_allowed=False`: a preliminary decision (the words read with a packaged list while the
    host's is read): only a refusal is final, and so audited.

    A `cancel` is decided with the owner of the run it names (someone else's needs an admin); a
    playbook run by what its steps do (`run NAME` needs what the command behind it needs)."""
    roles = await _roles(services, client, user)
    target = requested_target(services.settings, invocation)
    policy = services.settings.targets[target].policy if target in services.settings.targets else None
    owner = None
    if invocation.name == "cancel":
        given = invocation.positionals.get("experiment")
        row = await cancel_candidate(services.context, target, None if given is None else int(str(given)))
        owner = None if row is None else _owner(row.actor)
    decision = decide(
        invocation,
        roles,
        actor=user,
        target_policy=policy,
        run_owner=owner,
        effects=_effects(services, invocation),
    )
    if decision.allowed:  # the target's change rules: protected flags, environment allow-list
        decision = _change_rules(services, invocation, roles, decision)
    decision = limit_reads(
        services.read_limiter,
        invocation,
        decision,
        user=user,
        per_minute=services.settings.slack.read_commands_per_minute,
    )
    if audit_allowed or not decision.allowed:
        services.spawn(
            audit_decision(
                services.store,
                actor=f"slack:{user}",
                target=target,
                command=command_label(invocation),
                decision=decision,
                roles=roles,
                channel=channel,
            )
        )
    return decision


def _change_rules(
    services: SlackServices, invocation: Invocation, roles: frozenset[Role], decision: Decision
) -> Decision:
    """The RBAC decision, or a refusal naming the rule when the command asks for a change the
    target's policy does not allow this user (`bot.app.change_rights`; admins by role)."""
    try:
        why = invocation_refusal(services.settings, invocation, admin="admin" in roles)
    except CommandError as exc:
        return Decision(False, exc.render())
    return decision if why is None else Decision(False, why, role="admin")


async def _start(
    services: SlackServices,
    client: AsyncWebClient,
    invocation: Invocation,
    decision: Decision,
    *,
    text: str,
    user: str,
    where: Where,
    hypothesis_id: int | None = None,
    notes: list[str] | None = None,
) -> None:
    """Run it, or (a restart that needs an approver or a confirmation) post the approval card.
    `notes` (which flag list judged the flags) open the run's thread."""
    if decision.needs != "none" and threaded(invocation):
        work = request_approval(
            services, client, invocation, text=text, user=user, where=where, needs=decision.needs
        )
    else:
        work = _dispatch(
            services,
            client,
            invocation,
            text=text,
            user=user,
            where=where,
            hypothesis_id=hypothesis_id,
            notes=notes or [],
        )
    services.spawn(work, on_error=_report_error(client, where, user))


async def _post_answer(client: AsyncWebClient, blocks_of: list[Evidence], where: Where) -> None:
    for block in blocks_of:
        rendered = render_block(block)
        for part, text in messages(rendered.blocks, rendered.text):
            await client.chat_postMessage(
                channel=where.channel, thread_ts=where.thread_ts, blocks=part, text=text
            )


async def _dispatch(
    services: SlackServices,
    client: AsyncWebClient,
    invocation: Invocation,
    *,
    text: str,
    user: str,
    where: Where,
    hypothesis_id: int | None = None,
    notes: list[str] | None = None,
) -> None:
    if threaded(invocation):
        await start_thread(
            services,
            client,
            invocation,
            text=text,
            user=user,
            where=where,
            hypothesis_id=hypothesis_id,
            notes=notes or [],
        )
    elif invocation.name == "cancel":
        await _cancel(services, client, invocation, user=user, where=where)
    else:
        await _post_answer(client, await answer(services, client, invocation, user=user, where=where), where)


def _effects(services: SlackServices, invocation: Invocation) -> PlaybookEffects | None:
    """What the command's playbook does; None (decided by the command's name) when it runs none."""
    if not runs_playbook(invocation):
        return None
    try:
        return playbook_effects(services.settings, invocation)
    except CommandError:  # `check` answered it before; the name-based rules are the stricter
        return None


def _owner(actor: str) -> str:
    """Who started a run, comparable with a Slack user id: `slack:U123` is U123; any other actor
    (`cli:alice@host`, the scheduler) is someone else than every Slack user."""
    return actor.removeprefix("slack:") if actor.startswith("slack:") else actor


async def _cancel(
    services: SlackServices, client: AsyncWebClient, invocation: Invocation, *, user: str, where: Where
) -> None:
    target = requested_target(services.settings, invocation)
    given = invocation.positionals.get("experiment")
    result = await cancel(
        services.context, target, None if given is None else int(str(given)), actor=f"slack:{user}"
    )
    row = result.experiment
    if result.experiment_id is None:
        text = f"nothing is running on {target}"
    elif row is None:
        text = f"there is no experiment #{result.experiment_id}"
    elif result.requested:
        text = (
            f"<@{user}> asked experiment #{result.experiment_id} ({row.playbook}) to stop; it stops at its "
            "next step and rolls back"
        )
    else:
        text = f"experiment #{result.experiment_id} is {row.status}: not running, nothing to cancel"
    await client.chat_postMessage(channel=where.channel, thread_ts=where.thread_ts, text=text)


def _report_error(
    client: AsyncWebClient, where: Where, user: str
) -> Callable[[str, BaseException], Awaitable[None]]:
    async def report(ident: str, exc: BaseException) -> None:
        # a host that cannot be reached or whose key is unknown is the user's to fix: say which
        known = isinstance(exc, CommandError | AppError | LookupError | ValueError | TargetError)
        text = str(exc) if known else f"something went wrong (error id {ident}); the log has the details"
        await client.chat_postEphemeral(
            channel=where.channel, user=user, thread_ts=where.thread_ts, text=text
        )

    return report


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
            on_error=_report_error(client, where, user),
        )
        await ack(response_type="ephemeral", text=checking_text(words, services.settings.default_target))
        return
    accepted = await _accepted(services, client, text, flags, user, channel)
    if isinstance(accepted, str):
        await ack(response_type="ephemeral", text=redact(accepted))
        return
    invocation, decision, notes = accepted
    # before the ack: once Slack has its answer, the run is already registered
    await _start(services, client, invocation, decision, text=text, user=user, where=where, notes=notes)
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
    decision = await _decide(services, client, invocation, user, channel, audit_allowed=False)
    return None if decision.allowed else decision.reason


async def _accepted(
    services: SlackServices, client: AsyncWebClient, text: str, flags: FlagList, user: str, channel: str
) -> tuple[Invocation, Decision, list[str]] | str:
    """The command read with `flags`, checked and authorised; or the refusal to show the user."""
    try:
        invocation = parse(services.settings, text, flags)
        check(services.settings, invocation)
        await check_stored(services, invocation)
    except CommandError as exc:  # a list's refusal says which list it was
        return exc.render() + (f"\nflags checked against the {flags.note}" if exc.flag_list else "")
    decision = await _decide(services, client, invocation, user, channel)
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
    accepted = await _accepted(services, client, text, flags, user, where.channel)
    if isinstance(accepted, str):
        await client.chat_postEphemeral(channel=where.channel, user=user, text=redact(accepted))
        return
    invocation, decision, notes = accepted
    await _start(services, client, invocation, decision, text=text, user=user, where=where, notes=notes)
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
        on_error=_report_error(client, where, event.get("user", "")),
    )


async def _mentioned(
    services: SlackServices, client: AsyncWebClient, event: dict[str, Any], where: Where, ident: str
) -> None:
    user, channel = event.get("user", ""), event["channel"]
    if not await services.first_delivery("event", ident, user):
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
    await _start(services, client, invocation, decision, text=text, user=user, where=where, notes=notes)


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
        _clicked(services, client, action, user, message, where), on_error=_report_error(client, where, user)
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
    try:
        value = parse_action_value(str(action.get("value", "")))
    except ValueError as exc:
        await client.chat_postEphemeral(
            channel=channel, user=user, thread_ts=root, text=f"this button cannot be used: {exc}"
        )
        return
    if value.action in ("approve", "deny"):
        roles = await _roles(services, client, user)
        await decide_approval(services, client, value.experiment_id, value.action, user=user, roles=roles)
        return
    if not await _may_click(services, client, value, user, where):
        return
    words = await _button_words(services, action["action_id"], value)
    invocation = await _read(services, words) if words is not None else None
    decision = None
    if invocation is not None:
        await check_stored(services, invocation)
        decision = await _decide(services, client, invocation, user, channel)
        if not decision.allowed:
            await client.chat_postEphemeral(channel=channel, user=user, thread_ts=root, text=decision.reason)
            return
    kept = await _kept_experiment(services, value.experiment_id) if value.action == "keep" else None
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
            client, channel, message, f"<@{user}> ran it at {when} as hypothesis #{hypothesis_id}"
        )
    await client.chat_postMessage(
        channel=channel, thread_ts=root, text=f"<@{user}> clicked {label} at {when}"
    )
    if value.action == "keep":
        assert kept is not None
        await _record_keep(services, kept, user)
    if invocation is None or words is None or decision is None:
        return
    await _start(
        services,
        client,
        invocation,
        decision,
        text=words,
        user=user,
        where=where,
        hypothesis_id=hypothesis_id,
    )


async def _read(services: SlackServices, text: str) -> Invocation:
    """A button's command read with its target's flag list (the cached host list, else the host's
    answer: a click is acknowledged before this runs)."""
    return parse(services.settings, text, await flag_list(services.settings, words_of(text)))


async def _may_click(
    services: SlackServices, client: AsyncWebClient, value: ActionValue, user: str, where: Where
) -> bool:
    """Every other button changes the target or records the team's decision (Keep): a viewer is
    refused, audited, before anything the button names is looked up (a missing experiment must not
    answer in place of the refusal, and Keep must not be recorded)."""
    roles = await _roles(services, client, user)
    decision = decide_click(value.action, roles, actor=user)
    if decision.allowed:
        return True
    row = await services.store.run(get_experiment, services.store.store, value.experiment_id)
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


async def _mark_tested(client: AsyncWebClient, channel: str, message: dict[str, Any], text: str) -> None:
    """The clicked proposal's button is replaced by who ran it and when (a later click finds none)."""
    if not message.get("ts"):
        return

    kept = [b for b in message.get("blocks") or [] if b.get("type") != "actions"]
    await client.chat_update(
        channel=channel,
        ts=message["ts"],
        blocks=[*kept, context_block(text)],
        text=message.get("text") or text,
    )


async def _kept_experiment(services: SlackServices, experiment_id: int) -> Experiment:
    """The experiment a Keep names; LookupError (before the click is used up) when it is gone."""
    row = await services.store.run(get_experiment, services.store.store, experiment_id)
    if row is None:
        raise LookupError(f"no experiment #{experiment_id}: nothing to keep")
    return row


async def _record_keep(services: SlackServices, row: Experiment, user: str) -> None:
    """Keep changes nothing on the target: it is the team's decision, recorded for the log, with
    the experiment's own target."""
    await services.store.run(
        audit,
        services.store.store,
        actor=f"slack:{user}",
        target=row.target,
        action="slack:keep",
        experiment_id=row.id,
        detail={"decision": "keep", "experiment_id": row.id},
    )


async def _button_words(services: SlackServices, action_id: str, value: ActionValue) -> str | None:
    """The command a button stands for (Keep only records the decision), always on the
    experiment's own target (never the default one). Isolate and re-run check the capacity the
    experiment started from; a proposed hypothesis runs the command the ranking proposed."""
    experiment_id = value.experiment_id
    if action_id == "flagbot_test_hypothesis":
        row, chosen = await proposal(services, experiment_id, value.item or 0)
        return f"{chosen.command} target={row.target}"
    if action_id not in ("flagbot_revert", "flagbot_cancel", "flagbot_isolate", "flagbot_rerun"):
        return None
    found = await services.store.run(get_experiment, services.store.store, experiment_id)
    if found is None:
        raise LookupError(f"no experiment #{experiment_id}")
    if action_id == "flagbot_revert":
        return f"revert {experiment_id} target={found.target}"
    if action_id == "flagbot_cancel":
        return f"cancel {experiment_id} target={found.target}"
    before_id = RunState.load(found.state).before.snapshot_id
    before = await services.store.run(get_snapshot, services.store.store, before_id)
    want = snapshot_value(before, "max_running_requests")
    if want is None:
        raise LookupError(f"experiment #{experiment_id} has no start to compare with")
    verb = "isolate" if action_id == "flagbot_isolate" else "verify"
    return f"{verb} max_running_requests>={want} target={found.target}"
