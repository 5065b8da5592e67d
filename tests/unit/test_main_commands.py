"""`bot.main` loads only the module of the command typed (issue 22, "a quick CLI").

What is held here is structure, not time: the table of command modules names real registrars
that register the command they are listed for, every chat command has an entry, the command
word is found past the program's own options, and a process that loads one command does not
import the heavy packages other commands need. The times are printed by bench/cli_startup.py.
"""

from __future__ import annotations

import gc
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.main import get_command

from bot import main as entry
from bot.cli.app import app as full_app
from bot.commands import COMMANDS
from bot.main import COMMAND_MODULES, READ_AND_EXIT_COMMANDS, command_word

HEAVY_FOR_NOBODY_BUT_SERVE_AND_THE_LAB = ("slack_bolt", "slack_sdk", "aiohttp", "flagbot_lab", "matplotlib")


def _registered_by(spec: str) -> set[str]:
    """The command names `module:function` puts on an application of its own."""
    module_name, _, function_name = spec.partition(":")
    register = getattr(importlib.import_module(module_name), function_name)
    assert callable(register), spec
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """A callback, so typer keeps a group even for one command."""

    register(app)
    return set(get_command(app).commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(COMMAND_MODULES))
def test_every_entry_names_a_front_end_registrar_that_registers_its_command(name: str) -> None:
    spec = COMMAND_MODULES[name]
    assert spec.count(":") == 1, spec
    assert spec.startswith(("bot.cli.", "bot.serve:")), f"{spec}: only front ends and serve register commands"
    assert name in _registered_by(spec)


def test_every_chat_command_and_every_console_command_is_in_the_table_or_loaded_in_full() -> None:
    chat = {spec.name for spec in COMMANDS}
    assert chat - set(COMMAND_MODULES) == set(), "a chat command without a module would load every command"
    console = set(get_command(full_app).commands)  # type: ignore[attr-defined]
    assert set(COMMAND_MODULES) - console - {"serve"} == set(), "an entry for a command the console lacks"
    add_ons = _registered_by("bot.cli.plugins:register_plugins")  # `bot.main.app` adds them to the same app
    assert console - set(COMMAND_MODULES) - add_ons == {"parse", "db", "config"}, (
        "loaded in full, and only these"
    )


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["status"], "status"),
        (["--config", "x.toml", "log", "12"], "log"),
        (["-c", "x.toml", "help", "try"], "help"),
        (["--config=x.toml", "explain", "try", "--tp", "8"], "explain"),
        (["-cx.toml", "status", "--json"], "status"),
        ([], None),
        (["--help"], None),
        (["--version"], None),
        (["--config"], None),
        (["--no-such-option", "status"], None),
    ],
)
def test_the_command_word_is_read_past_the_programs_own_options(args: list[str], word: str | None) -> None:
    assert command_word(args) == word


HEAVY_PACKAGES = (
    "sqlalchemy",
    "alembic",
    "asyncssh",
    "scipy",
    "numpy",
    *HEAVY_FOR_NOBODY_BUT_SERVE_AND_THE_LAB,
)

THE_DIGEST_AND_THE_CAPACITY_MODEL = (
    "bot.digest.build",
    "bot.digest.chart",
    "bot.sglang.capacity_model.prediction",
)


def _imported_after(code: str, watched: tuple[str, ...] = HEAVY_PACKAGES) -> list[str]:
    """Which of the watched modules a fresh interpreter has imported after `code`."""
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(name for name in WATCHED if name in sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe.replace("WATCHED", repr(watched))],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found: list[str] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_importing_the_entry_point_or_the_console_package_imports_no_heavy_package() -> None:
    assert _imported_after("import bot.cli\nimport bot.main") == []


def test_help_loads_neither_the_store_nor_ssh_nor_statistics() -> None:
    assert _imported_after("import bot.main\nbot.main.load_commands('help')") == []


@pytest.mark.parametrize("name", ["status", "log", "explain"])
def test_a_console_command_loads_neither_the_slack_stack_nor_the_lab(name: str) -> None:
    found = _imported_after(f"import bot.main\nbot.main.load_commands({name!r})")
    assert set(found) & set(HEAVY_FOR_NOBODY_BUT_SERVE_AND_THE_LAB) == set()
    assert "sqlalchemy" in found or name == "explain", "the probe sees what a command imports"


