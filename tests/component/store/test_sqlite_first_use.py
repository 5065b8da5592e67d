"""The embedded default just works: a SQLite file that does not exist yet, or whose schema is
behind, is created and migrated on first use (`Store.prepare`), once, even by two processes
starting at the same moment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from sqlalchemy import inspect

from bot.store import Store
from bot.store.migrate import head_revision, upgrade
from bot.store.schema_revision import current_revision

FLAGBOT = shutil.which("flagbot", path=str(Path(sys.executable).parent)) or "flagbot"


def _flagbot(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("FLAGBOT_CONFIG", "FLAGBOT_DATABASE_URL")}
    return subprocess.run(
        [FLAGBOT, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=environment | (env or {}),
        timeout=60,
        check=False,
    )


def test_a_command_on_a_new_sqlite_file_creates_and_migrates_it(tmp_path: Path) -> None:
    database = tmp_path / "fresh" / "flagbot.db"
    result = _flagbot("checks", "list", cwd=tmp_path, env={"FLAGBOT_DATABASE_URL": f"sqlite:///{database}"})
    assert result.returncode == 0, result.stderr
    assert "db upgrade" not in result.stderr + result.stdout
    assert "no verification checks yet" in result.stdout
    store = Store.open(f"sqlite:///{database}")
    assert current_revision(store.engine) == head_revision(store.engine)
    store.close()


def test_a_schema_behind_this_flagbot_is_upgraded_on_first_use(tmp_path: Path) -> None:
    store = Store.open(None, sqlite_path=tmp_path / "flagbot.db")
    upgrade(store.engine, "0001")
    assert "verification_check" not in set(inspect(store.engine).get_table_names())
    assert store.prepare() == head_revision(store.engine)
    assert "verification_check" in set(inspect(store.engine).get_table_names())
    store.close()


def test_a_schema_ahead_of_this_flagbot_is_refused_and_left_alone(tmp_path: Path) -> None:
    store = Store.open(None, sqlite_path=tmp_path / "flagbot.db")
    store.upgrade()
    with store.engine.begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    try:
        store.prepare()
    except RuntimeError as exc:
        assert "database schema is at 9999" in str(exc)
    else:
        raise AssertionError("a schema from a newer flagbot was accepted")
    assert current_revision(store.engine) == "9999"
    store.close()


_PREPARE = """
import sys
from pathlib import Path
from bot.store import Store
store = Store.open(None, sqlite_path=Path(sys.argv[1]))
print(store.prepare())
store.close()
"""


def test_processes_starting_at_once_on_a_new_file_migrate_it_once(tmp_path: Path) -> None:
    database = tmp_path / "state" / "flagbot.db"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _PREPARE, str(database)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outcomes = [racer.communicate(timeout=120) for racer in racers]
    store = Store.open(None, sqlite_path=database)
    head = head_revision(store.engine)
    for racer, (out, err) in zip(racers, outcomes, strict=True):
        assert racer.returncode == 0, err
        assert out.strip() == head
    assert current_revision(store.engine) == head
    with store.engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT count(*) FROM alembic_version").scalar() == 1
    store.close()
