"""One experiment as Markdown for a post-mortem (issue 22 item 5: `log ID --markdown`), rebuilt
from the store alone: the run, its parameters, every step, every piece of evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.commands import parse_command
from bot.loop.postmortem import experiment_markdown
from bot.loop.records_view import read
from bot.store import Store
from bot.store.experiments import create_experiment, finish_step, start_step, update_experiment
from bot.store.records import add_evidence
from bot.target.evidence import JournalExcerpt, TableBlock, VerdictBlock


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = Store.open(None, sqlite_path=tmp_path / "flagbot.db")
    opened.upgrade()
    return opened


def experiment(store: Store) -> int:
    row = create_experiment(
        store,
        target="lab",
        playbook="try",
        actor="slack:U0OPER",
        params={
            "changes": [{"op": "add", "flag": "--enable-fused-moe-sum-all-reduce", "value": None}],
            "expect": ["max_running_requests>=48"],
            "dry_run": False,
        },
    )
    assert row.id is not None
    step = start_step(store, row.id, index=0, name="apply", action="apply", args={})
    assert step.id is not None
    finish_step(store, step.id, status="failed", result={}, error="a | b\nbroke", state={})
    for block in (
        TableBlock("Capacity", ("metric", "value"), (("max_running_requests", "26"),)),
        JournalExcerpt("the start's log", "n0", "journalctl -u sglang.service", ("line ```1", "line 2")),
        VerdictBlock("regressed", "capacity fell", ("parsed 48, effective 26",)),
    ):
        add_evidence(
            store,
            target="lab",
            kind=block.kind,
            title=block.title,
            data=block.to_json(),
            experiment_id=row.id,
            step_index=0,
        )
    update_experiment(store, row.id, status="failed", verdict="regressed", summary="capacity fell to 26")
    return row.id


def test_the_document_holds_the_run_its_steps_and_its_evidence(store: Store) -> None:
    ident = experiment(store)
    text = experiment_markdown(store, ident, "lab")
    assert text.startswith(f"# Experiment #{ident}: `try` on lab\n")
    assert "- **Verdict:** regressed (run failed)" in text and "- **Requested by:** slack:U0OPER" in text
    assert "- changes: `add --enable-fused-moe-sum-all-reduce`" in text
    assert "- expect: `max_running_requests>=48`" in text
    assert "## Summary\n\ncapacity fell to 26" in text
    assert "| 1 | apply | apply | failed |" in text and "a \\| b broke |" in text  # one row, pipes escaped
    assert "| max_running_requests | 26 |" in text
    assert "On n0: `journalctl -u sglang.service`\n\n````\nline ```1\nline 2\n````" in text
    assert "### capacity fell (step 1)\n\n**regressed**: capacity fell\n- parsed 48, effective 26" in text


def test_another_target_s_or_an_unknown_experiment_is_refused(store: Store) -> None:
    ident = experiment(store)
    with pytest.raises(LookupError, match=f"experiment #{ident} is of target lab, not prod; add target=lab"):
        experiment_markdown(store, ident, "prod")
    with pytest.raises(LookupError, match="no experiment #999"):
        experiment_markdown(store, 999, "lab")


def test_log_id_markdown_through_the_grammar(store: Store) -> None:
    ident = experiment(store)
    for words in (f"log {ident} markdown=yes", f"log #{ident} --markdown"):
        document = read(store, parse_command(words), "lab", actor="cli")
        assert document["markdown"].startswith(f"# Experiment #{ident}") and document["experiment"] == ident
    plain = read(store, parse_command(f"log {ident}"), "lab", actor="cli")
    assert "markdown" not in plain and plain["lines"][0].startswith(f"# Experiment #{ident}")
    with pytest.raises(ValueError, match="markdown=yes shows one experiment: give its id"):
        read(store, parse_command("log --markdown"), "lab", actor="cli")
    assert "experiment" not in read(store, parse_command("log limit=5"), "lab", actor="cli")
