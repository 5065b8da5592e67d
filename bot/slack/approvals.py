"""Restarts that need a second person (production targets) or the requester's own confirmation.

StackStorm-style inquiry: the command is not run but recorded as an approval request with an
expiry, and a card with Approve / Deny buttons is posted. An approver (never the requester)
approves a production restart; a confirmation is the requester's own click. Deciding is one
atomic update in the store, so a double click or two approvers at once decide it once; the
card then says who decided and when, and an approved command runs in the card's thread.
"""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.app.targets import target_of
from bot.commands import Invocation
from bot.slack.dispatch import parse, start_thread
from bot.slack.rbac import Decision, Role, audit_decision, may_approve, roles_on
from bot.slack.render import CardState, status_card
from bot.slack.services import SlackServices
from bot.slack.threads import Where
from bot.store.approvals import create_request, decide_request, get_request, set_card
from bot.store.models import utcnow
from bot.store.slack_models import ApprovalRequest


def _card(request: ApprovalRequest, *, status: str, summary: str) -> CardState:
    return CardState(
        experiment_id=request.id if status == "awaiting-approval" else None,
        playbook=request.command.split()[0] if request.command.split() else "command",
        target=request.target,
        actor=f"<@{request.requester}>",
        command=f"/flagbot {request.command}",
        steps=[],
        status=status,
        verdict=None,
        summary=summary,
    )


async def request_approval(
    services: SlackServices,
    client: AsyncWebClient,
    invocation: Invocation,
    *,
    text: str,
    user: str,
    where: Where,
    needs: str,
) -> None:
    """Record the request and post its card (a new thread, or a reply in the one it came from)."""
    target = target_of(services.settings, invocation)
    expiry = services.settings.targets[target].policy.approval_expiry
    store = services.store
    request = await store.run(
        create_request,
        store.store,
        target=target,
        command=text,
        requester=user,
        channel=where.channel,
        needs=needs,
        expires_in=expiry,
    )
    who = "an approver (not you)" if needs == "approval" else "you, to confirm it"
    summary = (
        f"approval request #{request.id}: this restarts {target}; it waits for {who} "
        f"until {request.expires_at:%H:%M} UTC"
    )
    blocks, fallback = status_card(_card(request, status="awaiting-approval", summary=summary))
    posted = await client.chat_postMessage(
        channel=where.channel, thread_ts=where.thread_ts, blocks=blocks, text=fallback
    )
    assert request.id is not None
    await store.run(set_card, store.store, request.id, str(posted["ts"]))


async def decide(services: SlackServices, client: Any, request_id: int, action: str, *, user: str) -> None:
    """An Approve or Deny click: checked (who may decide, on the request's target: its own
    `[targets.NAME.rbac]` lists when it names them; expiry), decided once, then run or not."""
    store = services.store
    request = await store.run(get_request, store.store, request_id)
    if request is None:
        raise LookupError(f"no approval request #{request_id}")
    roles, table = await roles_on(client, services.settings, user, request.target)
    where = Where(request.channel, request.card_ts)
    own = user == request.requester
    reason: str | None
    if request.needs == "confirmation" and not own:
        reason = "only the person who asked can confirm their own restart"
    elif request.needs == "approval" and action == "approve":
        verdict = may_approve(user, roles, request.requester, expires_at=request.expires_at, table=table)
        reason = None if verdict.allowed else verdict.reason
    elif request.needs == "approval" and not own and not ({"approver", "admin"} & set(roles)):
        reason = (
            f"denying needs the approver role{table.on()} (or being the one who asked); "
            f"ask an admin to add you to {table.config_key('approver')}"
        )
    else:
        reason = None
    if reason is not None:
        await _audit_refusal(services, request, action, reason, user=user, roles=roles)
        await client.chat_postEphemeral(
            channel=request.channel, user=user, thread_ts=request.card_ts, text=reason
        )
        return
    status = "approved" if action == "approve" else "denied"
    decided = await store.run(decide_request, store.store, request_id, status=status, by=user)
    if decided is None:
        current = await store.run(get_request, store.store, request_id)
        state = current.status if current is not None else "gone"
        await client.chat_postEphemeral(
            channel=request.channel,
            user=user,
            thread_ts=request.card_ts,
            text=f"approval request #{request_id} is already {state}; nothing was done",
        )
        return
    when = f"{utcnow():%H:%M:%S} UTC"
    summary = f"{status} by {user} at {when}" + ("; running it below" if status == "approved" else "")
    blocks, fallback = status_card(_card(decided, status=status, summary=summary))
    if status == "approved":  # registered before the card says so: whoever sees "approved" sees the run
        invocation = parse(services.settings, decided.command)
        services.spawn(
            start_thread(
                services,
                client,
                invocation,
                text=decided.command,
                user=decided.requester,
                where=where,
                restart_approved=decided.needs == "approval",
            )
        )
    if decided.card_ts:
        await client.chat_update(channel=decided.channel, ts=decided.card_ts, blocks=blocks, text=fallback)


async def _audit_refusal(
    services: SlackServices,
    request: ApprovalRequest,
    action: str,
    reason: str,
    *,
    user: str,
    roles: frozenset[Role],
) -> None:
    """A refused Approve or Deny is audited like every RBAC decision (`slack:approve`, `slack:deny`)."""
    await audit_decision(
        services.store,
        Decision(False, reason),
        actor=f"slack:{user}",
        target=request.target,
        command=action,
        roles=roles,
        channel=request.channel,
        detail={"approval_request": request.id},
    )
