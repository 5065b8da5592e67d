"""`flagbot digest [--week 2026-W48] [--markdown] [--all] [--target T] [--json] [--chart PATH]`.

The same digest the bot posts on Mondays (`bot.app.digest`), for any week: printed for the
terminal, as Markdown for a wiki or an e-mail (`--markdown`), or as JSON (`--json`); `--chart`
writes the PNG. A week of thousands is summarised (`bot.digest.markdown.MAX_ROWS` entries a
list); `--all` lists every entry, as `--json` always does. The chat form's words (`week=2026-W48 target=T`) are accepted too. Exit codes:
0 printed, 2 usage (a malformed week, an unknown target, a database that is not ready).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markdown import Markdown

from bot.app import digest as digests
from bot.app.context import AppContext
from bot.cli.common import fail, run_in_context, set_json_mode, settings, usage_errors
from bot.digest.markdown import MAX_ROWS, render_markdown
from bot.digest.week import WeekFormatError

__all__ = ["register_digest"]


def register_digest(app: typer.Typer) -> None:
    """Register `digest`, replacing the registry's placeholder of the same name."""
    app.command("digest")(digest)


def _chat_words(words: list[str]) -> dict[str, str]:
    """`week=2026-W48 target=T` as options; anything else is a usage error."""
    options: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or key not in ("week", "target") or not value:
            raise fail(
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
    every: Annotated[
        bool, typer.Option("--all", help=f"list every entry (default: the first {MAX_ROWS:,} a list)")
    ] = False,
    target: Annotated[str | None, typer.Option("--target", help="one target (default: all)")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="the digest as JSON")] = False,
    chart: Annotated[Path | None, typer.Option("--chart", help="write the chart (PNG) to this path")] = None,
) -> None:
    """The weekly post-mortem digest: experiments, hypotheses, flags, incidents, lessons, a chart."""
    set_json_mode(json_output)
    options = _chat_words(words or [])
    week_text = week or options.get("week")
    target = target or options.get("target")
    if markdown and json_output:
        raise fail("error: --markdown and --json: choose one")
    config = settings()
    try:
        chosen = digests.week_of(config, week_text)
    except WeekFormatError as exc:
        raise fail(f"error: {exc}") from None

    async def work(ctx: AppContext) -> digests.BuiltDigest:
        return await digests.build(
            ctx, chosen, await digests.digest_target(ctx, target), chart=chart is not None
        )

    with usage_errors():
        built = run_in_context(config, work)
    chart_path = None
    if chart is not None:
        if built.chart_png is None:
            typer.echo(f"note: no chart: nothing was recorded in {built.week}", err=True)
        else:
            chart.parent.mkdir(parents=True, exist_ok=True)
            chart.write_bytes(built.chart_png)
            chart_path = str(chart)
    if json_output:
        typer.echo(json.dumps({"ok": True, **built.digest.to_json(), "chart_path": chart_path}, indent=2))
        return
    text = render_markdown(built.digest, chart_path=chart_path, limit=None if every else MAX_ROWS)
    if markdown:
        typer.echo(text, nl=False)
        return
    Console().print(Markdown(text))
