"""The streaming log parser against the real corpus and focused synthetic inputs."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

import bot.sglang.log as log_module
from bot.sglang.log import LogReport, parse_log_lines, parse_log_stream, parse_log_text

CORPUS_REL = Path("corpus") / "sglang-logs"
INDEX: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[2] / "fixtures" / CORPUS_REL / "index.json").read_text()
)
RELEASES_REL = Path("sglang-releases")
RELEASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[2] / "fixtures" / RELEASES_REL / "index.json").read_text()
)
JOURNAL = "Mar 09 21:45:34 llm-two sglang-qwen[4550]: "
DOCKER = "2026-08-01T23:37:40.123456789Z "
TOP_KEYS = {
    "server_args",
    "parsed",
    "effective",
    "per_rank",
    "ready",
    "startup_error",
    "warnings",
    "starts",
    "server_args_line",
    "server_args_complete",
    "server_args_form",
    "server_args_nested",
    "unparsed",
    "ready_line",
    "stage",
    "errors",
    "distributed_init",
    "kv_cache",
    "weights",
    "cuda_graph",
    "mamba_cache",
    "state_cache",
    "mamba_cap",
    "startup_error_chain",
    "lines",
    "starts_dropped",
}
EFFECTIVE_KEYS = {
    "max_running_requests",
    "max_total_num_tokens",
    "context_len",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "available_gpu_mem_gb",
}


def _read(fixtures_dir: Path, name: str) -> bytes:
    return (fixtures_dir / CORPUS_REL / name).read_bytes()


def _text(fixtures_dir: Path, name: str) -> str:
    return _read(fixtures_dir, name).decode("utf-8", "replace")


def _observed(report: LogReport) -> dict[str, Any]:
    """The report's values under the corpus index's field names."""
    data = report.to_json()
    return {
        "server_args_max_running_requests": data["parsed"]["max_running_requests"],
        "max_running_requests": data["effective"]["max_running_requests"],
        "max_total_num_tokens": data["effective"]["max_total_num_tokens"],
        "context_len": data["effective"]["context_len"],
        "chunked_prefill_size": data["effective"]["chunked_prefill_size"],
        "available_gpu_mem_gb": data["effective"]["available_gpu_mem_gb"],
        "tp_size": data["parsed"]["tp_size"],
        "model_path": data["parsed"]["model_path"],
        "reached_ready": data["ready"],
        "startup_error": data["startup_error"],
    }


def _keepends(text: str) -> list[str]:
    """Lines with their `\n`, split at `\n` only (012.log has CRLF, others raw `\r`)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _prefixed(text: str, prefix: str) -> str:
    """Prefix every line; a final newline stays a terminator, not a new empty line."""
    body, newline = (text[:-1], "\n") if text.endswith("\n") else (text, "")
    return "\n".join(prefix + line for line in body.split("\n")) + newline


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_corpus_expected_fields_stream(fixtures_dir: Path, entry: dict[str, Any]) -> None:
    report = parse_log_stream(io.BytesIO(_read(fixtures_dir, entry["file"])))
    assert set(entry["expected"]) == set(_observed(report))
    assert _observed(report) == entry["expected"]


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_corpus_expected_fields_text_and_lines(fixtures_dir: Path, entry: dict[str, Any]) -> None:
    text = _text(fixtures_dir, entry["file"])
    assert _observed(parse_log_text(text)) == entry["expected"]
    assert _observed(parse_log_lines(_keepends(text))) == entry["expected"]


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_corpus_json_shape(fixtures_dir: Path, entry: dict[str, Any]) -> None:
    data = parse_log_stream(io.BytesIO(_read(fixtures_dir, entry["file"]))).to_json()
    json.dumps(data, allow_nan=False)
    assert set(data) == TOP_KEYS
    assert set(data["effective"]) == EFFECTIVE_KEYS
    assert len(data["starts"]) == 1
    assert data["starts"][0]["first_line"] == 1
    assert data["starts"][0]["last_line"] == data["lines"]
    assert data["starts"][0]["effective"] == data["effective"]
    for warning in data["warnings"]:
        assert {"line", "text", "level", "source", "rank", "count"} <= set(warning)
        assert warning["line"] >= 1


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_corpus_tiny_chunks_equal_whole_text(fixtures_dir: Path, entry: dict[str, Any]) -> None:
    data = _read(fixtures_dir, entry["file"])
    whole = parse_log_text(data.decode("utf-8", "replace")).to_json()
    assert parse_log_stream(io.BytesIO(data), chunk_size=7).to_json() == whole
    assert parse_log_stream(io.BytesIO(data), chunk_size=4093).to_json() == whole


def test_chunk_size_one(fixtures_dir: Path) -> None:
    data = _read(fixtures_dir, "013.log")
    assert (
        parse_log_stream(io.BytesIO(data), chunk_size=1).to_json() == parse_log_text(data.decode()).to_json()
    )


