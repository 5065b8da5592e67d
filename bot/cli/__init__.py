"""The console front end: `flagbot COMMAND …` parses the words, calls `bot.app`, renders the result.

Modules: `root` (the bare Typer application and the program's own options), `app` (every command
on it: `db`, `config`, and the families below), one module per command family (`help`, `explain`,
`chat` with `target` for the target commands, `loop`, `playbooks`, `bench`, `checks`, `digest`,
`sudoers`, `parse`), `families` (which names a family registers), `state` (this invocation's
`--config` and `--json`, errors as exit codes), `common` (the settings, the store and context, the
flag list), `plugins` (commands of installed add-ons). `bot.main` loads only the family of the
command typed; `flagbot serve` is wired in there too: the console never imports the Slack front
end or the scheduler.
"""
