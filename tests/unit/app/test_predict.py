"""`predict`'s application layer: which stored start it reads, the jitter history it takes, and
what it renders (tables with the steps and their sources, the calls, the band's origin)."""

from __future__ import annotations

from typing import Any

from bot.app.predict import PredictAnswer
from bot.loop.capacity import figures_of
from bot.sglang.capacity_model.prediction import predict
from bot.sglang.change import Change
from bot.sglang.expectation import parse_expectation
from bot.store.models import Snapshot

GIB = 1 << 30


def snapshot(
    pre: float = 80.0, *, version: str = "0.5.10", weight: float = 16.0, figures: bool = True
) -> Snapshot:
    tokens = int((pre - 16.0 - pre * 0.1) * GIB) // 131072
    recorded: dict[str, Any] = {
        "pre_model_load_gib": pre,
        "post_model_load_gib": pre - 16.0,
        "weight_gib": weight,
        "kv_tokens": tokens,
        "kv_gib": tokens * 131072 / GIB,
        "max_total_num_tokens": tokens,
        "max_running_requests": 4096,
        "context_len": 32768,
        "available_gpu_mem_gb": 7.5,
        "kv_dtype": "torch.bfloat16",
    }
    return Snapshot(
        target="lab",
        node="n0",
        sglang_version=version,
        requested_flags=[{"flag": "--mem-fraction-static", "value": "0.9"}, {"flag": "--tp", "value": "1"}],
        server_args={
            "mem_fraction_static": 0.9,
            "page_size": 1,
            "chunked_prefill_size": 8192,
            "cuda_graph_max_bs": 256,
        },
        effective={"start_figures": recorded, "gpus": {"n0": [{"memory.total": "81559"}]}} if figures else {},
    )


def test_the_answer_shows_todays_figures_the_band_the_steps_and_the_call() -> None:
    prediction = predict(
        figures_of(snapshot()),
        [Change("add", "--max-running-requests", "32")],
        band_source="+-0.30 GiB: no history yet",
        expectations=[parse_expectation("max_running_requests>=48")],
    )
    answer = PredictAnswer("lab", 7, prediction)
    assert answer.ok is False  # a confident fail
    tables = {t["title"]: t for t in answer.tables()}
    figures = tables["predicted capacity of lab after add --max-running-requests 32"]
    row = next(r for r in figures["rows"] if r[0] == "max_running_requests")
    assert row[1:] == ["4096", "32"]
    steps = tables["the arithmetic, step by step"]["rows"]
    assert all(source for _name, _formula, source in steps)
    assert tables["expectations against the predicted band"]["rows"][0][1] == "fail (confident)"
    assert answer.lines()[0].startswith("from the start of snapshot #7 (SGLang 0.5.10")
    assert answer.to_json()["ok"] is False


def test_an_unmodelled_flag_says_unknown_once_and_is_not_a_failure() -> None:
    prediction = predict(figures_of(snapshot()), [Change("add", "--enable-metrics")])
    answer = PredictAnswer("lab", 7, prediction)
    assert answer.ok is True
    assert (
        "unknown: needs a restart (the memory effect of --enable-metrics is not modelled)" in answer.lines()
    )
    assert {row[2] for row in answer.tables()[0]["rows"]} == {"unknown"}
