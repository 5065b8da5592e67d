"""The scheduler front end (docs/schedule.md): APScheduler in the bot's event loop, its jobs in
flagbot's database. It runs what `bot.app` defines (verification checks, the drift watch, the
weekly digest) at their times, and tells through the `Notifier` and `DigestPublisher` that
`flagbot serve` hands it; it imports no other front end.

`scheduler` builds and runs it (`running_scheduler` for `flagbot serve`, `run_due` for tests);
`jobs` holds the pickled job functions.
"""
