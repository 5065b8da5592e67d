"""isolate: the restart bounds hold for every culprit position and ranking, pairs and larger culprit
sets are named in full, and stops (max_probes, misleading answers) report what is known."""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable, Iterable
from functools import cache
from itertools import combinations

import pytest

from bot.loop.isolate import IsolateResult, ProbeRecord, isolate, probe_bound

FLAGS = [f"--flag-{i:02d}" for i in range(1, 17)]
TOP_SUSPECT_COST = [0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 2, 2, 3, 3, 4]
"""Probes when the top-ranked suspect is the one culprit, N = 1..16 (the module docstring's table)."""


def ceil_log2(n: int) -> int:
    return (n - 1).bit_length()


def monotone(*culprit_sets: Iterable[str]) -> Callable[[frozenset[str]], Awaitable[bool]]:
    """A server whose expectation fails exactly when the configuration holds all of some culprit set."""
    sets = [frozenset(s) for s in culprit_sets]

    async def answer(applied: frozenset[str]) -> bool:
        return not any(s <= applied for s in sets)

    return answer


def pair_bound(n: int) -> int:
    return ceil_log2(n) + ceil_log2(n - 1) + 2


@cache
def fits(first: int, last: int, budget: int) -> bool:
    """Brute force, independent of isolate's `_need`: can a prefix bisection settle leaves
    first..last within the budget, each leaf but 1 paying one more probe (its check)?"""
    if first == last:
        return budget >= (0 if first == 1 else 1)
    return budget >= 1 and any(
        fits(first, j, budget - 1) and fits(j + 1, last, budget - 1) for j in range(first, last)
    )


@cache
def shallowest_top(last: int, budget: int) -> int:
    """Brute force: the fewest probes that reach leaf 1 in a bisection of leaves 1..last that keeps
    every leaf within the budget."""
    if last == 1:
        return 0
    return 1 + min(
        shallowest_top(j, budget - 1)
        for j in range(1, last)
        if fits(1, j, budget - 1) and fits(j + 1, last, budget - 1)
    )


def test_probe_bound_is_ceil_log2_plus_one() -> None:
    assert [probe_bound(n) for n in range(0, 18)] == [0, 1, 2, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6]


async def test_one_culprit_every_position_every_top_suspect_within_the_bound() -> None:
    for n in range(1, 17):
        changes = FLAGS[:n]
        unranked_worst = 0
        for culprit in changes:
            server = monotone({culprit})
            result = await isolate(changes, server)
            assert (result.status, result.culprits, result.suspects) == ("found", (culprit,), (culprit,))
            assert result.final == tuple(c for c in changes if c != culprit)
            assert len(result.probes) <= probe_bound(n)
            unranked_worst = max(unranked_worst, len(result.probes))
            for top in changes:  # top == culprit: a right ranking; otherwise a wrong one
                order = [top, *reversed([c for c in changes if c != top])]
                ranked = await isolate(changes, server, order=order)
                assert ranked.culprits == (culprit,), (n, culprit, top)
                assert len(ranked.probes) <= probe_bound(n), (n, culprit, top)
        # the bound is reached (it is optimal, see the module docstring), except for N = 1: no probe
        assert unranked_worst == (probe_bound(n) if n > 1 else 0)


async def test_a_right_top_suspect_costs_the_fewest_probes_the_bound_allows() -> None:
    for n in range(1, 17):
        changes = FLAGS[:n]
        costs = []
        for culprit in changes:
            order = [culprit, *(c for c in changes if c != culprit)]
            result = await isolate(changes, monotone({culprit}), order=order)
            assert result.culprits == (culprit,)
            costs.append(len(result.probes))
        assert set(costs) == {TOP_SUSPECT_COST[n - 1]}, n
        assert TOP_SUSPECT_COST[n - 1] == shallowest_top(n, probe_bound(n))
        if n >= 2:
            unranked = [len((await isolate(changes, monotone({c}))).probes) for c in changes]
            assert TOP_SUSPECT_COST[n - 1] < sum(unranked) / n
    # two probes are reachable within the bound for all N but these (proof in the module docstring)
    assert [n for n in range(1, 17) if TOP_SUSPECT_COST[n - 1] > 2] == [8, 14, 15, 16]


async def test_a_right_top_suspect_is_probed_alone_first_when_the_bound_allows() -> None:
    changes = FLAGS[:5]
    result = await isolate(changes, monotone({"--flag-04"}), order=["--flag-04"])
    assert [r.applied for r in result.probes] == [("--flag-04",)]
    assert result.message.startswith("--flag-04 is the culprit: applied alone it fails (probe #1).")


