"""`--json` on every console command that prints a result: one JSON object on stdout with `ok`,
and an error as `{"ok": false, "error": ..., "kind": ...}` with the exit code the command has
without `--json`. The table walks the command registry (bot/commands/registry.py): a new chat
command fails here until it is listed, with words that reach its result (or its refusal) on a
real SQLite store and an unreachable loopback target (nothing listens on port 9)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.commands import COMMANDS
from tests.support.cli_config import lab_config

RESULT_WORDS: dict[str, list[str]] = {
    "help": [],
    "status": [],
    "observe": [],
    "predict": ["set", "--mem-fraction-static=0.85"],
    "grep": ["fired"],
    "logs": [],
    "try": ["add", "--enable-metrics", "--dry-run"],
    "revert": ["--dry-run"],
    "restart": ["--dry-run"],
    "freeze": ["reason=window", "until=1h"],
    "unfreeze": [],
    "verify": ["--dry-run"],
    "bench": ["--base-url", "http://127.0.0.1:9"],
    "baseline": ["show"],
    "hypothesis": ["list"],
    "knowledge": [],
    "isolate": ["--dry-run"],
    "run": ["restart", "--dry-run"],
    "playbooks": [],
    "log": [],
    "cancel": [],
    "keep": ["1"],
    "rollback": ["--dry-run"],
    "reconcile": [],
    "checks": ["list"],
    "digest": [],
}
"""Words after the command's name that reach its answer (success or refusal) quickly."""

CONSOLE_ONLY: dict[str, list[str]] = {
    "explain": ["try", "add", "--enable-metrics"],
    "config check": [],
    "db current": [],
    "db upgrade": [],
    "sudoers": ["--user", "flagbot", "--unit", "sglang.service"],
}
"""Console commands outside the chat registry that print a result."""

PRINTS_NOTHING = {
    "serve": "runs the Slack bot and the scheduler until stopped; it prints no result",
    "parse": "a group: `parse log|bench|unit` each take `--json` (tests/component/test_cli.py)",
    "twin": "the lab's add-on (flagbot_lab), not the product; absent from a product install",
    "demo": "the lab's add-on (flagbot_lab), not the product; absent from a product install",
}
"""Top-level commands with no result of their own to print, and why."""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    return lab_config(tmp_path)


def invoke(config: Path, *words: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.app, ["--config", str(config), *words])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def one_document(out: str) -> dict[str, Any]:
    document = json.loads(out)  # one JSON document, nothing before or after it
    assert isinstance(document, dict), out
    return document


def test_the_table_lists_every_registry_command() -> None:
    assert {spec.name for spec in COMMANDS} == set(RESULT_WORDS)


def test_every_top_level_command_is_covered_or_listed_as_printing_nothing() -> None:
    names = {command.name for command in cli.app.registered_commands} | {
        group.name for group in cli.app.registered_groups
    }
    covered = set(RESULT_WORDS) | {name.split()[0] for name in CONSOLE_ONLY} | set(PRINTS_NOTHING)
    assert names - covered == set()


@pytest.mark.parametrize("name", sorted(RESULT_WORDS) + sorted(CONSOLE_ONLY))
def test_json_prints_one_document_with_ok_that_agrees_with_the_exit_code(config: Path, name: str) -> None:
    words = RESULT_WORDS.get(name, CONSOLE_ONLY.get(name, []))
    code, out, err = invoke(config, *name.split(), *words, "--json")
    document = one_document(out)
    assert document["ok"] is (code == 0), (name, code, out, err)
    if code != 0 and "error" in document:
        assert document["kind"] in ("usage", "failed", "not_available")


@pytest.mark.parametrize("name", sorted(set(RESULT_WORDS) - {"help"}))
def test_a_usage_error_under_json_is_a_json_error_with_exit_code_2(config: Path, name: str) -> None:
    code, out, err = invoke(config, name, "target=nope", "--json")
    assert code == 2, (name, out, err)
    document = one_document(out)
    assert document["ok"] is False and document["kind"] == "usage"
    assert document["error"] and document["error"] in err  # the same words as the stderr line


@pytest.mark.parametrize(("words", "code"), [(["log"], 2), (["bench"], 1), (["unit"], 1)])
def test_parse_errors_under_json_are_json_errors(
    config: Path, tmp_path: Path, words: list[str], code: int
) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("nothing to see\n", encoding="utf-8")
    source = str(tmp_path / "missing.log") if code == 2 else str(empty)
    got, out, err = invoke(config, "parse", *words, "--json", source)
    assert got == code, (out, err)
    document = one_document(out)
    assert document["ok"] is False and document["kind"] == ("usage" if code == 2 else "failed")
    assert source in document["error"]


def test_help_json_carries_the_help_text(config: Path) -> None:
    code, out, _ = invoke(config, "help", "try", "--json")
    document = one_document(out)
    assert code == 0 and document["topic"] == "try" and "usage: try CHANGE" in document["help"]
