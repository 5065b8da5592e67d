"""The weekly post-mortem digest (docs/digest.md): build it from the store, render it as
Markdown and a chart.

The parts are imported from their modules (`bot.digest.build.build_digest`,
`bot.digest.markdown.render_markdown`, `bot.digest.chart.render_chart_png`,
`bot.digest.week.parse_week`), not from this package: commands that only need where a run's
thread is (`bot.digest.threads`, which `status` and the settling of runs read) would otherwise
load the whole digest, its chart and the capacity model, before their first call (issue 22).

Its Block Kit form and the Slack posts live in the Slack front end (`bot.slack.digest_blocks`,
`bot.slack.digest`); the command and the Monday job in `bot.app.digest`.
"""
