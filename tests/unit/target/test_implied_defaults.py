"""Implied flags are diffed against the defaults of the release the host runs, with their source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.sglang.catalog import FlagCatalog
from bot.sglang.launch import parse_flags
from bot.sglang.server_args import parse_server_args
from bot.target.evidence import TableBlock
from bot.target.observe import implied_tables
from bot.target.snapshot_facts import (
    ReleaseDefaults,
    implied_flags,
    is_release_difference,
    release_defaults,
    requested_values,
)

FIXTURES = Path(__file__).parents[2] / "fixtures" / "releases"
GROK_LAUNCH = (
    "--model-path /models/grok-2 --tokenizer-path /models/grok-2/tokenizer.tok.json --tp 8 "
    "--quantization fp8 --attention-backend triton --host 0.0.0.0 --port 30000"
)


def _line_of_defaults(version: str, changes: dict[str, Any], *, as_dict: bool = False) -> str:
    """A `server_args=` line as SGLang `version` prints it, every field at its default but `changes`."""
    values = {
        spec.field: spec.default for spec in FlagCatalog.load(version) if spec.field and not spec.negates
    }
    values |= changes
    if as_dict:  # 0.5.22+ print a dict
        return f"[2026-11-02 10:00:00] server_args={values!r}"
    body = ", ".join(f"{key}={value!r}" for key, value in values.items())
    return f"[2026-03-09 21:45:34] server_args=ServerArgs({body})"


def _diff(line: str, launch: str, defaults: ReleaseDefaults) -> tuple[dict[str, Any], dict[str, Any]]:
    catalog = defaults.catalog
    printed = parse_server_args(line)
    assert printed is not None
    requested, unknown = requested_values(parse_flags(launch.split()), catalog)
    assert unknown == []
    return implied_flags(printed, requested, catalog, defaults)


def test_a_real_0_5_2_start_shows_release_differences_apart_not_as_implications() -> None:
    line = (FIXTURES / "sglang-0.5.2rc2-server-args.log").read_text(encoding="utf-8")
    defaults = release_defaults("0.5.2")
    assert defaults.catalog.version == "0.5.9" and not defaults.same_release
    implied, _derived = _diff(line, GROK_LAUNCH, defaults)
    # 0.5.2's own defaults (triton, 3) differ from 0.5.9's (csgmv, 8): a difference of release
    for field, printed, listed in (("lora_backend", "triton", "csgmv"), ("sm_group_num", 3, 8)):
        entry = implied[field]
        assert (entry["value"], entry["was"]) == (printed, listed)
        assert entry["default_from"] == "SGLang 0.5.9 list" and is_release_difference(entry)
    assert "tp_size" not in implied and "attention_backend" not in implied  # requested, as printed
    tables = implied_tables(implied, {**defaults.to_json(), "note": defaults.note()})
    own = [b for b in tables if isinstance(b, TableBlock) and b.title.startswith("Implied flags")]
    assert all(row[0] not in {"lora_backend", "sm_group_num"} for block in own for row in block.rows)
    other = next(
        block
        for block in tables
        if isinstance(block, TableBlock) and block.title.startswith("Not implications")
    )
    assert "SGLang 0.5.9 list" in other.title
    assert ("lora_backend", "triton", "csgmv", "SGLang 0.5.9 list") in other.rows
    assert ("sm_group_num", "3", "8", "SGLang 0.5.9 list") in other.rows
    assert "the host runs SGLang 0.5.2, which has no packaged list" in other.note
    assert "nearest packaged list, SGLang 0.5.9" in other.note and "differ by release" in other.note


def test_a_0_5_9_start_is_diffed_against_0_5_9s_defaults() -> None:
    line = _line_of_defaults("0.5.9", {"model_path": "/m", "tp_size": 2, "chunked_prefill_size": 4096})
    own = release_defaults("0.5.9")
    assert own.same_release and own.note() is None
    implied, _ = _diff(line, "--model-path /m --tp-size 2", own)
    assert set(implied) == {"chunked_prefill_size"}
    entry = implied["chunked_prefill_size"]
    assert entry == {
        "value": 4096,
        "was": None,
        "source": "default",
        "default_from": "SGLang 0.5.9 list",
        "same_release": True,
    }
    table = implied_tables(implied, own.to_json())
    assert len(table) == 1 and isinstance(table[0], TableBlock)
    assert table[0].rows == (("chunked_prefill_size", "4096", "—", "default (SGLang 0.5.9 list)"),)
    # against 0.5.10's list the same start shows a 0.5.9 default as if SGLang had changed it
    other = ReleaseDefaults(FlagCatalog.load("0.5.10"), "0.5.9")
    implied_10, _ = _diff(line, "--model-path /m --tp-size 2", other)
    assert implied_10["fp4_gemm_runner_backend"]["was"] == "auto"
    assert is_release_difference(implied_10["fp4_gemm_runner_backend"])
    assert "fp4_gemm_runner_backend" not in implied


def test_a_0_5_23_start_printed_as_a_dict_is_diffed_against_0_5_23s_defaults() -> None:
    line = _line_of_defaults(
        "0.5.23", {"model_path": "/m", "tp_size": 2, "max_running_requests": 48}, as_dict=True
    )
    own = release_defaults("0.5.23")
    implied, _ = _diff(line, "--model-path /m --tp-size 2", own)
    assert set(implied) == {"max_running_requests"}
    assert implied["max_running_requests"]["default_from"] == "SGLang 0.5.23 list"
    # 0.5.10's list would have called 0.5.23's page_first layout an implied flag
    wrong, _ = _diff(
        line, "--model-path /m --tp-size 2", ReleaseDefaults(FlagCatalog.load("0.5.10"), "0.5.23")
    )
    assert wrong["hicache_mem_layout"]["was"] == "layer_first" and is_release_difference(
        wrong["hicache_mem_layout"]
    )


def test_an_unknown_host_version_is_named_as_such() -> None:
    defaults = release_defaults(None)
    assert defaults.catalog.version == "0.5.10" and not defaults.same_release
    note = defaults.note()
    assert note is not None and note.startswith("the host's SGLang version is unknown")


def test_without_release_defaults_the_catalogs_own_are_the_releases() -> None:
    catalog = FlagCatalog.load("0.5.10")
    implied, _ = implied_flags({"chunked_prefill_size": 4096}, {}, catalog)
    assert implied["chunked_prefill_size"]["same_release"] is True
