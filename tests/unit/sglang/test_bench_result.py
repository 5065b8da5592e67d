"""bench_serving result blocks: corpus files, the 0.5.10 reference block and the odd shapes pasted text takes."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.sglang.bench_result import REQUIRED_KEYS, BenchResult, parse_bench_text

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus" / "sglang-bench"
INDEX: list[dict[str, Any]] = json.loads((CORPUS / "index.json").read_text())
# The corpus index names two fields differently from bench_serving's JSON.
CORPUS_KEYS = {"successful_requests": "completed", "output_token_throughput": "output_throughput"}

# sglang.md §5.2, rendered with the real format calls ("{:<40} {:<10}"), trailing spaces included.
REFERENCE_ROWS = [
    ("Backend:", "sglang"),
    ("Traffic request rate:", "inf"),
    ("Max request concurrency:", "64"),
    ("Successful requests:", "512"),
    ("Benchmark duration (s):", "95.43"),
    ("Total input tokens:", "524288"),
    ("Total input text tokens:", "524288"),
    ("Total generated tokens:", "524288"),
    ("Total generated tokens (retokenized):", "523901"),
    ("Request throughput (req/s):", "5.37"),
    ("Input token throughput (tok/s):", "5493.90"),
    ("Output token throughput (tok/s):", "5493.90"),
    ("Peak output token throughput (tok/s):", "6208.00"),
    ("Peak concurrent requests:", "64"),
    ("Total token throughput (tok/s):", "10987.80"),
    ("Concurrency:", "63.71"),
    ("-End-to-End Latency-", None),
    ("Mean E2E Latency (ms):", "11873.12"),
    ("Median E2E Latency (ms):", "11860.55"),
    ("P90 E2E Latency (ms):", "12101.90"),
    ("P99 E2E Latency (ms):", "12300.40"),
    ("-Time to First Token-", None),
    ("Mean TTFT (ms):", "412.30"),
    ("Median TTFT (ms):", "388.10"),
    ("P99 TTFT (ms):", "901.70"),
    ("-Time per Output Token (excl. 1st token)-", None),
    ("Mean TPOT (ms):", "11.20"),
    ("Median TPOT (ms):", "11.19"),
    ("P99 TPOT (ms):", "11.90"),
    ("-Inter-Token Latency-", None),
    ("Mean ITL (ms):", "11.20"),
    ("Median ITL (ms):", "10.80"),
    ("P95 ITL (ms):", "12.40"),
    ("P99 ITL (ms):", "30.10"),
    ("Max ITL (ms):", "402.20"),
]


def render(rows: Sequence[tuple[str, str | None]], *, close: bool = True) -> str:
    lines = ["", "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    for label, value in rows:
        if value is None:
            lines.append("{s:{c}^{n}}".format(s=label.strip("-"), n=50, c="-"))
        else:
            lines.append(f"{label:<40} {value:<10}")
    if close:
        lines.append("=" * 50)
    return "\n".join(lines) + "\n"


REFERENCE = render(REFERENCE_ROWS)


def only(text: str) -> BenchResult:
    results = parse_bench_text(text)
    assert len(results) == 1
    return results[0]


@pytest.mark.parametrize("entry", INDEX, ids=[entry["file"] for entry in INDEX])
def test_corpus_file_gives_every_expected_field(entry: dict[str, Any]) -> None:
    result = only((CORPUS / entry["file"]).read_text())
    data = result.to_json()
    for key, expected in entry["expected"].items():
        assert data[CORPUS_KEYS.get(key, key)] == expected, key
    assert data["truncated"] is False
    assert data["extra"] == {}


def test_corpus_001_newest_rows_are_mapped_and_typed() -> None:
    data = only((CORPUS / "001.log").read_text()).to_json()
    assert data["request_rate"] == "inf"
    assert data["total_input_vision_tokens"] == 0
    assert isinstance(data["total_output_tokens_retokenized"], int)
    assert data["max_output_tokens_per_s"] == 3085.0
    assert data["max_concurrent_requests"] == 120
    assert data["accept_length"] == 1.54
    assert data["p95_itl_ms"] == 73.65
    assert data["max_itl_ms"] == 13528.11
    assert data["mean_e2e_latency_ms"] == 107698.45


def test_corpus_003_without_accept_length_has_no_such_key() -> None:
    data = only((CORPUS / "003.log").read_text()).to_json()
    assert "accept_length" not in data
    assert data["concurrency"] == 79.97


def test_reference_block_maps_every_row_to_bench_serving_keys() -> None:
    result = only(REFERENCE)
    assert result.values == {
        "backend": "sglang",
        "request_rate": math.inf,
        "max_concurrency": 64,
        "completed": 512,
        "duration": 95.43,
        "total_input_tokens": 524288,
        "total_input_text_tokens": 524288,
        "total_output_tokens": 524288,
        "total_output_tokens_retokenized": 523901,
        "request_throughput": 5.37,
        "input_throughput": 5493.90,
        "output_throughput": 5493.90,
        "max_output_tokens_per_s": 6208.00,
        "max_concurrent_requests": 64,
        "total_throughput": 10987.80,
        "concurrency": 63.71,
        "mean_e2e_latency_ms": 11873.12,
        "median_e2e_latency_ms": 11860.55,
        "p90_e2e_latency_ms": 12101.90,
        "p99_e2e_latency_ms": 12300.40,
        "mean_ttft_ms": 412.30,
        "median_ttft_ms": 388.10,
        "p99_ttft_ms": 901.70,
        "mean_tpot_ms": 11.20,
        "median_tpot_ms": 11.19,
        "p99_tpot_ms": 11.90,
        "mean_itl_ms": 11.20,
        "median_itl_ms": 10.80,
        "p95_itl_ms": 12.40,
        "p99_itl_ms": 30.10,
        "max_itl_ms": 402.20,
    }
    assert result.extra == {}
    assert result.truncated is False
    assert result.line == 2


def test_reference_block_has_the_trailing_spaces_it_claims() -> None:
    assert "Backend:                                 sglang    \n" in REFERENCE


def test_to_json_is_strict_json_with_inf_as_string() -> None:
    data = only(REFERENCE).to_json()
    assert data["request_rate"] == "inf"
    assert float(data["request_rate"]) == math.inf
    assert json.loads(json.dumps(data, allow_nan=False)) == data


def test_to_json_always_has_the_required_keys() -> None:
    data = only(render([("Backend:", "sglang")])).to_json()
    for key in REQUIRED_KEYS:
        assert key in data
    assert data["backend"] == "sglang"
    assert data["median_ttft_ms"] is None
    assert data["truncated"] is False


def test_old_misspelling_maps_to_max_concurrency() -> None:
    result = only(render([("Backend:", "sglang"), ("Max reqeuest concurrency:", "16")]))
    assert result.values["max_concurrency"] == 16
    assert result.extra == {}


def test_not_set_concurrency_is_null() -> None:
    result = only(render([("Backend:", "sglang"), ("Max request concurrency:", "not set")]))
    assert "max_concurrency" in result.values
    assert result.to_json()["max_concurrency"] is None
    assert result.extra == {}


def test_truncated_block_keeps_its_rows_and_says_so() -> None:
    text = render(REFERENCE_ROWS[:20], close=False)
    result = only(text)
    assert result.truncated is True
    assert result.to_json()["truncated"] is True
    assert result.values["completed"] == 512
    assert result.values["median_e2e_latency_ms"] == 11860.55
    assert result.to_json()["median_ttft_ms"] is None


def test_two_blocks_in_one_log_come_back_in_order() -> None:
    second = render([("Backend:", "sglang-oai"), ("Successful requests:", "7")])
    text = "benchmark_args=Namespace(...)\n" + REFERENCE + "#Input tokens: 10\nnoise\n" + second
    first, other = parse_bench_text(text)
    assert (first.values["backend"], first.values["completed"]) == ("sglang", 512)
    assert (other.values["backend"], other.values["completed"]) == ("sglang-oai", 7)
    assert not first.truncated and not other.truncated
    assert other.line > first.line


def test_a_new_header_truncates_the_unfinished_block() -> None:
    text = render(REFERENCE_ROWS[:3], close=False) + REFERENCE
    first, second = parse_bench_text(text)
    assert first.truncated is True
    assert second.truncated is False
    assert second.values["median_itl_ms"] == 10.80


@pytest.mark.parametrize(
    "prefix",
    [
        "[2026-02-04 11:30:29] ",
        "[2026-01-12 05:01:32 DP0 TP0 EP0] ",
        "Mar 09 21:45:34 llm-two bench[4550]: ",
        "2026-03-09T21:45:34+0100 llm-two bench[4550]: ",
        "2025-03-09T21:45:34.123456789Z ",
        "2025-03-09T21:45:34.123456789Z [2026-02-04 11:30:29] ",
        "2025-03-07 23:50:27,531 - __main__ - INFO - ",
        "bench-1  | ",
        "<<unknown fixed-width prefix>> ",
    ],
)
def test_log_prefixes_in_front_of_rows_are_stripped(prefix: str) -> None:
    text = "".join(prefix + line + "\n" for line in REFERENCE.splitlines())
    result = only(text)
    assert result.values == only(REFERENCE).values
    assert result.extra == {}
    assert result.truncated is False


def test_crlf_ansi_and_progress_bar_redraws_are_tolerated() -> None:
    text = REFERENCE.replace("\n", "\r\n").replace("Backend:", "\x1b[32mBackend:\x1b[0m", 1)
    text = "100%|#####| 512/512 [01:35<00:00]\r" + text.lstrip("\r\n")
    result = only(text)
    assert result.values == only(REFERENCE).values


def test_trailing_spaces_stripped_and_ints_stay_ints() -> None:
    result = only(REFERENCE)
    assert isinstance(result.values["completed"], int)
    assert isinstance(result.values["duration"], float)
    assert isinstance(result.values["backend"], str)
    assert result.values["backend"] == "sglang"


def test_unknown_rows_go_to_extra_and_stray_lines_do_not() -> None:
    rows = [*REFERENCE_ROWS[:4], ("Failed requests:", "3"), ("Goodput (req/s):", "1.25"), ("Note:", "a b")]
    text = render(rows).replace("Failed requests:", "INFO: something unrelated\nFailed requests:")
    result = only(text)
    assert result.extra == {"Failed requests": 3, "Goodput (req/s)": 1.25, "Note": "a b"}


def test_unparseable_known_value_is_kept_in_extra() -> None:
    result = only(render([("Backend:", "sglang"), ("Successful requests:", "many")]))
    assert "completed" not in result.values
    assert result.extra == {"Successful requests": "many"}


def test_trace_request_rate_is_kept_as_text() -> None:
    result = only(render([("Traffic request rate:", "trace"), ("Max request concurrency:", "8")]))
    assert result.values["request_rate"] == "trace"


def test_cache_block_of_0_5_14_and_later() -> None:
    rows = [
        *REFERENCE_ROWS[:3],
        ("-Cache Hit Details-", None),
        ("Total prompt tokens:", "524288"),
        ("Total cached tokens:", "262144"),
        ("  Device:", "200000"),
        ("  Host:", "62144"),
        ("Cache hit rate:", "50.0%"),
        ("  Device:", "76.3%"),
        ("  Host:", "23.7%"),
    ]
    result = only(render(rows))
    assert result.values["total_prompt_tokens"] == 524288
    assert result.values["total_cached_tokens"] == 262144
    assert result.values["device_cached_tokens"] == 200000
    assert result.values["host_cached_tokens"] == 62144
    assert result.values["cache_hit_rate_pct"] == 50.0
    assert result.extra == {"Cache hit rate: Device": 76.3, "Cache hit rate: Host": 23.7}


def test_storage_tier_row_names_its_backend() -> None:
    rows = [("Total cached tokens:", "10"), ("  Storage (hf3fs):", "4"), ("Cache hit rate:", "5.0%")]
    result = only(render(rows))
    assert result.values["storage_cached_tokens"] == 4
    assert result.values["storage_backend"] == "hf3fs"


def test_summary_names_the_numbers_and_the_truncation() -> None:
    summary = only(render(REFERENCE_ROWS[:5], close=False)).summary()
    assert "sglang" in summary
    assert "512 ok" in summary
    assert "max concurrency 64" in summary
    assert summary.endswith("(truncated)")
    full = only(REFERENCE).summary()
    assert "TTFT p50 388.10 ms" in full
    assert "(truncated)" not in full


def test_text_without_a_block_gives_nothing() -> None:
    assert parse_bench_text("Backend: sglang\nSuccessful requests: 5\n") == []


CORPUS_TEXTS = [(CORPUS / entry["file"]).read_text() for entry in INDEX] + [REFERENCE]


@settings(max_examples=300)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    for result in parse_bench_text(text):
        json.dumps(result.to_json(), allow_nan=False)
        result.summary()


@settings(max_examples=300)
@given(st.sampled_from(CORPUS_TEXTS), st.data())
def test_truncated_corpus_blocks_never_raise(text: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    results = parse_bench_text(text[start:end])
    for result in results:
        json.dumps(result.to_json(), allow_nan=False)
    if start == 0 and end == len(text):
        assert len(results) == 1
        assert results[0].truncated is False


def _print_0_5_23() -> str:
    """The block `sglang.benchmark.serving` 0.5.23 prints (`benchmark/serving.py` after the run,
    `benchmark/goodput.py` `print_goodput`), with its own format calls, `--goodput` and
    `--cache-report` on: P90/P95 rows in every latency section, and a Goodput section."""
    out: list[str] = []

    def row(label: str, value: object, spec: str = "<10") -> None:
        out.append(("{:<40} {:" + spec + "}").format(label, value))

    def rule(title: str) -> None:
        out.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))

    out.append("\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    row("Backend:", "sglang-oai")
    row("Traffic request rate:", float("inf"))
    row("Max request concurrency:", 64)
    row("Successful requests:", 512)
    row("Benchmark duration (s):", 95.432, "<10.2f")
    for label, value in (("Total input tokens:", 524288), ("Total input text tokens:", 524288)):
        row(label, value)
    row("Total generated tokens:", 131072)
    row("Total generated tokens (retokenized):", 131070)
    for label, number in (
        ("Request throughput (req/s):", 5.365),
        ("Input token throughput (tok/s):", 5493.96),
        ("Output token throughput (tok/s):", 1373.49),
        ("Peak output token throughput (tok/s):", 2304.0),
    ):
        row(label, number, "<10.2f")
    row("Peak concurrent requests:", 64)
    row("Total token throughput (tok/s):", 6867.45, "<10.2f")
    row("Concurrency:", 63.41, "<10.2f")
    out.append("{s:{c}^{n}}".format(s="Goodput", n=50, c="-"))
    row("SLOs (ms):", "ttft:2000 tpot:50")
    row("Request goodput (req/s):", 4.9, "<10.2f")
    row("SLO attainment (%):", 91.3, "<10.2f")
    row("TTFT SLO attainment (%):", 95.1, "<10.2f")
    for title, metric, names in (
        ("End-to-End Latency", "E2E Latency", ("Mean", "Median", "P90", "P95", "P99")),
        ("Time to First Token", "TTFT", ("Mean", "Median", "P90", "P95", "P99")),
        ("Time per Output Token (excl. 1st token)", "TPOT", ("Mean", "Median", "P90", "P95", "P99")),
        ("Inter-Token Latency", "ITL", ("Mean", "Median", "P90", "P95", "P99", "Max")),
    ):
        rule(title)
        for i, name in enumerate(names):
            row(f"{name} {metric} (ms):", 10.0 * (i + 1) + len(metric), "<10.2f")
    rule("Cache Hit Details")
    row("Total prompt tokens:", 524288)
    row("Total cached tokens:", 262144)
    out.append("{:<40} {:.1f}%".format("Cache hit rate:", 50.0))
    out.append("=" * 50)
    return "\n".join(out) + "\n"


def test_block_of_0_5_23_benchmark_serving() -> None:
    result = only(_print_0_5_23())
    assert result.truncated is False
    values = result.values
    assert values["backend"] == "sglang-oai"
    assert values["request_rate"] == math.inf
    assert (values["max_concurrency"], values["completed"]) == (64, 512)
    assert values["output_throughput"] == 1373.49
    assert values["max_output_tokens_per_s"] == 2304.0
    assert values["request_goodput"] == 4.9
    assert (values["p90_ttft_ms"], values["p95_ttft_ms"], values["median_ttft_ms"]) == (34.0, 44.0, 24.0)
    assert (values["p95_e2e_latency_ms"], values["p95_itl_ms"], values["max_itl_ms"]) == (51.0, 43.0, 63.0)
    assert values["p90_tpot_ms"] == 34.0
    assert values["cache_hit_rate_pct"] == 50.0
    assert result.extra == {
        "SLOs (ms)": "ttft:2000 tpot:50",
        "SLO attainment (%)": 91.3,
        "TTFT SLO attainment (%)": 95.1,
    }