@pytest.mark.parametrize("name", ["014.log", "021.log", "010.log"])
def test_journald_prefixed_copy_gives_same_report(fixtures_dir: Path, name: str) -> None:
    text = _text(fixtures_dir, name)
    plain = parse_log_text(text).to_json()
    journal = parse_log_text(_prefixed(text, JOURNAL)).to_json()
    assert journal == plain
    assert journal["ready"] is (name != "010.log")


def test_journald_prefixed_014_values(fixtures_dir: Path) -> None:
    report = parse_log_stream(io.BytesIO(_prefixed(_text(fixtures_dir, "014.log"), JOURNAL).encode()), 512)
    expected = next(e for e in INDEX if e["file"] == "014.log")["expected"]
    assert _observed(report) == expected


@pytest.mark.parametrize("name", ["014.log", "026.log", "013.log"])
def test_docker_timestamp_prefixed_copy_gives_same_report(fixtures_dir: Path, name: str) -> None:
    text = _text(fixtures_dir, name)
    assert parse_log_text(_prefixed(text, DOCKER)).to_json() == parse_log_text(text).to_json()


@pytest.mark.parametrize("name", ["012.log", "026.log", "010.log", "014.log"])
def test_python_logger_wrapped_copy_gives_same_values(fixtures_dir: Path, name: str) -> None:
    text = _text(fixtures_dir, name)
    wrapped = _prefixed(text, "2025-03-07 23:50:27,531 - __main__ - INFO - ")
    assert _observed(parse_log_text(wrapped)) == _observed(parse_log_text(text))


def test_013_effective_is_tp0_though_tp1_printed_first() -> None:
    text = (
        "[2025-01-17 01:52:02 TP1] max_total_num_tokens=16000, max_prefill_tokens=16384, "
        "max_running_requests=999, context_len=16384\n"
        "[2025-01-17 01:52:02 TP0] max_total_num_tokens=16384, max_prefill_tokens=16384, "
        "max_running_requests=2049, context_len=16384\n"
    )
    report = parse_log_text(text)
    assert list(report.per_rank) == ["TP1", "TP0"]
    assert report.per_rank["TP1"]["max_running_requests"] == 999
    assert report.per_rank["TP0"]["line"] == 2
    assert report.effective["max_running_requests"] == 2049
    assert report.effective["max_total_num_tokens"] == 16384


def test_013_corpus_per_rank(fixtures_dir: Path) -> None:
    report = parse_log_text(_text(fixtures_dir, "013.log"))
    assert list(report.per_rank) == ["TP1", "TP0"]
    assert report.per_rank["TP0"]["line"] == 7


def test_dp_rank_labels(fixtures_dir: Path) -> None:
    report = parse_log_text(_text(fixtures_dir, "021.log"))
    assert list(report.per_rank) == ["DP0 TP0 EP0"]
    ranks = {entry["rank"] for entry in report.to_json()["kv_cache"]}
    assert "DP15 TP15 EP15" in ranks


def test_lowest_rank_wins_over_print_order() -> None:
    text = (
        "[2026-01-12 05:01:32 DP1 TP8 EP8] max_total_num_tokens=5, max_prefill_tokens=1, max_running_requests=1, "
        "context_len=8\n"
        "[2026-01-12 05:01:32 DP0 TP0 EP0] max_total_num_tokens=7, max_prefill_tokens=1, max_running_requests=2, "
        "context_len=8\n"
    )
    assert parse_log_text(text).effective["max_total_num_tokens"] == 7


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "[2024-12-13 01:45:02 TP0] max_total_num_tokens=56524, max_prefill_tokens=16384, "
            "max_running_requests=2049, context_len=32768",
            (56524, None, 16384, 2049, 32768, None),
        ),
        (
            "[2025-03-01 01:45:02 TP0] max_total_num_tokens=56524, chunked_prefill_size=2048, "
            "max_prefill_tokens=16384, max_running_requests=2049, context_len=32768",
            (56524, 2048, 16384, 2049, 32768, None),
        ),
        (
            "[2025-10-01 01:45:02] max_total_num_tokens=1528503, chunked_prefill_size=8192, "
            "max_prefill_tokens=16384, max_running_requests=4096, context_len=40960, available_gpu_mem=11.93 GB",
            (1528503, 8192, 16384, 4096, 40960, 11.93),
        ),
    ],
)
def test_capacity_line_versions(line: str, expected: tuple[Any, ...]) -> None:
    eff = parse_log_text(line).effective
    keys = (
        "max_total_num_tokens",
        "chunked_prefill_size",
        "max_prefill_tokens",
        "max_running_requests",
        "context_len",
        "available_gpu_mem_gb",
    )
    assert tuple(eff[k] for k in keys) == expected


