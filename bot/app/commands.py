"""Every command and subcommand of the grammar (`bot.commands.COMMANDS`), mapped to the one
application function that does it. The front ends call these functions; this table says which
is which, and a test holds it to the registry: no command without its function, none with two.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from bot.app import ask, digest, freeze, predict, records, runs, status, target_commands
from bot.app.bench import run_bench
from bot.app.checks_command import checks_command
from bot.app.playbooks import load_all
from bot.commands import Invocation, help_text

COMMAND_USE_CASES: Mapping[str, Callable[..., object]] = {
    "help": help_text,
    "status": status.status,
    "observe": target_commands.observation,
    "predict": predict.predict_change,
    "grep": target_commands.grep_target,
    "logs": target_commands.logs_target,
    "try": runs.run_playbook,
    "revert": runs.run_playbook,
    "verify": runs.run_playbook,
    "isolate": runs.run_playbook,
    "restart": runs.run_playbook,
    "freeze": freeze.freeze,
    "unfreeze": freeze.unfreeze,
    "run": runs.run_playbook,
    "baseline show": records.read_records,
    "baseline pin": runs.run_playbook,
    "baseline set": runs.run_playbook,
    "baseline diff": records.read_records,
    "hypothesis add": records.read_records,
    "hypothesis list": records.read_records,
    "hypothesis show": records.read_records,
    "hypothesis close": records.read_records,
    "knowledge list": records.read_records,
    "knowledge show": records.read_records,
    "knowledge forget": records.read_records,
    "log": records.read_records,
    "bench": run_bench,
    "playbooks": load_all,
    "cancel": runs.cancel,
    "keep": ask.keep_command,
    "rollback": target_commands.rollback_or_reconcile,
    "reconcile": target_commands.rollback_or_reconcile,
    "checks list": checks_command,
    "checks pause": checks_command,
    "checks resume": checks_command,
    "checks run": checks_command,
    "checks delete": checks_command,
    "digest": digest.build,
}
"""`NAME` or `NAME SUB` -> the application function (the grammar's `help` is answered by the
shared base itself: it needs no context)."""


def use_case(invocation: Invocation) -> Callable[..., object]:
    """The function that does a parsed command (its subcommand's, when it has one)."""
    if invocation.sub is not None:
        return COMMAND_USE_CASES[f"{invocation.name} {invocation.sub}"]
    if invocation.spec.default_sub is not None:
        return COMMAND_USE_CASES[f"{invocation.name} {invocation.spec.default_sub}"]
    return COMMAND_USE_CASES[invocation.name]
