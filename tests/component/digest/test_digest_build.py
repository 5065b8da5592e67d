"""The digest of a seeded week read from a real store (SQLite and PostgreSQL), and its renderings."""

from __future__ import annotations

import io

import pytest

from bot.config import Settings
from bot.digest.build import build_digest
from bot.digest.chart import render_chart_png
from bot.digest.markdown import render_markdown
from bot.digest.threads import threads_of
from bot.digest.week import parse_week
from bot.loop.run_state import RunState
from bot.slack.digest_blocks import render_blocks
from bot.slack.render import messages
from bot.store.experiments import create_experiment, update_experiment
from bot.store.investigations import open_investigation
from flagbot_lab.standin.blocks import block_errors
from tests.component.digest.digest_seed import CHUNK, FUSION, MOE, PERMALINK, TARGET, Seeded, moved, utc

W48 = parse_week("2026-W48")


def test_the_seeded_week_has_the_right_counts_and_names(seeded: Seeded) -> None:
    ids = seeded.ids
    digest = build_digest(seeded.store, seeded.settings, W48)

    assert [line.id for line in digest.experiments] == [
        ids["e_regressed"],
        ids["e_kept"],
        ids["e_failed"],
        ids["e_revert"],
    ]  # e_before (Sun 23:30) and e_after (Mon 00:30) are other weeks in Europe/Berlin
    regression = digest.experiments[0]
    assert (regression.verdict, regression.capacity_before, regression.capacity_after) == (
        "regressed",
        48,
        26,
    )
    assert regression.kept is False
    assert regression.thread is not None and regression.thread.permalink == PERMALINK
    assert regression.what == f"add {FUSION}, add {MOE}"
    assert digest.experiments[1].thread is None

    assert [h.id for h in digest.confirmed] == [ids["h_confirmed"]]
    assert [h.id for h in digest.refuted] == [ids["h_refuted"]]
    assert [h.id for h in digest.inconclusive] == [ids["h_inconclusive"]]
    assert [h.id for h in digest.still_open] == [ids["h_open"]]  # not the one asked after the week

    assert [(d.change, d.experiment_id) for d in digest.kept] == [(f"add {CHUNK} 4096", ids["e_kept"])]
    assert [(d.change, d.experiment_id) for d in digest.reverted] == [
        (f"add {FUSION}", ids["e_regressed"]),
        (f"add {MOE}", ids["e_regressed"]),
        (f"add {CHUNK} 4096", ids["e_revert"]),
    ]
    assert "undoes #" in digest.reverted[-1].why

    (flags,) = digest.targets
    assert flags.target == TARGET
    assert flags.differences == (f"add {MOE}",)
    assert (flags.baseline_capacity, flags.capacity) == (48, 26)

    assert [(i.experiment_id, i.text) for i in digest.failed_starts] == [
        (ids["e_failed"], "RuntimeError: CUDA out of memory")
    ]
    assert [i.experiment_id for i in digest.rollbacks] == [ids["e_failed"]]
    assert [o.flag for o in digest.learned] == [MOE, FUSION]
    assert digest.checks in (None, [])  # no check ran in the seeded week (or no check results yet)

    counts = digest.counts()
    assert counts["experiments"] == 4
    assert counts["verdict:regressed"] == 1
    assert (counts["kept"], counts["reverted"], counts["failed_starts"], counts["rollbacks"]) == (1, 3, 1, 1)
    assert not digest.empty


def test_the_chart_data_starts_before_the_week_and_marks_every_change(seeded: Seeded) -> None:
    digest = build_digest(seeded.store, seeded.settings, W48)
    capacity = digest.chart.capacity[TARGET]
    assert capacity[0] == (digest.start, 48.0)  # the last start before the week, drawn at its beginning
    assert [value for _, value in capacity] == [48.0, 26.0, 48.0, 48.0, 48.0, 26.0]
    assert [value for _, value in digest.chart.throughput[TARGET]] == [700.0, 1100.0]
    assert digest.chart.reference == {TARGET: 1000.0}
    assert [label for _, label, _ in digest.chart.marks] == [f"#{line.id}" for line in digest.experiments]


def test_the_week_follows_the_configured_time_zone(seeded: Seeded) -> None:
    in_utc = build_digest(seeded.store, Settings(), W48)
    ids = [line.id for line in in_utc.experiments]
    assert seeded.ids["e_after"] in ids  # Sunday 23:30 UTC is still week 48 in UTC
    assert seeded.ids["e_before"] not in ids  # Sunday 22 Nov is week 47 in UTC too
    assert in_utc.start.utcoffset() is not None and in_utc.start.utcoffset().total_seconds() == 0


def test_an_experiment_of_an_investigation_links_to_its_thread(seeded: Seeded) -> None:
    investigation = open_investigation(
        seeded.store,
        target=TARGET,
        title="why 26?",
        created_by="slack:U0OPER",
        channel="C0FLAGBOT",
        thread_ts="1.2",
    )
    experiment = seeded.ids["e_failed"]
    update_experiment(seeded.store, experiment, investigation_id=investigation.id)
    recorded = seeded.ids["e_regressed"]
    links = threads_of(seeded.store, [experiment, recorded], {experiment: investigation.id or 0})
    assert (links[experiment].channel, links[experiment].ts, links[experiment].permalink) == (
        "C0FLAGBOT",
        "1.2",
        None,
    )
    assert links[recorded].permalink == PERMALINK


def test_one_target_only(seeded: Seeded) -> None:
    other = build_digest(seeded.store, seeded.settings, W48, target="other-target")
    assert other.empty
    assert other.experiments == [] and other.learned == [] and other.still_open == []
    assert [t.target for t in other.targets] == ["other-target"]
    assert "no baseline" in other.targets[0].note


