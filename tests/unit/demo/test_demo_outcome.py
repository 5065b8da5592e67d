"""The story runner's step-outcome matching, on threads recorded by hand in the stand-in's model.

Messages are built with the bot's own renderers (status card, evidence blocks), so a change of
how the card shows its status or how a comparison table reads breaks these tests before it
breaks the demo.
"""

from __future__ import annotations

from bot.slack.card import CardState, status_card
from bot.slack.render import render_block
from bot.slack.reporter import card_metadata
from bot.target.evidence import ComparisonRow, Evidence, MetricComparison, TextBlock, VerdictBlock
from flagbot_lab.demo.outcome import judge, observe
from flagbot_lab.demo.play import summary
from flagbot_lab.demo.story import CHANNEL, FUSED_MOE, FUSION, OPERATOR, STORY, Step
from flagbot_lab.standin.state import StandinState

TRY = next(s for s in STORY if s.key == "try")
DIGEST = next(s for s in STORY if s.key == "digest")
GATING = (
    f"{FUSION} needs compute capability 9.x or 10.x (SGLang checks SM90/SM100); this GPU is 12.1: "
    "probably a no-op here, yet it can still have side effects"
)


def post_card(state: StandinState, card: CardState) -> str:
    blocks, text = status_card(card)
    return state.workspace.post(CHANNEL, blocks=blocks, text=text, metadata=card_metadata(card)).ts


def edit_card(state: StandinState, ts: str, card: CardState) -> None:
    blocks, text = status_card(card)
    state.workspace.update(CHANNEL, ts, text=text, blocks=blocks, metadata=card_metadata(card))


def reply(state: StandinState, root: str, block: Evidence) -> None:
    rendered = render_block(block)
    state.workspace.post(CHANNEL, blocks=rendered.blocks, text=rendered.text, thread_ts=root)


def try_card(status: str, verdict: str | None = None, running: int | None = None) -> CardState:
    steps = [(name, "ok") for name in ("heal", "preflight", "apply", "await_start", "measure after")]
    if running is not None:
        steps[running:] = [(steps[running][0], "running"), *((n, "pending") for n, _ in steps[running + 1 :])]
    return CardState(7, "try", "twin", f"<@{OPERATOR}>", f"/flagbot {TRY.command}", steps, status, verdict)


def capacity(after: str) -> MetricComparison:
    return MetricComparison(
        "Capacity: before vs after, parsed vs effective side by side",
        (
            ComparisonRow("max_running_requests (parsed, server_args)", "48", "48", "+0", "same"),
            ComparisonRow("max_running_requests (effective)", "48", after, "", "changed"),
        ),
    )


def the_try_thread(state: StandinState, *, after: str = "26", verdict: str = "regressed") -> str:
    ts = post_card(state, try_card("running", running=4))
    reply(state, ts, TextBlock(f"• {GATING}", "Preflight warnings"))
    reply(state, ts, capacity(after))
    reply(state, ts, VerdictBlock(verdict, f"{verdict}: effective max_running_requests 48 -> {after}"))
    reply(state, ts, VerdictBlock(verdict, "reverted the change (regressed); back to the flags from before"))
    return ts


def test_a_running_card_is_waited_for_and_says_which_step_runs() -> None:
    state = StandinState()
    the_try_thread(state)
    outcome = judge(TRY, observe(state, CHANNEL, "0.000000", OPERATOR))
    assert outcome.state == "waiting"
    assert outcome.detail == "running: benchmark after the change"  # the step in words


def test_the_regression_with_parsed_vs_effective_and_the_gating_warning_is_reached() -> None:
    state = StandinState()
    ts = the_try_thread(state)
    edit_card(state, ts, try_card("succeeded", "regressed"))
    outcome = judge(TRY, observe(state, CHANNEL, "0.000000", OPERATOR))
    assert outcome.state == "reached", outcome
    assert outcome.detail == "succeeded, regressed"
    assert outcome.missing == ()
    assert "effective max_running_requests 48 -> 26" in outcome.found
    assert any(label.startswith("hardware gating") for label in outcome.found)
    assert outcome.card_ts == ts


def test_a_finished_run_without_the_regression_fails_naming_what_differs() -> None:
    state = StandinState()
    ts = the_try_thread(state, after="48", verdict="no-effect")
    edit_card(state, ts, try_card("succeeded", "no-effect"))
    outcome = judge(TRY, observe(state, CHANNEL, "0.000000", OPERATOR))
    assert outcome.state == "failed"
    assert "verdict no-effect (expected regressed)" in outcome.detail
    assert outcome.missing == ("effective max_running_requests 48 -> 26",)


