"""A try's extra repeats on a real load: `run_plan(extend=...)` appends repeats to a stored set
against a twin, numbered on, its summary recomputed over all of them; the sizing and the try's
comparison read the extended set (`bot.bench.power`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlmodel import Session, col, select

from bot.bench.compare_sets import compare_by_id, side_of
from bot.bench.power import size_reference
from bot.bench.run import BenchPlan, run_plan
from bot.bench.verdict import VerdictSettings
from bot.config.schema import BenchProfile
from bot.store import Measurement, Store
from bot.store.bench_repo import load_set
from bot.store.models import MeasurementSet
from tests.component.bench.conftest import slowed
from tests.support.twin_process import TwinFactory

SETTINGS = VerdictSettings(guarded={"output_throughput": "higher"})


def server_bound(store: Store, *set_ids: int) -> None:
    """Judge these sets as the server's: whether the client was the limit (its event-loop lag on
    this machine, now) depends on the machine's load, and the sizing skips a client-bound level;
    the client's own judgement is tested elsewhere (tests/unit/bench/test_metrics.py)."""
    with Session(store.engine) as session:
        for row in session.exec(select(Measurement).where(col(Measurement.set_id).in_(set_ids))):
            row.client_bound = False
            session.add(row)
        for set_id in set_ids:
            owner = session.get(MeasurementSet, set_id)
            assert owner is not None
            owner.client_bound = False
            session.add(owner)
        session.commit()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    yield opened
    opened.close()


async def test_a_set_extended_with_more_repeats_is_one_set(twins: TwinFactory, store: Store) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    profile = BenchProfile(
        concurrency=[2], num_requests=4, input_len=64, output_len=16, warmup_requests=1, repeats=3
    )
    plan = BenchPlan.build(target="twin", base_url=twin.base, profile_name="tiny", profile=profile)
    first = await run_plan(plan, store=store)
    assert first.set.id is not None
    server_bound(store, first.set.id)
    sizing = size_reference(side_of(load_set(store, first.set.id)), SETTINGS)  # type: ignore[arg-type]
    assert sizing.measured == 3 and 3 <= sizing.repeats <= SETTINGS.max_repeats
    assert sizing.cell == "output_throughput@c=2"
    more = await run_plan(replace(plan, repeats=2), store=store, extend=first.set.id, first_repeat=3)
    assert more.set.id == first.set.id and len(more.measurements) == 2
    loaded = load_set(store, first.set.id)
    assert loaded is not None
    assert [m.repeat for m in loaded.measurements] == [0, 1, 2, 3, 4]
    (level,) = loaded.set.summary["levels"]
    assert level["repeats"] == 5 and level["completed"] == 5 * 4
    assert loaded.set.params["repeats"] == 5
    assert side_of(loaded).repeats() == 5

    after = await run_plan(plan, store=store)
    assert after.set.id is not None
    server_bound(store, first.set.id, after.set.id)
    compared = compare_by_id(store, first.set.id, after.set.id, SETTINGS, looks_on="candidate")
    assert compared.result.repeats == 3 and compared.power is not None
    assert (compared.power.reference_repeats, compared.power.candidate_repeats) == (5, 3)
    assert any(note.startswith("power against a 5% change: ") for note in compared.result.notes)
    assert "(before 5 repeats, after 3" in "\n".join(compared.result.lines())


async def test_extending_a_set_that_does_not_exist_is_refused(store: Store) -> None:
    profile = BenchProfile(concurrency=[2], repeats=1)
    plan = BenchPlan.build(target="twin", base_url="http://127.0.0.1:9", profile_name="tiny", profile=profile)
    with pytest.raises(LookupError, match="no measurement set 99"):
        await run_plan(plan, store=store, extend=99, first_repeat=1)
