"""Find the changed flags that make an expectation fail, with as few server restarts as possible.

A target has a known-good base configuration and a current one that differs by N changes, and the
current one fails an expectation (say max_running_requests>=48). A probe applies a subset of the
changes on top of the base, restarts the server (minutes) and says whether the expectation holds.
`isolate` returns a minimal failing subset, the culprits: one flag, a pair that only fails
together, or in general a set whose every proper subset passes. It assumes monotone failure (a
configuration that contains a failing one fails too). The restart that settles the target on the
recommended configuration afterwards is the engine's, not a probe.

Premises, measured before the first probe (issue 18)
----------------------------------------------------
The search rests on two premises: the failing side (every change applied) fails and the good side
(the base) passes. The caller says what it already knows of each (`Premise`): a measurement it has
for free (the running start's snapshot, a benchmark on the running server, the reference's stored
snapshot and set), or nothing (`holds=None`). A premise nothing can tell is probed first (the
whole change, then the base). When the failing side is measured to pass, the answer is
`not-reproduced` before any probe or after that one probe; when the base fails, `not-found` (the
cause is not among the changes); in both cases nothing is blamed. And when the failing side's
failure was measured outside this run and every probe of the search passed, the whole change is
probed once more before any culprit set is named: if it passes too, the answer is `not-reproduced`
(noise, a cause outside the change, a flaky start), never "all of them together".

The search: prefix bisection, as in QuickXplain or git bisect over an ordered list
-------------------------------------------------------------------------------
Order the suspects (the ranking, most suspect first, else as given). Keep F, the culprits found
so far, and R, the suspects still in play, with the invariant "F + R fails" (at first F is empty
and R is every change: the current configuration fails). A round:

1. unless it is the first round: if R is empty, F is the answer; else probe F alone, and if it
   fails, F is the answer (the check);
2. bisect for the shortest prefix R[:k] such that F + R[:k] fails (F + R[:0] = F passes: given in
   the first round, step 1 after; F + R fails: the invariant);
3. R[k-1] is a culprit: F += R[k-1], R = R[:k-1]. The invariant holds: F + R is F_old + R_old[:k].

F is minimal: a member x joined when F_old + R_old[:k-1] passed, and every later member comes from
R_old[:k-1], so the answer without x lies inside that passing set and passes too.

Robustness. Every probe asks something no earlier answer implies: it lies strictly inside the
smallest set known to fail (F + R[:hi], which every set that failed before contains), and it holds
a suspect that every set that passed before lacks (the member found last, or the next suspect
after the passing prefix). So any answers at all, from a flaky or non-monotone server too, are
consistent with some monotone failure: the search cannot meet a contradiction or loop (at most N
rounds of at most ⌈log2 N⌉ + 1 probes each, whatever the answers), it can only be misled.
Catching that would take probes whose answers are already known, which every bound below would
pay for; so the status `inconsistent` (kept in `Status` for callers) is never returned by this
search, and a misleading answer shows at the engine's settle restart (`final_verified` says
whether `final` was seen to pass).

Bounds (tested exhaustively in tests/unit/loop/test_isolate.py)
---------------------------------------------------------------
The bisection of a round has leaves k = 1..m. Leaf 1 costs nothing more (R becomes empty, so F
is the answer); leaf k >= 2 costs the next round's check. So a group of n leaves can be settled,
check included, within ⌈log2 n⌉ + 1 probes (`probe_bound(n)`): halving it gives halves that need
at most ⌈log2 n⌉, so a split whose two outcomes both fit the budget always exists, and the choice
among fitting splits only moves probes between leaves, never past the budget.

* One culprit among N >= 2 changes: at most ⌈log2 N⌉ + 1 probes (`probe_bound`): round 1 has a
  budget of `probe_bound(N)` and the culprit's check, if any, fails and ends the search. N = 1 needs
  none; the seeds' case, N = 2, needs at most 2. This is optimal for any strategy that names the
  culprit with proof (a probe of it alone that fails): an adversary answers "pass" to a probe of
  one suspect alone and otherwise keeps the larger half, so at least ⌈log2 N⌉ probes go by
  before one suspect is left, and that suspect alone has not been probed yet.
* A pair among N: at most ⌈log2 N⌉ + ⌈log2(N-1)⌉ + 2 <= 2⌈log2 N⌉ + 2 probes: round 1 finds the
  later member within ⌈log2 N⌉, the check of it alone passes (+1), round 2 bisects at most N-1
  suspects and its leaf plus the last check fit in ⌈log2(N-1)⌉ + 1.
* m culprits: at most m(⌈log2 N⌉ + 1); any answers: at most N(⌈log2 N⌉ + 1).

A ranking saves probes when it is right without breaking the bound when it is wrong: the top
suspect is leaf 1, and among the splits that fit the budget the one with the smallest failing side
is taken, so the top suspect (then the second...) sits as shallow as the bound allows. A correct
top suspect costs, for N = 1..16: 0 1 1 2 1 2 2 3 1 2 2 2 2 3 3 4 probes. Two probes for every N
cannot be had within the bound: with L = ⌈log2 N⌉ and a budget of L + 1, naming the top suspect
with proof in two probes means probing it alone first or second. First: if it passes, N - 1
suspects need ⌈log2(N-1)⌉ + 1 more, within L only when N = 2^(L-1) + 1. Second, after a probe
that splits the suspects into the side holding the top one (h of them) and the other (N - h):
the other side needs N - h <= 2^(L-1), and the h - 1 left after the top one passes alone need
h - 1 <= 2^(L-2); so N <= 3·2^(L-2) + 1. N = 8, 14, 15, 16 fail both.
Without a ranking the fitting split closest to halves is taken (the lowest mean).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Probe = Callable[[frozenset[str]], Awaitable["bool | ProbeAnswer"]]
"""Applies the subset on top of the base, restarts, returns True when the expectation holds (or a
`ProbeAnswer` naming the snapshot and set it measured)."""
Status = Literal["found", "not-found", "not-reproduced", "inconsistent"]


@dataclass(frozen=True)
class ProbeAnswer:
    """A probe's answer with the measurement it rests on: the start's snapshot and, when an
    expectation needed a benchmark, the measurement set (None: not measured, e.g. a failed start)."""

    passed: bool
    snapshot_id: int | None = None
    set_id: int | None = None


@dataclass(frozen=True)
class Premise:
    """What is known of one side before the search: `holds` (the expectation held on it; None: not
    known, so it is probed) and `evidence`, the measurement that says so, in words that cite it."""

    holds: bool | None
    evidence: str
    snapshot_id: int | None = None
    set_id: int | None = None


FAILING_GIVEN = Premise(False, "the failing configuration (measured by the caller)")
BASE_GIVEN = Premise(True, "the base (measured by the caller)")


def probe_bound(n: int) -> int:
    """⌈log2 n⌉ + 1: the most probes `isolate` spends on one culprit among n changes (proof in the
    module docstring; optimal for n >= 2; n = 1 actually needs none, n = 0 is nothing to do)."""
    if n <= 0:
        return 0
    return (n - 1).bit_length() + 1


def restart_bound(n: int, *, unknown_premises: int = 0) -> int:
    """The restarts an `isolate` of one culprit among n changes needs at most, as
    bench/isolate_restarts.py prints them ("+settle"): `probe_bound(n)` probes, one probe per
    premise nothing measured (`Premise.holds` None), and the restart that settles the target.
    `policy.max_restarts_per_hour` is checked against it before the first probe."""
    if n <= 0:
        return 0
    return probe_bound(n) + unknown_premises + 1


@dataclass(frozen=True)
class ProbeRecord:
    """One probe restart, as the engine posts it: the changes applied on top of the base (in the
    order given), whether the expectation held, and why this probe was chosen."""

    index: int  # 1 for the first probe
    applied: tuple[str, ...]
    passed: bool
    note: str
    snapshot_id: int | None = None
    set_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "index": self.index,
            "applied": list(self.applied),
            "passed": self.passed,
            "note": self.note,
        }
        if self.snapshot_id is not None:
            found["snapshot_id"] = self.snapshot_id
        if self.set_id is not None:
            found["set_id"] = self.set_id
        return found


@dataclass
class IsolateResult:
    """What `isolate` found. `final` is the configuration to settle on: every change except the
    culprits when found; otherwise the largest configuration a probe saw pass (the base, the
    empty tuple, when none did or when the answers contradicted each other). `final_verified`:
    `final` is one of the probes that passed, or the base, whose passing the premises established. `suspects`:
    the culprits when found, else the changes that may still hold them."""

    culprits: tuple[str, ...]
    probes: list[ProbeRecord]
    final: tuple[str, ...]
    final_verified: bool
    status: Status
    message: str
    suspects: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "culprits": list(self.culprits),
            "suspects": list(self.suspects),
            "final": list(self.final),
            "final_verified": self.final_verified,
            "message": self.message,
            "probe_count": len(self.probes),
            "probes": [record.to_json() for record in self.probes],
        }


class _OutOfProbesError(Exception):
    """max_probes reached before the next probe."""


def _split(lo: int, hi: int, budget: int, *, ranked: bool) -> int:
    """The prefix length to probe next when F + R[:lo] passes and F + R[:hi] fails: a length whose
    both outcomes still fit the budget; the shortest such (ranked: the top suspects stay shallow)
    or the one closest to halves (no ranking: the lowest mean)."""
    fits = [j for j in range(lo + 1, hi) if probe_bound(j - lo) < budget and probe_bound(hi - j) < budget]
    if ranked:
        return fits[0]
    return min(fits, key=lambda j: (abs(2 * j - lo - hi), j))


def _names(items: Iterable[str]) -> str:
    return ", ".join(items) or "nothing"


class _Search:
    """The state of one isolate run, kept on an object so that a stop at max_probes can report what
    is known at that moment."""

    def __init__(
        self,
        given: tuple[str, ...],
        probe: Probe,
        max_probes: int | None,
        on_probe: Callable[[ProbeRecord], Awaitable[None]] | None,
    ) -> None:
        self.given = given
        self.position = {change: i for i, change in enumerate(given)}
        self.probe = probe
        self.max_probes = max_probes
        self.on_probe = on_probe
        self.records: list[ProbeRecord] = []
        self.found: list[str] = []
        self.rest: list[str] = []
        self.lo = 0  # found + rest[:lo] passes
        self.hi = 0  # found + rest[:hi] fails
        self.fail_source = "the failing configuration"

    def ordered(self, items: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(items, key=self.position.__getitem__))

    async def ask(self, applied: Iterable[str], note: str) -> bool:
        if self.max_probes is not None and len(self.records) >= self.max_probes:
            raise _OutOfProbesError
        subset = frozenset(applied)
        answer = await self.probe(subset)
        if not isinstance(answer, ProbeAnswer):
            answer = ProbeAnswer(bool(answer))
        passed = answer.passed
        record = ProbeRecord(
            len(self.records) + 1, self.ordered(subset), passed, note, answer.snapshot_id, answer.set_id
        )
        self.records.append(record)
        if self.on_probe is not None:
            await self.on_probe(record)
        return passed

    async def run(self, suspects: list[str], *, ranked: bool) -> None:
        self.rest = suspects
        first = True
        while True:
            if not first:
                if not self.rest:
                    return
                if not await self.ask(
                    self.found, f"{_names(self.ordered(self.found))} alone: are the culprits complete?"
                ):
                    self.fail_source = f"probe #{len(self.records)}"
                    return
            self.lo, self.hi = 0, len(self.rest)
            budget = probe_bound(self.hi)
            while self.hi - self.lo > 1:
                j = _split(self.lo, self.hi, budget, ranked=ranked)
                held = f" with {_names(self.ordered(self.found))}" if self.found else ""
                asked = self.rest[self.lo : j]
                which = f"among {_names(asked)}" if len(asked) > 1 else asked[0]
                note = f"first {j} of {len(self.rest)} suspects{held}: is the next culprit {which}?"
                budget -= 1
                if await self.ask([*self.found, *self.rest[:j]], note):
                    self.lo = j
                else:
                    self.hi = j
                    self.fail_source = f"probe #{len(self.records)}"
            self.found.append(self.rest[self.hi - 1])
            self.rest = self.rest[: self.hi - 1]
            first = False

    def best_passing(self) -> tuple[str, ...]:
        """The largest configuration a probe saw pass (the base when none did)."""
        passing = [record.applied for record in self.records if record.passed]
        return max(passing, key=len, default=())


LIKELY = (
    "likely noise in the measurement, a cause outside the change (the node, the load, the driver), "
    "or a flaky start"
)


def _stop(search: _Search, status: Status, message: str) -> IsolateResult:
    """An answer that blames nothing: the largest configuration seen to pass is recommended."""
    final = search.best_passing()
    return IsolateResult((), search.records, final, True, status, message, ())


async def _check_premises(search: _Search, failing: Premise, good: Premise) -> IsolateResult | None:
    """Establish both premises before the search (probing one only when `holds` is None); an
    answer when one does not hold, None when the search may start."""
    everything = search.given
    if failing.holds is None:
        failed = not await search.ask(everything, "premise: does the whole change fail?")
        index = len(search.records)
        if not failed:
            return _stop(
                search,
                "not-reproduced",
                f"not reproduced: the whole change passes (probe #{index}); nothing to isolate",
            )
        search.fail_source = f"probe #{index}"
    elif failing.holds:
        return IsolateResult(
            (),
            [],
            (),
            True,
            "not-reproduced",
            f"not reproduced: {failing.evidence}; nothing to isolate",
            (),
        )
    else:
        search.fail_source = failing.evidence
    if good.holds is None:
        if not await search.ask((), "premise: does the base pass?"):
            return _stop(
                search,
                "not-found",
                f"the base fails too (probe #{len(search.records)}): the cause is not among the changes",
            )
    elif not good.holds:
        return _stop(
            search, "not-found", f"the base fails too: {good.evidence}; the cause is not among the changes"
        )
    return None


async def _confirm(search: _Search, failing: Premise, searched_from: int) -> IsolateResult | None:
    """When the search's probes all passed, the culprits are every change and rest only on the
    failing side's one measurement: unless a probe of this run measured it, probe the whole change
    once more. An answer (`not-reproduced`) when it passes, None when the culprits stand."""
    searched = search.records[searched_from:]
    if not searched or not all(record.passed for record in searched):
        return None
    if any(not record.passed for record in search.records):
        return None  # the premise was probed in this run and failed
    if await search.ask(search.given, "confirm: every probe passed; does the whole change still fail?"):
        index = len(search.records)
        return _stop(
            search,
            "not-reproduced",
            f"not reproduced: {failing.evidence}, but every probe passed, the whole change too "
            f"(probe #{index}): {LIKELY}. No culprit is named.",
        )
    search.fail_source = f"probe #{len(search.records)}"
    return None


def _suspect_order(given: tuple[str, ...], order: Sequence[str] | None) -> list[str]:
    """The ranking's order for the changes it names (unknown names ignored), then the rest as given."""
    if order is None:
        return list(given)
    known = set(given)
    ranked = list(dict.fromkeys(name for name in order if name in known))
    placed = set(ranked)
    return ranked + [change for change in given if change not in placed]


