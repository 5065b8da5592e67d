"""`flagbot`: the console's Typer application. Chat commands take the same words as `/flagbot` in Slack.

Chat commands (`flagbot try add --enable-x ...`) receive their raw words and hand them to the
shared grammar, so SGLang flags are never taken for options of this program. Options of the
program itself (`--config`) go before the command name.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.exc import SQLAlchemyError

from bot import __version__
from bot.app.connect_check import connect_checks, failed
from bot.app.playbooks import set_broken_announcer
from bot.app.unit_secrets import unit_findings
from bot.cli.bench import register_bench
from bot.cli.checks import register_checks
from bot.cli.common import catalog_for, fail, set_config_path, set_json_mode, settings, split_json
from bot.cli.digest import register_digest
from bot.cli.loop import register_loop
from bot.cli.parse import parse_app
from bot.cli.playbooks import register_playbooks
from bot.cli.sudoers import register_sudoers
from bot.cli.target import TARGET_COMMANDS, run_target_command
from bot.commands import COMMANDS, CommandError, describe_invocation, get_command, help_text, parse_command
from bot.config import Secrets
from bot.store import Store

app = typer.Typer(
    name="flagbot",
    help="Run the SGLang flag-tuning loop: try, revert, verify, isolate; evidence and a log that lasts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database schema (SQLite in state/ or PostgreSQL from FLAGBOT_DATABASE_URL).")
config_app = typer.Typer(help="Check flagbot.toml.")
app.add_typer(parse_app, name="parse")
app.add_typer(db_app, name="db")
app.add_typer(config_app, name="config")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"flagbot {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="flagbot.toml to use (default: $FLAGBOT_CONFIG, then ./flagbot.toml)"
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    set_config_path(config)
    set_json_mode(False)  # a command that takes `--json` turns it on (bot/cli/common.py)
    # a broken playbook file is told once on stderr, by the first command that loads playbooks
    set_broken_announcer(lambda message: typer.echo(message, err=True))


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


@app.command(
    "explain",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
)
def explain(ctx: typer.Context, json_output: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show how flagbot reads a chat command, without running it: `flagbot explain try --tp 8`."""
    set_json_mode(json_output)
    if ctx.args in (["--help"], ["-h"], []):
        typer.echo("usage: flagbot explain [--json] COMMAND [ARGS]...  (shows how a chat command is read)")
        return
    config = settings()
    try:
        invocation = parse_command(ctx.args, catalog=catalog_for(config, ctx.args))
    except CommandError as exc:
        raise fail(exc.render()) from None
    description = describe_invocation(invocation)
    if json_output:
        typer.echo(json.dumps({"ok": True, **description}, indent=2))
    else:
        for key, value in description.items():
            typer.echo(f"{key}: {value}")


def _chat_command(name: str) -> None:
    spec = next(spec for spec in COMMANDS if spec.name == name)

    def run(ctx: typer.Context) -> None:
        words, json_output = split_json(list(ctx.args))
        if words in (["--help"], ["-h"]) or name == "help":
            topic = words[0] if name == "help" and words else (None if name == "help" else name)
            if topic is not None and get_command(topic) is None:
                raise fail(help_text(topic))
            text = help_text(topic)
            typer.echo(
                json.dumps({"ok": True, "topic": topic, "help": text}, indent=2) if json_output else text
            )
            return
        config = settings()
        try:
            invocation = parse_command([name, *words], catalog=catalog_for(config, words, name))
        except CommandError as exc:
            raise fail(exc.render()) from None
        if name in TARGET_COMMANDS:
            run_target_command(name, invocation, config, json_output=json_output)
        raise fail(
            f"`{name}` is understood ({invocation.tier}) but not available in flagbot {__version__} yet; "
            "`flagbot explain` shows how it was read.",
            code=3,
        )

    run.__doc__ = spec.summary
    app.command(
        name,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    )(run)


for _spec in COMMANDS:
    _chat_command(_spec.name)
register_bench(app)  # `bench` runs for real (bot/cli/bench.py); last registration wins
register_playbooks(app)  # `playbooks` and `run` (bot/cli/playbooks.py)
register_loop(
    app
)  # try, revert, verify, isolate, baseline, hypothesis, knowledge, log, cancel (bot/cli/loop.py)
register_checks(app)  # verification checks: list, pause, resume, run, delete (bot/cli/checks.py)
register_digest(app)  # the weekly post-mortem digest (bot/cli/digest.py)
register_sudoers(app)  # the least-privilege sudoers file for the hosts (bot/cli/sudoers.py)
