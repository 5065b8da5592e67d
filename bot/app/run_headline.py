"""What a finished run comes to, in one line: what changed, the verdict, what decided it, what
flagbot did; and the cells of a verdict that decided it.

Why here and not in a front end: an on-call engineer reads the Slack card's first line (and
perhaps a terminal's) in ten seconds, so the line must be the same facts wherever it is shown,
taken from the run's own steps (`RunOutcome.steps`: `compare` says what decided, `decide`
whether the change was kept) rather than from the wording of its evidence. A front end only
lays the parts out. The restart's ETA is read from this target's own stored starts: a guess
from another deployment would be worse than saying there is none.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.loop.report import RunOutcome
from bot.sglang.change import Change
from bot.store import AsyncStore, Store

ETA_STARTS = 5
"""Stored starts of the target whose median is the restart's ETA (the most recent ones)."""
MAX_DECISIVE_CELLS = 3
"""Cells a broadcast shows: the ones that decided, never the undecided ones."""
DECIDING_WORDS = frozenset({"regressed", "improved"})
"""Cell verdicts that can decide a comparison (`no effect` and `undecided` never do)."""
_CAPACITY_CELL = re.compile(
    r"^(?P<metric>[\w.@=]+): (?P<before>\S+) -> (?P<after>\S+?)(?: \((?P<change>[+-][\d.]+%)\))? "
    r"(?P<verdict>[\w -]+?) \(tolerance [^)]*\)$"
)
_METRIC_CELL = re.compile(
    r"^(?P<metric>[\w.@=]+): (?P<change>[+-][\d.]+%) \[(?P<low>[+-][\d.]+%), (?P<high>[+-][\d.]+%)\] "
    r"(?P<verdict>regressed|improved|no effect|undecided)(?: \(.*\))?$"
)
_EXPECTATION_FAILED = "an expectation of the command failed: "


@dataclass(frozen=True)
class RunHeadline:
    """The parts of a finished run's one line."""

    change: str
    """What the run changed or checked, as typed back (`--enable-foo`, `set --tp-size 4`, `verify`)."""
    outcome: str
    """The verdict when there is one, else how the run ended (`failed`, `cancelled`)."""
    decided_by: str | None
    """The number that decided it (`max_running_requests 48 → 26`), when one did."""
    done: str | None
    """What flagbot did about it (`reverted`, `kept`, `change still applied: Keep or Revert?`)."""

    def text(self) -> str:
        """The line as plain text (a notification's fallback; a front end may add emphasis)."""
        line = f"{self.change} → {self.outcome}"
        if self.decided_by:
            line += f": {self.decided_by}"
        return line + (f"; {self.done}" if self.done else "")


@dataclass(frozen=True)
class RestartEta:
    """How long this target's last starts took: the median of `starts` stored start durations."""

    seconds: float | None
    starts: int

    def text(self) -> str:
        """`ETA ~15 min (median of the last 3 starts)`, or that there is no earlier start."""
        if self.seconds is None:
            return "ETA unknown: no earlier start"
        plural = "start" if self.starts == 1 else f"{self.starts} starts"
        return f"ETA ~{duration_text(self.seconds)} (median of the last {plural})"


def duration_text(seconds: float) -> str:
    """`42 s`, `3 min 05 s`, `1 h 02 min`: a duration a reader takes in at a glance."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def change_text(playbook: str, params: Mapping[str, Any]) -> str:
    """The run's change in the grammar's words (an `add` reads as the bare flag); for a run that
    changes nothing, the playbook's name and its expectations."""
    raw = params.get("changes")
    if isinstance(raw, list | tuple) and raw:
        described = []
        for item in raw:
            change = (
                item
                if isinstance(item, Change)
                else Change.from_json(item)
                if isinstance(item, Mapping)
                else None
            )
            if change is None:
                continue
            words = change.describe()
            described.append(words.removeprefix("add ") if change.op == "add" else words)
        if described:
            return ", ".join(described)
    expect = params.get("expect")
    if isinstance(expect, list | tuple) and expect:
        return f"{playbook} " + " ".join(str(e) for e in expect)
    return playbook


def _step_result(outcome: RunOutcome, action: str) -> Mapping[str, Any] | None:
    for step in reversed(outcome.steps):
        if step.get("action") == action and isinstance(step.get("result"), Mapping):
            return step["result"]  # type: ignore[no-any-return]
    return None


def _done(outcome: RunOutcome) -> str | None:
    decided = _step_result(outcome, "decide")
    if outcome.status == "rolled-back":
        return "rolled back to the flags from before"
    if decided is not None and "kept" in decided:
        kept = decided["kept"]
        if kept is None:
            return "change still applied: Keep or Revert?"
        return "kept" if kept else "reverted"
    if outcome.status == "cancelled":
        return "stopped"
    if outcome.status == "failed":
        return "see the failed step"
    return None


def decisive_cells(details: Sequence[str], verdict: str, limit: int = MAX_DECISIVE_CELLS) -> list[str]:
    """The cells of a verdict's details that decided it, shortened (`max_running_requests 48 → 26
    (-45.8%)`): capacity cells and benchmark cells whose own verdict is the run's (or, for a
    verdict that is neither regressed nor improved, either of those), and a failed expectation.
    Undecided and no-effect cells are left out: their intervals say nothing yet."""
    wanted = {verdict} if verdict in DECIDING_WORDS else set(DECIDING_WORDS)
    found: list[str] = []
    for detail in details:
        line = " ".join(detail.split())
        if line.startswith(_EXPECTATION_FAILED) and verdict == "regressed":
            found.append("expectation failed: " + line.removeprefix(_EXPECTATION_FAILED))
        elif (match := _CAPACITY_CELL.match(line)) and match["verdict"] in wanted:
            change = f" ({match['change']})" if match["change"] else ""
            found.append(f"{match['metric']} {match['before']} → {match['after']}{change}")
        elif (match := _METRIC_CELL.match(line)) and match["verdict"] in wanted:
            found.append(f"{match['metric']} {match['change']} [{match['low']}, {match['high']}]")
        if len(found) == limit:
            break
    return found


def headline_of(
    outcome: RunOutcome, params: Mapping[str, Any], verdict_details: Sequence[str] = ()
) -> RunHeadline:
    """The one line of a finished run: its change, its verdict (else its status), the first
    decisive cell of its verdict (else what `compare` said decided it), and what was done."""
    verdict = outcome.verdict
    word = verdict.replace("-", " ") if verdict else outcome.status.replace("-", " ")
    cells = decisive_cells(verdict_details, verdict or "")
    decided_by: str | None = cells[0] if cells else None
    compared = _step_result(outcome, "compare")
    if decided_by is None and compared is not None and isinstance(compared.get("decided_by"), str):
        decided_by = str(compared["decided_by"])
    if decided_by is None and verdict is None and outcome.summary:
        decided_by = outcome.summary
    return RunHeadline(change_text(outcome.playbook, params), word, decided_by, _done(outcome))


def _start_seconds(store: Store, target: str) -> list[float]:
    rows = store.snapshots(target, limit=50)
    return [float(row.startup_seconds) for row in rows if row.startup_seconds is not None][:ETA_STARTS]


async def restart_eta_of(store: AsyncStore, target: str) -> RestartEta:
    """The ETA of a restart of `target`: the median of its last stored start durations."""
    seconds = await store.run(_start_seconds, store.store, target)
    return RestartEta(float(statistics.median(seconds)) if seconds else None, len(seconds))
