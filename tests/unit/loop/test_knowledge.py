"""The flag knowledge base: the packaged file, user overrides, schema errors, gating, implied flags, cite."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.loop.kb_schema import CapabilityRule, version_in, version_key
from bot.loop.knowledge import (
    PACKAGED,
    FlagContext,
    KnowledgeBase,
    KnowledgeError,
    knowledge_files,
    observation_stance,
)
from bot.sglang.catalog import FlagCatalog
from bot.sglang.launch import parse_flags
from tests.unit.loop.kb_support import Obs

AR = "--enable-flashinfer-allreduce-fusion"
MOE = "--enable-fused-moe-sum-all-reduce"
REQUIRED = [
    AR,
    "--enforce-disable-flashinfer-allreduce-fusion",
    MOE,
    "--disable-piecewise-cuda-graph",
    "--enable-piecewise-cuda-graph",
    "--mem-fraction-static",
    "--max-running-requests",
    "--cuda-graph-max-bs",
    "--disable-cuda-graph",
    "--chunked-prefill-size",
    "--speculative-algorithm",
    "--enable-dp-attention",
    "--kv-cache-dtype",
    "--context-length",
]


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return KnowledgeBase.load()


# --- the packaged file ----------------------------------------------------------------------


def test_the_packaged_file_covers_the_flags_and_each_is_a_real_0_5_10_flag(kb: KnowledgeBase) -> None:
    assert set(REQUIRED) <= set(kb.flags)
    assert len(kb.flags) >= 12
    catalog = FlagCatalog.load("0.5.10")
    for flag in kb.flags:
        assert catalog.get(flag) is not None, flag
        entry = kb.entry(flag)
        assert entry is not None and entry.summary and entry.versions and entry.sources, flag
        assert all(source.ref for source in entry.sources), flag
        assert any(source.kind in ("sglang-source", "sglang-docs") for source in entry.sources), flag


def test_seed_claims_the_reference_contradicts_are_unverified_with_what_it_says(kb: KnowledgeBase) -> None:
    entry = kb.entry(AR)
    assert entry is not None
    piecewise = [s for s in entry.sources if s.kind == "seeds" and "piecewise" in s.says]
    assert piecewise and all(s.unverified for s in piecewise)
    assert all(s.reference_says and "sets no other field" in s.reference_says for s in piecewise)
    assert entry.implied == []
    moe = kb.entry(MOE)
    assert moe is not None and moe.memory.capacity == "unknown"
    assert all(s.unverified for s in moe.sources if s.kind == "seeds")


def test_versions_follow_the_reference_table(kb: KnowledgeBase) -> None:
    assert kb.covers(MOE, "0.5.10") is True
    assert kb.covers(MOE, "0.5.13") is True
    assert kb.covers(MOE, "0.5.14") is False
    assert kb.covers(MOE, "0.5.9") is False
    assert kb.covers("--disable-piecewise-cuda-graph", "0.5.19") is True
    assert kb.covers("--disable-piecewise-cuda-graph", "0.5.20") is False
    assert kb.covers("--not-there", "0.5.10") is None


# --- gating ---------------------------------------------------------------------------------


def test_allreduce_fusion_is_a_probable_no_op_on_gb10_with_provenance(kb: KnowledgeBase) -> None:
    gate = kb.gating(AR, "12.1")
    assert gate is not None
    assert gate.text.startswith(
        f"{AR} needs compute capability 9.x or 10.x (SGLang checks SM90/SM100 in layers/communicator.py"
    )
    assert "this GPU is 12.1: probably a no-op here, yet it can still have side effects" in gate.text
    assert gate.side_effects == ()
    assert any("piecewise" in claim and "SGLang's source says" in claim for claim in gate.claims)
    assert any("communicator.py" in source.ref for source in gate.sources)


@pytest.mark.parametrize("capability", ["9.0", "10.0", "10.3"])
def test_no_gate_where_the_fusion_runs(kb: KnowledgeBase, capability: str) -> None:
    assert kb.gating(AR, capability) is None


@pytest.mark.parametrize("capability", ["8.0", "8.9", "12.0", "12.1"])
def test_gate_everywhere_else(kb: KnowledgeBase, capability: str) -> None:
    assert kb.gating(AR, capability) is not None


def test_flags_without_a_gpu_rule_or_unknown_are_never_gated(kb: KnowledgeBase) -> None:
    assert kb.gating(MOE, "12.1") is None
    assert kb.gating("--not-there", "12.1") is None
    assert kb.gating(AR, "garbage") is None


def test_capability_rules_and_versions() -> None:
    rule = CapabilityRule(min="8.0", max="10.x")
    assert (rule.allows("8.0"), rule.allows("10.3"), rule.allows("12.1"), rule.allows("7.5")) == (
        True,
        True,
        False,
        False,
    )
    assert rule.describe() == "between 8.0 and 10.x"
    assert CapabilityRule(any_of=["9.0"]).allows("9.1") is False
    assert (
        version_key("0.5.10rc0") < version_key("0.5.10") < version_key("0.5.10.post1") < version_key("0.5.11")
    )
    assert version_in("0.5.10rc0", ">=0.5.10rc0,<0.5.11") is True
    assert version_in("0.5.11", ">=0.5.10rc0,<0.5.11") is False
    assert version_in("main", ">=0.5.10") is None


# --- implied flags --------------------------------------------------------------------------


def test_speculative_decoding_implies_48_unless_max_running_requests_is_given(kb: KnowledgeBase) -> None:
    argv = ["--model-path", "/m", "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3"]
    ctx = FlagContext.of(parse_flags(argv), sglang_version="0.5.10", compute_capability="12.1")
    fields = {item.field: item.value for item in kb.implied("--speculative-algorithm", ctx)}
    assert fields["max_running_requests"] == 48
    assert fields["disable_piecewise_cuda_graph"] is True
    assert "speculative_num_steps" not in fields  # given explicitly
    assert "enable_mixed_chunk" not in fields  # only with --enable-mixed-chunk
    later = FlagContext.of(parse_flags([*argv, "--max-running-requests", "64"]), sglang_version="0.5.12")
    later_fields = {item.field for item in kb.implied("--speculative-algorithm", later)}
    assert "max_running_requests" not in later_fields
    assert "disable_piecewise_cuda_graph" not in later_fields  # 0.5.11+ keeps piecewise


def test_implied_without_context_lists_the_unconditional_view(kb: KnowledgeBase) -> None:
    items = kb.implied("--enforce-disable-flashinfer-allreduce-fusion")
    assert [(i.field, i.value, i.flag) for i in items] == [("enable_flashinfer_allreduce_fusion", False, AR)]
    assert items[0].sources and "forcibly disabled" in items[0].describe() + items[0].sources[0].says
    assert kb.implied(AR) == [] and kb.implied("--not-there") == []


# --- user files -----------------------------------------------------------------------------


def test_a_user_file_wins_per_field_and_adds_sources(tmp_path: Path) -> None:
    knowledge = tmp_path / "team" / "knowledge"
    knowledge.mkdir(parents=True)
    (knowledge / "gb10.yaml").write_text(
        "schema: 1\nflags:\n"
        f"  {MOE}:\n"
        "    memory: {capacity: lowers, text: 'measured on our GB10 pair: 48 -> 26'}\n"
        "    sources:\n"
        "      - {kind: observed, ref: 'experiment #12', says: 'max_running_requests 48 -> 26', about: [memory]}\n"
        "  --enable-metrics:\n"
        "    summary: Prometheus /metrics.\n"
    )
    files = knowledge_files([tmp_path / "team", tmp_path / "absent"])
    assert files == [knowledge / "gb10.yaml"]
    kb = KnowledgeBase.load(files)
    entry = kb.entry(MOE)
    assert entry is not None
    assert entry.memory.capacity == "lowers"
    assert entry.summary.startswith("In the Triton fused-MoE path")  # kept from the packaged file
    assert entry.sources[-1].kind == "observed" and len(entry.sources) > 1
    assert "--enable-metrics" in kb and kb.files == (PACKAGED, knowledge / "gb10.yaml")


def test_a_loaded_base_is_reused_until_a_file_changes(tmp_path: Path) -> None:
    """Preflight loads the base for every experiment: parsed once, read again when edited."""
    team = tmp_path / "knowledge" / "team.yaml"
    team.parent.mkdir()
    team.write_text("schema: 1\nflags:\n  --enable-metrics:\n    summary: Prometheus /metrics.\n")
    first = KnowledgeBase.load([team])
    again = KnowledgeBase.load([team])
    assert again.entry("--enable-metrics") is first.entry("--enable-metrics")  # not parsed again
    team.write_text("schema: 1\nflags:\n  --enable-metrics:\n    summary: Prometheus metrics, edited.\n")
    edited = KnowledgeBase.load([team])
    entry = edited.entry("--enable-metrics")
    assert entry is not None and entry.summary == "Prometheus metrics, edited."
    team.unlink()
    with pytest.raises(KnowledgeError, match="cannot read"):
        KnowledgeBase.load([team])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            f"flags:\n  {AR}:\n    requires: {{compute_capability: {{any_off: ['9.0']}}}}\n",
            f"{AR}: unknown key 'any_off'",
        ),
        (f"flags:\n  {AR}:\n    versions: 'from 0.5.10'\n", f"{AR}: versions: 'from 0.5.10' is not a clause"),
        (f"flags:\n  {AR}:\n    sources: [{{kind: blog, ref: x, says: y}}]\n", f"{AR}: sources.0.kind"),
        (f"flags:\n  {AR}:\n    memory: {{capacity: huge}}\n", f"{AR}: memory.capacity"),
        (
            f"flags:\n  {AR}:\n    requires: {{compute_capability: {{min: sm90}}}}\n",
            "is not a compute capability",
        ),
        ("flags:\n  enable-metrics: {summary: x}\n", "is not a flag name"),
        (
            "flags:\n  --brand-new: {memory: {capacity: none}}\n",
            "--brand-new: summary: a flag needs a summary",
        ),
        ("schema: 2\nflags: {}\n", "file: schema"),
        ("- just a list\n", "expected a mapping"),
        ("flags: [unclosed\n", "cannot read"),
    ],
)
def test_schema_errors_name_the_file_the_flag_and_the_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(KnowledgeError) as caught:
        KnowledgeBase.load([path])
    assert str(caught.value).startswith(str(path))
    assert message in str(caught.value)


# --- cite and observations ------------------------------------------------------------------


def test_cite_puts_static_facts_next_to_observations_newest_first(kb: KnowledgeBase) -> None:
    older = Obs(
        MOE, "effect", "max_running_requests fell 48 -> 26", observed_at=datetime(2026, 3, 1, tzinfo=UTC)
    )
    newer = Obs(MOE, "capacity-lowered", "isolate: culprit for max_running_requests")
    other = Obs(AR, "no-op", "no change")
    citation = kb.cite(MOE, [older, other, newer])
    assert citation.observations[0].startswith(
        "observed 2026-03-09 on twin (NVIDIA GB10, cc 12.1, SGLang 0.5.10"
    )
    assert len(citation.observations) == 2 and "fell 48 -> 26" in citation.observations[1]
    assert any(fact.startswith("memory: unknown capacity") for fact in citation.facts)
    assert "[seeds, unverified]" in citation.text()
    assert citation.to_json()["flag"] == MOE
    assert kb.cite("--not-there").facts == ("not in the knowledge base",)


def test_observation_stance() -> None:
    metric = "max_running_requests"
    assert observation_stance(Obs(MOE, "capacity-lowered", "x"), metric) == 1
    assert observation_stance(Obs(MOE, "not-culprit", "x"), metric) == -1
    assert observation_stance(Obs(MOE, "effect", "max_running_requests dropped 48 -> 26"), metric) == 1
    assert observation_stance(Obs(MOE, "effect", "throughput dropped 3%"), metric) == 0
    assert observation_stance(Obs(MOE, "note", "max_running_requests dropped"), metric) == 0

    assert (
        observation_stance(
            Obs(MOE, "effect", "", detail={"metric": metric, "before": 48, "after": 26}), metric
        )
        == 1
    )
    assert (
        observation_stance(
            Obs(MOE, "effect", "", detail={"metric": metric, "before": 48, "after": 48}), metric
        )
        == -1
    )
