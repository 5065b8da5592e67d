"""`flagbot demo` (`make demo`): the seeds' incident played as slash commands on real systemd nodes.

`story` holds the commands and their expected outcomes as data, `outcome` decides from what
the Slack stand-in recorded whether a step reached its outcome, `thread` prints the channel as
text, `setup` writes the demo's config and database, `runner` ties them together. See docs/demo.md.
"""
