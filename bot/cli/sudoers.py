"""`flagbot sudoers [target=T | --user U --unit UNIT]`: the least-privilege sudoers file for GPU hosts.

Generated from the one table of node commands (bot/target/privileged.py), so what a host
allows is exactly what flagbot runs: one line per command, absolute paths, every argument
spelled out, no wildcards. With a target from the config, its SSH user and unit are used;
install the output on each node as /etc/sudoers.d/flagbot after `visudo -cf`.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from bot.cli.common import fail, set_json_mode, settings
from bot.target import sudoers_text
from bot.target.params import ParamError

__all__ = ["register_sudoers"]


def register_sudoers(app: typer.Typer) -> None:
    app.command("sudoers")(sudoers)


def sudoers(
    words: Annotated[list[str] | None, typer.Argument(metavar="[target=T]", show_default=False)] = None,
    user: Annotated[str | None, typer.Option("--user", help="the login flagbot uses on the hosts")] = None,
    unit: Annotated[str | None, typer.Option("--unit", help="the SGLang systemd unit")] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="the file and its user and unit as JSON")
    ] = False,
) -> None:
    """Print the sudoers file that lets flagbot run exactly its privileged commands on a host."""
    set_json_mode(json_output)
    target_name: str | None = None
    for word in words or []:
        key, sep, value = word.partition("=")
        if key != "target" or not sep or not value:
            raise fail(f"error: unexpected {word!r}; use target=NAME, or --user and --unit")
        target_name = value
    if target_name is not None or user is None or unit is None:
        config = settings()
        name = target_name or config.default_target
        if name is None or name not in config.targets:
            known = ", ".join(sorted(config.targets)) or "none configured"
            raise fail(
                f"error: no target {name!r} (targets: {known}); give target=NAME or --user U --unit UNIT"
            )
        target = config.targets[name]
        users = {node.user for node in target.nodes}
        if user is None and len(users) > 1:
            raise fail(f"error: the nodes of {name} log in as {sorted(users)}; pick one with --user")
        user = user or users.pop()
        unit = unit or target.unit
    try:
        text = sudoers_text(user, unit)
    except ParamError as exc:
        raise fail(f"error: {exc}") from None
    if json_output:
        document = {"ok": True, "target": target_name, "user": user, "unit": unit, "sudoers": text}
        typer.echo(json.dumps(document, indent=2))
    else:
        typer.echo(text, nl=False)
