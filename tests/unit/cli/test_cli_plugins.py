"""Add-on commands reach `flagbot` through the `flagbot.commands` entry points (bot/cli_plugins.py)."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
import typer
from typer.testing import CliRunner

from bot.cli import plugins as cli_plugins


def _points(monkeypatch: pytest.MonkeyPatch, *points: EntryPoint) -> None:
    monkeypatch.setattr(cli_plugins, "entry_points", lambda group: [p for p in points if p.group == group])


def test_the_installed_lab_adds_twin_and_demo() -> None:
    app = typer.Typer()
    assert "lab" in cli_plugins.register_plugins(app)
    names = {group.name for group in app.registered_groups} | {
        command.name for command in app.registered_commands
    }
    assert {"twin", "demo"} <= names


def test_a_broken_add_on_is_named_and_skipped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _points(
        monkeypatch,
        EntryPoint("missing", "flagbot_no_such_module:register", cli_plugins.PLUGIN_GROUP),
        EntryPoint("not_callable", "bot:__version__", cli_plugins.PLUGIN_GROUP),
        EntryPoint("lab", "flagbot_lab.plugin:register", cli_plugins.PLUGIN_GROUP),
        EntryPoint("elsewhere", "flagbot_no_such_module:register", "other.group"),
    )
    app = typer.Typer()
    assert cli_plugins.register_plugins(app) == ["lab"]
    err = capsys.readouterr().err
    assert "add-on 'missing' (flagbot_no_such_module:register) not loaded: No module named" in err
    assert "add-on 'not_callable' (bot:__version__) not loaded: bot:__version__ is not callable" in err
    assert "elsewhere" not in err


def test_without_add_ons_the_product_commands_stand_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    _points(monkeypatch)
    app = typer.Typer()
    assert cli_plugins.register_plugins(app) == []

    @app.command()
    def status() -> None:
        """A product command."""

    @app.command()
    def other() -> None:
        """Another, so typer keeps the group."""

    result = CliRunner().invoke(app, ["twin"])
    assert result.exit_code == 2
    assert "No such command 'twin'" in result.output
