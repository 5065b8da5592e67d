"""A verification check: look at the target again, without restarting it, and say whether what
the experiment concluded still holds.

A run: take the target's lease (waiting for it, like any load), re-observe the running start
(journal of this invocation, /server_info; nothing restarted, the known-good start untouched),
run a short benchmark, then compare with the conclusion: the same flags, the same effective
capacity (`[verdicts.capacity]` tolerances: max_running_requests exactly), and throughput not
regressed beyond the verdict's noise (`bot.bench.verdict`, same profile only). Every run is
recorded; only a change of state (pass -> fail, fail -> pass) is told to the experiment's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.app.notify import Notice
from bot.app.owed_posts import late_note, owed_window, post_once
from bot.app.probe import Probe
from bot.app.runtime import ScheduleRuntime
from bot.bench.capacity import judge_capacity, parse_tolerance
from bot.bench.compare_sets import compare_by_id
from bot.bench.planning import plan_for
from bot.bench.run import run_plan
from bot.bench.verdict import VerdictSettings
from bot.config.verdicts import Verdicts
from bot.loop.expectations import evaluate_all, load_measured
from bot.loop.lease_guard import hold_lease, holder_id
from bot.loop.steps.measure_steps import routed
from bot.sglang.expectation import ExpectationResult, parse_expectation
from bot.store import Store
from bot.store.bench_repo import load_set
from bot.store.checks import RecordedRun, get_check, record_check_run, set_posted, unposted_check_runs
from bot.store.leases import LeaseHeld
from bot.store.schedule_models import CheckRun, VerificationCheck
from bot.target.evidence import ComparisonRow, Evidence, MetricComparison, VerdictBlock
from bot.target.observe import observe

__all__ = ["CheckOutcome", "Probe", "Verdict", "judge", "post_owed_check_runs", "probe_target", "run_check"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    result: str
    """pass or fail."""
    reasons: tuple[str, ...]
    rows: tuple[ComparisonRow, ...]
    not_measured: tuple[str, ...] = ()
    """What this check could not measure (said, never assumed to pass or fail)."""


@dataclass(frozen=True)
class CheckOutcome:
    check: VerificationCheck
    recorded: RecordedRun
    blocks: tuple[Evidence, ...]
    posted: str | None

    def to_json(self) -> dict[str, Any]:
        run = self.recorded.run
        return {
            "check_id": self.check.id,
            "run_id": run.id,
            "result": run.result,
            "summary": run.summary,
            "previous_state": self.recorded.previous,
            "state": self.recorded.state,
            "changed": self.recorded.changed,
            "posted": self.posted,
            "detail": run.detail,
        }


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return str(value)


def judge(
    expected: dict[str, Any],
    probe: Probe,
    capacity_tolerances: dict[str, str],
    throughput: tuple[str, list[str]] | None,
    expectations: Sequence[ExpectationResult] = (),
) -> Verdict:
    """Pass or fail, with the reasons and a row per thing compared (concluded vs now).

    `throughput` is the verdict of the check's benchmark against the concluded one and its
    lines (None when not compared); only `regressed` fails: improved, no effect and undecided
    are within what the experiment concluded. `expectations` are the experiment's own,
    evaluated on this check's start (bot.loop.expectations); a failed one fails the check.
    What could not be measured (a capacity value missing on either side, no comparable
    benchmark, an expectation without a value or reference) is a "not measured" row and is
    named in `not_measured`: it neither passes nor fails the check.
    """
    reasons: list[str] = []
    unmeasured: list[str] = []
    rows: list[ComparisonRow] = []
    healthy = "pass" if probe.healthy else "fail"
    rows.append(
        ComparisonRow("healthy (ready, /health 200)", "yes", "yes" if probe.healthy else "no", "", healthy)
    )
    if not probe.healthy:
        reasons.append(f"the server is not healthy (/health {probe.health})")
    want_flags = expected.get("flags")
    if want_flags is not None:
        same = list(want_flags) == list(probe.flags)
        rows.append(
            ComparisonRow(
                "flags", "as concluded", "same" if same else "changed", "", "pass" if same else "fail"
            )
        )
        if not same:
            reasons.append("the flags differ from the ones the experiment left")
    for metric, tolerance in capacity_tolerances.items():
        want, got = expected.get(metric), probe.effective.get(metric)
        if want is None and got is None:
            continue
        if want is None or got is None:
            side = "the concluded start" if want is None else "this start"
            rows.append(
                ComparisonRow(
                    f"{metric} (effective)", _cell(want), _cell(got), f"no value on {side}", "not measured"
                )
            )
            if probe.healthy:
                unmeasured.append(f"{metric} (no value on {side})")
            continue
        verdict = judge_capacity(metric, want, got, parse_tolerance(tolerance))
        ok = verdict.verdict in ("no effect", "improved")
        rows.append(
            ComparisonRow(
                f"{metric} (effective)", _cell(want), _cell(got), tolerance, "pass" if ok else "fail"
            )
        )
        if not ok:
            reasons.append(f"effective {metric} {_cell(got)}, concluded {_cell(want)} ({tolerance})")
    if throughput is None:
        if probe.healthy:
            why = "; ".join(probe.notes) or "no measurement set of the same profile on both sides"
            rows.append(ComparisonRow("benchmark vs the concluded one", "", "-", why, "not measured"))
            unmeasured.append(f"throughput ({why})")
    else:
        word, lines = throughput
        ok = word != "regressed"
        rows.append(ComparisonRow("benchmark vs the concluded one", "", word, "", "pass" if ok else "fail"))
        if not ok:
            reasons.append(
                "throughput or latency regressed beyond the noise: " + (lines[0] if lines else word)
            )
    for result in expectations:
        shown = {"pass": "pass", "fail": "fail", "not measured": "not measured"}[result.outcome]
        rows.append(
            ComparisonRow(
                f"expectation {result.expectation}",
                _cell(result.reference) + (f" ({result.source})" if result.source else ""),
                _cell(result.actual),
                result.why,
                shown,
            )
        )
        if result.failed:
            reasons.append(result.describe())
        elif result.outcome == "not measured" and probe.healthy:
            unmeasured.append(f"{result.expectation} ({result.why})")
    return Verdict("fail" if reasons else "pass", tuple(reasons), tuple(rows), tuple(unmeasured))


async def probe_target(rt: ScheduleRuntime, check: VerificationCheck) -> Probe:
    """Observe the running start and benchmark it, under the target's lease (LeaseHeld when it
    stays busy for `rt.lease_wait_s`), in its turn among the scheduled looks (`rt.looking`)."""

    settings = rt.settings
    target = settings.targets[check.target]
    async with (
        rt.looking(),  # its turn among the scheduled looks first: no lease held while it waits
        hold_lease(
            rt.store,
            check.target,
            purpose=f"check #{check.id}",
            holder=holder_id(f"schedule:check-{check.id}"),
            ttl_s=rt.lease_ttl_s,
            wait_s=rt.lease_wait_s,
        ),
        rt.session(check.target) as ts,
    ):
        obs = await observe(ts, cache_dir=rt.cache(), promote=False)
        probe = Probe(
            healthy=obs.healthy,
            health=obs.health,
            invocation=obs.invocation,
            flags=list(obs.requested),
            effective=dict(obs.effective),
            snapshot_id=obs.snapshot_id,
        )
        if not obs.healthy:
            return probe
        name = check.profile or check.expected.get("profile") or target.benchmark_profile
        if name not in settings.bench:
            probe.notes.append(f"no benchmark profile {name!r}: not benchmarked")
            return probe
        try:
            plan = plan_for(
                settings, check.target, profile=name, label=f"check #{check.id}", snapshot_id=obs.snapshot_id
            )
        except ValueError as exc:  # DatasetError, NotForBenchServingError
            probe.notes.append(f"profile {name}: {exc}: not benchmarked")
            return probe
        plan = await routed(plan, ts)
        node = ts.node0 if plan.backend == "bench_serving" else None
        run = await run_plan(plan, store=rt.store, node=node)
        probe.set_id = run.set.id
    return probe


def _throughput(
    store: Store, reference: int | None, candidate: int | None, settings: Verdicts
) -> tuple[str, list[str]] | None:
    """(verdict word, lines) of the check's set against the concluded one; None when not comparable."""

    if reference is None or candidate is None:
        return None
    a, b = load_set(store, reference), load_set(store, candidate)
    if a is None or b is None or a.set.profile != b.set.profile:
        return None
    compared = compare_by_id(
        store, reference, candidate, VerdictSettings.from_config(settings), single_look=True
    )
    return compared.result.verdict, list(compared.result.lines())


