"""The console front end: `flagbot COMMAND …` parses the words, calls `bot.app`, renders the result.

Modules: `app` (the Typer application, the chat commands' dispatch, `db`, `config`, `explain`),
one module per command family (`target`, `loop`, `playbooks`, `bench`, `checks`, `digest`,
`sudoers`, `parse`), `common` (the config path, the store and context, errors as exit codes),
`plugins` (commands of installed add-ons). `flagbot serve` is wired in by `bot.main`: the
console never imports the Slack front end or the scheduler.
"""
