"""When `flagbot serve` starts: settle the runs a stopped bot (or a killed CLI) left unfinished.

A bot stopped mid-run (SIGTERM after its grace, a crash, a host reboot) leaves an experiment
`running` or `interrupted`. Waiting for the next mutating command to notice could take days, and
meanwhile the target may run half-applied flags. So at start, for every target with such an
experiment whose lease is no longer heartbeaten, the engine's own reconcile runs: resume when the
target runs the intended flags and is healthy, else roll back. The outcome is posted in the
experiment's thread (or the investigation channel) and logged. A target that cannot be reached
is logged and left to the next command; the bot starts anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from slack_sdk.web.async_client import AsyncWebClient

from bot.app.runs import settle_every_target
from bot.app.settle import tell_settled
from bot.loop.playbook import Playbook
from bot.loop.report import RunOutcome
from bot.slack.notify import SlackNotifier
from bot.slack.services import SlackServices

log = logging.getLogger(__name__)


async def reconcile_at_start(
    services: SlackServices, client: AsyncWebClient, *, playbooks: Mapping[str, Playbook] | None = None
) -> list[RunOutcome]:
    """Reconcile every target with unfinished experiments; post and log what became of each."""
    settled: list[RunOutcome] = []
    for target, result in await settle_every_target(services.context, books=playbooks):
        if isinstance(result, Exception):  # unreachable, diverged, lease held: the next command retries
            log.warning("reconcile of %s at start failed: %s", target, result)
            continue
        settled += result
    notifier = SlackNotifier(client, services.settings.slack.investigation_channel)
    await tell_settled(services.store, notifier, settled, why="when flagbot stopped")
    return settled
