"""The twin's argument surface is SGLang 0.5.10's: same flags, same argparse messages, exit 2."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from bot.sglang.catalog import FlagCatalog
from flagbot_lab.twin.engine import args


def _fail(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        args.parse(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_an_unknown_flag_exits_2_with_argparses_message(capsys: pytest.CaptureFixture[str]) -> None:
    last = _fail(capsys, ["--model-path", "/m", "--bogus-flag"])
    assert last == "sglang serve: error: unrecognized arguments: --bogus-flag"


def test_a_bad_value_exits_2_with_argparses_message(capsys: pytest.CaptureFixture[str]) -> None:
    last = _fail(capsys, ["--model-path", "/m", "--max-running-requests", "abc"])
    assert last == "sglang serve: error: argument --max-running-requests: invalid int value: 'abc'"


def test_choices_and_the_required_model_path(capsys: pytest.CaptureFixture[str]) -> None:
    last = _fail(capsys, ["--model-path", "/m", "--speculative-algorithm", "MEDUSA"])
    assert last.startswith("sglang serve: error: argument --speculative-algorithm: invalid choice: 'MEDUSA'")
    assert _fail(capsys, ["--tp-size", "2"]) == (
        "sglang serve: error: the following arguments are required: --model-path/--model"
    )


def test_sglangs_own_types_keep_their_names_in_messages(capsys: pytest.CaptureFixture[str]) -> None:
    parsed = args.parse(["--model-path", "/m", "--context-length", "32Ki"])
    assert parsed.values["context_length"] == 32768
    last = _fail(capsys, ["--model-path", "/m", "--max-total-tokens", "lots"])
    assert "argument --max-total-tokens: Invalid integer value: 'lots'" in last


def test_abbreviations_and_aliases_reach_the_field() -> None:
    assert args.parse(["--model", "/m", "--tp", "8"]).values["tp_size"] == 8
    parsed = args.parse(["--model-path", "/m", "--tensor-parallel-size", "4", "--nccl-init-addr", "h:1"])
    assert parsed.values["tp_size"] == 4
    assert parsed.values["dist_init_addr"] == "h:1"
    assert parsed.requested == {"model_path", "tp_size", "dist_init_addr"}


def test_help_prints_sglangs_usage_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        args.parse(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: sglang serve [-h] --model-path MODEL_PATH")
    assert "--enable-fused-moe-sum-all-reduce\n" in out
    assert "Enable fused moe triton and sum all reduce." in out
    assert "Disable piecewise cuda graph for extend/prefill." in out
    assert "token_idx % cp_size" in out  # the catalog's `%%` prints as `%`, as argparse does


def test_every_catalog_option_string_is_accepted() -> None:
    parser = args.build_parser()
    known = set(parser._option_string_actions)
    for flag in args.flags():
        assert set(flag["option_strings"]) <= known
    assert "--no-experts-shared-outer-loras" in known


def test_the_surface_agrees_with_flagbots_catalog() -> None:
    catalog = FlagCatalog.load("0.5.10")
    parser = args.build_parser()
    for spec in catalog:
        for option in spec.option_strings:
            assert option in parser._option_string_actions, option


def test_defaults_fill_every_field_in_dataclass_order() -> None:
    values = args.parse(["--model-path", "/m"]).values
    names = list(values)
    assert len(names) == 349
    assert names[0] == "model_path" and names[-1] == "forward_hooks"
    # dataclass order differs from add_argument order in places (reference Appendix A)
    assert names.index("prefill_max_requests") == names.index("max_prefill_tokens") + 1
    assert names.index("attn_cp_size") == names.index("load_balance_method") + 1
    assert values["host"] == "127.0.0.1" and values["port"] == 30000
    assert values["max_prefill_tokens"] == 16384
    assert values["uvicorn_access_log_exclude_prefixes"] == []
    assert values["disable_piecewise_cuda_graph"] is False


def test_deprecated_switches_warn_in_yellow_and_set_nothing_or_their_field() -> None:
    parsed = args.parse(["--model-path", "/m", "--enable-piecewise-cuda-graph", "--stream-output"])
    assert parsed.warnings == [
        "\033[1;33mThe command line argument '--enable-piecewise-cuda-graph' is deprecated and will be removed "
        "in future versions.\033[0m",
        "\033[1;33mThe command line argument '--stream-output' is deprecated and will be removed in future "
        "versions.\033[0m",
    ]
    assert parsed.values["incremental_streaming_output"] is True
    assert "enable_piecewise_cuda_graph" not in parsed.values


def test_lora_paths_are_kept_as_given_strings() -> None:
    parsed = args.parse(["--model-path", "/m", "--lora-paths", "a=/lora/x", " b "])
    assert parsed.values["lora_paths"] == ["a=/lora/x", "b"]


def test_the_catalog_is_found_next_to_the_engine_when_installed(tmp_path: Path) -> None:
    source = Path(resources.files("bot.sglang.data") / "sglang-0.5.10-flags.json")
    assert args._candidates("0.5.10")[-1] == source  # on the host: the product's packaged catalog
    assert [path.name for path in args._candidates("0.5.23")[:2]] == ["flags-0.5.23.json", "flags.json"]
    document = json.loads(source.read_text())
    assert args.catalog()["primary_flag_count"] == document["primary_flag_count"] == 354
