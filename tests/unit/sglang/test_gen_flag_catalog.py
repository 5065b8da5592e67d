"""tools/gen_flag_catalog.py's import method, on a small wheel that imports what is not installed."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[3]

SERVER_ARGS = """
import argparse
import dataclasses

import torch
from transformers import PretrainedConfig  # noqa: F401  (not installed: stubbed)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


class Layer(torch.nn.Module):
    pass


@dataclasses.dataclass
class ServerArgs:
    tp_size: int = 1
    device: str = DEVICE
    enable_hierarchical_cache: bool = False
    flag_x: bool = True

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=ServerArgs.tp_size,
                            dest="tp_size", help="TP.")
        parser.add_argument("--device", type=str, default=ServerArgs.device, choices={"cuda", "cpu"})
        parser.add_argument("--enable-hierarchical-cache", "--enable-hicache", action="store_true")
        parser.add_argument("--flag-x", action=argparse.BooleanOptionalAction, default=True)
        parser.add_argument("--json-thing", type=json_loads_like)


def json_loads_like(text):
    return text
"""


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_flag_catalog", ROOT / "tools" / "gen_flag_catalog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_flag_catalog"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _wheel(tmp_path: Path, server_args: str, *, arg_groups: bool = True) -> Path:
    path = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("sglang/__init__.py", "import torch\nimport triton\n")
        wheel.writestr("sglang/srt/__init__.py", "")
        if arg_groups:
            wheel.writestr("sglang/srt/arg_groups/__init__.py", "")
        wheel.writestr("sglang/srt/server_args.py", server_args)
    return path


def test_the_import_method_reads_the_parser_the_wheel_builds(tmp_path: Path) -> None:
    gen = _generator()
    document = gen.build("9.9.9", _wheel(tmp_path, SERVER_ARGS))
    assert "ArgumentParser" in document["source"] and "stubbed" in document["source"]
    flags = {flag["name"]: flag for flag in document["flags"]}
    assert list(flags) == ["--tp-size", "--device", "--enable-hierarchical-cache", "--flag-x", "--json-thing"]
    assert flags["--tp-size"]["aliases"] == ["--tensor-parallel-size"]
    assert flags["--tp-size"]["type"] == "int" and flags["--tp-size"]["default"] == 1
    assert flags["--tp-size"]["field"] == "tp_size" and flags["--tp-size"]["help"] == "TP."
    # the stubs answer as a CUDA host; a set of choices is written in a stable order
    assert flags["--device"]["default"] == "cuda" and flags["--device"]["choices"] == ["cpu", "cuda"]
    assert flags["--device"]["help"] == ""  # no help= given
    hicache = flags["--enable-hierarchical-cache"]
    assert hicache["aliases"] == ["--enable-hicache"] and hicache["action"] == "store_true"
    assert hicache["nargs"] == 0 and hicache["default"] is False
    assert flags["--flag-x"]["negative_option_strings"] == ["--no-flag-x"]
    assert flags["--flag-x"]["option_strings"] == ["--flag-x"]
    assert flags["--json-thing"]["type"] == "json_loads_like" and flags["--json-thing"]["field"] is None
    assert all(flag["default_source"] == "parser" for flag in flags.values())


def test_a_value_computed_from_a_stub_is_refused(tmp_path: Path) -> None:
    tainted = SERVER_ARGS.replace(
        'default=ServerArgs.device, choices={"cuda", "cpu"}', "default=torch.float16"
    )
    with pytest.raises(SystemExit, match=r"stubbed modules.*--device \(default\)"):
        _generator().build("9.9.9", _wheel(tmp_path, tainted))


def test_auto_picks_the_ast_walk_without_field_groups(tmp_path: Path) -> None:
    gen = _generator()
    with zipfile.ZipFile(_wheel(tmp_path, SERVER_ARGS, arg_groups=False)) as wheel:
        assert gen.choose_method(wheel) == "ast"
    with zipfile.ZipFile(_wheel(tmp_path, SERVER_ARGS)) as wheel:
        assert gen.choose_method(wheel) == "import"
