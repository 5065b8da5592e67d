"""The application layer: every flagbot command written once, as a typed function.

Why a layer of its own: the CLI, Slack (slash commands, mentions, buttons) and the scheduler
each used to carry their own copy of what a command does (the target lookup, playbook loading,
rollback and reconcile, benchmark planning, building the engine). Here each command is one
function taking a typed request (the parsed `Invocation`, who acts, where progress goes) and
returning a typed result; the front ends only parse, call it and render what it returns.
`bot.app.registry` maps each command and subcommand to exactly one of these functions.

Nothing here knows typer, rich or Slack; the layers are held by import-linter contracts
(`.importlinter`): front ends -> bot.app -> domain (loop, bench, target, digest, checks) ->
bot.store -> the shared base (config, commands) -> bot.sglang.
"""
