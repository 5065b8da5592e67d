"""Installing the twin onto a node root: layout, modes, stdlib-only code that runs under the
node's /usr/bin/python3, and the unit file flagbot's own launch parser reads back."""

from __future__ import annotations

import ast
import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bot.sglang.launch import parse_launch_text
from bot.sglang.server_args import parse_server_args
from flagbot_lab.twin import install
from flagbot_lab.twin.engine.hybrid import adjust_mem_fraction_for_vlm
from flagbot_lab.twin.engine.scenario import load_scenario
from flagbot_lab.twin.schema import compile_scenario

TWIN = Path(install.__file__).parent
NODE_PYTHON = "/usr/bin/python3"
needs_node_python = pytest.mark.skipif(not Path(NODE_PYTHON).exists(), reason="no /usr/bin/python3")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("node")
    install.install_into(path, scenario="seed-gb10")
    return path


def _node(root: Path, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(root / install.NODE_SITE),
        "SGLANG_TWIN_SCENARIO": str(root / install.SCENARIO_FILE),
        "SGLANG_TWIN_RUN_DIR": str(root / "run"),
        "PYTHONNOUSERSITE": "1",
    }
    return subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=cwd or root, timeout=60, check=False
    )


def test_the_layout_of_an_installed_node(root: Path) -> None:
    site = root / install.NODE_SITE
    assert (site / "sglang_twin" / "startup.py").is_file()
    assert (site / "sglang_twin" / "flags.json").is_file()
    assert (site / "sglang" / "__init__.py").is_file()
    assert (site / "sglang" / "srt" / "server_args.py").is_file()
    assert not list(site.rglob("__pycache__"))
    smi = root / install.NVIDIA_SMI
    assert stat.S_IMODE(smi.stat().st_mode) == 0o755
    scenario_file = root / install.SCENARIO_FILE
    assert stat.S_IMODE(scenario_file.stat().st_mode) == 0o644
    assert load_scenario(scenario_file).name == "seed-gb10"
    assert (root / install.TRUTH_DIR).is_dir()


def test_installing_again_replaces_the_old_copy(tmp_path: Path) -> None:
    install.install_into(tmp_path, scenario="tiny-cpu")
    stale = tmp_path / install.NODE_SITE / "sglang_twin" / "stale.py"
    stale.write_text("")
    install.install_into(tmp_path, scenario="h200-tp8")
    assert not stale.exists()
    assert json.loads((tmp_path / install.SCENARIO_FILE).read_text())["name"] == "h200-tp8"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_engine_and_shim_import_only_the_standard_library() -> None:
    files = [
        *TWIN.joinpath("engine").glob("*.py"),
        *TWIN.joinpath("shim").rglob("*.py"),
        TWIN / "shim" / "nvidia-smi",
    ]
    allowed = set(sys.stdlib_module_names) | {"__future__", "sglang_twin"}
    for path in files:
        outside = _imports(path) - allowed
        assert not outside, f"{path.relative_to(TWIN)} imports {sorted(outside)}"


@needs_node_python
def test_sglang_version_under_the_node_python(root: Path) -> None:
    done = _node(
        root, NODE_PYTHON, "-c", "import sglang, sys; print(sglang.__version__); print(sorted(sys.modules))"
    )
    assert done.returncode == 0, done.stderr
    version, modules = done.stdout.splitlines()
    assert version == "0.5.10"
    assert "sglang_twin" not in modules  # importing sglang stays cheap


@needs_node_python
def test_dry_run_under_the_node_python(root: Path) -> None:
    flags = json.loads((root / install.SCENARIO_FILE).read_text())["launch"]
    done = _node(root, NODE_PYTHON, "-m", "sglang.dry_run", *flags, "--enable-fused-moe-sum-all-reduce")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("Max running requests is reset to 48 for speculative decoding.")
    assert done.stdout.startswith("server_args=ServerArgs(model_path='/shared/models/Qwen3.5-122B-A10B', ")
    parsed = parse_server_args(done.stdout)
    assert parsed is not None
    assert parsed["max_running_requests"] == 48 and parsed["enable_fused_moe_sum_all_reduce"] is True


@needs_node_python
def test_a_bad_flag_exits_2_under_the_node_python(root: Path) -> None:
    done = _node(root, NODE_PYTHON, "-m", "sglang.dry_run", "--model-path", "/m", "--bogus")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == "sglang serve: error: unrecognized arguments: --bogus"
    assert done.stdout == ""


@needs_node_python
def test_prepare_server_args_under_the_node_python(root: Path) -> None:
    code = (
        "import dataclasses\n"
        "from sglang.srt.server_args import prepare_server_args, ServerArgs\n"
        "sa = prepare_server_args(['--model-path', '/m', '--tp-size', '2'])\n"
        "assert isinstance(sa, ServerArgs)\n"
        "print(sa.tp_size, sa.mem_fraction_static, len(dataclasses.asdict(sa)))\n"
        "print(repr(sa)[:32])\n"
    )
    done = _node(root, NODE_PYTHON, "-c", code)
    assert done.returncode == 0, done.stderr
    # seed-gb10's model is a VLM: no piecewise graphs to reserve for (0.889), and the estimate is
    # lowered by `adjust_mem_fraction_for_vlm`
    fraction = adjust_mem_fraction_for_vlm(0.889, 27, 1152)
    assert done.stdout.splitlines() == [f"2 {fraction!r} 349", "ServerArgs(model_path='/m', toke"]


