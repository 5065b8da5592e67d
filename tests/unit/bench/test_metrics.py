"""bench_serving's metric definitions on synthetic timelines, where every figure is known exactly."""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from bot.bench.client_health import WorkerStats, judge
from bot.bench.metrics import RequestRecord, group_error, peak_concurrency_per_s, summarize


def request(
    send: float, ttft: float, gap: float, n: int, *, usage: int | None = None, prompt: int = 100
) -> RequestRecord:
    """n content chunks: the first at send+ttft, then one every `gap`; the stream ends with the last."""
    chunks = array("d", [send + ttft + i * gap for i in range(n)])
    return RequestRecord(
        scheduled=send,
        send=send,
        end=chunks[-1],
        ok=True,
        chunks=chunks,
        prompt_tokens=prompt,
        completion_tokens=n if usage is None else usage,
    )


def test_definitions_on_two_known_requests() -> None:
    a = request(0.0, 0.100, 0.020, 11)  # E2E = 0.1 + 10 * 0.02 = 0.3
    b = request(0.1, 0.200, 0.010, 21)  # E2E = 0.2 + 20 * 0.01 = 0.4, ends at 0.5
    m = summarize([a, b], start=0.0, requested_input_len=100, request_rate=None, max_concurrency=2)
    assert m["duration"] == pytest.approx(0.5)
    assert m["completed"] == 2
    assert m["failed"] == 0
    assert m["total_output_tokens"] == 32
    assert m["total_input_tokens"] == 200
    assert m["output_throughput"] == pytest.approx(32 / 0.5)
    assert m["request_throughput"] == pytest.approx(4.0)
    assert m["total_throughput"] == pytest.approx(232 / 0.5)
    assert m["mean_ttft_ms"] == pytest.approx(150.0)
    assert m["median_ttft_ms"] == pytest.approx(150.0)
    assert m["std_ttft_ms"] == pytest.approx(50.0)  # population std, as numpy's default
    assert m["mean_tpot_ms"] == pytest.approx(15.0)  # (E2E - TTFT) / (N - 1): 20 ms and 10 ms
    itl = [20.0] * 10 + [10.0] * 20  # pooled chunk gaps of both requests
    assert m["mean_itl_ms"] == pytest.approx(float(np.mean(itl)))
    assert m["p99_itl_ms"] == pytest.approx(float(np.percentile(itl, 99)))
    assert m["max_itl_ms"] == pytest.approx(20.0)
    assert m["mean_e2e_latency_ms"] == pytest.approx(350.0)
    assert m["concurrency"] == pytest.approx(0.7 / 0.5)
    assert m["max_concurrent_requests"] == 2
    assert m["request_rate"] == "inf"
    assert m["output_tokens_source"] == "usage"


def test_tpot_uses_the_servers_token_count_and_itl_stays_per_chunk() -> None:
    # 4 tokens per chunk: 5 chunks, usage says 20 tokens.
    r = request(0.0, 0.1, 0.08, 5, usage=20)
    m = summarize([r], start=0.0, requested_input_len=1, request_rate=None, max_concurrency=1)
    assert m["total_output_tokens"] == 20
    assert m["total_output_chunks"] == 5
    assert m["mean_tpot_ms"] == pytest.approx(320.0 / 19)
    assert m["mean_itl_ms"] == pytest.approx(80.0)


def test_without_usage_tokens_are_counted_from_chunks_and_marked() -> None:
    with_usage = request(0.0, 0.1, 0.01, 10)
    without = request(0.0, 0.1, 0.01, 10)
    without.completion_tokens = None
    without.prompt_tokens = None
    m = summarize([without], start=0.0, requested_input_len=64, request_rate=None, max_concurrency=1)
    assert m["output_tokens_source"] == "chunks"
    assert m["total_output_tokens"] == 10
    assert m["total_input_tokens"] == 64  # the requested length when the server says nothing
    mixed = summarize(
        [with_usage, without], start=0.0, requested_input_len=64, request_rate=None, max_concurrency=2
    )
    assert mixed["output_tokens_source"] == "mixed"


def test_a_single_token_request_has_ttft_but_no_tpot() -> None:
    m = summarize(
        [request(0.0, 0.05, 0.0, 1)], start=0.0, requested_input_len=1, request_rate=None, max_concurrency=1
    )
    assert m["mean_ttft_ms"] == pytest.approx(50.0)
    assert m["mean_tpot_ms"] is None
    assert m["mean_itl_ms"] is None


def test_failed_requests_are_counted_grouped_and_kept_out_of_the_latencies() -> None:
    ok = request(0.0, 0.1, 0.01, 10)
    failed = [
        RequestRecord(scheduled=0, send=0, end=0.5, error="HTTP 503: Service Unavailable"),
        RequestRecord(scheduled=0, send=0, end=0.6, error="HTTP 503: Service Unavailable"),
        RequestRecord(scheduled=0, send=0, end=0.7, error="request timeout after 600 s"),
        RequestRecord(
            scheduled=0, send=0, end=0.2, error="Traceback (most recent call last):\n  x\nKeyError: 'choices'"
        ),
    ]
    m = summarize([ok, *failed], start=0.0, requested_input_len=1, request_rate=2.0, max_concurrency=None)
    assert m["completed"] == 1
    assert m["failed"] == 4
    assert m["errors"] == {
        "HTTP 503: Service Unavailable": 2,
        "request timeout after 600 s": 1,
        "KeyError: 'choices'": 1,
    }
    assert m["mean_ttft_ms"] == pytest.approx(100.0)
    assert m["duration"] == pytest.approx(0.7)  # the benchmark lasted until the last response
    assert m["request_rate"] == 2.0


