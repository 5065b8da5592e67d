"""The weekly post-mortem digest (docs/digest.md): build it from the store, render it as
Markdown, Block Kit and a chart, post it to Slack.

The Slack entry points (`post_weekly_digest`, `digest_answer`) live in `bot.digest.slack`, so
the CLI's `--markdown` path does not import the Slack stack.
"""

from bot.digest.blocks import render_blocks
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
    "render_blocks",
    "render_chart_png",
    "render_markdown",
]