def test_cpu_capacity_line() -> None:
    line = (
        "[2025-10-01 01:45:02] max_total_num_tokens=100, chunked_prefill_size=64, max_prefill_tokens=64, "
        "max_running_requests=8, context_len=512, available_cpu_mem=60.50 GB"
    )
    report = parse_log_text(line)
    assert report.per_rank[""]["available_cpu_mem_gb"] == 60.5
    assert report.effective["available_gpu_mem_gb"] is None
    assert report.effective["max_running_requests"] == 8


def test_decoy_max_total_tokens_is_not_the_capacity_line() -> None:
    decoy = (
        "[2025-05-01 10:00:00 TP0] max_total_tokens=131072 is larger than the profiled value -561981. "
        "Use the profiled value instead."
    )
    report = parse_log_text(decoy)
    assert report.per_rank == {}
    assert report.effective["max_total_num_tokens"] is None
    real = (
        "[2025-05-01 10:00:01 TP0] max_total_num_tokens=90000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=512, context_len=32768, available_gpu_mem=3.10 GB"
    )
    assert parse_log_text(decoy + "\n" + real).effective["max_total_num_tokens"] == 90000


def test_chunked_prefill_falls_back_to_server_args_only_when_missing() -> None:
    args = (
        "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='m', chunked_prefill_size=4096, tp_size=1)\n"
    )
    old = (
        "[2025-01-01 00:00:09 TP0] max_total_num_tokens=1, max_prefill_tokens=1, max_running_requests=1, "
        "context_len=2\n"
    )
    new = (
        "[2025-01-01 00:00:09] max_total_num_tokens=1, chunked_prefill_size=-1, max_prefill_tokens=1, "
        "max_running_requests=1, context_len=2\n"
    )
    assert parse_log_text(args + old).effective["chunked_prefill_size"] == 4096
    assert parse_log_text(args + new).effective["chunked_prefill_size"] == -1
    assert parse_log_text(args).effective["chunked_prefill_size"] == 4096


def test_capacity_line_is_not_readiness(fixtures_dir: Path) -> None:
    report = parse_log_text(_text(fixtures_dir, "026.log"))
    assert report.effective["max_total_num_tokens"] == 326217
    assert report.ready is False
    assert report.to_json()["ready_line"] is None


def test_ready_line_and_stage(fixtures_dir: Path) -> None:
    data = parse_log_text(_text(fixtures_dir, "014.log")).to_json()
    assert data["ready_line"] == 179
    assert data["stage"] == "ready"
    silent = parse_log_text(_text(fixtures_dir, "015.log")).to_json()
    assert silent["stage"] == "cuda_graph"
    assert silent["errors"] == []


def test_kv_cache_variants(fixtures_dir: Path) -> None:
    text = "\n".join(
        [
            "[2025-01-01 00:00:00 TP0] KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB.",
            "[2025-06-01 00:00:00 TP0] KV Cache is allocated. #tokens: 903439, K size: 13.79 GB, V size: 13.79 GB",
            "[2025-06-01 00:00:00 TP1] KV Cache is allocated. #tokens: 326265, KV size: 21.35 GB",
            "[2026-08-01 23:40:01] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 148717, K size: 10.21 GB, "
            "V size: 10.21 GB",
        ]
    )
    kv = parse_log_text(text).to_json()["kv_cache"]
    assert kv[0] == {"line": 1, "rank": "TP0", "k_size_gb": 27.13, "v_size_gb": 27.13}
    assert kv[1]["tokens"] == 903439
    assert kv[2] == {"line": 3, "rank": "TP1", "tokens": 326265, "kv_size_gb": 21.35}
    assert kv[3]["dtype"] == "torch.bfloat16"
    assert kv[3]["tokens"] == 148717
    corpus_kv = parse_log_text(_text(fixtures_dir, "014.log")).to_json()["kv_cache"]
    # the window pool, the full pool, SWAKVPool's total of both, the DFLASH draft's pool
    assert [entry["tokens"] for entry in corpus_kv] == [148717, 185897, 185897, 185897]
    assert [entry.get("state") for entry in corpus_kv] == [None, None, "hybrid_swa", None]


def test_weight_load_lines(fixtures_dir: Path) -> None:
    weights = parse_log_text(_text(fixtures_dir, "014.log")).to_json()["weights"]
    assert weights[0] == {"line": 35, "rank": "", "phase": "begin", "avail_mem_gb": 115.36}
    end = weights[1]
    assert end["phase"] == "end"
    assert end["elapsed_s"] == 109.33
    assert end["type"] == "LagunaForCausalLM"
    assert end["quant"] == "compressed-tensors"
    assert (end["avail_mem_gb"], end["mem_usage_gb"]) == (47.8, 67.56)