def test_nothing_succeeded_gives_nulls_not_nan() -> None:
    m = summarize(
        [RequestRecord(scheduled=0, send=0, end=1.0, error="ConnectError: refused")],
        start=0.0,
        requested_input_len=1,
        request_rate=None,
        max_concurrency=1,
    )
    assert m["completed"] == 0
    assert m["mean_ttft_ms"] is None
    assert m["output_tokens_source"] is None
    assert m["output_throughput"] == 0.0


def test_dispatch_delay_is_send_minus_schedule() -> None:
    r = request(1.05, 0.1, 0.01, 3)
    r.scheduled = 1.0
    m = summarize([r], start=1.0, requested_input_len=1, request_rate=1.0, max_concurrency=None)
    assert m["mean_dispatch_delay_ms"] == pytest.approx(50.0)


def test_peak_output_counts_chunks_per_whole_second() -> None:
    r = request(0.0, 0.0, 0.1, 25)  # 10 chunks in each of seconds 0 and 1, 5 in second 2
    m = summarize([r], start=0.0, requested_input_len=1, request_rate=None, max_concurrency=1)
    assert m["max_output_tokens_per_s"] == 10.0


def test_peak_concurrency_per_second_counts_a_request_in_every_bucket_it_touches() -> None:
    spans = [request(send, 0.1, 0.1, 2) for send in (0.0, 1.5, 2.95)]  # end 0.2, 1.7, 3.15
    assert peak_concurrency_per_s(spans, 0.0) == 1
    spans.append(request(0.9, 0.05, 0.1, 3))  # 0.9 to 1.15: seconds 0 and 1
    assert peak_concurrency_per_s(spans, 0.0) == 2
    assert peak_concurrency_per_s([], 0.0) == 0


def test_error_groups_drop_ids_and_timings_but_keep_status_codes() -> None:
    assert (
        group_error("HTTP 429: rate limited for req 8f14e45fceea167a5a36dedd4bea2543")
        == "HTTP 429: rate limited for req N"
    )
    assert group_error("request timeout after 12.5 s") == "request timeout after N s"
    assert group_error("") == "unknown error"


def stats(cpu: float, lags_ms: list[float], wall: float = 10.0, events: int = 1000) -> WorkerStats:
    return WorkerStats(cpu_s=cpu, wall_s=wall, events=events, lag_s=[x / 1000 for x in lags_ms])


def test_client_bound_rule_cpu_and_lag() -> None:
    idle = judge(
        [stats(1.0, [0.5] * 100)],
        median_itl_ms=20.0,
        open_loop=False,
        capped=True,
        request_rate=None,
        p90_dispatch_delay_ms=None,
    )
    assert not idle.client_bound
    assert idle.figures["us_per_event"] == pytest.approx(1000.0)
    busy = judge(
        [stats(9.0, [0.5] * 100)],
        median_itl_ms=20.0,
        open_loop=False,
        capped=True,
        request_rate=None,
        p90_dispatch_delay_ms=None,
    )
    assert busy.client_bound
    assert "client CPU 90%" in busy.reasons[0]
    warm = judge(
        [stats(7.5, [0.5] * 100)],
        median_itl_ms=20.0,
        open_loop=False,
        capped=True,
        request_rate=None,
        p90_dispatch_delay_ms=None,
    )
    assert not warm.client_bound
    assert warm.warnings
    laggy = judge(
        [stats(1.0, [0.5] * 80 + [6.0] * 20)],
        median_itl_ms=20.0,
        open_loop=False,
        capped=True,
        request_rate=None,
        p90_dispatch_delay_ms=None,
    )
    assert laggy.client_bound
    assert "lag p90" in laggy.reasons[0]
    slow_decode = judge(
        [stats(1.0, [0.5] * 80 + [6.0] * 20)],
        median_itl_ms=100.0,
        open_loop=False,
        capped=True,
        request_rate=None,
        p90_dispatch_delay_ms=None,
    )
    assert not slow_decode.client_bound  # 6 ms late is within a tenth of a 100 ms gap


def test_client_bound_rule_open_loop_dispatch() -> None:
    late = judge(
        [stats(1.0, [0.5])],
        median_itl_ms=20.0,
        open_loop=True,
        capped=False,
        request_rate=10.0,
        p90_dispatch_delay_ms=30.0,
    )
    assert late.client_bound
    assert "sent late" in late.reasons[0]
    capped = judge(
        [stats(1.0, [0.5])],
        median_itl_ms=20.0,
        open_loop=True,
        capped=True,
        request_rate=10.0,
        p90_dispatch_delay_ms=30.0,
    )
    assert not capped.client_bound  # waiting for the cap is the load model, not the client
