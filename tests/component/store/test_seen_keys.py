"""The idempotency keys a burst of Slack deliveries records in one trip (`first_times`), on SQLite
and a real PostgreSQL: in order, a repeated key first only once, a key recorded before never
first, and a key another process records between the read and the insert is not first here."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, func, select

from bot.store import Store
from bot.store.database import make_engine
from bot.store.seen_keys import first_time, first_times
from bot.store.slack_models import SeenKey


def _rows(store: Store) -> int:
    with store.engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(SeenKey)).scalar_one())


def test_keys_in_one_trip_in_order(store: Store) -> None:
    assert first_time(store, "delivery:command:T0", actor="U0")
    got = first_times(
        store,
        [
            ("delivery:command:T1", "U1"),
            ("delivery:command:T0", "U2"),
            ("delivery:command:T1", "U3"),
            ("click:n1", "U4"),
        ],
    )
    assert got == [True, False, False, True]
    assert _rows(store) == 3
    assert first_times(store, [("click:n1", "U5"), ("delivery:command:T2", "U5")]) == [False, True]
    assert first_times(store, []) == []
    assert not first_time(store, "delivery:command:T2", actor="U6")


def test_a_key_another_process_records_in_between_is_not_first_here(store: Store) -> None:
    other = Store(make_engine(store.engine.url.render_as_string(hide_password=False)))  # another process's
    raced: list[str] = []

    def _meanwhile(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT") and not raced:
            raced.append("delivery:command:T8")
            assert first_time(other, "delivery:command:T8", actor="U-other")

    event.listen(store.engine, "before_cursor_execute", _meanwhile)
    try:
        got = first_times(store, [("delivery:command:T7", "U1"), ("delivery:command:T8", "U1")])
    finally:
        event.remove(store.engine, "before_cursor_execute", _meanwhile)
        other.close()
    assert raced and got == [True, False]
    assert _rows(store) == 2
