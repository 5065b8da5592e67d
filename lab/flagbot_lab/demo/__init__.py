"""`flagbot demo` (`make demo`): the seeds' incident played as slash commands on real systemd nodes.

`story` holds the commands and their expected outcomes as data, `outcome` decides from what
the Slack stand-in recorded whether a step reached its outcome, `thread` prints the channel as
text, `setup` writes the demo's config and database, `parts` starts and stops the nodes, the
stand-in and the bot, `play` types the story, `runner` handles signals and exit codes.
See docs/demo.md.
"""
