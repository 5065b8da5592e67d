"""The checks every playbook command makes before Slack's acknowledgement (the target's latest
freeze, its restarts of the last hour) read the audit log through its (target, action, at) index,
not every audit row of the target: at 100,000 rows that was 111 and 44 ms a query
(bench/audit_queries.py prints the figures)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event, text

from bot.store import Store
from bot.store.loop_models import AuditEvent
from bot.store.models import utcnow
from bot.store.records import RESTART_ACTION, latest_freeze_event, restart_times

INDEX = "ix_audit_event_target_action_at"


def plans_of(store: Store, query: Callable[[], Any]) -> list[str]:
    """SQLite's plan of each statement `query` runs, with the parameters it ran with."""
    seen: list[tuple[str, Any]] = []

    def keep(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", keep)
    try:
        query()
    finally:
        event.remove(store.engine, "before_cursor_execute", keep)
    plans = []
    with store.engine.connect() as connection:
        for statement, parameters in seen:
            rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
            plans.append(" | ".join(str(row[-1]) for row in rows))
    return plans


def test_the_freeze_and_restart_reads_use_the_index(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    try:
        store.upgrade()
        now = utcnow()
        for k in range(50):
            store.add(AuditEvent(at=now - timedelta(minutes=k), actor="a", target="lab", action="command"))
        store.add(AuditEvent(at=now, actor="a", target="lab", action=RESTART_ACTION))
        with store.engine.connect() as connection:  # the planner's statistics, as a used database has
            connection.execute(text("ANALYZE"))
        plans = [
            *plans_of(store, lambda: latest_freeze_event(store, "lab")),
            *plans_of(store, lambda: restart_times(store, "lab", since=now - timedelta(hours=1))),
        ]
        assert len(plans) == 3  # the newest freeze, the newest unfreeze, the restarts
        assert all(f"INDEX {INDEX} (" in plan and "TEMP B-TREE" not in plan for plan in plans), plans
        assert restart_times(store, "lab", since=now - timedelta(hours=1)) == [now]
    finally:
        store.close()
