"""A hybrid sliding-window model's start: two KV pools, the full one's size is max_total_num_tokens.

SGLang 0.5.10 sizes both from one profile (model_runner_kv_cache_mixin.py
`_resolve_hybrid_swa_tokens`: full_tokens = total memory / (F x n_full + ratio x S x n_swa)), and
prints the window pool's line first, the full pool's second, then `SWAKVPool mem usage` with their
total. A draft model loaded before the pool (DFLASH) is already off the free memory the profile
measured. The real case is corpus log 014 (poolside Laguna with a DFLASH draft).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bot.sglang.capacity_model.arithmetic import recompute_profile
from bot.sglang.capacity_model.figures import GIB, Band, StartFigures, Unknown, figures_json, start_figures
from bot.sglang.capacity_model.prediction import predict
from bot.sglang.change import Change
from bot.sglang.log import parse_log_lines
from bot.sglang.log_events import kv_cache
from bot.sglang.log_report import StartReport

FULL, WINDOW = 185897, 148717


def _corpus_start(fixtures_dir: Path) -> StartReport:
    path = fixtures_dir / "corpus" / "sglang-logs" / "014.log"
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        report = parse_log_lines(handle)
    return next(s for s in reversed(report.starts) if s.effective.get("max_total_num_tokens"))


def test_the_swakvpool_line_is_read_as_the_pool_it_sums() -> None:
    line = f"SWAKVPool mem usage: 28.93 GB, swa size: {WINDOW}, full size: {FULL}"
    assert kv_cache(line) == {
        "pool": "SWAKVPool",
        "state": "hybrid_swa",
        "tokens": FULL,
        "swa_tokens": WINDOW,
        "kv_size_gb": 28.93,
    }
    upper = kv_cache(f"SWAKVPool VA upper bound: 30.00 GB, swa size: {WINDOW}, full size: {FULL}")
    assert upper is not None and upper["state"] == "hybrid_swa_va_upper_bound"
    assert kv_cache("SWAKVPool mem usage: lots") is None


def test_the_figures_take_the_full_pool_and_the_free_memory_after_the_draft(fixtures_dir: Path) -> None:
    recorded = figures_json(_corpus_start(fixtures_dir))
    assert recorded["kv_tokens"] == FULL == recorded["max_total_num_tokens"]
    assert recorded["swa_tokens"] == WINDOW
    assert recorded["kv_gib"] == 28.93  # both pools; the draft's own pool (4.26 GB) after it is not
    assert recorded["pre_model_load_gib"] == 115.36
    # the DFLASH draft's weights end at 46.25 GB before the pool; the target's end was 47.80
    assert recorded["post_model_load_gib"] == 46.25
    assert recorded["weight_gib"] == 67.56  # the target's, which identifies the start's weights


def _figures(fixtures_dir: Path, version: str = "0.5.10") -> StartFigures:
    start = _corpus_start(fixtures_dir)
    return start_figures(
        figures_json(start),
        start.server_args or {},
        version=version,
        explicit=("mem_fraction_static", "max_running_requests", "context_length"),
        gpu_total_mib=None,
    )


def test_the_corpus_pool_is_recomputed_from_its_lines(fixtures_dir: Path) -> None:
    found = recompute_profile(_figures(fixtures_dir))
    assert not isinstance(found, Unknown), found
    tokens, formula = found
    # rest = 46.25 - 115.36 x 0.15 = 28.946 GiB over 28.93 GiB / 185897 tokens per full-pool token
    expected = int((46.25 - 115.36 * (1 - 0.85)) * GIB) // round(28.93 * GIB / FULL)
    assert tokens == expected
    assert abs(tokens - FULL) / FULL < 0.005
    assert "sliding window" in formula


def test_a_smaller_static_fraction_shrinks_both_pools_through_the_full_one(fixtures_dir: Path) -> None:
    figures = _figures(fixtures_dir)
    prediction = predict(figures, [Change("set", "--mem-fraction-static", "0.80")], jitter_gib=0.0)
    band = prediction.figure("max_total_num_tokens").predicted
    assert isinstance(band, Band), band
    cell = 28.93 * GIB / FULL
    # 0.05 x 115.36 GiB less rest, at the same cell per full-pool token
    assert band.value == pytest.approx(FULL - 0.05 * 115.36 * GIB / cell, rel=0.005)
    kv_step = next(s for s in prediction.steps if s.name == "max_total_num_tokens")
    assert "_resolve_hybrid_swa_tokens" in kv_step.source


def test_what_the_window_share_would_do_is_unknown(fixtures_dir: Path) -> None:
    prediction = predict(_figures(fixtures_dir), [Change("set", "--swa-full-tokens-ratio", "0.5")])
    assert prediction.unknown is not None and "--swa-full-tokens-ratio" in prediction.unknown


def test_0_5_23s_sliding_window_sizing_is_not_guessed(fixtures_dir: Path) -> None:
    figures = dataclasses.replace(_figures(fixtures_dir), version="0.5.23")
    found = recompute_profile(figures)
    assert isinstance(found, Unknown) and "sliding-window" in found.why