async def test_the_seeds_case_two_changes_one_culprit_at_most_two_probes() -> None:
    changes = ["--enable-mixed-chunk", "--enable-dp-attention"]
    for culprit in changes:
        for order in (None, [culprit], [c for c in changes if c != culprit]):
            result = await isolate(changes, monotone({culprit}), order=order)
            assert result.culprits == (culprit,)
            assert len(result.probes) <= 2
            if order == [culprit]:
                assert len(result.probes) == 1


async def test_every_pair_is_named_in_full_within_the_pair_bound() -> None:
    for n in range(2, 11):
        changes = FLAGS[:n]
        assert pair_bound(n) <= 2 * ceil_log2(n) + 2
        for pair in combinations(changes, 2):
            others = [c for c in changes if c not in pair]
            for order in (None, [*pair, *others], [*others, *pair], [pair[1], *others, pair[0]]):
                result = await isolate(changes, monotone(pair), order=order)
                assert (result.status, result.culprits) == ("found", pair), (n, pair, order)
                assert len(result.probes) <= pair_bound(n), (n, pair, order)
                assert result.final == tuple(others)


async def test_neither_member_of_a_pair_alone_is_blamed() -> None:
    changes = FLAGS[:6]
    result = await isolate(changes, monotone({"--flag-02", "--flag-05"}))
    assert result.culprits == ("--flag-02", "--flag-05")
    assert "together" in result.message
    alone = [r for r in result.probes if r.applied in {("--flag-02",), ("--flag-05",)}]
    assert alone and all(r.passed for r in alone)


async def test_triples_and_larger_sets_within_m_rounds() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(3, 12)
        changes = FLAGS[:n]
        size = rng.randint(3, min(n, 5))
        culprits = tuple(sorted(rng.sample(changes, size), key=changes.index))
        result = await isolate(changes, monotone(culprits), order=rng.sample(changes, n))
        assert result.culprits == culprits
        assert len(result.probes) <= size * probe_bound(n)


async def test_any_monotone_server_yields_a_minimal_failing_subset() -> None:
    rng = random.Random(11)
    for _ in range(300):
        n = rng.randint(1, 8)
        changes = FLAGS[:n]
        family = [frozenset(rng.sample(changes, rng.randint(1, n))) for _ in range(rng.randint(1, 3))]
        server = monotone(*family)
        result = await isolate(changes, server)
        found = frozenset(result.culprits)
        assert result.status == "found"
        assert not await server(found)
        assert [await server(found - {c}) for c in found] == [True] * len(found)
        assert len(result.probes) <= len(found) * probe_bound(n)


async def test_two_independent_culprits_one_is_named_and_the_final_is_not_claimed() -> None:
    changes = FLAGS[:8]
    result = await isolate(changes, monotone({"--flag-03"}, {"--flag-06"}))
    assert result.culprits in {("--flag-03",), ("--flag-06",)}
    assert result.final_verified is False
    assert "not probed: the settle restart checks it" in result.message


async def test_final_verified_when_a_probe_ran_exactly_the_final_configuration() -> None:
    result = await isolate(["--a", "--b"], monotone({"--b"}))
    assert [r.applied for r in result.probes[:1]] == [("--a",)]
    assert result.final == ("--a",)
    assert result.final_verified is True
    assert "which passed (probe #1)" in result.message


async def test_misleading_answers_end_within_the_hard_cap_and_never_contradict_each_other() -> None:
    """A flaky or non-monotone server: the search cannot loop and its questions never have an
    answer implied by earlier ones, so the recorded answers always fit some monotone failure."""
    rng = random.Random(3)

    async def coin(applied: frozenset[str]) -> bool:
        return rng.random() < 0.5

    async def cancelling(applied: frozenset[str]) -> bool:  # --flag-01 fails unless --flag-02 is on
        return not ("--flag-01" in applied and "--flag-02" not in applied)

    for server in (coin, cancelling):
        for _ in range(200):
            n = rng.randint(1, 12)
            changes = FLAGS[:n]
            result = await isolate(changes, server, order=rng.sample(changes, n))
            searched = [r for r in result.probes if not r.note.startswith("confirm:")]
            if result.status == "not-reproduced":  # every probe passed, the re-probed whole change too
                assert result.culprits == () and all(r.passed for r in result.probes)
                assert result.probes[-1].note.startswith("confirm:") and len(searched) >= 1
                continue
            assert result.status == "found"
            assert len(searched) <= n * probe_bound(n)
            assert len(result.probes) - len(searched) <= 1
            facts = [(frozenset(), True), (frozenset(changes), False)]
            facts += [(frozenset(r.applied), r.passed) for r in searched]
            assert len({f for f, _ in facts}) == len(facts), "a configuration was probed twice"
            assert not any(not p1 and p2 and s1 <= s2 for s1, p1 in facts for s2, p2 in facts)
            failing = {f for f, passed in facts if not passed}
            assert frozenset(result.culprits) in failing


