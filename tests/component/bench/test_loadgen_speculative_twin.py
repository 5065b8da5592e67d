"""Speculative decoding on a twin process: a decode step's accepted tokens arrive in one chunk,
`/server_info` reports the accept length, and the load generator counts tokens, not chunks.

Tolerances are wide on purpose (a shared, loaded machine); `bench/loadgen_fidelity.py
--speculative` measures the precision.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from bot.bench.loadgen import LoadSpec, run_load
from tests.component.bench.conftest import OUTPUT_LEN, measured_truth, slowed
from tests.support.twin_process import Twin, TwinFactory

SPECULATIVE = ("--speculative-algorithm", "NGRAM", "--speculative-num-steps", "3")
"""NGRAM needs no draft model; the twin's accept length for 3 steps is 1 + 0.55 x 3 = 2.65."""
ACCEPT = 2.65


def speculative_twin(twins: TwinFactory) -> Twin:
    twin = twins.start(*SPECULATIVE, scenario=slowed())
    twin.wait_ready()
    return twin


def stream(twin: Twin, body: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with httpx.stream("POST", twin.base + "/v1/completions", json=body, timeout=30) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                events.append(json.loads(line[len("data: ") :]))
    return events


def test_chunks_carry_a_decode_steps_tokens_and_server_info_the_accept_length(twins: TwinFactory) -> None:
    twin = speculative_twin(twins)
    before = httpx.get(twin.base + "/server_info", timeout=5).json()
    body = {
        "prompt": "abc def ghi",
        "max_tokens": 40,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    events = stream(twin, body)
    running = [e["usage"]["completion_tokens"] for e in events if e["choices"]]
    sizes = [b - a for a, b in zip([0, *running], running, strict=False)]
    assert sizes[0] == 1  # the prefill's token goes alone
    assert set(sizes[1:-1]) == {2, 3}  # floor and ceiling of 2.65
    assert sum(sizes) == 40 == events[-1]["usage"]["completion_tokens"]
    assert sum(sizes[1:]) / len(sizes[1:]) == pytest.approx(ACCEPT, abs=0.3)
    texts = [e["choices"][0]["text"] for e in events if e["choices"]]
    assert [len(t.split()) for t in texts] == sizes  # the text of every token is there
    # SGLang's get_internal_state adds the key once a decode step has run
    states = httpx.get(twin.base + "/server_info", timeout=5).json()["internal_states"]
    assert all(state["avg_spec_accept_length"] == ACCEPT for state in states)
    assert before["internal_states"][0].get("avg_spec_accept_length") in (None, ACCEPT)


def test_the_load_generator_counts_tokens_and_reports_the_accept_length(twins: TwinFactory) -> None:
    twin = speculative_twin(twins)
    spec = LoadSpec(base_url=twin.base, input_len=256, output_len=OUTPUT_LEN, concurrency=2, num_requests=4)
    m = run_load(spec).metrics
    assert len(measured_truth(twin, 4)) == 4
    assert m["completed"] == 4 and m["total_output_tokens"] == 4 * OUTPUT_LEN
    assert m["chunk_tokens_source"] == "usage"  # the running usage on every chunk
    assert m["total_output_chunks"] < m["total_output_tokens"] / 2  # about 1 + 47 / 2.65 a request
    assert m["accept_length"] == ACCEPT
    # per-token ITL is about TPOT; a chunk's gap is about accept length x TPOT
    assert m["median_itl_ms"] == pytest.approx(m["mean_tpot_ms"], rel=0.35)
    assert m["median_chunk_itl_ms"] > 1.8 * m["mean_tpot_ms"]
