"""Tokens per streamed chunk: the running usage first, else the target's tokenizer, else one."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.bench.loadgen import LoadSpec, plans
from bot.bench.metrics import RequestRecord, summarize
from bot.bench.planning import plan_for
from bot.bench.sse import Chunk
from bot.bench.tokenizer import load_token_counter
from bot.bench.worker import note_chunk
from bot.config import load_settings
from tests.support.wordlevel_tokenizer import write_wordlevel_tokenizer


def usage(completion: int) -> dict[str, object]:
    return {"prompt_tokens": 8, "completion_tokens": completion, "total_tokens": 8 + completion}


def test_the_running_usage_gives_each_chunks_tokens() -> None:
    record = RequestRecord(scheduled=0.0, send=0.0)
    note_chunk(record, Chunk(content=False, usage=usage(0)), 0.05, None)  # the role chunk
    for now, running in ((0.1, 1), (0.2, 4), (0.3, 6), (0.4, 9)):
        note_chunk(record, Chunk(content=True, text="w", usage=usage(running)), now, None)
    note_chunk(record, Chunk(usage=usage(9)), 0.41, None)  # include_usage's final chunk
    assert list(record.chunk_tokens) == [1, 3, 2, 3]
    assert record.chunk_tokens_source == "usage"
    assert record.completion_tokens == 9
    assert list(record.chunks) == [0.1, 0.2, 0.3, 0.4]


def test_without_running_usage_the_tokenizer_counts_the_text(tmp_path: Path) -> None:
    count = load_token_counter(write_wordlevel_tokenizer(tmp_path / "t.json", ["abc", "def"]))
    record = RequestRecord(scheduled=0.0, send=0.0)
    for now, text in ((0.1, "abc"), (0.2, " def abc"), (0.3, " abc def abc")):
        note_chunk(record, Chunk(content=True, text=text), now, count)
    assert list(record.chunk_tokens) == [1, 2, 3]
    assert record.chunk_tokens_source == "tokenizer"
    assert record.completion_tokens is None
    assert record.output_tokens == 6  # no usage at all: the counted tokens, not the 3 chunks


def test_with_neither_a_chunk_is_one_token() -> None:
    record = RequestRecord(scheduled=0.0, send=0.0)
    for now in (0.1, 0.2):
        note_chunk(record, Chunk(content=True, text="abc def"), now, None)
    assert list(record.chunk_tokens) == [1, 1]
    assert record.chunk_tokens_source == "one per chunk"


def test_a_stream_error_is_kept_once() -> None:
    record = RequestRecord(scheduled=0.0, send=0.0)
    note_chunk(record, Chunk(error="boom"), 0.1, None)
    note_chunk(record, Chunk(error="later"), 0.2, None)
    assert record.error == "boom"
    assert not record.chunks


def test_the_target_tokenizer_reaches_every_worker() -> None:
    spec = LoadSpec(base_url="http://h:1", concurrency=4, num_requests=8, workers=2, tokenizer="/t.json")
    assert [plan.tokenizer for plan in plans(spec, "m")] == ["/t.json", "/t.json"]


def multi_token_request(send: float, ttft: float, gap: float, sizes: list[int]) -> RequestRecord:
    """One chunk per entry of `sizes` (its tokens), the first at send+ttft, then one every `gap`."""
    record = RequestRecord(scheduled=send, send=send, ok=True)
    for i, size in enumerate(sizes):
        record.chunks.append(send + ttft + i * gap)
        record.chunk_tokens.append(size)
    record.end = record.chunks[-1]
    record.completion_tokens = sum(sizes)
    record.chunk_tokens_source = "usage"
    return record


def test_itl_is_per_token_as_bench_serving_splits_a_chunk() -> None:
    # prefill token alone, then steps of 3, 2, 3 tokens, 60 ms apart
    r = multi_token_request(0.0, 0.1, 0.06, [1, 3, 2, 3])
    m = summarize([r], start=0.0, requested_input_len=1, request_rate=None, max_concurrency=1)
    per_token = [20.0] * 3 + [30.0] * 2 + [20.0] * 3  # each gap / its chunk's tokens, that many times
    assert m["mean_itl_ms"] == pytest.approx(sum(per_token) / len(per_token))
    assert m["median_itl_ms"] == pytest.approx(20.0)
    assert m["max_itl_ms"] == pytest.approx(30.0)
    assert m["mean_chunk_itl_ms"] == pytest.approx(60.0)  # what the client's loop saw
    assert m["total_output_tokens"] == 9
    assert m["total_output_chunks"] == 4
    assert m["chunk_tokens_source"] == "usage"
    assert m["mean_tpot_ms"] == pytest.approx(180.0 / 8)  # (E2E - TTFT) / (N - 1), unchanged


def test_peak_output_counts_tokens_per_one_second_bucket() -> None:
    # chunks of 4 tokens every 0.3 s from t=0.1: 4 chunks in second 0 (16 tokens), 3 in second 1
    r = multi_token_request(0.0, 0.1, 0.3, [4] * 7)
    m = summarize([r], start=0.0, requested_input_len=1, request_rate=None, max_concurrency=1)
    assert m["max_output_tokens_per_s"] == 16.0  # counting chunks would say 4


def test_peak_concurrency_is_per_one_second_bucket() -> None:
    # never two at one instant, but three within second 0, as bench_serving counts them
    records = [multi_token_request(send, 0.1, 0.05, [1, 1]) for send in (0.0, 0.3, 0.6)]
    m = summarize(records, start=0.0, requested_input_len=1, request_rate=None, max_concurrency=1)
    assert m["max_concurrent_requests"] == 3
    later = multi_token_request(2.2, 0.1, 0.05, [1, 1])
    m = summarize([records[0], later], start=0.0, requested_input_len=1, request_rate=None, max_concurrency=1)
    assert m["max_concurrent_requests"] == 1


def test_the_targets_tokenizer_setting_reaches_the_load_spec(tmp_path: Path) -> None:
    config = tmp_path / "flagbot.toml"
    config.write_text(
        'default_target = "q"\n[targets.q]\nunit = "s.service"\nnodes = [{ host = "10.0.0.2" }]\n'
        '[targets.q.bench]\ntokenizer = "/models/q/tokenizer.json"\n',
        encoding="utf-8",
    )
    plan = plan_for(load_settings(config), "q")
    assert plan.spec(64).tokenizer == "/models/q/tokenizer.json"
