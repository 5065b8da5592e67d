"""A `try` that never reached a node (issue 20 item 5): the console's real `try` playbook against a
target whose key file is missing, or whose SSH port refuses, fails before any change; the run is
marked "not started" (`RunState.conclusion.not_started`, set by `bot.loop.runner`) and the weekly
digest lists it apart, not as a failed experiment."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.config import load_settings
from bot.digest.build import build_digest
from bot.digest.markdown import render_markdown
from bot.digest.week import IsoWeek, zone
from bot.loop.run_state import RunState
from bot.store import Store
from bot.store.experiments import list_experiments
from tests.support.cli_config import lab_config, store_path
from tests.support.fake_node import Keys

ABSENT_KEY = "absent key file"
REFUSED = "port refuses"


def _ssh(tmp_path: Path, case: str) -> str:
    """The lines that go under `[targets.lab.ssh]` (the last table of `lab_config`) for `case`."""
    keys = Keys.make(tmp_path, 1)
    keys.client_key.chmod(0o600)
    known = keys.known_hosts([9])  # the lab's node is 127.0.0.1:9, where nothing listens
    key = tmp_path / "no_such_key" if case == ABSENT_KEY else keys.client_key
    return f'key_path = "{key}"\nknown_hosts = "{known}"\n'


@pytest.mark.parametrize("case", [ABSENT_KEY, REFUSED])
def test_a_try_that_could_not_connect_is_not_started_and_the_digest_lists_it_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    config = lab_config(tmp_path, after=_ssh(tmp_path, case))
    done = CliRunner().invoke(cli.app, ["--config", str(config), "try", "add", "--enable-metrics"])
    assert done.exit_code == 1, done.stdout + done.stderr

    store = Store.open(None, sqlite_path=store_path(config))
    try:
        [row] = list_experiments(store, "lab")
        assert row.status == "failed"
        why = RunState.load(row.state).conclusion.not_started
        assert why is not None and why.startswith("could not connect: 127.0.0.1:9: ")
        if case == ABSENT_KEY:
            assert "not connected: ssh.key_path" in why and "does not exist" in why
            assert "unreachable" not in why and "Errno" not in why
        else:
            assert "unreachable" in why
        settings = load_settings(config, required=True)
        created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
        week = IsoWeek.containing(created, zone(settings.schedules.timezone))  # the run's own week
        digest = build_digest(store, settings, week)
    finally:
        store.close()
    assert [line.id for line in digest.experiments] == []
    assert [(line.id, line.not_started) for line in digest.not_started] == [(row.id, why)]
    counts = digest.counts()
    assert counts["not_started"] == 1 and not any(key.startswith("verdict:") for key in counts)
    assert "1 not started (could not connect)" in render_markdown(digest)