async def isolate(
    changes: Sequence[str],
    probe: Probe,
    *,
    order: Sequence[str] | None = None,
    max_probes: int | None = None,
    on_probe: Callable[[ProbeRecord], Awaitable[None]] | None = None,
    failing: Premise = FAILING_GIVEN,
    good: Premise = BASE_GIVEN,
) -> IsolateResult:
    """Find a minimal subset of `changes` whose application on the base fails (see the module
    docstring for the search and its bounds). `order`: the hypothesis ranker's suspects, most
    suspect first. `max_probes`: stop before probe max_probes + 1 (status `not-found`, with what
    is known). `on_probe` is awaited after each probe, in order. `failing` and `good`: what is
    known of the premises (the docstring's "Premises"); one not known is probed before the search.
    The probe's exceptions propagate."""
    given = tuple(changes)
    if len(set(given)) != len(given):
        raise ValueError(f"changes named twice: {_names(sorted({c for c in given if given.count(c) > 1}))}")
    if max_probes is not None and max_probes < 0:
        raise ValueError("max_probes must be >= 0")
    if not given:
        return IsolateResult(
            (), [], (), True, "not-found", "no changes to isolate: the current configuration is the base"
        )
    search = _Search(given, probe, max_probes, on_probe)
    try:
        stopped = await _check_premises(search, failing, good)
        if stopped is not None:
            return stopped
        searched_from = len(search.records)
        await search.run(_suspect_order(given, order), ranked=order is not None)
        unconfirmed = await _confirm(search, failing, searched_from)
        if unconfirmed is not None:
            return unconfirmed
    except _OutOfProbesError:
        found = search.ordered(search.found)
        pending = search.ordered(search.rest[search.lo : search.hi])
        suspects = search.ordered([*search.found, *search.rest[: search.hi]])
        known = f"the culprits include {_names(found)}; " if found else ""
        final = search.best_passing()
        return IsolateResult(
            (),
            search.records,
            final,
            True,
            "not-found",
            f"stopped at max_probes={max_probes} before finishing: {known}the next culprit is one of "
            f"{_names(pending)}; every culprit is among {_names(suspects)}. Recommended: "
            f"{_names(final) if final else 'the base'}, which passed.",
            suspects,
        )
    culprits = search.ordered(search.found)
    final = tuple(change for change in given if change not in set(culprits))
    verified_by = next((r.index for r in search.records if r.passed and r.applied == final), None)
    if len(culprits) == 1:
        what = f"{culprits[0]} is the culprit: applied alone it fails ({search.fail_source})."
    else:
        what = (
            f"{_names(culprits)} are the culprits together: all of them applied fail "
            f"({search.fail_source}), and leaving out any one of them passes."
        )
    if not final:
        settle = " Recommended: the base, which is known good."
    elif verified_by is not None:
        settle = f" Recommended: every change but the culprits, which passed (probe #{verified_by})."
    else:
        settle = " Recommended: every change but the culprits (not probed: the settle restart checks it)."
    return IsolateResult(
        culprits,
        search.records,
        final,
        not final or verified_by is not None,
        "found",
        what + settle,
        culprits,
    )