def test_markdown_holds_the_counts_names_and_links(seeded: Seeded) -> None:
    digest = build_digest(seeded.store, seeded.settings, W48)
    text = render_markdown(digest, chart_path="w48.png")
    assert text.startswith("# Weekly post-mortem 2026-W48\n")
    assert "Mon 23 Nov 2026 – Sun 29 Nov 2026 (Europe/Berlin)" in text
    assert "4 experiments (1 failed-to-start, 1 improved, 1 pass, 1 regressed)" in text
    assert "48 → 26" in text
    assert f"[thread]({PERMALINK})" in text
    assert f"`add {FUSION}, add {MOE}`" in text
    assert "### Confirmed (1)" in text and "### Still open (1)" in text
    assert "memory fraction moved with the fusion flag" in text
    assert "RuntimeError: CUDA out of memory" in text
    assert "max\\_running\\_requests 48 -> 26 on the GB10" in text  # store text escaped for Markdown
    assert "an older question" not in text and "learned the week before" not in text
    assert "![effective capacity and output throughput](w48.png)" in text


def test_block_kit_is_within_slacks_limits(seeded: Seeded) -> None:
    digest = build_digest(seeded.store, seeded.settings, W48)
    rendered = render_blocks(digest)
    parts = messages(rendered.blocks, rendered.text)
    assert len(parts) == 1
    assert block_errors(parts[0][0]) == []
    assert rendered.blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "Weekly post-mortem 2026-W48", "emoji": True},
    }
    shown = "\n".join(b["text"]["text"] for b in rendered.blocks if b["type"] == "section")
    assert f"<{PERMALINK}|#{seeded.ids['e_regressed']}>" in shown
    assert "max_running_requests 48 → 26" in shown
    assert "max_running_requests 48 -&gt; 26 on the GB10" in shown  # store text escaped for mrkdwn


def test_the_chart_is_a_valid_non_empty_png(seeded: Seeded) -> None:
    digest = build_digest(seeded.store, seeded.settings, W48)
    png = render_chart_png(digest)
    assert png is not None and png.startswith(b"\x89PNG\r\n\x1a\n")
    image_module = pytest.importorskip("PIL.Image")
    with image_module.open(io.BytesIO(png)) as image:
        image.load()
        assert image.width > 0 and image.height > 0
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 10  # lines, labels and text: not one flat colour
        reds = sum(n for n, (r, g, b) in colours if r > 180 and g < 90 and b < 90)
        assert reds > 0  # the regression is marked in red


def test_an_empty_week_says_so(seeded: Seeded) -> None:
    digest = build_digest(seeded.store, seeded.settings, parse_week("2026-W30"))
    assert digest.empty
    assert render_chart_png(digest) is None  # nothing to draw: no start before it, no benchmark
    text = render_markdown(digest)
    assert "Nothing happened in 2026-W30" in text
    assert "No experiments this week." in text
    rendered = render_blocks(digest)
    assert block_errors(rendered.blocks) == []
    assert any("Nothing happened in 2026-W30" in b.get("text", {}).get("text", "") for b in rendered.blocks)


def test_a_run_that_never_reached_a_node_is_listed_apart_not_as_a_failed_experiment(seeded: Seeded) -> None:
    """A key or known_hosts problem before any change: "not started: could not connect", not a
    failure of the change it was to try."""
    never = RunState()
    never.conclusion.not_started = (
        "could not connect: 10.0.0.1: not connected: ssh.key_path /k does not exist"
    )
    row = create_experiment(
        seeded.store,
        target=TARGET,
        playbook="try",
        params={"changes": [{"op": "add", "flag": "--enable-metrics", "value": None}]},
        actor="slack:U0OPER",
    )
    assert row.id is not None
    moved(seeded.store, row, created_at=utc(26, 9))
    update_experiment(
        seeded.store, row.id, status="failed", summary="step 1 (heal) failed: ...", state=never.dump()
    )
    digest = build_digest(seeded.store, seeded.settings, W48)

    assert row.id not in [line.id for line in digest.experiments]
    assert [(line.id, line.not_started) for line in digest.not_started] == [
        (row.id, never.conclusion.not_started)
    ]
    counts = digest.counts()
    assert counts["experiments"] == 4 and counts["not_started"] == 1 and "verdict:failed" not in counts
    assert digest.to_json()["not_started"][0]["id"] == row.id
    text = render_markdown(digest)
    assert (
        "4 experiments (1 failed-to-start, 1 improved, 1 pass, 1 regressed); 1 not started (could not connect)"
        in text
    )
    assert "## Not started: could not connect" in text
    assert f"- #{row.id} try on {TARGET}" in text and "ssh.key\\_path /k does not exist" in text
    rendered = render_blocks(digest)
    parts = messages(rendered.blocks, rendered.text)
    assert block_errors(parts[0][0]) == []
    shown = "\n".join(b["text"]["text"] for b in rendered.blocks if b["type"] == "section")
    assert "Not started: could not connect (1)" in shown and "ssh.key_path /k does not exist" in shown


def test_an_old_failed_run_without_the_mark_still_reads_as_failed(seeded: Seeded) -> None:
    """Rows stored before the mark existed keep their meaning: no migration, nothing lost."""
    row = create_experiment(seeded.store, target=TARGET, playbook="verify", params={}, actor="cli:bob")
    assert row.id is not None
    moved(seeded.store, row, created_at=utc(26, 10))
    update_experiment(seeded.store, row.id, status="failed", summary="step 2 failed", state={"kept": None})
    digest = build_digest(seeded.store, seeded.settings, W48)
    assert digest.not_started == [] and digest.counts()["verdict:failed"] == 1
