"""Headless Chromium from Debian's `chromium` and `chromium-driver`, driven with Selenium (a dev extra).

Used by the browser tests, `tools/screenshot_thread.py` and `flagbot demo --screenshot`.

Nothing is downloaded: chromedriver's path is given to Selenium (so Selenium Manager never
runs) and the browser is the Debian one. Selenium is synchronous, so every call runs in a worker
thread and the test's event loop keeps serving the stand-in and the bot the page talks to.

Ending everything: while the browser lives, this process is made a child subreaper (Linux), so
the processes Chromium forks and orphans (zygotes, the crash handler) are re-parented here and not
to an init that never reaps them; after `quit()` any of them still alive is killed by its pid and
every one is reaped. Each browser gets its own profile directory, removed at the end, and any
process still naming it is reported by `leftovers()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

from bot.target.nodestate import Backoff

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
HEADLESS = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu")
QUIET = (
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-breakpad",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)
"""No network of its own (updates, sync, crash reports): the page is all it loads."""
IMAGES_LOADED = (
    "return document.images.length > 0 && [...document.images].every(i => i.complete && i.naturalWidth > 0)"
)
CHROME_NAMES = frozenset({"chromium", "chrome_crashpad", "chromedriver", "chrome"})
PR_SET_CHILD_SUBREAPER = 36
T = TypeVar("T")


def missing() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if absent:
        return f"{' and '.join(absent)} not installed (Debian packages chromium, chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


def _subreaper(on: bool) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[str, str, int] | None:
    """(name, state, parent pid) of a process, from /proc."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, rest = raw[raw.index("(") + 1 : raw.rindex(")")], raw[raw.rindex(")") + 2 :].split()
    return name, rest[0], int(rest[1])


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _end_orphans() -> list[int]:
    """Kill (by pid) and reap the Chromium processes re-parented to this process; their pids."""
    ended = []
    for pid in _pids():
        found = _stat(pid)
        if found is None or found[2] != os.getpid() or found[0] not in CHROME_NAMES:
            continue
        if found[1] != "Z":
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        ended.append(pid)
    return ended


def naming(text: str) -> list[int]:
    """Live processes whose command line contains `text` (a browser's profile directory)."""
    found = []
    for pid in _pids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state = _stat(pid)
        if text in cmdline and state is not None and state[1] != "Z":
            found.append(pid)
    return found


class Browser:
    """One headless Chromium window; async methods that run Selenium calls in a worker thread."""

    def __init__(self, driver: Any, profile: Path) -> None:
        self.driver = driver
        self.profile = profile

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run one blocking Selenium call off the event loop."""
        return await asyncio.to_thread(fn, *args)

    async def open(self, url: str) -> None:
        await self.call(self.driver.get, url)

    async def js(self, script: str, *args: Any) -> Any:
        """`execute_script`: the script's `return` value (DOM elements come back as WebElements)."""
        return await self.call(self.driver.execute_script, script, *args)

    async def wait(self, script: str, *args: Any, what: str, timeout: float = 15.0) -> Any:
        """Poll `script` (with a backoff) until it returns something truthy, and return that."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        backoff = Backoff(0.05, 1.5, 0.5)
        while True:
            value = await self.js(script, *args)
            if value:
                return value
            if loop.time() > deadline:
                text = await self.js("return document.body.innerText")
                raise AssertionError(f"the page did not show {what} within {timeout}s; it shows:\n{text}")
            await backoff.sleep()

    async def wait_images_loaded(self, *, what: str = "the images loaded", timeout: float = 15.0) -> None:
        """Until the page has images and every one has loaded (a chart is ready to be pictured)."""
        await self.wait(IMAGES_LOADED, what=what, timeout=timeout)

    async def type_line(self, css: str, text: str) -> None:
        """Type `text` into the input `css` and press Enter, as a person would."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        element = await self.call(self.driver.find_element, By.CSS_SELECTOR, css)
        await self.call(element.send_keys, text + Keys.ENTER)

    async def click(self, element: Any) -> None:
        """A real click (WebDriver's pointer actions) on an element found with `js` or `wait`."""
        await self.call(element.click)

    async def screenshot(self, path: Path, *, width: int) -> bytes:
        """A PNG of the whole page: the window is made tall enough for every pane's content."""
        needed = await self.js(
            "const logs = [...document.querySelectorAll('.log')];"
            "const extra = Math.max(...logs.map(l => l.scrollHeight - l.clientHeight), 0);"
            "return document.documentElement.clientHeight + extra + (window.outerHeight - window.innerHeight);"
        )
        await self.call(self.driver.set_window_size, width, int(needed) + 8)
        png: bytes = await self.call(self.driver.get_screenshot_as_png)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
        return png


@contextlib.asynccontextmanager
async def chromium(width: int = 1600, height: int = 1000) -> AsyncIterator[Browser]:
    """A headless Chromium (Debian's) with chromedriver; both ended, and reaped, on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    reaping = _subreaper(True)
    profile = Path(tempfile.mkdtemp(prefix="flagbot-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*HEADLESS, *QUIET, f"--window-size={width},{height}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = None
    try:
        driver = await asyncio.to_thread(
            webdriver.Chrome, service=Service(executable_path=str(CHROMEDRIVER)), options=options
        )
        yield Browser(driver, profile)
    finally:
        if driver is not None:
            await asyncio.to_thread(driver.quit)
        await _end_all(profile, reaping=reaping)
        if reaping:
            _subreaper(False)
        shutil.rmtree(profile, ignore_errors=True)


async def _end_all(profile: Path, *, reaping: bool, timeout: float = 10.0) -> None:
    """Kill what still runs with this profile and reap the orphans, until a round finds nothing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    backoff = Backoff(0.02, 1.5, 0.25)
    while True:
        alive = naming(str(profile))
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        reaped = _end_orphans() if reaping else []
        if (not alive and not reaped) or loop.time() > deadline:
            return
        await backoff.sleep()
