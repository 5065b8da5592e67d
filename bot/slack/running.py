"""Deciding and starting a command from Slack, whoever asked: a slash command, a mention or a button.

Why a module of its own: the three listeners (`bot.slack.handlers` for commands and mentions,
`bot.slack.buttons` for clicks) read their payloads differently but must decide a command the
same way (the user's roles, RBAC, the target's change rules, the read rate limit, audited) and
start it the same way (the approval card when a restart needs one, else the run or the answer).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from slack_sdk.web.async_client import AsyncWebClient

from bot.app.change_rights import invocation_refusal
from bot.app.errors import AppError
from bot.app.playbooks import PlaybookEffects, playbook_effects, runs_playbook
from bot.app.runs import cancel, cancel_candidate
from bot.app.targets import requested_target
from bot.app.waiters import cancel_wait, waiter_of
from bot.bench.run import BenchmarkTimeoutError
from bot.commands import CommandError, Invocation
from bot.slack.approvals import request_approval
from bot.slack.dispatch import answer, start_thread, threaded
from bot.slack.rate_limit import limit_reads
from bot.slack.rbac import Decision, Role, audit_decision, command_label, decide, roles_on
from bot.slack.render import messages, render_block
from bot.slack.services import SlackServices
from bot.slack.threads import Where
from bot.target.errors import TargetError
from bot.target.evidence import Evidence


async def decide_for(
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
    target = requested_target(services.settings, invocation)
    roles, table = await roles_on(client, services.settings, user, target)
    policy = services.settings.targets[target].policy if target in services.settings.targets else None
    owner = None
    if invocation.name == "cancel" and "waiter" in invocation.options:  # who asked the waiting command
        waiter = await waiter_of(services.context, int(invocation.options["waiter"]))
        owner = None if waiter is None else _owner(waiter.requested_by)
    elif invocation.name == "cancel":
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
        table=table,
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


async def start(
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
        work = _run_now(
            services,
            client,
            invocation,
            text=text,
            user=user,
            where=where,
            hypothesis_id=hypothesis_id,
            notes=notes or [],
        )
    services.spawn(work, on_error=error_reporter(client, where, user))


async def post_answer(client: AsyncWebClient, blocks_of: list[Evidence], where: Where) -> None:
    for block in blocks_of:
        rendered = render_block(block)
        for part, text in messages(rendered.blocks, rendered.text):
            await client.chat_postMessage(
                channel=where.channel, thread_ts=where.thread_ts, blocks=part, text=text
            )


async def _run_now(
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
        await post_answer(client, await answer(services, client, invocation, user=user, where=where), where)


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
    if "waiter" in invocation.options:  # a command waiting for the target (wait=): no experiment yet
        text = (
            "cancel takes an experiment or waiter=ID, not both"
            if given is not None
            else (
                await cancel_wait(services.context, int(invocation.options["waiter"]), actor=f"slack:{user}")
            ).text()
        )
        await client.chat_postMessage(channel=where.channel, thread_ts=where.thread_ts, text=text)
        return
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


def error_reporter(
    client: AsyncWebClient, where: Where, user: str
) -> Callable[[str, BaseException], Awaitable[None]]:
    async def report(ident: str, exc: BaseException) -> None:
        # a host that cannot be reached or whose key is unknown is the user's to fix: say which
        known = isinstance(
            exc, CommandError | AppError | LookupError | ValueError | TargetError | BenchmarkTimeoutError
        )
        text = str(exc) if known else f"something went wrong (error id {ident}); the log has the details"
        await client.chat_postEphemeral(
            channel=where.channel, user=user, thread_ts=where.thread_ts, text=text
        )

    return report
