"""`flagbot demo`: the seeds' story on the two-node twin, through the local Slack stand-in.

Boots testbed instance 1 (the demo's) with the `seed-gb10` twin, starts `flagbot serve --http`
against the stand-in with SQLite in `state/demo/`, plays baseline -> try -> isolate -> revert ->
verify -> digest as signed slash commands, then stays up for the user (or, `--headless`,
prints the thread and exits). Ctrl-C tears everything down. See docs/demo.md.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from flagbot_lab.testbed.layout import DEFAULT_INSTANCE


def register_demo(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(
    headless: Annotated[
        bool, typer.Option("--headless", help="play the story, print the thread as text, tear down, exit")
    ] = False,
    instance: Annotated[
        int, typer.Option("--instance", "-i", min=1, max=254, help="testbed instance (the tests use 215)")
    ] = DEFAULT_INSTANCE,
    keep: Annotated[
        bool,
        typer.Option("--keep", help="leave the twin nodes running at exit (`flagbot twin down` stops them)"),
    ] = False,
    port: Annotated[
        int | None,
        typer.Option(
            "--port", min=0, max=65535, help="the stand-in page's port (default 8780; headless: any)"
        ),
    ] = None,
    screenshot: Annotated[
        Path | None,
        typer.Option(
            "--screenshot",
            help="at the end, write the try thread as the page shows it to this PNG (headless Chromium)",
        ),
    ] = None,
) -> None:
    """Play the seeds' incident end to end (root: boots the twin's nodes); see docs/demo.md."""
    from flagbot_lab.demo.parts import DEFAULT_PORT
    from flagbot_lab.demo.runner import DemoOptions, run_demo

    chosen = port if port is not None else (0 if headless else DEFAULT_PORT)
    if screenshot is not None:
        from flagbot_lab.demo.screenshot import unavailable

        why = unavailable()
        if why:  # refused before anything boots
            typer.echo(f"error: --screenshot needs headless Chromium: {why}", err=True)
            raise typer.Exit(2)
    options = DemoOptions(headless=headless, instance=instance, keep=keep, port=chosen, screenshot=screenshot)
    code = asyncio.run(run_demo(options))
    raise typer.Exit(code)
