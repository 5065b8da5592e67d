"""The seeds' incident as data: the slash commands the demo types and what each must produce.

Why data and not code: the runner, the headless check and the unit tests read the same list,
so the story a newcomer watches is exactly the story CI asserts. Each step names the command
typed in `#flagbot-ops` (as which stand-in user), how its outcome is recognised in what the bot
posts (the run's status card and the thread under it, or a plain answer in the channel) and
what the thread must show for the step to count as reached.

Patterns are regular expressions searched in the thread read as text (`flagbot_lab.demo.thread`), the
way a person reads it: Slack's `&gt;` escapes undone, code blocks kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

CHANNEL = "C0FLAGBOT"
"""`#flagbot-ops` in the stand-in's seeded workspace."""
ADMIN = "U0ADMIN"
"""alice: the only role that may pin a baseline."""
OPERATOR = "U0OPER"
"""bob: runs the experiments (operator role)."""
FUSION = "--enable-flashinfer-allreduce-fusion"
FUSED_MOE = "--enable-fused-moe-sum-all-reduce"


@dataclass(frozen=True)
class Show:
    """Something the step's thread must show; `label` is printed on the progress line."""

    label: str
    pattern: str


@dataclass(frozen=True)
class Expect:
    """How a step's outcome is recognised.

    `run`: a status card appears after the command and reaches a final status; the step is
    reached when that status is in `statuses`, its verdict in `verdicts` (any when empty) and
    every `shows` pattern is found in the card and its thread. `answer`: the bot posts plain
    messages in the channel; the step is reached when every `shows` pattern is found in them.
    `pending_if`: text that means the command is not wired in yet; the step is then `pending`
    (reported, not failed).
    """

    kind: Literal["run", "answer"]
    statuses: tuple[str, ...] = ("succeeded",)
    verdicts: tuple[str, ...] = ()
    shows: tuple[Show, ...] = ()
    pending_if: str | None = None


@dataclass(frozen=True)
class Step:
    """One slash command of the story."""

    key: str
    title: str
    command: str
    """What is typed after `/flagbot`."""
    user: str
    expect: Expect
    timeout_s: float
    """Upper bound for the outcome (readiness is polled; this is only where waiting stops)."""
    why: str = field(default="", compare=False)
    """One sentence for docs and the interactive banner."""


STORY: tuple[Step, ...] = (
    Step(
        key="baseline",
        title="baseline",
        command="baseline pin",
        user=ADMIN,
        expect=Expect(
            kind="run",
            verdicts=("pinned",),
            shows=(
                Show(
                    "effective max_running_requests 48 pinned",
                    r"baseline #\d+: snapshot #\d+, set #\d+, max_running_requests 48\b",
                ),
            ),
        ),
        timeout_s=300,
        why="observe the running server and benchmark it; pin both as the reference",
    ),
    Step(
        key="try",
        title="try both flags",
        command=f"try {FUSION} {FUSED_MOE}",
        user=OPERATOR,
        expect=Expect(
            kind="run",
            verdicts=("regressed",),
            shows=(
                Show(
                    "hardware gating: the allreduce fusion needs SM 9.x/10.x, this GPU is 12.1",
                    rf"{FUSION} needs compute capability 9\.x or 10\.x[^\n]*this GPU is 12\.1: probably a no-op",
                ),
                Show(
                    "parsed max_running_requests 48 -> 48",
                    r"max_running_requests \(parsed, server_args\)\s+(?:before: )?48\s+(?:· after: )?48\b",
                ),
                Show(
                    "effective max_running_requests 48 -> 26",
                    r"max_running_requests \(effective\)\s+(?:before: )?48\s+(?:· after: )?26\b",
                ),
                Show("change reverted", r"reverted the change"),
            ),
        ),
        timeout_s=480,
        why="the seeds' two 'free' flags: preflight warns one cannot act on this GPU; the start "
        "shows parsed 48 but effective 26, a regression the benchmark alone misses",
    ),
    Step(
        key="isolate",
        title="isolate",
        command="isolate max_running_requests>=48",
        user=OPERATOR,
        expect=Expect(
            kind="run",
            verdicts=("found",),
            shows=(Show(f"culprit {FUSED_MOE}", rf"culprit\(s\): {FUSED_MOE}"),),
        ),
        timeout_s=480,
        why="delta debugging over the two flags, a restart per probe, names the culprit",
    ),
    Step(
        key="revert",
        title="revert the no-op flag",
        command=f"revert flags={FUSION}",
        user=OPERATOR,
        expect=Expect(
            kind="run",
            verdicts=("pass",),
            shows=(Show("back at 48 (baseline 48)", r"max_running_requests 48 \(baseline 48\)"),),
        ),
        timeout_s=300,
        why="isolate left the no-op flag on (it is not the culprit); take it off too",
    ),
    Step(
        key="verify",
        title="verify",
        command="verify max_running_requests>=48",
        user=OPERATOR,
        expect=Expect(
            kind="run",
            verdicts=("pass",),
            shows=(
                Show(
                    "max_running_requests>=48 holds (effective 48, parsed 48)",
                    r"max_running_requests>=48 \(parsed 48\)\s+(?:before: )?48\s+(?:· after: )?48\b",
                ),
                Show("1/1 expectations hold", r"1/1 expectations hold"),
            ),
        ),
        timeout_s=240,
        why="check the running server against the expectation, without a restart",
    ),
    Step(
        key="digest",
        title="digest",
        command="digest",
        user=OPERATOR,
        expect=Expect(
            kind="answer",
            shows=(
                Show("the post-mortem digest", r"Weekly post-mortem \d{4}-W\d{2}"),
                Show("the week's experiments", r"Experiments \([1-9]\d*\)"),
                Show("the regression among them", r"regressed"),
            ),
        ),
        timeout_s=120,
        why="what was tried, what was learned, as a post-mortem",
    ),
)