@pytest.mark.parametrize(
    ("name", "then"),
    [
        ("status", ""),
        ("log", ""),
        ("rollback", "import bot.cli.target"),
        ("reconcile", "import bot.cli.target"),
    ],
)
def test_a_target_or_records_command_loads_neither_the_digest_nor_the_capacity_model(
    name: str, then: str
) -> None:
    """`rollback` reads where runs' threads are (`bot.digest.threads`); that alone once ran the
    digest package's re-exports, ~95 ms of imports before its first call. `then`: the module the
    command imports when it runs (`bot.cli.chat` defers it)."""
    code = f"import bot.main\nbot.main.load_commands({name!r})\n{then}"
    assert _imported_after(code, THE_DIGEST_AND_THE_CAPACITY_MODEL) == []
    assert "bot.digest.threads" in _imported_after(code, ("bot.digest.threads",)) or not then


def test_status_loads_none_of_the_other_target_commands() -> None:
    """`status` once came with rollback, heal, the run settler and the journal readers (the other
    target commands' modules): ~0.2 s of imports before its first call (bench/cli_startup.py)."""
    others = (
        "bot.app.target_commands",
        "bot.cli.target",
        "bot.target.rollback",
        "bot.target.heal",
        "bot.app.settle",
    )
    code = "import bot.main\nbot.main.load_commands('status')"
    assert _imported_after(code, others) == []
    assert _imported_after(f"{code}\nimport bot.cli.target", others) == sorted(others), "the probe sees them"


def test_explain_loads_no_statistics() -> None:
    assert (
        set(_imported_after("import bot.main\nbot.main.load_commands('explain')")) & {"scipy", "numpy"}
        == set()
    )


def test_the_full_application_has_serve_and_the_table_loads_on_the_same_application() -> None:
    assert "serve" in get_command(entry.app).commands  # type: ignore[attr-defined]
    assert entry.load_commands("status") is entry.app


@pytest.fixture
def collector_restored() -> Iterator[None]:
    """`main` may turn the collector off for the process; this one goes on with it on."""
    yield
    gc.enable()


@pytest.mark.usefixtures("collector_restored")
@pytest.mark.parametrize(
    ("word", "quick"), [("status", True), ("log", True), ("try", False), ("serve", False)]
)
def test_a_command_that_reads_and_exits_runs_without_the_collector_and_leaves_without_the_teardown(
    monkeypatch: pytest.MonkeyPatch, word: str, quick: bool
) -> None:
    collecting: list[bool] = []
    left: list[str | int | None] = []

    def application() -> None:
        collecting.append(gc.isenabled())
        raise SystemExit(3)  # as click ends a command

    def leave(code: str | int | None) -> None:
        left.append(code)
        raise SystemExit(code)  # not the process's end: this test's

    monkeypatch.setattr(entry, "load_commands", lambda _word: application)
    monkeypatch.setattr(entry, "exit_without_teardown", leave)
    monkeypatch.setattr(entry, "install_dump_on_signal", lambda: None)
    monkeypatch.setattr(entry, "install_log_redaction", lambda: None)
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # main wraps both streams; restored after
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    monkeypatch.setattr(sys, "argv", ["flagbot", "--config", "x.toml", word])
    gc.enable()
    with pytest.raises(SystemExit) as done:
        entry.main()
    assert done.value.code == 3
    assert collecting == [not quick]
    assert left == ([3] if quick else [])


def test_a_quick_command_still_runs_the_atexit_handlers_and_keeps_its_output_and_status(
    tmp_path: Path,
) -> None:
    """`exit_without_teardown` for real, in a process of its own: the help text is all there,
    an atexit handler ran after it, and a refusal keeps its status (2: no such config file)."""
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('atexit ran', flush=True))\n"
        "sys.argv = ['flagbot', *sys.argv[1:]]\n"
        "from bot.main import main\n"
        "main()\n"
    )
    helped = subprocess.run(
        [sys.executable, "-c", probe, "help", "try"], capture_output=True, text=True, timeout=120, check=False
    )
    assert helped.returncode == 0, helped.stderr
    assert "usage: try CHANGE" in helped.stdout
    assert helped.stdout.rstrip().endswith("atexit ran")
    refused = subprocess.run(
        [sys.executable, "-c", probe, "--config", str(tmp_path / "none.toml"), "status"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 2
    assert "config file not found" in refused.stderr
    assert refused.stdout.rstrip().endswith("atexit ran")


def test_the_read_and_exit_commands_are_commands_of_the_table() -> None:
    assert set(COMMAND_MODULES) >= READ_AND_EXIT_COMMANDS
    assert READ_AND_EXIT_COMMANDS.isdisjoint(
        {"try", "revert", "verify", "isolate", "restart", "serve", "digest"}
    )