@needs_node_python
def test_a_refused_launch_line_raises_sglangs_value_error_under_the_node_python(root: Path) -> None:
    """seed-gb10 is 0.5.10 with a hybrid model: EAGLE with the radix cache and `no_buffer` is refused."""
    argv = ("-m", "sglang.dry_run", "--model-path", "/m", "--tp", "2", "--speculative-algorithm", "EAGLE")
    done = _node(root, NODE_PYTHON, *argv)
    assert done.returncode == 1
    assert done.stdout == ""
    assert (
        done.stderr.rstrip()
        .splitlines()[-1]
        .startswith(
            "ValueError: Speculative decoding for Qwen3_5MoeForConditionalGeneration is not compatible with radix cache"
        )
    )


@needs_node_python
def test_nvidia_smi_under_the_node_python(root: Path) -> None:
    done = _node(root, NODE_PYTHON, str(root / install.NVIDIA_SMI), *(
        "--query-gpu=name,compute_cap,memory.total,memory.used", "--format=csv,noheader,nounits"
    ))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "NVIDIA GB10, 12.1, 122573, 3891\n"
    assert _node(root, NODE_PYTHON, str(root / install.NVIDIA_SMI), "--bogus").returncode == 2


@pytest.mark.parametrize("node_rank", [0, 1])
def test_the_unit_reads_back_into_the_intended_flags(node_rank: int) -> None:
    text = install.unit_text("seed-gb10", node_rank=node_rank, dist_init_addr="10.200.7.2:20000", port=30001)
    launch = parse_launch_text(text)
    assert launch.kind == "unit"
    assert launch.entrypoint.startswith("/usr/bin/python3 -m sglang.launch_server")
    assert launch.env == {"PYTHONUNBUFFERED": "1"}
    argv = [token for item in launch.flags.items for token in item.argv()]
    document = compile_scenario("seed-gb10")
    assert argv == [
        *document["launch"],
        "--nnodes", "2", "--node-rank", str(node_rank), "--dist-init-addr", "10.200.7.2:20000",
        "--host", "0.0.0.0", "--port", "30001",
    ]  # fmt: skip
    for setting in ("Restart=on-failure", "RestartSec=2", "TimeoutStopSec=30", "WantedBy=multi-user.target"):
        assert f"\n{setting}\n" in text
    assert text.startswith("[Unit]\n")


def test_a_single_node_unit_has_no_multi_node_flags() -> None:
    text = install.unit_text("h200-tp8", node_rank=0)
    assert "--nnodes" not in text and "--dist-init-addr" not in text
    with pytest.raises(ValueError, match="dist_init_addr is required"):
        install.unit_text("seed-gb10", node_rank=0)


def test_systemd_quoting_survives_flagbots_unit_parser() -> None:
    document = compile_scenario("tiny-cpu")
    document["launch"] = [*document["launch"], "--served-model-name", "my model 100%", "--api-key", 'a$b"c']
    launch = parse_launch_text(install.unit_text(document, node_rank=0))
    argv = [token for item in launch.flags.items for token in item.argv()]
    assert argv[argv.index("--served-model-name") + 1] == "my model 100%"
    # systemd reads `$$` as `$`; flagbot's unit parser keeps `$$` as written (docs/parsers/launch.md)
    assert argv[argv.index("--api-key") + 1] == 'a$$b"c'
    assert '--api-key "a$$b\\"c"' in install.unit_text(document, node_rank=0)


@needs_node_python
def test_the_installed_engine_needs_nothing_of_the_project(tmp_path: Path) -> None:
    """Copy the install somewhere the project is not importable and run the dry run there."""
    install.install_into(tmp_path / "root", scenario="tiny-cpu")
    moved = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / "root", moved)
    shutil.rmtree(tmp_path / "root")
    done = _node(moved, NODE_PYTHON, "-m", "sglang.dry_run", "--model-path", "/m", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "server_args=ServerArgs(model_path='/m'" in done.stdout


@needs_node_python
@pytest.mark.parametrize("runtime", install.CONTAINER_RUNTIMES)
def test_the_stand_in_runtime_runs_the_container_command_on_the_node(root: Path, runtime: Path) -> None:
    """`docker run`'s contract: the options a unit and flagbot use, `-e` into the environment,
    `--entrypoint` in front of the command; the image is only recorded."""
    program = root / runtime
    assert stat.S_IMODE(program.stat().st_mode) == 0o755
    done = _node(
        root,
        str(program),
        "run",
        "--rm",
        "--pull",
        "never",
        "--gpus",
        "all",
        "--network=host",
        "-v",
        "/models:/models",
        "-e",
        "NCCL_DEBUG=INFO",
        "--env",
        "A=b c",
        "--entrypoint",
        NODE_PYTHON,
        "lmsysorg/sglang:v0.5.10",
        "-c",
        "import os, sglang; print(os.environ['NCCL_DEBUG'], os.environ['A'], os.environ['FLAGBOT_STANDIN_IMAGE'], sglang.__version__)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "INFO b c lmsysorg/sglang:v0.5.10 0.5.10"


@needs_node_python
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ps"], "only `run` is supported"),
        (["run", "--cap-drop", "ALL", "img:1"], "unknown flag: --cap-drop"),
        (["run", "--rm"], "requires at least 1 argument"),
    ],
)
def test_the_stand_in_runtime_refuses_what_is_outside_its_contract(
    root: Path, argv: list[str], message: str
) -> None:
    done = _node(root, str(root / install.CONTAINER_RUNTIMES[0]), *argv)
    assert done.returncode == 125 and message in done.stderr
