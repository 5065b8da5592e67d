"""The weekly post-mortem digest (docs/digest.md): build it from the store, render it as
Markdown and a chart.

Its Block Kit form and the Slack posts live in the Slack front end (`bot.slack.digest_blocks`,
`bot.slack.digest`); the command and the Monday job in `bot.app.digest`.
"""

from bot.digest.build import build_digest
from bot.digest.chart import render_chart_png
from bot.digest.markdown import render_markdown
from bot.digest.model import Digest
from bot.digest.week import IsoWeek, WeekFormatError, parse_week

__all__ = [
    "Digest",
    "IsoWeek",
    "WeekFormatError",
    "build_digest",
    "parse_week",
    "render_chart_png",
    "render_markdown",
]