async def run_check(rt: ScheduleRuntime, check_id: int, *, trigger: str = "schedule") -> CheckOutcome | None:
    """Run check `check_id` now; None when it is gone, or (scheduled runs) paused or already done."""
    store = rt.store
    check = await store.run(get_check, store.store, check_id)
    if check is None:
        log.info("check #%s no longer exists; nothing to run", check_id)
        return None
    if trigger == "schedule" and check.status != "scheduled":
        log.info("check #%s is %s; its scheduled run is skipped", check_id, check.status)
        return None
    probe_func = rt.probe or probe_target
    detail: dict[str, Any] = {"expected": check.expected}
    probe: Probe | None = None
    try:
        if check.target not in rt.settings.targets and rt.probe is None:
            raise LookupError(f"target {check.target!r} is not configured any more")
        probe = await probe_func(rt, check)
    except LeaseHeld as busy:
        result, summary, verdict = "busy", f"not run: {busy}", None
    except Exception as exc:  # the target could not be looked at: recorded, the state stays
        log.warning("check #%s could not run: %s", check_id, exc)
        result, summary, verdict = "error", f"could not look at {check.target}: {exc}".splitlines()[0], None
    else:
        compared = await store.run(
            _throughput, store.store, check.expected.get("set_id"), probe.set_id, rt.settings.verdicts
        )
        expectations = await _expectations(rt, check, probe)
        verdict = judge(check.expected, probe, dict(rt.settings.verdicts.capacity), compared, expectations)
        result = verdict.result
        summary = "; ".join(verdict.reasons) or "what the experiment concluded still holds"
        if verdict.not_measured:
            summary += "; not measured: " + "; ".join(verdict.not_measured)
        detail |= {
            "reasons": list(verdict.reasons),
            "rows": [row.to_json() for row in verdict.rows],
            "invocation": probe.invocation,
            "effective": {k: probe.effective.get(k) for k in rt.settings.verdicts.capacity},
            "notes": probe.notes,
            "not_measured": list(verdict.not_measured),
            "expectations": [r.to_json() for r in expectations],
        }
    recorded = await store.run(
        record_check_run,
        store.store,
        check_id,
        result=result,
        summary=summary,
        detail=detail,
        trigger=trigger,
        snapshot_id=probe.snapshot_id if probe else None,
        set_id=probe.set_id if probe else None,
        ran_at=rt.clock(),
        done=trigger == "schedule",
    )
    blocks = _blocks(check, recorded, verdict.rows if verdict is not None else None)
    posted = None
    if recorded.changed:
        posted = await _post_run_once(rt, check, recorded, blocks, late=False)
    return CheckOutcome(check, recorded, blocks, posted)


