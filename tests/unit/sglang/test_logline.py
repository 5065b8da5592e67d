"""Prefix stripping and classification of single log lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.sglang.logline import LogLine, last_redraw, parse_line, parse_ranks, strip_ansi

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus" / "sglang-logs"
INNER = "[2026-03-09 21:45:34 TP0] Load weight begin. avail mem=138.03 GB"


def _assert_inner(line: LogLine) -> None:
    assert line.message == "Load weight begin. avail mem=138.03 GB"
    assert line.timestamp == "2026-03-09 21:45:34"
    assert line.ranks == {"TP": 0}
    assert line.fmt == "sglang"


@pytest.mark.parametrize(
    ("prefix", "outer_ts", "unit", "pid"),
    [
        ("Mar 09 21:45:34 llm-two sglang-qwen[4550]: ", "Mar 09 21:45:34", "sglang-qwen", 4550),
        ("Mar  9 21:45:34 llm-two sglang-qwen[4550]: ", "Mar  9 21:45:34", "sglang-qwen", 4550),
        ("Mar 09 21:45:34.123456 llm-two sglang-qwen[4550]: ", "Mar 09 21:45:34.123456", "sglang-qwen", 4550),
        (
            "2026-03-09T21:45:34+0100 llm-two sglang-qwen[4550]: ",
            "2026-03-09T21:45:34+0100",
            "sglang-qwen",
            4550,
        ),
        (
            "2026-03-09T21:45:34.123456+01:00 llm-two sglang-qwen[4550]: ",
            "2026-03-09T21:45:34.123456+01:00",
            "sglang-qwen",
            4550,
        ),
        ("Mon 2026-03-09 21:45:34 CET llm-two python3[77]: ", "Mon 2026-03-09 21:45:34 CET", "python3", 77),
        ("1773092734.123456 llm-two python3[77]: ", "1773092734.123456", "python3", 77),
        ("[  123.456789] llm-two python3[77]: ", "[  123.456789]", "python3", 77),
        (
            "Mar 09 21:45:34 llm-two dockerd[9]: 2026-03-09T21:45:34.123456789Z ",
            "Mar 09 21:45:34",
            "dockerd",
            9,
        ),
    ],
)
def test_journald_prefix_forms(prefix: str, outer_ts: str, unit: str, pid: int) -> None:
    line = parse_line(prefix + INNER + "\n")
    _assert_inner(line)
    assert (line.outer_timestamp, line.unit, line.pid) == (outer_ts, unit, pid)


def test_journald_prefix_on_a_bare_line_keeps_the_journal_time() -> None:
    line = parse_line("Mar 09 21:45:34 llm-two systemd[1]: Started sglang-qwen.service - SGLang.")
    assert line.message == "Started sglang-qwen.service - SGLang."
    assert (line.unit, line.pid, line.fmt) == ("systemd", 1, "bare")
    assert line.timestamp == "Mar 09 21:45:34"


def test_docker_timestamp_and_compose_column() -> None:
    line = parse_line("2025-03-09T21:45:34.123456789Z " + INNER)
    _assert_inner(line)
    assert line.outer_timestamp == "2025-03-09T21:45:34.123456789Z"
    composed = parse_line("sglang-1  | 2025-03-09T21:45:34.123456789Z " + INNER)
    _assert_inner(composed)


def test_python_logger_wrapper_around_sglang_prefix() -> None:
    line = parse_line("2025-03-07 23:50:27,531 - __main__ - INFO - " + INNER)
    _assert_inner(line)
    assert line.level == "INFO"


def test_python_logger_wrapper_alone() -> None:
    line = parse_line("2025-03-07 23:50:27,531 - sglang.srt.server_args - WARNING - Overlap disabled")
    assert (line.message, line.level, line.fmt) == ("Overlap disabled", "WARNING", "logger")
    assert line.timestamp == "2025-03-07 23:50:27,531"


@pytest.mark.parametrize(
    ("text", "timestamp", "ranks", "label"),
    [
        ("[2025-01-23 19:35:20 TP0] x", "2025-01-23 19:35:20", {"TP": 0}, "TP0"),
        ("[2026-02-04 11:30:29] x", "2026-02-04 11:30:29", {}, ""),
        (
            "[2026-01-12 05:01:32 DP0 TP0 EP0] x",
            "2026-01-12 05:01:32",
            {"DP": 0, "TP": 0, "EP": 0},
            "DP0 TP0 EP0",
        ),
        ("[2026-03-09 21:45:34 PP1 TP0] x", "2026-03-09 21:45:34", {"PP": 1, "TP": 0}, "PP1 TP0"),
        (
            "[2026-03-09 21:45:34 ATTN_CP0 TP2] x",
            "2026-03-09 21:45:34",
            {"ATTN_CP": 0, "TP": 2},
            "ATTN_CP0 TP2",
        ),
        (
            "[2026-03-09 21:45:34 MOE_DP1 TP3 EP3] x",
            "2026-03-09 21:45:34",
            {"MOE_DP": 1, "TP": 3, "EP": 3},
            "MOE_DP1 TP3 EP3",
        ),
        ("[2026-03-09 21:45:34.123 TP12] x", "2026-03-09 21:45:34.123", {"TP": 12}, "TP12"),
        ("[20:52:05] x", "20:52:05", {}, ""),
        ("[20:52:05 TP1] x", "20:52:05", {"TP": 1}, "TP1"),
    ],
)
def test_sglang_prefix_forms(text: str, timestamp: str, ranks: dict[str, int], label: str) -> None:
    line = parse_line(text)
    assert line.message == "x"
    assert line.timestamp == timestamp
    assert line.ranks == ranks
    assert line.rank_label == label
    assert line.fmt == "sglang"


def test_level_and_source_tag() -> None:
    line = parse_line("[2026-02-27 14:33:03] WARNING server_args.py:2326: KV cache is forced as chunk cache")
    assert (line.level, line.source) == ("WARNING", "server_args.py:2326")
    assert line.message == "KV cache is forced as chunk cache"
    engine = parse_line("[2025-11-23 23:34:08] INFO engine.py:123: server_args=ServerArgs(model_path='m')")
    assert (engine.level, engine.source) == ("INFO", "engine.py:123")
    assert engine.message.startswith("server_args=ServerArgs(")


def test_uvicorn_level() -> None:
    line = parse_line("[2026-03-09 21:47:40] INFO:     Started server process [402113]")
    assert (line.level, line.message) == ("INFO", "Started server process [402113]")


def test_ansi_escapes_are_removed() -> None:
    raw = "\x1b[1;33m'--cuda-graph-max-bs' is deprecated and will be removed.\x1b[0m"
    line = parse_line(raw)
    assert line.message == "'--cuda-graph-max-bs' is deprecated and will be removed."
    assert strip_ansi("\x1b[31m[2026-03-09 21:45:34 TP0] x\x1b[0m") == "[2026-03-09 21:45:34 TP0] x"


def test_carriage_return_progress_keeps_last_meaningful_segment() -> None:
    assert last_redraw("\rLoading: 50%\rLoading: 100%\r") == "Loading: 100%"
    assert parse_line("\rLoading: 50%\rLoading: 100%\r\n").message == "Loading: 100%"
    assert last_redraw("no carriage return") == "no carriage return"


def test_log_line_glued_after_progress_bar() -> None:
    raw = (
        "\r  0%|          | 0/8 [00:00<?, ?it/s]\rCapturing batches (bs=32 avail_mem=34.44 GB):   0%|"
        "          | 0/8 [00:00<?, ?it/s][2026-02-09 13:22:59 TP0] Attempting to acquire lock 1"
    )
    line = parse_line(raw)
    assert line.message == "Attempting to acquire lock 1"
    assert line.ranks == {"TP": 0}


def test_log_line_glued_after_dots() -> None:
    line = parse_line(
        '................[2026-01-12 05:01:34] INFO:     127.0.0.1:46796 - "GET /x HTTP/1.1" 200 OK'
    )
    assert line.timestamp == "2026-01-12 05:01:34"
    assert line.message.startswith("127.0.0.1:46796")


def test_glog_line() -> None:
    line = parse_line(
        "E0227 14:34:03.337682 3833148 rdma_context.cpp:265] Failed to register memory 0x7f9568000000"
    )
    assert (line.fmt, line.level, line.source) == ("glog", "ERROR", "rdma_context.cpp:265")
    assert line.message == "Failed to register memory 0x7f9568000000"


def test_crlf_and_bare_lines() -> None:
    line = parse_line("[2024-12-13 01:45:02 TP0] max_total_num_tokens=56524\r\n")
    assert line.message == "max_total_num_tokens=56524"
    bare = parse_line("RuntimeError: NCCL error: x\n")
    assert (bare.fmt, bare.message, bare.timestamp, bare.ranks) == (
        "bare",
        "RuntimeError: NCCL error: x",
        None,
        {},
    )
    frame = parse_line('  File "/x.py", line 3, in f')
    assert frame.message.startswith("  File")


def test_other_bracketed_starts_are_not_sglang_prefixes() -> None:
    for raw in (
        "[Gloo] Rank 0 is connected to 0 peer ranks.",
        "[W225 16:32:57.295093976 socket.cpp:767] [c10d] The client socket cannot be initialized",
        "[transformers] Unrecognized keys in `rope_parameters`",
        "[rank2]:[W112 05:00:32.697472133 compiler_depend.ts:83] Warning: x",
    ):
        line = parse_line(raw)
        assert line.fmt == "bare"
        assert line.message == raw


def test_parse_ranks() -> None:
    assert parse_ranks(" DP3 TP3 EP3") == {"DP": 3, "TP": 3, "EP": 3}
    assert parse_ranks("") == {}


def test_every_corpus_line_parses_and_loses_its_prefix() -> None:
    seen = 0
    for path in sorted(CORPUS.glob("*.log")):
        for raw in path.read_bytes().decode("utf-8", "replace").split("\n"):
            line = parse_line(raw)
            seen += 1
            if line.fmt == "sglang":
                assert not line.message.startswith("[20")
                assert line.timestamp is not None
    assert seen > 2900