def test_cuda_graph_lines(fixtures_dir: Path) -> None:
    graphs = parse_log_text(_text(fixtures_dir, "014.log")).to_json()["cuda_graph"]
    ends = [g for g in graphs if g["phase"] == "end"]
    assert [g["kind"] for g in ends] == [
        "target prefill CUDA graph",
        "target verify CUDA graph",
        "draft verify CUDA graph",
    ]
    assert ends[0]["elapsed_s"] == 216.19
    assert (ends[0]["mem_usage_gb"], ends[0]["avail_mem_gb"]) == (5.24, 7.27)
    text = "\n".join(
        [
            "[2024-12-13 01:45:01 TP0] Capture cuda graph end. Time elapsed: 6.57 s",
            "[2026-03-09 21:46:55 TP0] Capture cuda graph end. Time elapsed: 12.02 s. mem usage=1.35 GB. avail mem=12.55 GB.",
            "[2026-03-09 21:47:38 TP0] Capture piecewise CUDA graph end. Time elapsed: 43.10 s. mem usage=0.62 GB. "
            "avail mem=11.93 GB.",
            "[2026-01-12 05:01:12 DP0 TP0 EP0] Capture npu graph end. Time elapsed: 43.92 s. mem usage=7.90 GB. "
            "avail mem=7.63 GB.",
            "[2026-03-09 21:46:43 TP0] Capture cuda graph bs [1, 2, 4, 8]",
        ]
    )
    synthetic = parse_log_text(text).to_json()["cuda_graph"]
    assert [(g["kind"], g.get("elapsed_s")) for g in synthetic] == [
        ("cuda graph", 6.57),
        ("cuda graph", 12.02),
        ("piecewise CUDA graph", 43.10),
        ("npu graph", 43.92),
    ]
    assert synthetic[2]["avail_mem_gb"] == 11.93


@pytest.mark.parametrize(
    ("lines", "error"),
    [
        (
            [
                "[2026-03-09 21:46:42 TP0] Scheduler hit an exception: Traceback (most recent call last):",
                '  File "/sglang/srt/model_executor/model_runner.py", line 10, in init_memory_pool',
                '    raise RuntimeError("Not enough memory. Please try to increase --mem-fraction-static.")',
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                "Current value: mem_fraction_static=0.5",
                "[2026-03-09 21:46:42] Received sigquit from a child process. It usually means the child failed.",
            ],
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.5",
        ),
        (
            [
                "Traceback (most recent call last):",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity",
            ],
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity",
        ),
        (
            [
                "usage: sglang serve [-h] --model-path MODEL_PATH",
                "sglang serve: error: unrecognized arguments: --foo",
            ],
            "sglang serve: error: unrecognized arguments: --foo",
        ),
        (
            ["launch_server.py: error: argument --tp-size: invalid int value: 'x'"],
            "launch_server.py: error: argument --tp-size: invalid int value: 'x'",
        ),
        (
            ["[2026-03-09 21:47:50] Initialization failed. warmup error: Traceback (most recent call last):"],
            "Initialization failed. warmup error: Traceback (most recent call last):",
        ),
        (
            [
                "[2026-03-09 21:46:50 TP0] Capture cuda graph failed: CUDA error: out of memory",
                "Possible solutions:",
                "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
            ],
            "Capture cuda graph failed: CUDA error: out of memory",
        ),
        (
            [
                "[2026-03-09 21:46:50 TP3] Scheduler hit an exception: Traceback (most recent call last):",
                "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error",
            ],
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error",
        ),
        (
            [
                "[2026-03-09 21:46:42] Received sigquit from a child process. It usually means the child failed."
            ],
            "Received sigquit from a child process. It usually means the child failed.",
        ),
    ],
)
def test_fatal_errors(lines: list[str], error: str) -> None:
    report = parse_log_text("\n".join(lines))
    assert report.startup_error == error
    assert report.ready is False
    assert report.to_json()["stage"] == "failed"


@pytest.mark.parametrize(
    "line",
    [
        "E0227 14:34:03.337708 3833148 rdma_transport.cpp:256] Failed to register memory region with context 0",
        "[2026-02-25 16:33:59] tpgds-aihub0006:3996242:3996242 [2] misc/socket.cc:578 NCCL WARN socketPollConnect: "
        "connect to 10.82.101.249<54709> returned Connection refused, exceeded error retry count after 35 attempts",
        "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There appear "
        "to be 1 leaked semaphore objects to clean up at shutdown",
        "[2026-02-27 14:33:22 TP6] Ignore import error when loading sglang.srt.models.glmasr: cannot import name",
        '    raise RuntimeError(f"NCCL error: {error_str}")',
        "WARNING: Logging before InitGoogleLogging() is written to STDERR",
        "[2026-02-27 14:33:22 TP6] ValueError: logged by a rank, not a traceback's last line",
    ],
)
def test_noise_is_not_fatal(line: str) -> None:
    report = parse_log_text(line)
    assert report.startup_error is None
    assert report.to_json()["errors"] == []


