"""`flagbot try|revert|verify|isolate|restart|baseline|cancel|keep|freeze|unfreeze`: the loop
from the terminal (`freeze`/`unfreeze`: `bot.app.freeze`; `hypothesis`, `knowledge` and `log`:
`bot.cli.records`).

Each mutating command is its built-in playbook run by the engine, exactly as `flagbot run try
changes=...` would run it (same lease, same reconcile of a dead run first, same evidence): the
words are read by `bot.app.playbooks`, the run by `bot.app.runs`. `baseline show|diff` reads the
store (`bot.app.records`). Exit codes: 0 done (the experiment succeeded), 1 the target could not
do it or said no (lease held, verdict not reached), 2 usage.
"""

from __future__ import annotations

from typing import Any

import typer

from bot.app.ask import keep_command
from bot.app.context import AppContext, console_actor
from bot.app.freeze import freeze, unfreeze
from bot.app.runs import CancelResult, cancel
from bot.app.waiters import cancel_wait
from bot.cli.common import CHAT_CONTEXT
from bot.cli.families import LOOP_COMMANDS
from bot.cli.playbooks import run_playbook_command
from bot.cli.records import Reader, chat_command, read_records_json, run_read
from bot.commands import Invocation
from bot.config import Settings


def register_loop(app: typer.Typer) -> None:
    """Register the loop commands, replacing the registry's placeholders of the same names."""
    for name in LOOP_COMMANDS:
        app.command(name, context_settings=CHAT_CONTEXT)(chat_command(name, _run_loop_command))


def _run_loop_command(config: Settings, invocation: Invocation, target: str, json_output: bool) -> None:
    readers: dict[str, Reader] = {"cancel": _cancel, "keep": _keep, "freeze": _freeze, "unfreeze": _freeze}
    if invocation.name == "baseline" and invocation.sub in (None, "show", "diff"):
        readers["baseline"] = read_records_json
    read = readers.get(invocation.name)
    if read is not None:
        run_read(config, invocation, target, read, json_output=json_output)
        return
    run_playbook_command(config, invocation, json_output=json_output)


async def _cancel(ctx: AppContext, invocation: Invocation, target: str) -> dict[str, Any]:
    given = invocation.positionals.get("experiment")
    waiter = invocation.options.get("waiter")
    if waiter is not None:  # a command waiting for the target (wait=): it has no experiment yet
        if given is not None:
            raise LookupError("cancel takes an experiment or waiter=ID, not both")
        stopped = await cancel_wait(ctx, int(waiter), actor=console_actor())
        if stopped.waiter is None:
            raise LookupError(stopped.text())
        return {**stopped.to_json(), "lines": [stopped.text()]}
    result: CancelResult = await cancel(
        ctx, target, None if given is None else int(str(given)), actor=console_actor()
    )
    if result.experiment_id is None:
        raise LookupError(f"nothing is running on {target}")
    if result.experiment is None:
        raise LookupError(f"no experiment #{result.experiment_id}")
    text = (
        f"experiment #{result.experiment_id}: cancel requested; it stops at its next step boundary and rolls back"
        if result.requested
        else f"experiment #{result.experiment_id} is not running; nothing to cancel"
    )
    return {**result.to_json(), "lines": [text]}


async def _keep(ctx: AppContext, invocation: Invocation, target: str) -> dict[str, Any]:
    experiment_id = int(str(invocation.positionals["experiment"]))
    done = await keep_command(ctx, experiment_id, target, actor=console_actor())
    return {
        "ok": True,
        "experiment_id": done.experiment_id,
        "decision": done.decision,
        "lines": [done.text()],
    }


async def _freeze(ctx: AppContext, invocation: Invocation, target: str) -> dict[str, Any]:
    if invocation.name == "freeze":
        done = await freeze(
            ctx,
            target,
            reason=invocation.options.get("reason"),
            until=invocation.options.get("until"),
            actor=console_actor(),
        )
    else:
        done = await unfreeze(ctx, target, actor=console_actor())
    return done.to_json()
