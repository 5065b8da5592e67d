"""The engine: runs a playbook against a target under the target's lease, and cleans up after
runs that died (contract: docs/loop.md, Engine).

Why a lease and not a lock: flagbot runs as a CLI, a Slack bot and a scheduler, maybe on two
machines, against one database. A lease row with heartbeats works across processes and hosts,
names who holds the target (so a refusal says whom to ask), and expires when its holder dies,
so `reconcile` can take over and decide, from the target itself, to resume or roll back.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.bench.loadgen import prestart
from bot.config import Settings
from bot.loop.actions import StepContext, get_action
from bot.loop.lease_guard import HeldLease, hold_lease, holder_id
from bot.loop.params import complete_params
from bot.loop.playbook import Playbook, load_playbook_set, playbook_dirs
from bot.loop.report import Reporter, RunOutcome, RunStart
from bot.loop.run_state import RunState
from bot.loop.runner import Run, outcome_of
from bot.store import AsyncStore, Experiment
from bot.store.experiments import (
    create_experiment,
    finish_step,
    get_experiment,
    list_steps,
    request_cancel,
    unfinished_experiments,
    update_experiment,
)
from bot.store.leases import LeaseHeld, LeaseInfo, current
from bot.store.records import audit
from bot.target.session import TargetSession

__all__ = ["DEFAULT_INTERRUPT_CHECK", "Engine", "LeaseHeld", "RunOutcome", "SessionFactory"]

SessionFactory = Callable[[str], AbstractAsyncContextManager[TargetSession]]
DEFAULT_INTERRUPT_CHECK = "check_interrupted"


class Engine:
    """Runs playbooks; one Engine can serve many runs (each gets its own lease holder id)."""

    def __init__(
        self,
        settings: Settings,
        store: AsyncStore,
        reporter: Reporter,
        *,
        holder: str | None = None,
        host: str | None = None,
        lease_ttl_s: float = 60.0,
        playbooks: Mapping[str, Playbook] | None = None,
        session_factory: SessionFactory | None = None,
        cache_dir: Path | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.reporter = reporter
        self.holder = holder
        self.host = host or socket.gethostname()
        self.lease_ttl_s = lease_ttl_s
        self._playbooks = dict(playbooks) if playbooks is not None else None
        self.session_factory = session_factory
        self.cache_dir = cache_dir or settings.database.sqlite_path.parent / "cache"
        self.clock = clock
        """Time for lease decisions (tests move it forward to make a lease stale); None: real time."""

    # --- playbooks and sessions -----------------------------------------------------------------

    @property
    def playbooks(self) -> dict[str, Playbook]:
        if self._playbooks is None:
            self._playbooks = load_playbook_set(playbook_dirs(self.settings.playbook_dirs)).books
        return self._playbooks

    def playbook(self, name: str) -> Playbook:
        found = self.playbooks.get(name)
        if found is None:
            raise LookupError(f"no playbook {name!r}; playbooks: {', '.join(self.playbooks) or 'none'}")
        return found

    def _now(self) -> datetime | None:
        return self.clock() if self.clock is not None else None

    def _session(self, target: str) -> AbstractAsyncContextManager[TargetSession] | None:
        """A session to the target (connections open on first use), or None for an unconfigured one."""
        if self.session_factory is not None:
            return self.session_factory(target)
        if target in self.settings.targets:
            return TargetSession.open(target, self.settings.targets[target], store=self.store)
        return None

    async def _db(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await self.store.run(func, self.store.store, *args, **kwargs)

    def _hold(
        self,
        target: str,
        holder: str,
        purpose: str,
        *,
        wait_s: float = 0.0,
        on_wait: Callable[[LeaseHeld, float], None] | None = None,
        command: str = "",
        queue: bool = True,
    ) -> AbstractAsyncContextManager[HeldLease]:
        """The target's lease for a block, on the Engine's clock: LeaseHeld at once when busy, or
        after `wait_s` of waiting for it (`on_wait` says whom it waits for, `hold_lease`; `command`
        and `queue`: its place in the waiting queue)."""
        return hold_lease(
            self.store,
            target,
            purpose=purpose,
            holder=holder,
            ttl_s=self.lease_ttl_s,
            wait_s=wait_s,
            host=self.host,
            on_wait=on_wait,
            clock=self._now,
            command=command,
            queue=queue,
        )

    def _context(
        self,
        playbook: Playbook,
        row: Experiment,
        ts: TargetSession | None,
        state: RunState,
        held: HeldLease | None,
    ) -> StepContext:
        assert row.id is not None
        ctx = StepContext(
            experiment_id=row.id,
            target=row.target,
            ts=ts,
            store=self.store,
            settings=self.settings,
            params=dict(row.params),
            state=state,
            reporter=self.reporter,
            actor=row.actor,
            cache_dir=self.cache_dir,
            playbook=playbook.name,
            hypothesis_id=row.hypothesis_id,
            investigation_id=row.investigation_id,
        )
        if held is not None:  # a long action (a benchmark) can stop early when the lease is gone
            ctx.lease_lost = held.lost
        return ctx

    # --- run ------------------------------------------------------------------------------------

    async def run(
        self,
        playbook: str | Playbook,
        params: Mapping[str, Any],
        *,
        target: str,
        actor: str,
        admin: bool = False,
        hypothesis_id: int | None = None,
        investigation_id: int | None = None,
        ts: TargetSession | None = None,
        restart_approved: bool = False,
        wait_s: float = 0.0,
        on_wait: Callable[[LeaseHeld, float], None] | None = None,
        when_leased: Callable[[], Awaitable[None]] | None = None,
        command: str = "",
    ) -> RunOutcome:
        """Run a playbook to its end; LeaseHeld (nothing written) when the target is busy (and,
        with `wait_s`, stays busy that long: `on_wait(busy, remaining_s)` says so when it starts
        waiting and whenever the lease changes hands). `when_leased` runs once the lease is held,
        before anything is written: what it raises refuses the run (the lease is let go).
        `command`: the words that asked for it, shown in the waiting queue (`status`).

        `params` are in JSON form (see `parse_params`); missing ones get their defaults. `admin`:
        whether `actor` is an admin, for the target's change rules (`StepContext.admin`); a run
        resumed after a crash is resumed as no admin (what it wrote before stays checked).
        `restart_approved`: the requester may restart the target (see `RunState.restart_approved`).
        """
        book = self.playbook(playbook) if isinstance(playbook, str) else playbook
        values = complete_params(book, params)
        if any(step.action == "measure" for step in book.steps):
            prestart()  # the load workers' imports overlap the steps before the first benchmark
        async with AsyncExitStack() as stack:
            held = None
            if book.mutating:
                holder = self.holder or holder_id(actor)
                held = await stack.enter_async_context(
                    self._hold(target, holder, book.name, wait_s=wait_s, on_wait=on_wait, command=command)
                )
                if when_leased is not None:
                    await when_leased()
            row: Experiment = await self._db(
                create_experiment,
                target=target,
                playbook=book.name,
                params=values,
                actor=actor,
                holder=None if held is None else held.holder,
                hypothesis_id=hypothesis_id,
                investigation_id=investigation_id,
            )
            assert row.id is not None
            if held is not None:
                await held.attach(row.id)
            opener = None if ts is not None else self._session(target)
            session = ts if opener is None else await stack.enter_async_context(opener)
            ctx = self._context(book, row, session, RunState(restart_approved=restart_approved), held)
            ctx.admin = admin
            runner = Run(book, ctx, lease=held)
            start = {"playbook": book.name, "params": values, "holder": None if held is None else held.holder}
            await runner.audit("start", start)
            await self.reporter.started(RunStart(row.id, book.name, target, actor, values))
            return await runner.drive(0)

    # --- cancel ---------------------------------------------------------------------------------

    async def cancel(self, experiment_id: int, actor: str) -> bool:
        """Ask a pending or running experiment to stop at its next step boundary (any process).

        False when it is no longer running; LookupError when there is no such experiment.
        """
        recorded: bool = await self._db(request_cancel, experiment_id, actor=actor)
        if recorded:
            row = await self._db(get_experiment, experiment_id)
            await self._db(
                audit, actor=actor, target=row.target, action="cancel-request", experiment_id=experiment_id
            )
        return recorded

    # --- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, target: str) -> list[RunOutcome]:
        """Settle the target's experiments left unfinished by a holder that is gone.

        An experiment whose lease a live holder still heartbeats is left alone. Each other one
        is marked interrupted; the playbook's interrupt check then says whether the target is
        in the state the experiment intended (resume from the step that was in flight) or not
        (run on_failure, i.e. roll back). Only mutating playbooks are reconciled: a read-only
        run holds no lease, so whether it is still alive cannot be told.
        """
        outcomes: list[RunOutcome] = []
        for row in await self._db(unfinished_experiments, target):
            book = self.playbooks.get(row.playbook)
            if row.holder is None and (book is None or not book.mutating):
                continue
            lease: LeaseInfo | None = await self._db(current, target)
            if lease is not None and not lease.expired(self._now()):
                continue  # a live holder: its own engine finishes (or reconciles) it
            outcome = await self._settle(row, book)
            outcomes.append(outcome)
        return outcomes

    async def _settle(self, row: Experiment, book: Playbook | None) -> RunOutcome:
        assert row.id is not None
        holder = self.holder or holder_id("reconcile")
        async with self._hold(row.target, holder, f"reconcile #{row.id}", queue=False) as held:
            await held.attach(row.id)
            await self._db(update_experiment, row.id, status="interrupted", holder=holder)
            await self._db(
                audit,
                actor=holder,
                target=row.target,
                action="interrupt",
                detail={"previous_holder": row.holder, "cursor": row.cursor},
                experiment_id=row.id,
            )
            await self._close_dangling_steps(row)
            if book is None:
                summary = f"interrupted; playbook {row.playbook!r} no longer exists, nothing was rolled back"
                await self._db(update_experiment, row.id, status="failed", summary=summary)
                outcome = await outcome_of(self.store, row.id)
                await self.reporter.finished(outcome)
                return outcome
            async with AsyncExitStack() as stack:
                opener = self._session(row.target)
                session = None if opener is None else await stack.enter_async_context(opener)
                ctx = self._context(book, row, session, RunState.load(row.state), held)
                runner = Run(book, ctx, lease=held)
                resume, why = await self._interrupt_check(book, ctx, row)
                await runner.audit("reconcile", {"resume": resume, "why": why, "cursor": row.cursor})
                if resume:
                    start = RunStart(row.id, book.name, row.target, row.actor, dict(row.params), resumed=True)
                    await self.reporter.started(start)
                    runner.preface = f"interrupted at step {row.cursor + 1} and resumed ({why})"
                    return await runner.drive(row.cursor)
                ctx.step_index = max(row.cursor, len(book.steps)) - 1
                status, summary = await runner.failed(f"interrupted and not resumed: {why}")
                return await runner.finish(status, summary)

    async def _close_dangling_steps(self, row: Experiment) -> None:
        """The step that was in flight is closed as failed (the cursor stays: a resume re-runs it)."""
        assert row.id is not None
        for step in await self._db(list_steps, row.id):
            if step.status == "running":
                error = "interrupted: the engine stopped during this step"
                await self._db(finish_step, step.id, status="failed", result={}, error=error, state=row.state)

    async def _interrupt_check(self, book: Playbook, ctx: StepContext, row: Experiment) -> tuple[bool, str]:
        """Ask the playbook's `on_interrupt` action (or `check_interrupted`) whether to resume."""
        if any(step.index >= len(book.steps) for step in await self._db(list_steps, ctx.experiment_id)):
            return False, "it stopped while undoing a failure or a cancel"
        if row.cursor >= len(book.steps):
            return True, "every step had finished"
        name = book.on_interrupt or (DEFAULT_INTERRUPT_CHECK if get_action(DEFAULT_INTERRUPT_CHECK) else None)
        found = get_action(name) if name else None
        if found is None:
            return False, "the playbook has no interrupt check"
        ctx.step_index = row.cursor
        try:
            answer = await found.func(ctx)
        except Exception as exc:
            return False, f"the interrupt check {found.name} failed: {exc}"
        return bool(answer.get("resume")), str(answer.get("why", ""))
