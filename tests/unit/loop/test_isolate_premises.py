"""isolate's premises (issue 18 item 2): the failing side fails and the base passes are measured
before the first probe, from free evidence when there is some and by a probe only otherwise; a
failing side that passes stops before any restart; when every probe passes the answer is "not
reproduced", never a culprit set."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from bot.loop.isolate import Premise, ProbeAnswer, isolate

FIVE = [
    "--enable-cudagraph-gc",
    "--enable-mixed-chunk",
    "--enable-two-batch-overlap",
    "--disable-radix-cache",
    "--enable-torch-compile",
]


def counting(
    answer: Callable[[frozenset[str]], bool],
) -> tuple[list[frozenset[str]], Callable[..., Awaitable[bool]]]:
    asked: list[frozenset[str]] = []

    async def probe(applied: frozenset[str]) -> bool:
        asked.append(applied)
        return answer(applied)

    return asked, probe


def failing_when(*culprits: Iterable[str]) -> Callable[[frozenset[str]], bool]:
    sets = [frozenset(c) for c in culprits]
    return lambda applied: not any(s <= applied for s in sets)


async def test_a_failing_side_measured_to_pass_stops_before_any_probe_with_the_value() -> None:
    asked, probe = counting(lambda applied: True)
    evidence = (
        "the running start (snapshot #12) has max_running_requests 48, which meets max_running_requests>=48"
    )
    result = await isolate(FIVE, probe, failing=Premise(True, evidence, 12))
    assert asked == []
    assert (result.status, result.culprits, result.probes) == ("not-reproduced", (), [])
    assert result.message == f"not reproduced: {evidence}; nothing to isolate"


async def test_the_issues_case_five_flags_every_probe_passing_is_not_reproduced_never_a_culprit_set() -> None:
    _asked, probe = counting(lambda applied: True)
    result = await isolate(FIVE, probe, failing=Premise(False, "snapshot #9 had max_running_requests 40", 9))
    assert result.status == "not-reproduced"
    assert result.culprits == () and result.suspects == ()
    assert all(record.passed for record in result.probes)
    assert result.probes[-1].applied == tuple(FIVE)  # the whole change, re-probed before blaming it
    assert (
        "noise" in result.message
        and "outside the change" in result.message
        and "flaky start" in result.message
    )
    assert "culprit" not in result.message.replace("No culprit is named", "")
    assert result.final == tuple(FIVE) and result.final_verified


async def test_an_unknown_failing_side_is_probed_first_and_a_pass_ends_it() -> None:
    asked, probe = counting(lambda applied: True)
    result = await isolate(FIVE, probe, failing=Premise(None, "no stored start"))
    assert asked == [frozenset(FIVE)]
    assert result.status == "not-reproduced"
    assert result.message == "not reproduced: the whole change passes (probe #1); nothing to isolate"
    assert result.probes[0].note == "premise: does the whole change fail?"


async def test_an_unknown_failing_side_probed_to_fail_is_the_evidence_no_second_look() -> None:
    asked, probe = counting(failing_when(FIVE[:2]))
    result = await isolate(FIVE[:2], probe, failing=Premise(None, "no stored start"))
    assert asked[0] == frozenset(FIVE[:2])
    assert (result.status, result.culprits) == ("found", tuple(FIVE[:2]))
    assert "(probe #1)" in result.message  # the pair's failing evidence: the premise probe
    assert asked.count(frozenset(FIVE[:2])) == 1  # measured in this run: no confirming probe
    assert len(result.probes) == 3


async def test_a_base_known_to_fail_names_nothing_and_probes_nothing() -> None:
    asked, probe = counting(lambda applied: False)
    result = await isolate(
        FIVE, probe, good=Premise(False, "the reference (snapshot #3) has max_running_requests 40")
    )
    assert asked == []
    assert (result.status, result.culprits) == ("not-found", ())
    assert "the base fails too" in result.message and "snapshot #3" in result.message


async def test_an_unknown_base_is_probed_and_a_failing_base_names_nothing() -> None:
    asked, probe = counting(lambda applied: False)
    result = await isolate(FIVE, probe, good=Premise(None, "no reference set"))
    assert asked == [frozenset()]
    assert (result.status, result.culprits) == ("not-found", ())


async def test_one_change_with_a_measured_failing_side_needs_no_probe() -> None:
    asked, probe = counting(lambda applied: True)
    result = await isolate(["--only"], probe, failing=Premise(False, "experiment #4's after-start had 40", 7))
    assert asked == []
    assert (result.status, result.culprits) == ("found", ("--only",))
    assert "experiment #4's after-start had 40" in result.message


async def test_a_real_pair_with_free_evidence_is_confirmed_by_one_more_probe_and_named() -> None:
    asked, probe = counting(failing_when(FIVE[:2]))
    result = await isolate(FIVE[:2], probe, failing=Premise(False, "snapshot #9 had 40", 9))
    assert (result.status, result.culprits) == ("found", tuple(FIVE[:2]))
    assert asked[-1] == frozenset(FIVE[:2]) and not result.probes[-1].passed
    assert f"(probe #{len(result.probes)})" in result.message


async def test_probe_answers_carry_their_snapshot_and_set_into_the_records() -> None:
    async def probe(applied: frozenset[str]) -> ProbeAnswer:
        return ProbeAnswer("--b" not in applied, snapshot_id=100 + len(applied), set_id=7)

    result = await isolate(["--a", "--b"], probe)
    assert result.culprits == ("--b",)
    assert all(record.snapshot_id is not None and record.set_id == 7 for record in result.probes)
    assert result.to_json()["probes"][0]["snapshot_id"] == result.probes[0].snapshot_id
