"""The card states a run's outcome once, in its first line, per outcome; its steps read in words
with their durations, and the restart's ETA stands beside the restart until it is done. The
reporter files evidence into one reply per part and times steps by the clock it is given."""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest

from bot.app.run_headline import RunHeadline
from bot.loop.report import RunOutcome, RunStart
from bot.slack.card import CardState, first_line, status_card
from bot.slack.reporter import SlackThreadReporter
from bot.target.evidence import ChartBlock, TableBlock, TextBlock, VerdictBlock


def card(status: str, verdict: str | None = None, headline: RunHeadline | None = None) -> CardState:
    steps = [("preflight", "ok"), ("apply", "ok"), ("await_start", "ok"), ("decide", "ok")]
    return CardState(7, "try", "lab", "U0OPER", "/flagbot try --enable-foo", steps, status, verdict,
                     "a summary", headline=headline)  # fmt: skip


def shown(state: CardState) -> str:
    blocks, _ = status_card(state)
    return "\n".join(
        str(b.get("text", {}).get("text", "")) for b in blocks if isinstance(b.get("text"), dict)
    )


@pytest.mark.parametrize(
    ("status", "verdict", "headline", "line"),
    [
        (
            "succeeded",
            "regressed",
            RunHeadline("--enable-foo", "regressed", "max_running_requests 48 → 26", "reverted"),
            "🔻 `--enable-foo` → *regressed*: max_running_requests 48 → 26; reverted",
        ),
        (
            "succeeded",
            "improved",
            RunHeadline("--enable-foo", "improved", "output_throughput@c=64 +9.0%", "kept"),
            "✅ `--enable-foo` → *improved*: output_throughput@c=64 +9.0%; kept",
        ),
        (
            "succeeded",
            "regressed",
            RunHeadline("--enable-foo", "regressed", None, "change still applied: Keep or Revert?"),
            "🔻 `--enable-foo` → *regressed*; change still applied: Keep or Revert?",
        ),
        (
            "rolled-back",
            "failed-to-start",
            RunHeadline("--enable-foo", "failed to start", None, "rolled back to the flags from before"),
            "💥 `--enable-foo` → *failed to start*; rolled back to the flags from before",
        ),
        (
            "failed",
            None,
            RunHeadline("--enable-foo", "failed", "host unreachable", "see the failed step"),
            "❌ `--enable-foo` → *failed*: host unreachable; see the failed step",
        ),
        ("refused", None, None, "🚫 try on lab → *refused*: a summary"),
    ],
)
def test_the_card_opens_with_the_outcome_stated_once(
    status: str, verdict: str | None, headline: RunHeadline | None, line: str
) -> None:
    state = card(status, verdict, headline)
    assert first_line(state) == line
    text = shown(state)
    assert text.startswith(line) and "Status" not in text and "Verdict" not in text
    if verdict:
        assert status not in text  # never "succeeded" beside "regressed"


def test_steps_read_in_words_with_durations_and_the_eta_beside_the_restart() -> None:
    state = CardState(7, "try", "lab", "U0OPER", "/flagbot try --enable-foo", status="running")
    state.steps = [
        ("preflight", "ok"),
        ("open_hypothesis", "ok"),
        ("apply", "running"),
        ("await_start", "pending"),
    ]
    state.step_seconds = {0: 4.2, 1: 0.3}
    state.restart_eta = "ETA ~15 min 00 s (median of the last 3 starts)"
    text = shown(state)
    assert "✅ 1. preflight checks · 4 s\n✅ 2. record the hypothesis · 0 s" in text
    assert (
        "🔄 3. apply the change and restart every rank · _ETA ~15 min 00 s (median of the last 3 starts)_"
        in text
    )
    assert "⏳ 4. wait for the new start · _ETA ~15 min" in text
    assert "open_hypothesis" not in text and "await_start" not in text
    state.steps[2] = ("apply", "ok")
    state.step_seconds[2] = 905
    assert "✅ 3. apply the change and restart every rank · 15 min 05 s" in shown(state)  # done: no ETA
    state.restart_eta = "ETA unknown: no earlier start"
    assert "⏳ 4. wait for the new start · _ETA unknown: no earlier start_" in shown(state)


class Client:
    """Records what the reporter posts, edits and uploads (slack_sdk's method names)."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.updates: list[dict[str, Any]] = []
        self.uploads: list[dict[str, Any]] = []
        self._ts = count(1)

    async def chat_postMessage(self, **kwargs: Any) -> dict[str, Any]:
        self.posts.append(kwargs)
        return {"ok": True, "ts": f"2.{next(self._ts)}"}

    async def chat_update(self, **kwargs: Any) -> dict[str, Any]:
        self.updates.append(kwargs)
        return {"ok": True}

    async def files_upload_v2(self, **kwargs: Any) -> dict[str, Any]:
        self.uploads.append(kwargs)
        return {"ok": True, "file": {"id": "F1", "permalink": f"https://files.example/{kwargs['filename']}"}}


async def test_the_reporter_files_evidence_by_part_and_times_steps_by_its_clock() -> None:
    client, ticks = Client(), iter([100.0, 103.5, 110.0, 1010.0])
    state = CardState(None, "try", "lab", "U0OPER", "/flagbot try --enable-foo")
    reporter = SlackThreadReporter(client, "C1", "1.0", state, clock=lambda: next(ticks))
    await reporter.started(RunStart(7, "try", "lab", "slack:U0OPER", {}))
    await reporter.step(7, 0, "preflight", "running", "")
    await reporter.evidence(TextBlock("needs SM 9.x", "Preflight warnings"), 7)
    await reporter.evidence(TextBlock("Expected downtime: 15 min", "Downtime"), 7)
    await reporter.step(7, 0, "preflight", "ok", "")
    await reporter.step(7, 1, "measure before", "running", "")
    rows = tuple((str(level), "1") for level in range(40))
    await reporter.evidence(TableBlock("Benchmark (before): set #3", ("concurrency", "repeats"), rows), 7)
    await reporter.evidence(ChartBlock("Benchmark: before vs after", "/tmp/chart.png"), 7)
    await reporter.step(7, 1, "measure before", "ok", "")
    assert state.step_seconds == {0: 3.5, 1: 900.0}
    assert len(client.posts) == 2  # one reply per part, the second block of a part an edit
    preflight = client.posts[0]
    edits = [u for u in client.updates if u["ts"] == "2.1"]  # that reply, edited
    assert "*Preflight*" in str(preflight["blocks"]) and "Expected downtime" in str(edits[0]["blocks"])
    assert [u["filename"] for u in client.uploads] == ["benchmark_before_set_3.txt", "chart.png"]
    assert all("channel" not in u for u in client.uploads)  # uploaded, not shared: no reply of its own
    table = client.uploads[0]["content"]
    assert table.count("\n") > 40 and "concurrency" in table  # the long table, whole, in the file
    await reporter.evidence(VerdictBlock("regressed", "48 -> 26", ("x: 1 -> 2 regressed (tolerance 0)",)), 7)
    await reporter.finished(RunOutcome(7, "try", "lab", "succeeded", "regressed", "48 -> 26"))
    end = client.posts[-1]
    assert end["reply_broadcast"] is True and end["text"].startswith("<@U0OPER> ")
    assert "• x 1 → 2" in end["blocks"][0]["text"]["text"]