async def test_max_probes_stops_with_what_is_known() -> None:
    changes = FLAGS[:10]
    server = monotone({"--flag-07"})
    full = await isolate(changes, server)
    assert len(full.probes) >= 3
    for limit in range(len(full.probes)):
        result = await isolate(changes, server, max_probes=limit)
        assert len(result.probes) == limit
        assert (result.status, result.culprits) == ("not-found", ())
        assert "--flag-07" in result.suspects
        assert result.final_verified is True
        passing = [r.applied for r in result.probes if r.passed]
        assert result.final == max(passing, key=len, default=())
        assert await server(frozenset(result.final))
        assert f"max_probes={limit}" in result.message
    enough = await isolate(changes, server, max_probes=len(full.probes))
    assert (enough.status, enough.culprits) == ("found", ("--flag-07",))


async def test_on_probe_is_awaited_once_per_probe_in_order_after_the_probe() -> None:
    events: list[str] = []
    server = monotone({"--flag-02", "--flag-09"})

    async def recorded(applied: frozenset[str]) -> bool:
        events.append(f"probe {len([e for e in events if e.startswith('probe')]) + 1}")
        return await server(applied)

    async def on_probe(record: ProbeRecord) -> None:
        events.append(f"posted {record.index}")

    result = await isolate(FLAGS[:12], recorded, on_probe=on_probe)
    count = len(result.probes)
    assert count > 2
    assert [r.index for r in result.probes] == list(range(1, count + 1))
    assert events == [e for i in range(1, count + 1) for e in (f"probe {i}", f"posted {i}")]


async def test_probe_records_say_why_and_list_changes_in_the_given_order() -> None:
    changes = ["--c", "--a", "--b", "--d"]
    result = await isolate(changes, monotone({"--b", "--c"}), order=["--b", "--d"])
    for record in result.probes:
        assert list(record.applied) == [c for c in changes if c in record.applied]
        assert record.note
    assert result.culprits == ("--c", "--b")
    assert any("alone: are the culprits complete?" in r.note for r in result.probes)


async def test_the_ranking_ignores_unknown_names_and_keeps_unranked_changes_in_order() -> None:
    changes = FLAGS[:5]
    result = await isolate(changes, monotone({"--flag-03"}), order=["--nope", "--flag-03", "--flag-03"])
    assert [r.applied for r in result.probes] == [("--flag-03",)]
    assert result.culprits == ("--flag-03",)


async def test_edge_cases() -> None:
    async def never(applied: frozenset[str]) -> bool:
        raise AssertionError("no probe expected")

    empty = await isolate([], never)
    assert (empty.status, empty.culprits, empty.probes, empty.final) == ("not-found", (), [], ())
    one = await isolate(["--only"], never)
    assert (one.status, one.culprits, one.final, one.final_verified) == ("found", ("--only",), (), True)
    assert "the base, which is known good" in one.message
    with pytest.raises(ValueError, match="named twice: --a"):
        await isolate(["--a", "--b", "--a"], never)
    with pytest.raises(ValueError, match="max_probes"):
        await isolate(["--a", "--b"], never, max_probes=-1)


async def test_the_probes_exceptions_propagate() -> None:
    async def broken(applied: frozenset[str]) -> bool:
        raise RuntimeError("restart failed")

    with pytest.raises(RuntimeError, match="restart failed"):
        await isolate(["--a", "--b"], broken)


async def test_to_json_is_json_and_complete() -> None:
    result: IsolateResult = await isolate(FLAGS[:4], monotone({"--flag-01", "--flag-04"}))
    data = json.loads(json.dumps(result.to_json()))
    assert data["status"] == "found"
    assert data["culprits"] == ["--flag-01", "--flag-04"]
    assert data["final"] == ["--flag-02", "--flag-03"]
    assert data["probe_count"] == len(result.probes) == len(data["probes"])
    assert data["probes"][0] == {
        "index": 1,
        "applied": list(result.probes[0].applied),
        "passed": result.probes[0].passed,
        "note": result.probes[0].note,
    }
