"""`flagbot parse log|bench|unit FILE|-`: paste what a server printed, get facts back.

The `--json` shapes are an interface (documented in docs/parsers/): keep their keys stable.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import typer

from bot.cli.common import fail, set_json_mode
from bot.sglang.bench_result import parse_bench_text
from bot.sglang.launch import LaunchParseError, parse_launch_text
from bot.sglang.log import parse_log_stream

parse_app = typer.Typer(help="Parse SGLang output: a server log, a bench_serving result, a launch line.")

Source = Annotated[str, typer.Argument(help="a file, or - for standard input")]
AsJson = Annotated[bool, typer.Option("--json", help="print the parsed fields as JSON")]


def _open_binary(source: str) -> BinaryIO:
    if source == "-":
        return sys.stdin.buffer
    path = Path(source)
    try:
        return path.open("rb")
    except OSError as exc:
        raise fail(f"error: {source}: {exc.strerror}") from None


def _read_text(source: str) -> str:
    with _open_binary(source) as stream:
        return stream.read().decode("utf-8", errors="replace")


def _emit(data: Any, summary: str, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        typer.echo(summary)


@parse_app.command("log")
def parse_log(source: Source, as_json: AsJson = False) -> None:
    """An SGLang server log or journal: parsed vs effective capacity, readiness, errors, warnings."""
    set_json_mode(as_json)
    with _open_binary(source) as stream:
        report = parse_log_stream(stream)
    _emit(report.to_json(), report.summary(), as_json)


@parse_app.command("bench")
def parse_bench(source: Source, as_json: AsJson = False) -> None:
    """bench_serving output with bench_serving's own JSON key names.

    The JSON is always one object: the last result block's keys at the top (the run a user
    usually means) and every block, in order, under `runs`.
    """
    set_json_mode(as_json)
    results = parse_bench_text(_read_text(source))
    if not results:
        raise fail(f"error: {source}: no `Serving Benchmark Result` block found", 1)
    data: Any = results[-1].to_json() | {"runs": [result.to_json() for result in results]}
    _emit(data, "\n\n".join(r.summary() for r in results), as_json)


@parse_app.command("unit")
def parse_unit(source: Source, as_json: AsJson = False) -> None:
    """A systemd unit, launch script, docker wrapper or command line: entrypoint, env, flags."""
    set_json_mode(as_json)
    try:
        launch = parse_launch_text(_read_text(source))
    except LaunchParseError as exc:
        raise fail(f"error: {source}: {exc}", 1) from None
    _emit(launch.to_json(), launch.summary(), as_json)