def test_error_after_ready_is_not_a_startup_error() -> None:
    text = "\n".join(
        [
            "[2026-03-09 21:47:43] The server is fired up and ready to roll!",
            "Traceback (most recent call last):",
            "ValueError: bad request",
        ]
    )
    data = parse_log_text(text).to_json()
    assert data["ready"] is True
    assert data["startup_error"] is None
    assert data["errors"] == [
        {"line": 3, "text": "ValueError: bad request", "severity": "fatal", "rank": "", "after_ready": True}
    ]


def test_startup_error_is_the_fatal_line_not_the_sigquit(fixtures_dir: Path) -> None:
    data = parse_log_text(_text(fixtures_dir, "010.log")).to_json()
    assert [e["severity"] for e in data["errors"]] == ["weak", "fatal", "weak"]
    assert data["errors"][1]["line"] == 88


def test_warnings_with_levels_and_line_numbers(fixtures_dir: Path) -> None:
    w14 = parse_log_text(_text(fixtures_dir, "014.log")).warnings
    assert {
        "line": 11,
        "text": "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
        "setting --max-running-requests.",
        "level": None,
        "source": None,
        "rank": "",
        "flag": "max_running_requests",
        "count": 1,
    } in w14
    assert any(w["line"] == 4 and "'--cuda-graph-max-bs' is deprecated" in w["text"] for w in w14)
    w21 = parse_log_text(_text(fixtures_dir, "021.log")).warnings
    dp = next(w for w in w21 if w["text"].startswith("DP attention is enabled."))
    assert (dp["line"], dp["level"], dp["source"]) == (2, "WARNING", "server_args.py:1780")
    assert dp["text"].endswith("to avoid MoE kernel issues.")  # trailing space stripped
    w08 = parse_log_text(_text(fixtures_dir, "008.log")).warnings
    assert any(w["line"] == 4 and w["source"] == "server_args.py:2326" for w in w08)


def test_bare_post_init_warning_and_repeats() -> None:
    text = "\n".join(
        [
            "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
            "setting --max-running-requests.",
            "[2026-02-27 14:33:21 TP0] Custom allreduce is disabled because this process group spans across nodes.",
            "[2026-02-27 14:33:21 TP1] Custom allreduce is disabled because this process group spans across nodes.",
        ]
    )
    report = parse_log_text(text)
    assert [(w["line"], w["count"]) for w in report.warnings] == [(1, 1), (2, 2)]
    assert report.to_json()["starts"][0]["warnings_count"] == 3


def _concat(*texts: str) -> str:
    return "\n".join(t.rstrip("\n") for t in texts) + "\n"


def test_multi_start_concatenated_corpus(fixtures_dir: Path) -> None:
    first, second = _text(fixtures_dir, "016.log"), _text(fixtures_dir, "014.log")
    n_first = len(first.rstrip("\n").split("\n"))
    report = parse_log_text(_concat(first, second))
    data = report.to_json()
    assert len(data["starts"]) == 2
    assert data["parsed"]["model_path"] == "poolside/Laguna-S-2.1-INT4"
    assert data["effective"]["max_running_requests"] == 48
    assert data["starts"][0]["parsed"]["model_path"] == "meta-llama/Llama-3.2-3B"
    assert data["starts"][0]["effective"]["max_running_requests"] == 2048
    assert data["starts"][0]["ready"] is True
    # 014's post-init warnings (its lines 4, 10, 11) print before its server_args and belong to it.
    assert data["starts"][1]["first_line"] == n_first + 4
    assert data["starts"][0]["last_line"] == n_first + 3
    assert [w["line"] - n_first for w in data["warnings"]] == [4, 10, 11]
    assert data["starts"][1]["last_line"] == data["lines"]
    assert data["server_args_line"] == n_first + 12


def test_multi_start_failed_then_ready(fixtures_dir: Path) -> None:
    report = parse_log_text(_concat(_text(fixtures_dir, "010.log"), _text(fixtures_dir, "016.log")))
    starts = report.to_json()["starts"]
    assert [s["startup_error"] for s in starts] == [
        "RuntimeError: NCCL error: remote process exited or there was a network error",
        None,
    ]
    assert [s["ready"] for s in starts] == [False, True]
    assert [s["has_server_args"] for s in starts] == [False, True]


def test_journald_started_line_splits_starts(fixtures_dir: Path) -> None:
    text = _concat(
        _prefixed(_text(fixtures_dir, "012.log").rstrip("\n"), JOURNAL),
        "Mar 09 21:50:00 llm-two systemd[1]: Started sglang-qwen.service - SGLang server.",
        _prefixed(_text(fixtures_dir, "013.log").rstrip("\n"), JOURNAL),
    )
    starts = parse_log_text(text).to_json()["starts"]
    assert len(starts) == 2
    assert starts[1]["first_line"] == 10
    assert starts[0]["effective"]["max_total_num_tokens"] == 56524
    assert starts[1]["effective"]["max_total_num_tokens"] == 16384


