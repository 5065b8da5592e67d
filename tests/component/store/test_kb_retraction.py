"""Learned facts can be retracted (issue 18 item 3): migration 0007 finds the culprit facts that
isolate learned from a premise it never measured (old-shape rows written at revision 0006, then
upgraded) and marks them retracted with the reason, leaving measured facts alone; `knowledge
forget ID because=...` retracts one, keeps it, audits the reason, and ranking and preflight's
reader (`list_observations`) no longer return it. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import MetaData

from bot.commands import parse_command
from bot.loop.records_view import read
from bot.store import Store
from bot.store.migrate import upgrade
from bot.store.observations import add_observation, get_observation, list_observations
from bot.store.records import audit_events

WHEN = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GIVEN_MESSAGE = (
    "--enable-cudagraph-gc, --enable-mixed-chunk are the culprits together: all of them applied fail "
    "(the current configuration (given)), and leaving out any one of them passes."
)


def _experiment(experiment_id: int, playbook: str, isolate: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": experiment_id,
        "target": "lab",
        "playbook": playbook,
        "params": {},
        "status": "succeeded",
        "verdict": "found" if isolate else "regressed",
        "cursor": 3,
        "state": {"isolate": isolate} if isolate else {},
        "actor": "cli:alice",
        "created_at": WHEN,
    }


def _fact(fact_id: int, flag: str, kind: str, text: str, experiment_id: int | None) -> dict[str, Any]:
    return {
        "id": fact_id,
        "flag": flag,
        "kind": kind,
        "text": text,
        "target": "lab",
        "experiment_id": experiment_id,
        "detail": {},
        "observed_at": WHEN,
    }


@pytest.fixture
def store(empty_store: Store) -> Store:
    empty_store.upgrade()
    return empty_store


def test_migration_0007_marks_the_facts_learned_from_an_unmeasured_premise(empty_store: Store) -> None:
    store = empty_store
    upgrade(store.engine, "0006")
    meta = MetaData()
    meta.reflect(store.engine)
    all_passed = {"message": GIVEN_MESSAGE, "probes": [{"index": 1, "applied": ["--a"], "passed": True}]}
    all_passed_no_words = {
        "message": "--x is the culprit",
        "probes": [{"index": 1, "applied": [], "passed": True}],
    }
    measured = {
        "message": "--y is the culprit: applied alone it fails (probe #1).",
        "probes": [{"index": 1, "applied": ["--y"], "passed": False}],
    }
    with store.engine.begin() as connection:
        connection.execute(
            meta.tables["experiment"].insert(),
            [
                _experiment(1, "isolate", all_passed),
                _experiment(2, "isolate", all_passed_no_words),
                _experiment(3, "isolate", measured),
                _experiment(4, "try", None),
            ],
        )
        where = "on NVIDIA GB10 (compute capability 12.1), SGLang 0.5.10"
        connection.execute(
            meta.tables["kb_observation"].insert(),
            [
                _fact(
                    1,
                    "--enable-cudagraph-gc",
                    "culprit",
                    f"isolate: --enable-cudagraph-gc makes `m` fail {where}",
                    1,
                ),
                _fact(2, "--x", "culprit", f"isolate: --x makes `m` fail {where}", 2),
                _fact(3, "--y", "culprit", f"isolate: --y makes `m` fail {where}", 3),
                _fact(4, "--a", "not-culprit", f"isolate: --a alone keeps `m` holding {where}", 1),
                _fact(5, "--enable-metrics", "capacity-lowered", "moved 48 -> 26", 4),
                _fact(6, "--z", "culprit", f"isolate: --z makes `m` fail {where}", None),
            ],
        )
    upgrade(store.engine, "head")

    retracted = {o.id: o for o in list_observations(store, retracted=True) if o.retracted_at is not None}
    assert set(retracted) == {1, 2, 6}  # given premise; no probe ever failed; experiment gone
    for fact in retracted.values():
        assert fact.retracted_by == "migration 0007"
        assert fact.retracted_because is not None and "never measured" in fact.retracted_because
        assert fact.text.startswith("isolate:")  # kept, not deleted
    assert {o.id for o in list_observations(store)} == {3, 4, 5}  # what ranking and preflight read


def test_knowledge_forget_retracts_keeps_audits_and_is_no_longer_cited(store: Store) -> None:
    fact = add_observation(
        store, flag="--enable-metrics", kind="culprit", text="isolate: a fact", target="lab"
    )
    assert fact.id is not None
    forget = parse_command(f'knowledge forget {fact.id} because="the premise was assumed"')
    assert forget.spec.tier_for(forget.sub) == "mutating"  # an operator's command
    answer = read(store, forget, "lab", actor="slack:U1")

    assert "retracted" in answer["lines"][0] and "the premise was assumed" in answer["lines"][0]
    row = get_observation(store, fact.id)
    assert (
        row is not None
        and row.retracted_by == "slack:U1"
        and row.retracted_because == "the premise was assumed"
    )
    assert list_observations(store) == []  # ranking and preflight no longer see it
    assert [o.id for o in list_observations(store, retracted=True)] == [fact.id]  # kept
    [event] = [e for e in audit_events(store, "lab") if e.action == "knowledge forget"]
    assert event.actor == "slack:U1" and event.detail["because"] == "the premise was assumed"
    assert event.detail["observation_id"] == fact.id
    listed = read(store, parse_command("knowledge list retracted=yes"), "lab", actor="cli:bob")
    assert listed["tables"][0]["rows"][0][-1] == "retracted (the premise was assumed)"
    assert read(store, parse_command("knowledge"), "lab", actor="cli:bob")["tables"][0]["rows"] == []


@pytest.mark.parametrize(
    ("words", "error", "message"),
    [
        ("knowledge forget 1", ValueError, "needs a reason"),
        ('knowledge forget 99 because="x"', LookupError, "no knowledge fact #99"),
    ],
)
def test_knowledge_forget_refuses_bad_input_and_changes_nothing(
    store: Store, words: str, error: type[Exception], message: str
) -> None:
    add_observation(store, flag="--f", kind="culprit", text="isolate: a fact", target="lab")
    with pytest.raises(error, match=message):
        read(store, parse_command(words), "lab", actor="cli:bob")
    assert len(list_observations(store)) == 1
    assert [e for e in audit_events(store, "lab") if e.action == "knowledge forget"] == []


def test_a_fact_is_retracted_once(store: Store) -> None:
    fact = add_observation(store, flag="--f", kind="culprit", text="isolate: a fact", target="lab")
    read(store, parse_command(f'knowledge forget {fact.id} because="first"'), "lab", actor="cli:bob")
    with pytest.raises(ValueError, match="already retracted"):
        read(store, parse_command(f'knowledge forget {fact.id} because="again"'), "lab", actor="cli:bob")
    row = get_observation(store, int(fact.id or 0))
    assert row is not None and row.retracted_because == "first"
