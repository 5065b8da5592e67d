"""`status` lists the commands queued for the target's lease (`wait=`): who waits, for what,
since and until when, in its JSON and on the console; a target nobody waits for lists none.
Against a fake SSH node (tests/unit/target)."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

from rich.console import Console

from bot.app.context import AppContext
from bot.app.status import status
from bot.cli.status import print_status
from bot.config import Settings
from bot.store import AsyncStore, Store
from bot.store.lease_queue import join_queue
from bot.store.models import utcnow
from tests.support.fake_node import FakeNode, FakeSystemd
from tests.unit.target.conftest import serving


async def test_status_lists_the_waiting_queue(tmp_path: Path) -> None:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    store = AsyncStore(opened)
    try:
        async with serving(tmp_path, [FakeNode(FakeSystemd(rank=0))]) as fake:
            settings = Settings.model_validate(
                {"targets": {"fake": fake.target}, "database": {"sqlite_path": str(tmp_path / "x.db")}}
            )
            ctx = AppContext(settings, store)
            empty = await status(ctx, "fake")
            now = utcnow()
            waiter = await store.run(
                join_queue,
                opened,
                "fake",
                holder="slack:U1:0123abcd",
                purpose="try",
                requested_by="slack:U1",
                command="try changes=--x=1",
                deadline=now + timedelta(minutes=30),
                now=now,
            )
            queued = await status(ctx, "fake")
    finally:
        store._executor.shutdown(wait=True)
        opened.close()
    assert empty.to_json()["waiting"] == []
    [shown] = queued.to_json()["waiting"]
    assert shown["waiter"] == waiter.id and shown["requested_by"] == "slack:U1" and shown["purpose"] == "try"
    assert shown["text"].startswith(
        f"waiter {waiter.id}: try by slack:U1 (`try changes=--x=1`), waiting since "
    )
    out = io.StringIO()
    print_status(Console(file=out, width=200, highlight=False), queued.to_json())
    assert f"queued: {shown['text']}; `flagbot cancel waiter={waiter.id}` stops it" in out.getvalue()