def test_journald_pid_change_splits_starts(fixtures_dir: Path) -> None:
    text = _concat(
        _prefixed(_text(fixtures_dir, "026.log").rstrip("\n"), "Mar 09 21:45:34 llm-two sglang[100]: "),
        _prefixed(_text(fixtures_dir, "009.log").rstrip("\n"), "Mar 09 21:55:34 llm-two sglang[200]: "),
    )
    report = parse_log_text(text)
    assert len(report.starts) == 2
    assert report.starts[0].startup_error == "RuntimeError: open: Address family not supported by protocol"
    assert report.ready is True
    assert report.effective["max_total_num_tokens"] == 326265


def test_single_start_from_warnings_only() -> None:
    report = parse_log_text(
        "[2026-02-27 14:33:03] WARNING server_args.py:1: a\n[2026-02-27 14:33:03] WARNING x.py:2: b"
    )
    assert len(report.starts) == 1
    assert [w["line"] for w in report.warnings] == [1, 2]


def test_empty_input() -> None:
    data = parse_log_text("").to_json()
    assert data["lines"] == 0
    assert data["server_args"] is None
    assert data["ready"] is False
    assert len(data["starts"]) == 1
    assert parse_log_stream(io.BytesIO(b"")).to_json() == data


def test_line_counting_matches_between_entry_points() -> None:
    text = "a\r\nb\n\nlast without newline"
    assert parse_log_text(text).lines == 4
    assert parse_log_stream(io.BytesIO(text.encode())).lines == 4
    assert parse_log_lines(["a\r\n", "b\n", "\n", "last without newline"]).lines == 4
    assert parse_log_text("x\n").lines == 1


def test_overlong_line_is_truncated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_module, "MAX_LINE_BYTES", 200)
    args = (
        "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp_size=2, "
        + "x_pad='"
        + "p" * 400
        + "')"
    )
    hidden = "y" * 300 + " The server is fired up and ready to roll!"
    text = "\n".join([args, hidden, "[2025-01-01 00:00:09] done"]) + "\n"
    expected = parse_log_text(text).to_json()
    assert expected["server_args"] == {"model_path": "m", "tp_size": 2}
    assert expected["server_args_complete"] is False
    assert expected["ready"] is False  # the keyword was past the cap
    assert expected["lines"] == 3
    for chunk in (1, 7, 64, 150, 250, 100000):
        assert parse_log_stream(io.BytesIO(text.encode()), chunk_size=chunk).to_json() == expected


def test_summary_shows_parsed_and_effective_side_by_side(fixtures_dir: Path) -> None:
    summary = parse_log_text(_text(fixtures_dir, "021.log")).summary()
    assert "parsed=256 effective=16" in summary
    assert "status: ready" in summary
    assert "tp=16" in summary
    assert 2 <= len(summary.splitlines()) <= 8
    failed = parse_log_text(_text(fixtures_dir, "010.log")).summary()
    assert "FAILED: RuntimeError: NCCL error" in failed
    silent = parse_log_text(_text(fixtures_dir, "015.log")).summary()
    assert "not ready (last stage: cuda_graph)" in silent
    assert "warnings: 3" in silent


def test_to_json_is_a_copy(fixtures_dir: Path) -> None:
    report = parse_log_text(_text(fixtures_dir, "014.log"))
    data = report.to_json()
    data["server_args"]["model_path"] = "changed"
    data["per_rank"].clear()
    assert report.to_json()["server_args"]["model_path"] == "poolside/Laguna-S-2.1-INT4"
    assert report.per_rank


def test_traceback_source_line_quoting_server_args_is_not_a_new_start() -> None:
    text = "\n".join(
        [
            "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp_size=2)",
            "[2026-01-01 00:00:01 TP0] Load weight begin. avail mem=10.00 GB",
            "Traceback (most recent call last):",
            '  File "engine.py", line 640, in _launch_subprocesses',
            '    logger.info(f"server_args={server_args.resolved_dict()}")',
            "RuntimeError: boom",
        ]
    )
    report = parse_log_text(text)
    assert len(report.starts) == 1
    assert report.parsed["model_path"] == "m"
    assert report.startup_error == "RuntimeError: boom"


def test_the_profiled_value_adjustment_is_a_warning_not_capacity() -> None:
    report = parse_log_text(
        "[2026-01-01 00:00:00 TP0] max_total_tokens=131072 is larger than the profiled value -561981. "
        "Use the profiled value instead.\n"
    ).to_json()
    assert report["effective"]["max_total_num_tokens"] is None
    assert [w["text"][:40] for w in report["warnings"]] == ["max_total_tokens=131072 is larger than t"]


# --- each release's lines, as its sources print them (fixtures/sglang-releases/README.md) ----


