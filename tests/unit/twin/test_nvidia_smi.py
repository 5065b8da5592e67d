"""The twin's nvidia-smi answers flagbot's queries from the scenario and the runtime's state file."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from flagbot_lab.twin.engine import nvidia_smi
from flagbot_lab.twin.engine.scenario import Scenario, scenario_from_dict
from flagbot_lab.twin.schema import compile_scenario

QUERY = ["--query-gpu=name,compute_cap,memory.total,memory.used", "--format=csv,noheader,nounits"]


@cache
def _scenario(name: str) -> Scenario:
    return scenario_from_dict(compile_scenario(name))


def _run(argv: list[str], scenario: Scenario) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = nvidia_smi.main(argv, scenario=scenario, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SGLANG_TWIN_RUN_DIR", str(tmp_path))
    return tmp_path


def test_flagbots_query_on_an_idle_gb10(tmp_path: Path) -> None:
    code, out, _ = _run(QUERY, _scenario("seed-gb10"))
    assert code == 0
    assert out == "NVIDIA GB10, 12.1, 122573, 3891\n"


def test_memory_used_follows_a_live_twin(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(json.dumps({"pid": os.getpid(), "gpu_memory_used_mib": [108000]}))
    assert _run(QUERY, _scenario("seed-gb10"))[1] == "NVIDIA GB10, 12.1, 122573, 108000\n"


def test_a_dead_twins_state_is_ignored(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    (tmp_path / "state.json").write_text(
        json.dumps({"pid": int(dead.stdout), "gpu_memory_used_mib": [108000]})
    )
    assert _run(QUERY, _scenario("seed-gb10"))[1].endswith(", 3891\n")


def test_eight_gpus_with_header_and_units(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(json.dumps({"pid": os.getpid(), "used_mib_per_gpu": 128000}))
    code, out, _ = _run(
        ["--query-gpu=index,name,memory.used,memory.free", "--format=csv"], _scenario("h200-tp8")
    )
    lines = out.splitlines()
    assert code == 0 and len(lines) == 9
    assert lines[0] == "index, name, memory.used [MiB], memory.free [MiB]"
    assert lines[8] == "7, NVIDIA H200, 128000 MiB, 15771 MiB"


def test_list_gpus_and_index_selection() -> None:
    code, out, _ = _run(["-L"], _scenario("h200-tp8"))
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 8
    assert re.fullmatch(
        r"GPU 0: NVIDIA H200 \(UUID: GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\)",
        lines[0],
    )
    assert len(set(lines)) == 8
    _, out, _ = _run(
        ["-i", "3", "--query-gpu", "index,compute_cap", "--format=csv,noheader"], _scenario("h200-tp8")
    )
    assert out == "3, 9.0\n"


def test_plain_nvidia_smi_prints_a_table() -> None:
    code, out, _ = _run([], _scenario("seed-gb10"))
    assert code == 0
    assert "NVIDIA GB10" in out and "CUDA Version: 13.0" in out and "3891MiB / 122573MiB" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus"], "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."),
        (["--query-gpu=name,vram", "--format=csv"], 'Field "vram" is not a valid field to query.'),
        (["--query-gpu=name"], '"--format" must be "csv"'),
    ],
)
def test_bad_arguments_exit_2(argv: list[str], message: str) -> None:
    code, out, err = _run(argv, _scenario("seed-gb10"))
    assert code == 2
    assert out == ""
    assert err.startswith(message)


def test_a_missing_gpu_index_is_not_found() -> None:
    code, _, err = _run(["-i", "1", "-L"], _scenario("seed-gb10"))
    assert code == 6
    assert "No devices were found" in err
