"""The README's screenshot of an investigation thread: `make screenshot` (or run this file).

Starts the Slack stand-in and flagbot's app (HTTP mode, SQLite in a temp dir), posts the seeds'
regression thread through flagbot's own reporter (tests/support/sample_thread.py, the same
thread the page's browser test checks), opens the stand-in's page in headless Chromium (Debian's
`chromium` and `chromium-driver`, nothing downloaded) with the thread open, waits until the
chart has loaded, and writes the PNG (default docs/images/slack-thread.png). Everything it
started is stopped before it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PIL import Image  # noqa: E402

from flagbot_lab.standin.browser import chromium, missing  # noqa: E402
from tests.support.sample_thread import bot_without_hosts, post_sample_thread  # noqa: E402
from tests.support.slack_bot import TOKEN  # noqa: E402

DEFAULT_OUT = ROOT / "docs" / "images" / "slack-thread.png"


async def screenshot(out: Path, *, width: int, user: str) -> Path:
    """Write the screenshot of the sample thread, as `user` sees it, to `out`."""
    with tempfile.TemporaryDirectory(prefix="flagbot-screenshot-") as tmp:
        async with bot_without_hosts(Path(tmp)) as bot:
            thread = await post_sample_thread(bot.standin, TOKEN, Path(tmp) / "chart.png")
            async with chromium(width=width) as browser:
                url = f"{bot.standin.base_url}/?channel={thread.channel}&user={user}&thread={thread.card_ts}"
                await browser.open(url)
                await browser.wait_images_loaded(what="the chart loaded")
                await browser.screenshot(out, width=width)
    with Image.open(out) as shot:
        small = shot.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(out, optimize=True)  # a third of the size, for the repository; text stays sharp
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1600, help="window width in pixels")
    parser.add_argument("--user", default="U0OPER", help="whose view (their ephemerals show)")
    args = parser.parse_args()
    reason = missing()
    if reason is not None:
        print(f"screenshot_thread: cannot run: {reason}", file=sys.stderr)
        return 2
    out = asyncio.run(screenshot(args.out, width=args.width, user=args.user))
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