def _release_observed(report: LogReport) -> dict[str, Any]:
    data = report.to_json()
    kv = [entry for entry in data["kv_cache"] if entry["rank"] in ("", "TP0")]
    graphs = [g for g in data["cuda_graph"] if g["phase"] == "end" and g["rank"] in ("", "TP0")]
    return {
        **_observed(report),
        "cuda_graph_max_bs": data["parsed"]["cuda_graph_max_bs"],
        "kv_tokens": kv[0]["tokens"] if kv else None,
        "graph_capture_s": round(sum(g["elapsed_s"] for g in graphs), 2),
    }


@pytest.mark.parametrize("entry", RELEASES, ids=[e["sglang_version"] for e in RELEASES])
def test_release_lines_expected_fields(fixtures_dir: Path, entry: dict[str, Any]) -> None:
    data = (fixtures_dir / RELEASES_REL / entry["file"]).read_bytes()
    for report in (
        parse_log_stream(io.BytesIO(data)),
        parse_log_stream(io.BytesIO(data), chunk_size=511),
        parse_log_text(data.decode()),
        parse_log_lines(_keepends(data.decode())),
    ):
        assert _release_observed(report) == entry["expected"]
        json_data = report.to_json()
        assert json_data["server_args_form"] == entry["server_args_form"]
        assert json_data["server_args_complete"] is True
        assert json_data["unparsed"] == {}
        assert set(json_data) == TOP_KEYS


@pytest.mark.parametrize("entry", RELEASES, ids=[e["sglang_version"] for e in RELEASES])
def test_release_lines_behind_journald_prefix(fixtures_dir: Path, entry: dict[str, Any]) -> None:
    text = (fixtures_dir / RELEASES_REL / entry["file"]).read_text()
    assert _release_observed(parse_log_text(_prefixed(text, JOURNAL))) == entry["expected"]


def test_release_0_5_23_graph_settings_read_from_the_nested_dict(fixtures_dir: Path) -> None:
    data = parse_log_text((fixtures_dir / RELEASES_REL / "0.5.23.log").read_text()).to_json()
    assert "cuda_graph_max_bs" not in data["server_args"]["cuda_graph_config"]
    assert data["server_args"]["cuda_graph_config"]["decode"]["max_bs"] == 48
    assert data["parsed"]["cuda_graph_max_bs"] == 48
    assert data["parsed"]["disable_piecewise_cuda_graph"] is False
    assert data["server_args"]["cuda_graph_bs"] == [1, 2, 4, 8, 12, 16, 24, 32, 40, 48]
    assert data["server_args_nested"]["cuda_graph_max_bs"] == "cuda_graph_config.decode.max_bs"
    assert data["server_args_nested"]["disable_piecewise_cuda_graph"] == "cuda_graph_config.prefill.backend"
    begin = [g for g in data["cuda_graph"] if g["rank"] == "TP0" and g["phase"] == "begin"]
    assert [(g["kind"], g["backend"]) for g in begin] == [
        ("target prefill CUDA graph", "breakable"),
        ("target decode CUDA graph", "full"),
    ]
    assert begin[0]["max_num_tokens"] == 8192
    assert begin[1]["num_tokens_per_req"] == 1
    decode_end = [
        g for g in data["cuda_graph"] if g["rank"] == "TP0" and g["kind"] == "target decode CUDA graph"
    ]
    assert decode_end[-1]["max_bs"] == 48
    assert decode_end[-1]["elapsed_s"] == 6.93
    assert data["kv_cache"][0]["dtype"] == "torch.bfloat16"


def test_release_0_5_9_and_0_5_10_print_the_flat_fields(fixtures_dir: Path) -> None:
    for name, piecewise in (("0.5.9.log", None), ("0.5.10.log", False)):
        data = parse_log_text((fixtures_dir / RELEASES_REL / name).read_text()).to_json()
        assert data["server_args_nested"] == {}
        assert "cuda_graph_config" not in data["server_args"]
        assert data["parsed"]["disable_piecewise_cuda_graph"] is piecewise
        assert "dtype" not in data["kv_cache"][0]
    v9 = parse_log_text((fixtures_dir / RELEASES_REL / "0.5.9.log").read_text()).to_json()
    assert v9["server_args"]["enable_piecewise_cuda_graph"] is False
    assert [g["kind"] for g in v9["cuda_graph"]] == ["cuda graph", "cuda graph"]


