"""How long the checks before a playbook command's Slack acknowledgement take on a long audit log.

Every playbook command (`try`, `revert`, `restart`, ...) asks the store, before Slack gets its
answer and again when the run starts, for the target's newest `freeze`/`unfreeze` audit event
(`bot.app.freeze`) and for its restarts of the last hour (`bot.loop.restart_budget`). Every
command flagbot runs is audited, so a team's audit log grows by thousands of rows a week. Per N,
a fresh SQLite store in a temporary directory is migrated and N audit rows of one target are
inserted in bulk (`command` events over the last N seconds, one `restart` among them), then each
query runs `--repeats` times; the same again after dropping the (target, action, at) index
(migration 0011) shows what it was before. Prints the medians in ms; not a test.

    .venv/bin/python bench/audit_queries.py [--sizes 1000,10000,100000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from sqlalchemy import insert, text

from bot.store import Store
from bot.store.loop_models import AuditEvent
from bot.store.models import utcnow
from bot.store.records import RESTART_ACTION, latest_freeze_event, restart_times

TARGET = "lab"
INDEX = "ix_audit_event_target_action_at"


def seed(store: Store, rows: int) -> None:
    now = utcnow()
    events = [
        {
            "at": now - timedelta(seconds=rows - k),
            "actor": "slack:U0OPER",
            "target": TARGET,
            "action": RESTART_ACTION if k == rows - 10 else "command",
            "detail": {"command": "log", "channel": "C0FLAGBOT"},
        }
        for k in range(rows)
    ]
    with store.engine.begin() as connection:
        for start in range(0, rows, 5000):
            connection.execute(insert(AuditEvent), events[start : start + 5000])


def median_ms(query: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        query()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(rows: int, repeats: int) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory(prefix="flagbot-audit-queries-") as base:
        store = Store.open(f"sqlite:///{Path(base) / 'flagbot.db'}")
        try:
            store.upgrade()
            seed(store, rows)
            since = utcnow() - timedelta(hours=1)
            queries: dict[str, Callable[[], object]] = {
                "latest_freeze_event": lambda: latest_freeze_event(store, TARGET),
                "restart_times": lambda: restart_times(store, TARGET, since=since),
            }
            assert len(restart_times(store, TARGET, since=utcnow() - timedelta(seconds=rows + 60))) == 1
            indexed = {name: median_ms(query, repeats) for name, query in queries.items()}
            with store.engine.begin() as connection:
                connection.execute(text(f"DROP INDEX {INDEX}"))
            bare = {name: median_ms(query, repeats) for name, query in queries.items()}
        finally:
            store.close()
    return {name: (indexed[name], bare[name]) for name in indexed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="audit rows of the target")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"audit rows of one target; median of {args.repeats} calls, ms (SQLite, one process)")
    print(f"{'rows':>8s} {'query':22s} {'indexed':>9s} {'no index':>9s}")
    for rows in sizes:
        for name, (indexed, bare) in measure(rows, args.repeats).items():
            print(f"{rows:8d} {name:22s} {indexed:9.2f} {bare:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
