"""Settling what a stopped flagbot left on a target, before a command of its own.

Why apart from `bot.app.runs`: every mutating target command (`rollback`, `reconcile`, a run)
settles first, but almost always there is nothing to settle. Checking the store costs one
query; building the engine costs the import of the loop, the benchmark statistics and SciPy,
which a command that finds nothing to settle should not pay before its first call.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.app.context import AppContext
from bot.app.notify import Notice, Notifier
from bot.digest.threads import threads_of
from bot.loop.report import RunOutcome
from bot.store import AsyncStore
from bot.store.experiments import unfinished_experiments

if TYPE_CHECKING:
    from bot.loop.engine import Engine

log = logging.getLogger(__name__)


async def settle_unfinished(
    ctx: AppContext, target: str, *, engine: Engine | None = None
) -> list[RunOutcome]:
    """Settle (resume or roll back) the runs a flagbot that stopped left on the target; what
    became of each. Every mutating command does this first. The engine is built only when the
    store holds an unfinished run of the target (or the caller has one)."""
    if engine is None:
        if not await ctx.store.run(unfinished_experiments, ctx.store.store, target):
            return []
        # the engine brings the whole loop and the statistics: needed only when there is a run to settle
        # deferred: ~1 s of CPU that `rollback` and `reconcile` should not pay for nothing
        from bot.app.runs import build_engine

        engine = build_engine(ctx)
    return await engine.reconcile(target)


def settled_text(outcome: RunOutcome) -> str:
    """What a front end says of a run it settled before its own command."""
    return (
        f"experiment #{outcome.experiment_id} ({outcome.playbook}) was left unfinished by a flagbot "
        f"that stopped; it is now {outcome.status}: {outcome.summary or ''}"
    )


async def tell_settled(store: AsyncStore, notifier: Notifier, settled: list[RunOutcome], *, why: str) -> None:
    """Log each run settled without a command (at `flagbot serve`'s start, or by the leader for a
    dead replica) and tell its thread, else the notifier's default channel: "experiment #12 (try)
    on qwen was left unfinished `why`; it is now *rolled-back*: ...". A post that fails is logged;
    the run is settled either way."""
    if not settled:
        return
    threads = await store.run(threads_of, store.store, [outcome.experiment_id for outcome in settled])
    for outcome in settled:
        text = (
            f"experiment #{outcome.experiment_id} ({outcome.playbook}) on {outcome.target} was left "
            f"unfinished {why}; it is now *{outcome.status}*: {outcome.summary or ''}"
        ).strip()
        log.warning("%s", text)
        thread = threads.get(outcome.experiment_id)
        notice = Notice(text, (), thread.channel if thread else None, thread.ts if thread else None)
        try:
            await notifier.notify(notice)
        except Exception as exc:  # the run is settled either way; the log has it
            log.warning("could not tell the thread of #%s: %s", outcome.experiment_id, exc)