CHECK_POST = "check-post"
"""The claim of a check run's post (`bot.app.owed_posts`): one per run, across replicas."""


async def _post_run_once(
    rt: ScheduleRuntime,
    check: VerificationCheck,
    recorded: RecordedRun,
    blocks: tuple[Evidence, ...],
    *,
    late: bool,
) -> str | None:
    """Post a run that changed its check's state into the experiment's thread, once across replicas."""
    run = recorded.run
    text = (
        f"check #{check.id} of experiment #{check.experiment_id} on {check.target}"
        f"{f' ({late_note(run.ran_at)})' if late else ''}: {recorded.previous} -> {recorded.state}: {run.summary}"
    )

    async def remember(ts: str) -> None:
        if run.id is not None:
            await rt.store.run(set_posted, rt.store.store, run.id, ts)

    return await post_once(
        rt, CHECK_POST, run.id, Notice(text, blocks, check.channel, check.thread_ts), remember
    )


async def post_owed_check_runs(rt: ScheduleRuntime) -> list[int]:
    """Post every run that changed its check's state and was never posted (`bot.app.owed_posts`),
    marked late; the ids of the runs posted. The leader's `settle-orphans` job calls it."""
    store = rt.store
    owed = await store.run(unposted_check_runs, store.store, **owed_window(rt.clock()))
    done: list[int] = []
    for run in owed:
        check = await store.run(get_check, store.store, run.check_id)
        if check is None or run.id is None:
            continue
        log.warning(
            "check run #%s (check #%s) was recorded but never posted; posting it now", run.id, check.id
        )
        recorded = RecordedRun(run, run.previous_state, run.result)
        if (
            await _post_run_once(rt, check, recorded, _blocks(check, recorded, _stored_rows(run)), late=True)
            is not None
        ):
            done.append(run.id)
    return done


async def _expectations(
    rt: ScheduleRuntime, check: VerificationCheck, probe: Probe
) -> list[ExpectationResult]:
    """The experiment's expectations on this check's start, relative ones against the baseline that
    was pinned when the check was scheduled (its stored snapshot and set)."""
    texts = check.expected.get("expect") or []
    if not texts:
        return []
    now = await load_measured(rt.store, f"check #{check.id}'s start", probe.snapshot_id, probe.set_id)
    ref = check.expected.get("reference") or {}
    name = str(ref.get("name") or "no baseline pinned when the check was scheduled")
    pinned = ref.get("snapshot_id") is not None or ref.get("set_id") is not None
    reference = await load_measured(
        rt.store,
        name,
        ref.get("snapshot_id"),
        ref.get("set_id"),
        missing=None if pinned else "no baseline pinned when the check was scheduled",
    )
    return evaluate_all([parse_expectation(text) for text in texts], now, reference)


def _blocks(
    check: VerificationCheck, recorded: RecordedRun, rows: tuple[ComparisonRow, ...] | None
) -> tuple[Evidence, ...]:
    """The run's verdict block, and its table of rows when it had a verdict (None: it had none)."""
    run = recorded.run
    concluded = check.expected.get("summary") or f"experiment #{check.experiment_id}"
    head = VerdictBlock(
        run.result,
        f"check #{check.id} ({_after(check.after_s)} after experiment #{check.experiment_id}): {run.summary}",
        (f"concluded: {concluded}",),
    )
    if rows is None:
        return (head,)
    return (head, MetricComparison(f"Check #{check.id}: concluded vs now", rows))


def _stored_rows(run: CheckRun) -> tuple[ComparisonRow, ...] | None:
    """The rows a run stored in its `detail` (a late post rebuilds its table from them); None
    for a run that had no verdict (an error, busy) and stored none."""
    rows = run.detail.get("rows")
    return tuple(ComparisonRow(**row) for row in rows) if isinstance(rows, list) and rows else None


def _after(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


after_text = _after
