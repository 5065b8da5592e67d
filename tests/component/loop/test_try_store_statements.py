"""What one `try` asks of the store, counted (issue 16, item 9: the bot's overhead per experiment).

The built-in `try` playbook runs on the fake target layer (tests/support/loop_fake_target.py) and
a real SQLite store; SQLAlchemy's `before_cursor_execute` counts every statement by its verb and
first table. A count, not a timing: a step that starts re-reading rows it already has (or a
redaction or flag-list pass per step that queries) shows up here, whatever the machine's load.
The lease's own statements are left out: its heartbeat runs on a clock. `bench/experiment_counts.py`
prints the same counts next to an older commit's.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path
from typing import Any

from sqlalchemy import event

from bot.loop.engine import Engine
from bot.loop.report import MemoryReporter
from bot.sglang.change import Change
from bot.store import AsyncStore, Store
from tests.support.loop_fake_target import TARGET, faked_target, settings

STATEMENTS_PER_TRY = 219
"""Counted on this commit (lease statements aside, the wait queue's among them: taking the lease
asks `lease_waiter` whether anyone queued first); bench/experiment_counts.py shows where they go.
213 before issue 23's capacity prediction, which adds 6: the preflight reads the target's starts
and the knowledge observations and shows its prediction (here: none, the fake's starts have no
memory lines), `await_start` reads the new start and shows the prediction against it."""


def _kind(statement: str) -> str:
    table = re.search(r"\b(?:FROM|INTO|UPDATE)\s+\"?(\w+)", statement, re.IGNORECASE)
    return f"{statement.split()[0].upper()} {table.group(1) if table else ''}".strip()


async def test_a_try_asks_the_store_a_bounded_number_of_statements(tmp_path: Path) -> None:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    store = AsyncStore(opened)
    counted: collections.Counter[str] = collections.Counter()

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        counted[_kind(statement)] += 1

    engine = Engine(settings(tmp_path), store, MemoryReporter(), cache_dir=tmp_path / "cache")
    try:
        with faked_target(opened):
            change = Change("set", "--mem-fraction-static", "0.85")
            first = await engine.run(
                "try", {"changes": [change.to_json()], "keep": "always"}, target=TARGET, actor="cli:t"
            )
            assert first.status == "succeeded"
            event.listen(opened.engine, "before_cursor_execute", count)
            change = Change("set", "--mem-fraction-static", "0.86")
            outcome = await engine.run(
                "try", {"changes": [change.to_json()], "keep": "always"}, target=TARGET, actor="cli:t"
            )
            event.remove(opened.engine, "before_cursor_execute", count)
    finally:
        store._executor.shutdown(wait=True)
        opened.close()
    assert outcome.status == "succeeded"
    # the pinned baseline is read once (snapshot_before); schedule_checks reads it only for `expect=`
    assert counted["SELECT baseline"] == 1, counted
    others = {kind: n for kind, n in counted.items() if not kind.endswith((" lease", " lease_waiter"))}
    assert sum(others.values()) <= STATEMENTS_PER_TRY, sorted(others.items())
