"""`flagbot demo --screenshot PATH`: the try's investigation thread as the page shows it, as a PNG.

Taken at the end of the story, before anything is torn down, in headless Chromium (Debian's
`chromium` and `chromium-driver`, selenium from the dev extra; nothing is downloaded). The
README's picture is made this way, and the demo's integration test takes one as an artefact.
"""

from __future__ import annotations

from pathlib import Path

from flagbot_lab.demo.parts import Demo
from flagbot_lab.demo.setup import DemoSetupError
from flagbot_lab.demo.story import CHANNEL, OPERATOR

WIDTH = 1600


def unavailable() -> str | None:
    """Why no screenshot can be taken here (None: it can)."""
    from flagbot_lab.standin.browser import missing

    return missing()


async def capture_try_thread(demo: Demo, path: Path) -> Path:
    """Open the `try` card's thread on the stand-in's page as bob sees it and write the PNG."""
    from flagbot_lab.standin.browser import chromium

    why = unavailable()
    if why:
        raise DemoSetupError(f"--screenshot needs headless Chromium: {why}")
    standin = demo.standin
    assert standin is not None
    cards = [m for m in standin.messages(CHANNEL) if m.text.startswith("flagbot try #")]
    if not cards:
        raise DemoSetupError("--screenshot: the story left no try thread to show")
    url = f"{standin.base_url}/?channel={CHANNEL}&user={OPERATOR}&thread={cards[0].ts}"
    async with chromium(width=WIDTH) as browser:
        await browser.open(url)
        await browser.wait_images_loaded(what="the thread with its chart", timeout=30)
        await browser.screenshot(path, width=WIDTH)
    return path