def test_a_failed_run_fails_the_step_even_when_the_thread_shows_everything() -> None:
    state = StandinState()
    ts = the_try_thread(state)
    edit_card(state, ts, try_card("rolled-back", "regressed"))
    outcome = judge(TRY, observe(state, CHANNEL, "0.000000", OPERATOR))
    assert outcome.state == "failed"
    assert "status rolled-back (expected succeeded)" in outcome.detail


def test_only_cards_posted_after_the_command_count() -> None:
    state = StandinState()
    ts = the_try_thread(state)
    edit_card(state, ts, try_card("succeeded", "regressed"))  # an earlier run, already finished
    marker = state.workspace.message(CHANNEL, ts).edited_ts or ts
    later = max(marker, state.messages(CHANNEL, thread_ts=ts)[-1].ts)
    outcome = judge(TRY, observe(state, CHANNEL, later, OPERATOR))
    assert outcome.state == "waiting"
    assert outcome.detail == "waiting for the status card"


def test_the_acknowledgement_is_not_a_refusal_but_a_usage_error_is() -> None:
    state = StandinState()
    state.workspace.ephemeral(CHANNEL, OPERATOR, text="starting `try`: follow it in the thread")
    assert judge(TRY, observe(state, CHANNEL, "0.000000", OPERATOR)).state == "waiting"
    checking = "checking `try` against the SGLang that lab runs (its flag list is read from the host)"
    state.workspace.ephemeral(CHANNEL, OPERATOR, text=checking)  # a miss of the host's flag list
    assert judge(TRY, observe(state, CHANNEL, "0.000000", OPERATOR)).state == "waiting"
    state.workspace.ephemeral(CHANNEL, OPERATOR, text="unknown flag --enable-fused-moe; did you mean ...")
    outcome = judge(TRY, observe(state, CHANNEL, "0.000000", OPERATOR))
    assert outcome.state == "failed"
    assert outcome.detail == "the bot refused it: unknown flag --enable-fused-moe; did you mean ..."


def test_someone_elses_refusal_is_not_this_steps() -> None:
    state = StandinState()
    state.workspace.ephemeral(CHANNEL, "U0VIEW", text="you need the operator role")
    assert judge(TRY, observe(state, CHANNEL, "0.000000", OPERATOR)).state == "waiting"


def test_the_digest_step_needs_the_digest_itself() -> None:
    state = StandinState()
    assert judge(DIGEST, observe(state, CHANNEL, "0.000000", OPERATOR)).state == "waiting"
    state.workspace.post(CHANNEL, text="`digest` is not available in Slack yet; run it with the flagbot CLI.")
    assert judge(DIGEST, observe(state, CHANNEL, "0.000000", OPERATOR)).state != "reached"

    wired = StandinState()
    rendered = render_block(
        TextBlock(
            "Experiments (5)\n#2 try on twin: regressed, effective 48 -> 26, reverted",
            "Weekly post-mortem 2026-W49",
        )
    )
    wired.workspace.post(CHANNEL, blocks=rendered.blocks, text=rendered.text)
    assert judge(DIGEST, observe(wired, CHANNEL, "0.000000", OPERATOR)).state == "reached"


def test_an_answer_step_fails_when_the_bot_only_refuses() -> None:
    state = StandinState()
    state.workspace.ephemeral(CHANNEL, OPERATOR, text="unknown command `digets`")
    outcome = judge(DIGEST, observe(state, CHANNEL, "0.000000", OPERATOR))
    assert outcome.state == "failed"
    assert "unknown command" in outcome.detail


def test_the_story_is_the_seeds_incident_in_order() -> None:
    assert [s.key for s in STORY] == ["baseline", "try", "isolate", "revert", "verify", "digest"]
    assert FUSION in TRY.command and FUSED_MOE in TRY.command
    assert [s.key for s in STORY if s.expect.pending_if] == []  # every step is wired into Slack


def test_the_summary_passes_pending_steps_and_fails_on_the_first_failure() -> None:
    from flagbot_lab.demo.outcome import Outcome, Progress

    def progress(step: Step, state: str) -> Progress:
        return Progress(step, Outcome(state, "detail"), 1.0)  # type: ignore[arg-type]

    good = [progress(s, "reached") for s in STORY[:-1]] + [progress(DIGEST, "pending")]
    code, line = summary(good, len(STORY))
    assert code == 0
    assert "digest pending" in line
    code, line = summary([progress(STORY[0], "reached"), progress(TRY, "failed")], len(STORY))
    assert code == 1
    assert line.startswith("demo FAILED at step 'try both flags'")
    code, line = summary(good[:3], len(STORY))
    assert code == 1
