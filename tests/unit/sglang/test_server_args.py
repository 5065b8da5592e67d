"""The `server_args=` line: both shapes, whole-key matching, non-literals, truncation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bot.sglang.server_args import (
    flatten_nested,
    jsonable,
    parse_server_args,
    parse_server_args_status,
    read_server_args,
    split_top_level,
)

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus" / "sglang-logs"


def _server_args_line(name: str) -> str:
    for raw in (CORPUS / name).read_text(encoding="utf-8", errors="replace").split("\n"):
        if "server_args=" in raw:
            return raw
    raise AssertionError(f"no server_args line in {name}")


@pytest.mark.parametrize(
    ("name", "model_path", "tp_size", "max_running_requests", "chunked_prefill_size", "n_keys"),
    [
        ("008.log", "/app/models/Deepseek-R1/", 16, 128, 8192, 325),
        ("014.log", "poolside/Laguna-S-2.1-INT4", 1, 48, 8192, 445),
        ("015.log", "poolside/Laguna-S-2.1-NVFP4", 1, 48, 8192, 445),
        ("016.log", "meta-llama/Llama-3.2-3B", 1, None, -1, 312),
        ("017.log", "Qwen/Qwen3-14B", 2, 1, 2048, 328),
        ("021.log", "/root/.cache/modelscope/hub/models/DeepSeek-R1-0528-w4a8-per-channel", 16, 256, -1, 315),
        ("023.log", "Qwen/Qwen2.5-7B-Instruct-1M", 1, None, 8192, 278),
    ],
)
def test_corpus_server_args(
    name: str,
    model_path: str,
    tp_size: int,
    max_running_requests: int | None,
    chunked_prefill_size: int,
    n_keys: int,
) -> None:
    values, complete = parse_server_args_status(_server_args_line(name))
    assert complete is True
    assert values is not None
    assert len(values) == n_keys
    assert values["model_path"] == model_path
    assert values["tp_size"] == tp_size
    assert values["max_running_requests"] == max_running_requests
    assert values["chunked_prefill_size"] == chunked_prefill_size
    json.dumps(values, allow_nan=False)


def test_decoy_keys_are_separate_keys() -> None:
    values = parse_server_args(_server_args_line("014.log"))
    assert values is not None
    assert values["speculative_draft_model_path"] == "poolside/Laguna-S-2.1-DFlash-INT4"
    assert values["model_path"] == "poolside/Laguna-S-2.1-INT4"
    assert values["moe_dense_tp_size"] is None
    assert values["tp_size"] == 1
    values17 = parse_server_args(_server_args_line("017.log"))
    assert values17 is not None
    assert values17["dtype"] == "half"
    assert values17["kv_cache_dtype"] == "auto"


def test_nested_record_reads_as_the_dict_later_releases_print() -> None:
    values = parse_server_args(_server_args_line("014.log"))
    assert values is not None
    config = values["cuda_graph_config"]
    assert set(config) == {"decode", "prefill"}
    assert config["decode"] == {
        "backend": "full",
        "max_bs": 8,
        "bs": [1, 2, 3, 4, 5, 6, 7, 8],
        "tc_compiler": "eager",
        "full_prefill_max_req": None,
    }
    assert config["prefill"]["backend"] == "breakable"
    assert config["prefill"]["max_bs"] == 8192
    assert values["speculative_algorithm"] == "DFLASH"


def test_0_5_16_graph_settings_map_back_to_the_flat_names() -> None:
    read = read_server_args(_server_args_line("014.log"))
    assert read.form == "repr"
    assert read.complete is True
    assert read.unparsed == {}
    assert read.values is not None
    assert read.values["cuda_graph_max_bs"] == 8
    assert read.values["cuda_graph_bs"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert read.values["piecewise_cuda_graph_max_tokens"] == 8192
    assert read.values["disable_piecewise_cuda_graph"] is False
    assert read.values["cuda_graph_max_bs_decode"] == 8  # printed flat by 0.5.16 itself: kept
    assert read.nested["cuda_graph_max_bs"] == "cuda_graph_config.decode.max_bs"
    assert read.nested["disable_piecewise_cuda_graph"] == "cuda_graph_config.prefill.backend"


def test_a_disabled_prefill_backend_is_disable_piecewise_cuda_graph() -> None:
    line = (
        "server_args={'tp_size': 1, 'cuda_graph_config': {'decode': {'backend': 'full', 'max_bs': 16, "
        "'bs': [1, 2, 4, 8, 16], 'tc_compiler': 'eager'}, 'prefill': {'backend': 'disabled', "
        "'max_bs': None, 'bs': None, 'tc_compiler': 'eager'}}}"
    )
    read = read_server_args(line)
    assert read.form == "dict"
    assert read.values is not None
    assert read.values["disable_piecewise_cuda_graph"] is True
    assert read.values["cuda_graph_max_bs"] == 16
    assert read.values["piecewise_cuda_graph_max_tokens"] is None
    assert read.unparsed == {}


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ("cuda_graph_config=<object at 0x7f>", "printed in a form flagbot cannot read"),
        ("cuda_graph_config=None", "printed as None"),
        ("cuda_graph_config=CudaGraphConfig(decode=PhaseConfig(backend='full'))", "has no 'max_bs'"),
        ("cuda_graph_config=CudaGraphConfig(prefill=PhaseConfig(backend='full'))", "no readable 'decode'"),
    ],
)
def test_a_nested_config_that_cannot_be_read_is_named(config: str, reason: str) -> None:
    read = read_server_args(f"server_args=ServerArgs(tp_size=1, {config}, dp_size=1)")
    assert read.values is not None
    assert "cuda_graph_max_bs" not in read.values
    assert reason in read.unparsed["cuda_graph_max_bs"]


def test_flatten_leaves_flat_releases_alone() -> None:
    assert flatten_nested({"cuda_graph_max_bs": 48, "disable_piecewise_cuda_graph": True}) == ({}, {}, {})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no marker here", "no `server_args=`"),
        ("server_args=<ResolvedArgs tp_size=2>", "neither `ServerArgs(...)` nor `{...}`"),
        ("server_args=ServerArgs(", "no complete `key=value` item"),
    ],
)
def test_unreadable_lines_say_why(text: str, reason: str) -> None:
    read = read_server_args(text)
    assert read.values is None
    assert reason in read.unparsed["server_args"]


def test_engine_form_with_level_tag() -> None:
    line = _server_args_line("023.log")
    assert "INFO engine.py:123: server_args=ServerArgs(" in line
    values = parse_server_args(line)
    assert values is not None
    assert values["model_path"] == "Qwen/Qwen2.5-7B-Instruct-1M"
    assert values["disable_radix_cache"] is True


DICT_LINE = (
    "[2026-10-02 09:14:11] server_args={'model_path': '/models/Qwen3-30B-A3B', "
    "'tokenizer_path': '/models/Qwen3-30B-A3B', 'speculative_draft_model_path': None, "
    "'tp_size': 4, 'moe_dense_tp_size': None, 'dp_size': 1, 'max_running_requests': None, "
    "'chunked_prefill_size': 8192, 'mem_fraction_static': 0.871, "
    "'cuda_graph_bs': [1, 2, 4, 8, 16, 32], 'json_model_override_args': '{}', "
    "'dtype': torch.bfloat16, 'load_format': <LoadFormat.AUTO: 'auto'>, "
    "'watermark_secret': '<redacted>', 'enable_metrics': True}"
)


def test_dict_form() -> None:
    values, complete = parse_server_args_status(DICT_LINE)
    assert complete is True
    assert values is not None
    assert values["model_path"] == "/models/Qwen3-30B-A3B"
    assert values["tp_size"] == 4
    assert values["speculative_draft_model_path"] is None
    assert values["mem_fraction_static"] == 0.871
    assert values["cuda_graph_bs"] == [1, 2, 4, 8, 16, 32]
    assert values["json_model_override_args"] == "{}"
    assert values["dtype"] == {"raw": "torch.bfloat16"}
    assert values["load_format"] == {"raw": "<LoadFormat.AUTO: 'auto'>"}
    assert values["watermark_secret"] == "<redacted>"
    assert values["enable_metrics"] is True


def test_dict_form_all_literals_parses_through_ast() -> None:
    line = "[2026-10-02 09:14:11] server_args={'model_path': 'm', 'tp_size': 2, 'x': {'a': (1, 2)}}"
    assert parse_server_args(line) == {"model_path": "m", "tp_size": 2, "x": {"a": [1, 2]}}


def test_non_literal_values_in_call_form() -> None:
    line = "server_args=ServerArgs(a=1, dtype=torch.bfloat16, b=float('inf'), c=(1, 2), d={3, 1}, e=1e999)"
    values = parse_server_args(line)
    assert values == {
        "a": 1,
        "dtype": {"raw": "torch.bfloat16"},
        "b": {"raw": "float('inf')"},
        "c": [1, 2],
        "d": [1, 3],
        "e": {"raw": "inf"},
    }


def test_raw_segment_with_non_ascii_text() -> None:
    line = "server_args=ServerArgs(name='модель', cfg=Cfg('ü'), rec=Cfg(x='ü', d=torch.float16), tp_size=2)"
    values = parse_server_args(line)
    assert values == {
        "name": "модель",
        "cfg": {"raw": "Cfg('ü')"},
        "rec": {"x": "ü", "d": {"raw": "torch.float16"}},
        "tp_size": 2,
    }


def test_truncated_line_salvages_complete_items() -> None:
    line = _server_args_line("008.log")
    cut = line.index("max_running_requests=") + len("max_running_requests=12")  # real value is 128
    values, complete = parse_server_args_status(line[:cut])
    assert complete is False
    assert values is not None
    assert values["model_path"] == "/app/models/Deepseek-R1/"
    assert "max_running_requests" not in values  # the item the cut went through is dropped
    assert values["mem_fraction_static"] == parse_server_args(line)["mem_fraction_static"]  # type: ignore[index]


def test_truncated_dict_form() -> None:
    cut = DICT_LINE.index("'dp_size'")
    values, complete = parse_server_args_status(DICT_LINE[:cut])
    assert complete is False
    assert values == {
        "model_path": "/models/Qwen3-30B-A3B",
        "tokenizer_path": "/models/Qwen3-30B-A3B",
        "speculative_draft_model_path": None,
        "tp_size": 4,
        "moe_dense_tp_size": None,
    }


def test_trailing_garbage_is_salvaged_as_complete() -> None:
    values, complete = parse_server_args_status("server_args=ServerArgs(a=1, b='x,)') and more text")
    assert values == {"a": 1, "b": "x,)"}
    assert complete is True


@pytest.mark.parametrize(
    "text",
    [
        "no marker here",
        "server_args=",
        "server_args=ServerArgs(",
        "server_args=ServerArgs(model",
        "server_args=42",
        "server_args=ServerArgs",
        "logger.info(f'{server_args=}')",
        "server_args={",
        "server_args=((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((",
        "server_args=ServerArgs(" + "[" * 500 + ")",
    ],
)
def test_nothing_to_salvage(text: str) -> None:
    assert parse_server_args(text) is None


def test_every_prefix_of_a_real_line_is_safe() -> None:
    line = _server_args_line("014.log")
    full = parse_server_args(line)
    assert full is not None
    for cut in range(0, len(line), 37):
        values, _complete = parse_server_args_status(line[:cut])
        if values is None:
            continue
        json.dumps(values, allow_nan=False)
        for key, value in values.items():
            assert key in full
            if not (isinstance(value, dict) and "raw" in value):
                assert value == full[key]


def test_split_top_level_respects_quotes_and_brackets() -> None:
    items, closed = split_top_level("a='x, y', b=[1, (2, 3)], c={'k': 'v'}) rest", 0)
    assert closed is True
    assert [item.strip() for item in items] == ["a='x, y'", "b=[1, (2, 3)]", "c={'k': 'v'}"]
    items, closed = split_top_level("a='it\\'s', b=[1, 2", 0)
    assert closed is False
    assert [item.strip() for item in items] == ["a='it\\'s'", "b=[1, 2"]


def test_jsonable() -> None:
    assert jsonable((1, {2, 1}, b"x", 1j, math.nan, {1: "a"})) == [
        1,
        [1, 2],
        {"raw": "b'x'"},
        {"raw": "1j"},
        {"raw": "nan"},
        {"1": "a"},
    ]


def test_0_5_23_line_with_an_enum_repr_salvages_and_still_flattens() -> None:
    release = Path(__file__).resolve().parents[2] / "fixtures" / "sglang-releases" / "0.5.23.log"
    line = (
        release.read_text()
        .split("\n")[0]
        .replace("'load_format': 'auto'", "'load_format': <LoadFormat.AUTO: 'auto'>")
    )
    read = read_server_args(line)  # not Python syntax as a whole: the item splitter reads it
    assert read.complete is True
    assert read.form == "dict"
    assert read.values is not None
    assert read.values["load_format"] == {"raw": "<LoadFormat.AUTO: 'auto'>"}
    assert read.values["cuda_graph_config"]["decode"]["max_bs"] == 48
    assert read.values["cuda_graph_max_bs"] == 48
    assert read.values["disable_piecewise_cuda_graph"] is False
    assert read.unparsed == {}