def test_kv_cache_lines_of_0_5_19_and_later() -> None:
    text = "\n".join(
        [
            "[2026-11-30 11:00:17 TP0] MiniMax MSA-v1 main NVFP4 KV Cache is allocated. dtype: torch.uint8, "
            "#tokens: 524288, K size: 6.12 GB, V size: 6.12 GB",
            "[2026-11-30 11:00:18 TP0] KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 900000, "
            "KV size: 30.90 GB",
            "[2026-11-30 11:00:19 TP0] KV Cache skipped (no-op pool). Logical #tokens: 4096, "
            "physical K/V size: ~2.0 KB placeholder",
            "[2026-11-30 11:00:20 TP0] Set DSA backends for fp8_e4m3 KV Cache: prefill=flashmla_sparse",
        ]
    )
    data = parse_log_text(text).to_json()
    kv = data["kv_cache"]
    assert len(kv) == 3
    assert kv[0] == {
        "line": 1,
        "rank": "TP0",
        "pool": "MiniMax MSA-v1 main NVFP4",
        "dtype": "torch.uint8",
        "tokens": 524288,
        "k_size_gb": 6.12,
        "v_size_gb": 6.12,
    }
    assert (kv[1]["state"], kv[1]["tokens"], kv[1]["kv_size_gb"]) == ("va_upper_bound", 900000, 30.9)
    assert (kv[2]["state"], kv[2]["tokens"]) == ("skipped", 4096)
    assert data["unparsed"] == {}


def test_a_line_of_a_known_kind_that_does_not_read_is_named_not_null() -> None:
    text = "\n".join(
        [
            "[2026-11-30 11:00:17 TP0] KV Cache is allocated. size unknown",
            "[2026-11-30 11:00:41 TP0] Capture target decode CUDA graph end. took=6.9s",
        ]
    )
    data = parse_log_text(text).to_json()
    assert data["kv_cache"][0]["unparsed"].startswith("no #tokens")
    assert data["cuda_graph"][0]["unparsed"] == "no elapsed time on a capture end line"
    assert data["unparsed"]["kv_cache"].startswith("line 1: no #tokens")
    assert data["unparsed"]["cuda_graph"].startswith("line 2: ")
    assert "not read:" in parse_log_text(text).summary()


def test_a_server_args_line_in_an_unknown_form_is_named() -> None:
    text = "\n".join(
        [
            "[2026-11-30 11:00:01] server_args=<ResolvedArgs model_path=/m tp_size=2>",
            "[2026-11-30 11:00:49 TP0] max_total_num_tokens=862046, max_running_requests=48, context_len=40960",
        ]
    )
    data = parse_log_text(text).to_json()
    assert data["server_args"] is None
    assert data["parsed"]["max_running_requests"] is None
    assert "neither `ServerArgs(...)` nor `{...}`" in data["unparsed"]["server_args"]
    assert data["server_args_line"] == 1
    assert data["effective"]["max_running_requests"] == 48
    restarted = parse_log_text(text + "\n" + text).to_json()
    assert len(restarted["starts"]) == 2  # the unread line still opens its start
    assert restarted["starts"][1]["unparsed"]["server_args"] == data["unparsed"]["server_args"]


def test_a_cut_server_args_line_says_what_is_missing_is_not_unset(fixtures_dir: Path) -> None:
    line = (fixtures_dir / RELEASES_REL / "0.5.23.log").read_text().split("\n")[0]
    data = parse_log_text(line[: line.index("'cuda_graph_config'")]).to_json()
    assert data["server_args_complete"] is False
    assert data["parsed"]["tp_size"] == 2
    assert data["parsed"]["cuda_graph_max_bs"] is None
    assert "cut short" in data["unparsed"]["server_args"]


def test_0_5_23_overlapped_weight_load_end_line() -> None:
    text = (
        "[2026-11-30 11:00:50 TP0] Load weight end. Committed real weights after CUDA graph capture in 3.42 s "
        "(capture overlap window 21.07 s, startup overlap total 30.15 s)"
    )
    data = parse_log_text(text).to_json()
    assert data["weights"][0]["elapsed_s"] == 3.42
    assert data["weights"][0]["committed_after_capture"] is True
    assert data["unparsed"] == {}
    old = parse_log_text("[2024-12-13 01:44:59 TP0] Load weight end. type=Q, avail mem=9.69 GB").to_json()
    assert old["unparsed"] == {}  # no elapsed time in older releases: a known form
    bare = parse_log_text("[2026-11-30 11:00:50 TP0] Load weight end. took 7 s").to_json()
    assert bare["unparsed"]["weights"].startswith("line 1: no elapsed time, type or avail mem")


@pytest.mark.parametrize("name", ["014.log", "015.log"])
def test_corpus_0_5_16_nested_graph_settings_read_under_flat_names(fixtures_dir: Path, name: str) -> None:
    data = parse_log_text(_text(fixtures_dir, name)).to_json()
    assert data["server_args_form"] == "repr"
    assert data["parsed"]["cuda_graph_max_bs"] == 8  # null before: the value sits in cuda_graph_config
    assert data["parsed"]["disable_piecewise_cuda_graph"] is False  # prefill backend 'breakable'
    assert data["server_args"]["piecewise_cuda_graph_max_tokens"] == 8192
    assert data["server_args_nested"]["cuda_graph_max_bs"] == "cuda_graph_config.decode.max_bs"
    assert data["unparsed"] == {}
