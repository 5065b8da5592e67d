"""`status` shows a target's change freeze (bot/app/freeze.py), in its JSON, on the console and in
Slack's answer; a target without one shows none. Against a fake SSH node (tests/unit/target)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from bot.app.context import AppContext
from bot.app.freeze import freeze
from bot.app.status import status
from bot.cli.status import print_status
from bot.config import Settings
from bot.store import AsyncStore, Store
from tests.support.fake_node import FakeNode, FakeSystemd
from tests.unit.target.conftest import serving


async def test_status_shows_the_freeze_in_effect(tmp_path: Path) -> None:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    store = AsyncStore(opened)
    try:
        async with serving(tmp_path, [FakeNode(FakeSystemd(rank=0))]) as fake:
            settings = Settings.model_validate(
                {"targets": {"fake": fake.target}, "database": {"sqlite_path": str(tmp_path / "x.db")}}
            )
            ctx = AppContext(settings, store)
            plain = await status(ctx, "fake")
            await freeze(ctx, "fake", reason="launch day", until="3h", actor="cli:alice")
            frozen = await status(ctx, "fake")
    finally:
        store._executor.shutdown(wait=True)
        opened.close()
    assert plain.freeze is None and plain.to_json()["freeze"] is None
    shown = frozen.to_json()["freeze"]
    assert shown["reason"] == "launch day" and shown["by"] == "cli:alice" and shown["source"] == "command"
    assert shown["text"].startswith("fake is frozen: 'launch day' (set by cli:alice, until ")
    out = io.StringIO()
    print_status(Console(file=out, width=200, highlight=False), frozen.to_json())
    assert f"frozen: {shown['text']}; commands that change it are refused" in out.getvalue()
