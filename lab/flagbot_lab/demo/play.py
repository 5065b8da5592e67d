"""Playing the story: type each command into the stand-in, wait for its outcome, say how it went.

Outcomes are polled from what the stand-in recorded, with a backoff: nothing waits a fixed
time, and a bot that exits mid-step ends the wait at once with its log.
"""

from __future__ import annotations

import time

from bot.target.nodestate import Backoff
from flagbot_lab.demo.outcome import FINAL, Outcome, Progress, judge, observe
from flagbot_lab.demo.parts import Demo, tail
from flagbot_lab.demo.story import CHANNEL, STORY, Step
from flagbot_lab.demo.thread import Typed, transcript, ts_key
from flagbot_lab.standin import Standin


def latest_ts(standin: Standin) -> str:
    """The newest ts in the workspace: what a command typed now comes after."""
    ws = standin.workspace
    stamps = [m.ts for c in ws.channels for m in ws.all_messages(c)] + [e.ts for e in ws.ephemerals]
    return max(stamps, key=ts_key, default="0.000000")


async def play(demo: Demo, story: tuple[Step, ...] = STORY) -> list[Progress]:
    """Each step in turn; the story stops at the first step that fails."""
    done: list[Progress] = []
    for index, step in enumerate(story, start=1):
        progress = await play_step(demo, step, index, len(story))
        done.append(progress)
        _status(demo, "")
        demo.say(progress.line(index, len(story)))
        if progress.outcome.state == "failed":
            break
    return done


async def play_step(demo: Demo, step: Step, index: int, total: int) -> Progress:
    assert demo.standin is not None
    marker = latest_ts(demo.standin)
    demo.typed.append(Typed(marker, step.user, step.command))
    started = time.monotonic()
    _status(demo, f"[{index}/{total}] {step.title}: /flagbot {step.command}")
    answer = await demo.standin.slash(step.command, user=step.user, channel=CHANNEL)
    if answer.status != 200:
        outcome = Outcome("failed", f"the bot answered HTTP {answer.status}: {answer.body[:300]}")
    else:
        outcome = await _until_done(demo, step, marker, index, total)
    return Progress(step, outcome, time.monotonic() - started)


async def _until_done(demo: Demo, step: Step, marker: str, index: int, total: int) -> Outcome:
    assert demo.standin is not None
    assert demo.bot is not None
    started = time.monotonic()
    backoff = Backoff(0.2, 1.5, 2.0)
    shown = ""
    while True:
        outcome = judge(step, observe(demo.standin, CHANNEL, marker, step.user))
        if outcome.done:
            return outcome
        if demo.bot.returncode is not None:
            return Outcome(
                "failed", f"flagbot serve exited with {demo.bot.returncode}:\n{tail(demo.bot_log)}"
            )
        elapsed = time.monotonic() - started
        if elapsed > step.timeout_s:
            return Outcome("failed", f"no outcome within {step.timeout_s:g} s (last: {outcome.detail})")
        if outcome.detail != shown:
            shown = outcome.detail
            backoff.reset()
            _status(demo, f"[{index}/{total}] {step.title}: {shown}")
        await backoff.sleep()


def _status(demo: Demo, text: str) -> None:
    """A transient line on a terminal (what the running step is doing); nothing in a log."""
    if demo.out.isatty():
        demo.out.write("\r\033[K" + text[:150])
        demo.out.flush()


def channel_text(demo: Demo) -> str:
    """The channel as text: every message of every thread, cards and replies."""
    if demo.standin is None:
        return ""
    state = demo.standin
    names = {u.id: u.name for u in state.workspace.users.values()}
    roots = state.messages(CHANNEL)
    replies = {r.ts: state.messages(CHANNEL, thread_ts=r.ts) for r in roots if not r.is_reply}
    notes = [n for n in state.ephemerals() if n.channel == CHANNEL]
    title = "#flagbot-ops, as the Slack stand-in recorded it"
    return transcript(roots, replies, notes, demo.typed, names, title=title)


async def watch(demo: Demo) -> None:
    """Until stopped: one line whenever a run started from the page reaches its end."""
    assert demo.standin is not None
    reported = {c.ts for c in observe(demo.standin, CHANNEL, "0.000000", "").cards if c.status in FINAL}
    backoff = Backoff(0.5, 1.5, 3.0)
    while True:
        for card in observe(demo.standin, CHANNEL, "0.000000", "").cards:
            if card.ts not in reported and card.status in FINAL:
                reported.add(card.ts)
                verdict = f", {card.verdict}" if card.verdict else ""
                demo.say(f"  {card.text.splitlines()[0]}: {card.status}{verdict}")
        if demo.bot is not None and demo.bot.returncode is not None:
            demo.say(f"flagbot serve exited with {demo.bot.returncode}; see {demo.bot_log}")
            return
        await backoff.sleep()


def summary(results: list[Progress], total: int) -> tuple[int, str]:
    """The exit code and the last line of a headless run."""
    failed = [p for p in results if p.outcome.state != "reached" and p.outcome.state != "pending"]
    pending = [p.step.title for p in results if p.outcome.state == "pending"]
    if failed:
        p = failed[0]
        return 1, f"demo FAILED at step {p.step.title!r} (/flagbot {p.step.command}): {p.outcome.detail}"
    if len(results) < total:
        return 1, f"demo FAILED: only {len(results)} of {total} steps ran"
    note = f" ({', '.join(pending)} pending: not wired into Slack yet)" if pending else ""
    seconds = sum(p.seconds for p in results)
    return 0, f"demo OK: {total} steps reached their expected outcome in {seconds:.0f} s{note}"
