"""Properties: the parser never raises and always returns JSON, whatever it is fed."""

from __future__ import annotations

import io
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.sglang.log import LogReport, parse_log_lines, parse_log_stream, parse_log_text
from bot.sglang.logline import parse_line
from bot.sglang.server_args import parse_server_args

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus" / "sglang-logs"
CORPUS_LINES: list[str] = [
    line
    for path in sorted(CORPUS.glob("*.log"))
    for line in path.read_bytes().decode("utf-8", "replace").split("\n")
    if line.strip()
]
KEY_LINES: list[str] = [
    line
    for line in CORPUS_LINES
    if any(
        k in line
        for k in (
            "max_total_num_tokens=",
            "KV Cache",
            "Load weight",
            "Capture ",
            "ready to roll",
            "Error:",
            "WARN",
        )
    )
]
FRAGMENTS = [
    "[2026-03-09 21:45:34 TP0] ",
    "[2026-01-12 05:01:32 DP0 TP0 EP0] ",
    "Mar 09 21:45:34 llm-two sglang-qwen[4550]: ",
    "2025-03-09T21:45:34.123456789Z ",
    "server_args=ServerArgs(",
    "server_args={'",
    "model_path='m', ",
    "tp_size=",
    "max_total_num_tokens=",
    ", max_running_requests=",
    "context_len=",
    "available_gpu_mem=",
    " GB",
    "KV Cache is allocated. #tokens: ",
    "Capture cuda graph end. Time elapsed: ",
    "Load weight end. ",
    "The server is fired up and ready to roll!",
    "RuntimeError: ",
    "Traceback (most recent call last):",
    "error: ",
    "WARNING server_args.py:12: ",
    "is reset to ",
    "Started sglang.service",
    "\n",
    "\r",
    "\x1b[1;33m",
    "(",
    ")",
    "'",
    "9" * 30,
    "-1",
    "0.5",
]
text_pieces = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=60).map("".join)


def _check(report: LogReport) -> dict[str, object]:
    data = report.to_json()
    json.dumps(data, allow_nan=False)
    assert data["starts"]
    assert isinstance(report.summary(), str)
    return data


@settings(max_examples=300, deadline=None)
@given(text_pieces)
def test_arbitrary_text_never_raises(text: str) -> None:
    data = _check(parse_log_text(text))
    assert data["lines"] == text.count("\n") + (0 if text == "" or text.endswith("\n") else 1)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_unstructured_text_never_raises(text: str) -> None:
    _check(parse_log_text(text))
    _check(parse_log_lines([text, text]))
    parse_line(text)
    parse_server_args(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000), st.integers(min_value=1, max_value=97))
def test_arbitrary_bytes_via_stream(data: bytes, chunk: int) -> None:
    report = parse_log_stream(io.BytesIO(data), chunk_size=chunk)
    result = _check(report)
    assert result == parse_log_text(data.decode("utf-8", "replace")).to_json()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join), st.integers(min_value=1, max_value=31))
def test_keyword_heavy_bytes_chunked_equal_whole(text: str, chunk: int) -> None:
    data = text.encode("utf-8")
    assert parse_log_stream(io.BytesIO(data), chunk_size=chunk).to_json() == parse_log_text(text).to_json()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CORPUS_LINES), st.data())
def test_truncated_corpus_lines(line: str, data: st.DataObject) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(line)))
    _check(parse_log_text(line[:cut]))
    _check(parse_log_text(line[cut:]))


def test_key_lines_cut_at_every_position() -> None:
    for line in {line for line in KEY_LINES if len(line) < 400}:
        for cut in range(len(line) + 1):
            report = parse_log_text(line[:cut])
            _check(report)
            tokens = report.effective["max_total_num_tokens"]
            assert tokens is None or str(tokens) in line


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(CORPUS.glob("*.log"))), st.data())
def test_truncated_corpus_files(path: Path, data: st.DataObject) -> None:
    raw = path.read_bytes()
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)))
    chunk = data.draw(st.integers(min_value=1, max_value=4096))
    report = parse_log_stream(io.BytesIO(raw[:cut]), chunk_size=chunk)
    assert _check(report) == parse_log_text(raw[:cut].decode("utf-8", "replace")).to_json()
