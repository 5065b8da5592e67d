"""`flagbot`: the console's Typer application with every command on it. Chat commands take the
same words as `/flagbot` in Slack.

Chat commands (`flagbot try add --enable-x ...`) receive their raw words and hand them to the
shared grammar, so SGLang flags are never taken for options of this program. Options of the
program itself (`--config`) go before the command name.

Importing this module imports every command module: `flagbot --help` and the tests use it. A
single command run from the terminal does not (`bot.main` loads that command's module only).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Annotated

import typer
from sqlalchemy.exc import SQLAlchemyError

from bot.app.connect_check import connect_checks, failed
from bot.app.unit_secrets import unit_findings
from bot.cli.bench import register_bench
from bot.cli.chat import register_chat_command
from bot.cli.checks import register_checks
from bot.cli.common import fail, set_json_mode, settings
from bot.cli.digest import register_digest
from bot.cli.explain import register_explain
from bot.cli.loop import register_loop
from bot.cli.parse import parse_app
from bot.cli.playbooks import register_playbooks
from bot.cli.predict import register_predict
from bot.cli.records import register_records
from bot.cli.root import app
from bot.cli.sudoers import register_sudoers
from bot.commands import COMMANDS
from bot.config import Secrets
from bot.store import Store

__all__ = ["app", "config_app", "db_app"]

db_app = typer.Typer(help="Database schema (SQLite in state/ or PostgreSQL from FLAGBOT_DATABASE_URL).")
config_app = typer.Typer(help="Check flagbot.toml.")


@config_app.command("check")
def config_check(
    units: Annotated[
        bool,
        typer.Option(
            "--units", help="Also read each target's unit (node 0, over SSH) and warn about literal secrets."
        ),
    ] = False,
    connect: Annotated[
        bool,
        typer.Option(
            "--connect",
            help="Also connect to every node: key file, known_hosts, login, sudoers lines, unit, SGLang "
            "version and flag list, /health. Exit 1 when a check fails.",
        ),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Validate the config file and print what it defines."""
    set_json_mode(json_output)
    config = settings()
    secrets = Secrets()
    names = ("slack_bot_token", "slack_app_token", "slack_signing_secret", "database_url")
    secret_state = {
        (name.upper() if name != "database_url" else "FLAGBOT_DATABASE_URL"): getattr(secrets, name)
        is not None
        for name in names
    }
    findings = asyncio.run(unit_findings(config)) if units else []
    checks = asyncio.run(connect_checks(config)) if connect else []
    if json_output:
        report: dict[str, object] = {
            "targets": list(config.targets),
            "default_target": config.default_target,
            "benchmark_profiles": list(config.bench),
            # names only (a `"NAME_TOKEN": value` pair would be masked as a secret in the output)
            "environment_set": [name for name, state in secret_state.items() if state],
            "environment_not_set": [name for name, state in secret_state.items() if not state],
        }
        if units:
            report["units"] = [finding.render() for finding in findings]
        report["ok"] = not failed(checks)
        if connect:
            report["checks"] = [check.to_json() for check in checks]
        typer.echo(json.dumps(report, indent=2))
    else:
        typer.echo(
            f"targets: {', '.join(config.targets) or 'none'} (default: {config.default_target or 'none'})"
        )
        typer.echo(f"benchmark profiles: {', '.join(config.bench)}")
        for name, state in secret_state.items():
            typer.echo(f"{name}: {'set' if state else 'not set'}")
        for finding in findings:
            typer.echo(finding.render())
        for check in checks:
            typer.echo(check.render())
    if failed(checks):
        raise typer.Exit(1)


def _store() -> Store:
    config = settings()
    url = Secrets().database_url
    try:
        return Store.open(url.get_secret_value() if url else None, sqlite_path=config.database.sqlite_path)
    except Exception as exc:  # a malformed URL or a missing driver: one line, never the password
        raise fail(f"error: FLAGBOT_DATABASE_URL: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    """SQLAlchemy messages carry the statement and a help link; the first line says what failed."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _with_store(action: str, run: Callable[[Store], str], *, json_output: bool = False) -> None:
    set_json_mode(json_output)
    store = _store()
    try:
        text = run(store)
        if json_output:
            revision = store.revision()
            document = {"ok": True, "backend": store.backend, "revision": revision, "text": text}
            typer.echo(json.dumps(document, indent=2))
        else:
            typer.echo(text)
    except SQLAlchemyError as exc:
        raise fail(f"error: {action}: database ({store.backend}) unavailable: {_first_line(exc)}") from None
    finally:
        store.close()


JsonSwitch = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


@db_app.command("upgrade")
def db_upgrade(json_output: JsonSwitch = False) -> None:
    """Create the database or migrate it to the newest schema."""
    _with_store(
        "db upgrade",
        lambda store: f"database ({store.backend}) at revision {store.upgrade()}",
        json_output=json_output,
    )


@db_app.command("current")
def db_current(json_output: JsonSwitch = False) -> None:
    """Print the schema revision of the database."""
    _with_store(
        "db current",
        lambda store: (
            f"database ({store.backend}) at revision {store.revision() or 'none (run flagbot db upgrade)'}"
        ),
        json_output=json_output,
    )


# Every console command, in the order `flagbot --help` lists them: the registry's chat commands
# first, each replaced by its own module's command where there is one (last registration wins).
app.add_typer(parse_app, name="parse")
app.add_typer(db_app, name="db")
app.add_typer(config_app, name="config")
register_explain(app)  # how a chat command is read (bot/cli/explain.py)
for _spec in COMMANDS:
    register_chat_command(
        app, _spec.name
    )  # the target commands run (bot/cli/chat.py); the rest are placeholders
register_bench(app)  # `bench` runs for real (bot/cli/bench.py)
register_playbooks(app)  # `playbooks` and `run` (bot/cli/playbooks.py)
# try, revert, verify, isolate, restart, baseline, cancel, keep, freeze (bot/cli/loop.py)
register_loop(app)
register_records(app)  # hypothesis, knowledge, log: the store's records (bot/cli/records.py)
register_predict(app)  # a change's capacity from the last observed start (bot/cli/predict.py)
register_checks(app)  # verification checks: list, pause, resume, run, delete (bot/cli/checks.py)
register_digest(app)  # the weekly post-mortem digest (bot/cli/digest.py)
register_sudoers(app)  # the least-privilege sudoers file for the hosts (bot/cli/sudoers.py)
