"""What a command's words can be refused for, checked before anything runs (and in Slack before
the acknowledgement): one call for every command, so no value is found wrong only later, in a
background task the user's ack has already left behind.

The grammar (`bot.commands`) has checked each word on its own: characters, numbers and
durations in bounds, ids, weeks, choices, flag names and values (against the flag list the
front end got from `bot.app.flag_list`: the target host's own, cached per SGLang version, or a
packaged one when the host cannot answer). What needs the configuration
or two words together is here: the target (`target=` or `--target`), `grep`'s `scope=since`
without `since=`, `freeze`'s reason and `until=`, and, for the commands that open a thread, the playbook and its parameters
and `bench`'s plan. Every refusal is a `CommandError` naming the rule.
"""

from __future__ import annotations

from bot.app.bench import BenchRequest, check_rerun, plan_bench
from bot.app.fleet import wants_fleet
from bot.app.freeze import FreezeInputError, check_freeze_words
from bot.app.playbooks import resolve_playbook, runs_playbook
from bot.app.target_commands import GrepRequest
from bot.app.targets import target_of
from bot.commands import CommandError, Invocation
from bot.commands.target_catalog import UnknownTargetError
from bot.config import Settings

__all__ = ["check_invocation"]


def check_invocation(settings: Settings, invocation: Invocation) -> None:
    """CommandError unless the command can start as written (what is missing on a host is
    still found when it runs: a lease held, a node down)."""
    try:
        if invocation.name == "status" and wants_fleet(settings, invocation):
            pass  # every target, one line each (`bot.app.fleet`)
        elif invocation.spec.option("target") is not None:
            target_of(settings, invocation)
        if invocation.name == "grep":
            GrepRequest.of(invocation)
        elif invocation.name == "bench":
            request = BenchRequest.of(settings, invocation)
            if request.rerun is None:
                plan_bench(settings, request)
            else:  # the experiment's set decides the plan when it runs (`with_rerun`)
                check_rerun(request)
        elif invocation.name == "freeze":
            check_freeze_words(invocation.options.get("reason"), invocation.options.get("until"))
        elif runs_playbook(invocation):
            resolve_playbook(settings, invocation)
    except UnknownTargetError as exc:
        raise CommandError(str(exc)) from None
    except FreezeInputError as exc:
        raise CommandError(exc.message, usage=invocation.spec.usage) from None
