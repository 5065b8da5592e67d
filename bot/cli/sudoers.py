"""`flagbot sudoers [target=T | --user U --unit UNIT]`: the least-privilege sudoers file for GPU hosts.

Generated from the one table of node commands (bot/target/privileged.py), so what a host
allows is exactly what flagbot runs: one line per command, absolute paths, every argument
spelled out, no wildcards. With a target from the config, each node's SSH user and unit are used
(`Target.unit_of`: head and worker may differ), one file per distinct pair, each opening with the
nodes it is for; install each on its nodes as /etc/sudoers.d/flagbot after `visudo -cf`.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from bot.cli.common import fail, set_json_mode, settings
from bot.target import sudoers_text
from bot.target.params import ParamError
from bot.target.sudoers import NodeSudoers, target_sudoers

__all__ = ["register_sudoers"]


def register_sudoers(app: typer.Typer) -> None:
    app.command("sudoers")(sudoers)


def sudoers(
    words: Annotated[
        list[str] | None, typer.Argument(metavar="[target=T] [node=K]", show_default=False)
    ] = None,
    user: Annotated[str | None, typer.Option("--user", help="the login flagbot uses on the hosts")] = None,
    unit: Annotated[str | None, typer.Option("--unit", help="the SGLang systemd unit")] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="the file and its user and unit as JSON")
    ] = False,
) -> None:
    """Print the sudoers file that lets flagbot run exactly its privileged commands on a host.

    With a target: one file per node's login and unit (a head and a worker with different
    units get different files), each saying which nodes it is for; `node=K` prints node K's only."""
    set_json_mode(json_output)
    target_name: str | None = None
    node: int | None = None
    for word in words or []:
        key, sep, value = word.partition("=")
        if key == "target" and sep and value:
            target_name = value
        elif key == "node" and sep and value.isdigit():
            node = int(value)
        else:
            raise fail(f"error: unexpected {word!r}; use target=NAME [node=K], or --user and --unit")
    if target_name is None and node is None and user is not None and unit is not None:
        _print([NodeSudoers((), (), user, unit, _text(user, unit))], None, json_output)
        return
    if unit is not None:
        raise fail("error: --unit goes with --user and no target; a target's units come from its config")
    config = settings()
    name = target_name or config.default_target
    if name is None or name not in config.targets:
        known = ", ".join(sorted(config.targets)) or "none configured"
        raise fail(f"error: no target {name!r} (targets: {known}); give target=NAME or --user U --unit UNIT")
    try:
        files = target_sudoers(name, config.targets[name], user=user, node=node)
    except ParamError as exc:
        raise fail(f"error: {exc}") from None
    _print(files, name, json_output)


def _text(user: str, unit: str) -> str:
    try:
        return sudoers_text(user, unit)
    except ParamError as exc:
        raise fail(f"error: {exc}") from None


def _print(files: list[NodeSudoers], target: str | None, json_output: bool) -> None:
    """Text: the files one after another (each opens with the nodes it is for). JSON: `files`,
    and `user`/`unit`/`sudoers` at the top when there is one file, as before per-node units."""
    if not json_output:
        typer.echo("\n".join(file.text for file in files), nl=False)
        return
    document: dict[str, object] = {"ok": True, "target": target}
    if len(files) == 1:
        document |= {"user": files[0].user, "unit": files[0].unit, "sudoers": files[0].text}
    document["files"] = [
        {"nodes": list(f.nodes), "hosts": list(f.hosts), "user": f.user, "unit": f.unit, "sudoers": f.text}
        for f in files
    ]
    typer.echo(json.dumps(document, indent=2))
