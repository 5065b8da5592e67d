"""`flagbot demo`: boot the twin, start the stand-in and the bot, play the story, tear it all down.

Every exit path (the end of a headless run, a failed step, SIGINT/SIGTERM, a setup error)
runs the same teardown (`Demo.close`); the exit code says which path it was.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from typing import TextIO

from flagbot_lab.demo.parts import Demo, DemoOptions
from flagbot_lab.demo.play import channel_text, play, summary, watch
from flagbot_lab.demo.setup import DemoSetupError
from flagbot_lab.demo.story import CHANNEL, STORY

__all__ = ["DemoOptions", "run_demo"]


async def run_demo(options: DemoOptions, out: TextIO | None = None) -> int:
    """The whole demo; returns the exit code (0 ok, 1 a step failed, 2 cannot start, 130 stopped)."""
    stream = out or sys.stdout
    demo = Demo(options, stream)
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    signalled: list[int] = []

    def on_signal(signum: int) -> None:
        if signalled:
            demo.say("still tearing down, please wait")
            return
        signalled.append(signum)
        demo.say(f"\n{signal.Signals(signum).name}: stopping, tearing everything down")
        if main is not None:
            main.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    started = time.monotonic()
    code = 0
    try:
        code = await _run(demo, options)
    except asyncio.CancelledError:
        if not signalled:
            raise
        if main is not None:
            main.uncancel()
        code = 130
        if options.headless and demo.standin is not None:
            demo.say(channel_text(demo))
    except DemoSetupError as exc:
        demo.say(f"error: {exc}")
        code = 2
    finally:
        left = await demo.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    if left:
        demo.say("left behind: " + "; ".join(left))
        code = code or 1
    elif demo.stopped and options.keep:
        demo.say(f"stopped: {', '.join(demo.stopped)} (--keep: the nodes stay up)")
    elif demo.stopped:
        demo.say(f"torn down: {', '.join(demo.stopped)}; nothing left behind")
    demo.say(f"wall time {time.monotonic() - started:.0f} s")
    return code


async def _run(demo: Demo, options: DemoOptions) -> int:
    await demo.start()
    demo.say(f"playing the seeds' story ({len(STORY)} slash commands in #flagbot-ops)")
    results = await play(demo)
    code, last = summary(results, len(STORY))
    if options.headless:
        demo.say("")
        demo.say(channel_text(demo))
    if code != 0:
        demo.say(await demo.diagnostics())
    elif options.screenshot is not None:
        from flagbot_lab.demo.screenshot import capture_try_thread

        demo.say(f"screenshot of the try thread: {await capture_try_thread(demo, options.screenshot)}")
    demo.say(last)
    if options.headless:
        return code
    assert demo.standin is not None
    demo.say(
        f"\nThe demo stays up. Open {demo.standin.base_url}/?channel={CHANNEL} and type commands as "
        "alice (admin) or bob (operator), e.g. `status`, `observe`, `log`, `try --enable-metrics`, "
        f"`help`; or `flagbot --config {demo.config} log` in a shell. Ctrl-C tears everything down."
    )
    await watch(demo)
    return code
