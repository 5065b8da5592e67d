"""flagbot's scheduler (docs/schedule.md): verification checks of what experiments concluded,
the drift watch, and the weekly digest's timer, run by APScheduler in the bot's event loop with
its jobs in flagbot's database.

`scheduler` builds and runs it (`running_scheduler` for `flagbot serve`, `run_due` for tests);
`jobs` holds the pickled job functions; `checks` and `drift` the logic; `notify` where a change
of state is told; `commands` the `checks` command for the CLI and Slack (`checks_answer`).
"""

from bot.schedule.commands import checks_answer

__all__ = ["checks_answer"]
