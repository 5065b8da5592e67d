"""The dry-run program text, run for real: the table's rendered argv against the twin's `prepare_server_args`.

The twin's shim package (`sglang.srt.server_args`, installed by the twin's own installer) has
SGLang 0.5.10's argument surface and post-init; running the exact argv the table renders, as a
local process, proves the program text and the outcome reading against real code.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.sglang.catalog import FlagCatalog
from bot.sglang.launch import parse_flags
from bot.target.dryrun import dry_run
from bot.target.privileged import render_params
from bot.target.snapshot_facts import implied_flags, requested_values
from flagbot_lab.twin.schema import compile_scenario
from tests.support.twin_process import PYTHON

SEED = compile_scenario("seed-gb10")
AR = "--enable-flashinfer-allreduce-fusion"
MOE = "--enable-fused-moe-sum-all-reduce"


@dataclass
class Done:
    exit_status: int
    stdout: bytes
    stderr: bytes


@dataclass
class LocalNode:
    """Runs a table command as a local process with the given environment (no SSH)."""

    env: dict[str, str]
    name: str = "local"
    index: int = 0
    unit: str = "sglang-qwen.service"

    async def run(
        self, command: str, /, *, timeout: float | None = None, check: bool = True, **params: object
    ) -> Any:
        argv = render_params(command, params, sudo=False).argv
        proc = await asyncio.create_subprocess_exec(
            *argv, env=self.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
        return Done(int(proc.returncode or 0), out, err)

    def stream(self, command: str, /, **params: object) -> Any:
        raise NotImplementedError


@pytest.fixture
def node(layout: Path, tmp_path: Path) -> LocalNode:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps(SEED))
    return LocalNode(
        {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(layout),
            "SGLANG_TWIN_SCENARIO": str(scenario),
        }
    )


async def test_the_seed_flags_resolve_with_speculative_adjustments(node: LocalNode) -> None:
    argv = [str(word) for word in SEED["launch"]] + [AR, MOE]
    result = await dry_run(node, python=PYTHON, argv=argv)  # type: ignore[arg-type]
    assert result.ok, result
    args = result.server_args or {}
    assert (
        args["enable_fused_moe_sum_all_reduce"] is True and args["enable_flashinfer_allreduce_fusion"] is True
    )
    assert args["tp_size"] == 2 and args["max_running_requests"] == 48
    assert any("reset to 48 for speculative decoding" in line for line in result.warnings)
    catalog = FlagCatalog.load("0.5.10")
    requested, unknown = requested_values(parse_flags(argv), catalog)
    implied, _derived = implied_flags(args, requested, catalog)
    assert unknown == [] and implied["max_running_requests"] == {
        "value": 48,
        "was": None,
        "source": "default",
        "default_from": "SGLang 0.5.10 list",
        "same_release": True,
    }
    assert implied["disable_piecewise_cuda_graph"]["value"] is True  # EAGLE in 0.5.10, not the fusion flag


async def test_a_bad_flag_is_argparse_s_exit_2(node: LocalNode) -> None:
    result = await dry_run(node, python=PYTHON, argv=["--model-path", "/m", "--bogus-flag"])  # type: ignore[arg-type]
    assert result.available and not result.ok and result.exit_status == 2
    assert result.error == "sglang serve: error: unrecognized arguments: --bogus-flag"


async def test_a_python_without_sglang_is_unavailable_not_an_error(node: LocalNode) -> None:
    bare = LocalNode({"PATH": node.env["PATH"]})
    result = await dry_run(bare, python=PYTHON, argv=["--model-path", "/m"])  # type: ignore[arg-type]
    assert not result.available and result.reason == f"SGLang is not importable by {PYTHON}"
