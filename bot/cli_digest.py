"""`flagbot digest [--week 2026-W48] [--markdown] [--target T] [--json] [--chart PATH]`.

The same digest the bot posts on Mondays, for any week: printed for the terminal, as Markdown
for a wiki or an e-mail (`--markdown`), or as JSON (`--json`); `--chart` writes the PNG. The
chat form's words (`week=2026-W48 target=T`) are accepted too. Exit codes: 0 printed, 2 usage
(a malformed week, an unknown target, a database that is not ready).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.cli_target import CliError

if TYPE_CHECKING:
    pass

__all__ = ["register_digest"]


def register_digest(app: typer.Typer) -> None:
    """Register `digest`, replacing the registry's placeholder of the same name."""
    app.command("digest")(digest)


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def _chat_words(words: list[str]) -> dict[str, str]:
    """`week=2026-W48 target=T` as options; anything else is a usage error."""
    options: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or key not in ("week", "target") or not value:
            raise _fail(
                f"error: unexpected argument {word!r}; usage: flagbot digest [--week YYYY-Www] [--target T]"
            )
        options[key] = value
    return options


def digest(
    words: Annotated[
        list[str] | None, typer.Argument(help="the chat form: week=YYYY-Www target=NAME")
    ] = None,
    week: Annotated[
        str | None, typer.Option("--week", help="ISO week, e.g. 2026-W48 (default: this week)")
    ] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown for a wiki or an e-mail")] = False,
    target: Annotated[str | None, typer.Option("--target", help="one target (default: all)")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="the digest as JSON")] = False,
    chart: Annotated[Path | None, typer.Option("--chart", help="write the chart (PNG) to this path")] = None,
) -> None:
    """The weekly post-mortem digest: experiments, hypotheses, flags, incidents, lessons, a chart."""
    from bot import cli
    from bot.cli_target import open_store
    from bot.digest import WeekFormatError, build_digest, parse_week, render_chart_png, render_markdown
    from bot.digest.week import IsoWeek, zone
    from bot.store.digest_reads import stored_targets

    options = _chat_words(words or [])
    week_text = week or options.get("week")
    target = target or options.get("target")
    if markdown and json_output:
        raise _fail("error: --markdown and --json: choose one")
    config = cli.settings()
    tz = zone(config.schedules.timezone)
    try:
        chosen = parse_week(week_text) if week_text else IsoWeek.containing(datetime.now(UTC), tz)
    except WeekFormatError as exc:
        raise _fail(f"error: {exc}") from None
    try:
        store = open_store(config)
    except CliError as exc:
        raise _fail(f"error: {exc}", exc.code) from None
    try:
        if target is not None and target not in config.targets and target not in stored_targets(store):
            known = ", ".join(sorted(config.targets)) or "none configured"
            raise _fail(f"error: unknown target {target!r}; targets: {known}")
        found = build_digest(store, config, chosen, target)
    finally:
        store.close()
    chart_path = None
    if chart is not None:
        png = render_chart_png(found)
        if png is None:
            typer.echo(f"note: no chart: nothing was recorded in {chosen}", err=True)
        else:
            chart.parent.mkdir(parents=True, exist_ok=True)
            chart.write_bytes(png)
            chart_path = str(chart)
    if json_output:
        typer.echo(json.dumps({**found.to_json(), "chart_path": chart_path}, indent=2))
        return
    text = render_markdown(found, chart_path=chart_path)
    if markdown:
        typer.echo(text, nl=False)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    Console().print(Markdown(text))
