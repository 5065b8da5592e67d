"""Put the SGLang twin onto a node's root filesystem, and write the node's systemd unit.

Why a host-side installer: a test node (a systemd-nspawn root) has Debian's `/usr/bin/python3`
and nothing else, and must run `python3 -m sglang.launch_server ...` exactly as a GPU host
does. So the twin goes where a pip-installed package would, and never shadows a real `sglang`
in the project's own environment:

* `lab/flagbot_lab/twin/engine/` -> `<root>/usr/local/lib/python3.11/dist-packages/sglang_twin/`, plus
  every packaged flag catalog as `sglang_twin/flags-<version>.json` and the scenario's own as
  `sglang_twin/flags.json` (the engine looks there first);
* `lab/flagbot_lab/twin/shim/sglang/` -> `.../dist-packages/sglang/` (`launch_server`, `srt.server_args`,
  `dry_run`, and the benchmark client modules the scenario's release has: `bench_serving`, and
  from 0.5.15 `benchmark.serving`), with `_version.py` saying the scenario's `sglang_version`;
* `lab/flagbot_lab/twin/shim/nvidia-smi` -> `<root>/usr/local/bin/nvidia-smi` (0755);
* `lab/flagbot_lab/twin/shim/container-runtime` -> `<root>/usr/local/bin/docker` and `.../podman`
  (0755): a stand-in for the container runtime a node does not have, which takes `docker run`'s
  argument contract and execs the container's command on the node (docs/twin.md);
* the compiled scenario -> `<root>/etc/sglang-twin/scenario.json` (0644);
* `<root>/var/lib/sglang-twin/` for the runtime's ground-truth file.

Run as root (the testbed does), the files are root's, which is what the unit's service user
(root) needs. `unit_text` writes `sglang-qwen.service` for one node of the scenario.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from flagbot_lab.twin.engine.releases import release
from flagbot_lab.twin.schema import compile_scenario

NODE_SITE = Path("usr/local/lib/python3.11/dist-packages")
ENGINE_PACKAGE = "sglang_twin"
SCENARIO_FILE = Path("etc/sglang-twin/scenario.json")
TRUTH_DIR = Path("var/lib/sglang-twin")
NVIDIA_SMI = Path("usr/local/bin/nvidia-smi")
CONTAINER_RUNTIMES = (Path("usr/local/bin/docker"), Path("usr/local/bin/podman"))
PYTHON = "/usr/bin/python3"

_HERE = Path(__file__).resolve().parent
_ENGINE = _HERE / "engine"
_SHIM = _HERE / "shim"
_DATA = Path(str(resources.files("bot.sglang.data")))
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")
NEW_BENCH_MODULE = "sglang.benchmark.serving"
_PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./-]+")


def _replace_tree(source: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=_IGNORE)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def install_into(root: Path, *, scenario: str | Path | Mapping[str, Any]) -> None:
    """Install the twin under `root` (a node's `/`); idempotent, replaces an older install.

    `scenario` is a shipped scenario name, a YAML path, or an already compiled document.
    """
    document = dict(scenario) if isinstance(scenario, Mapping) else compile_scenario(scenario)
    site = root / NODE_SITE
    site.mkdir(parents=True, exist_ok=True)
    version = str(document.get("sglang_version") or "0.5.10")
    _replace_tree(_ENGINE, site / ENGINE_PACKAGE)
    for catalog in sorted(_DATA.glob("sglang-*-flags.json")):
        name = catalog.name.removeprefix("sglang-").removesuffix("-flags.json")
        target_file = site / ENGINE_PACKAGE / f"flags-{name}.json"
        shutil.copyfile(catalog, target_file)
        target_file.chmod(0o644)
        if name == version:
            shutil.copyfile(catalog, site / ENGINE_PACKAGE / "flags.json")
            (site / ENGINE_PACKAGE / "flags.json").chmod(0o644)
    _replace_tree(_SHIM / "sglang", site / "sglang")
    fit_release(root, version)

    smi = root / NVIDIA_SMI
    smi.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_SHIM / "nvidia-smi", smi)
    smi.chmod(0o755)
    for runtime in CONTAINER_RUNTIMES:
        shutil.copyfile(_SHIM / "container-runtime", root / runtime)
        (root / runtime).chmod(0o755)

    target = root / SCENARIO_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    tmp.chmod(0o644)
    os.replace(tmp, target)

    truth = root / TRUTH_DIR
    truth.mkdir(parents=True, exist_ok=True)
    truth.chmod(0o755)


def fit_release(root: Path, version: str) -> None:
    """Make the installed `sglang` shim under `root` (a node's `/`) the release `version`: its
    `__version__`, and only the benchmark client modules that release has (0.5.9 has no
    `sglang.benchmark` package; before 0.5.15 there is no `sglang.benchmark.serving`). The engine
    holds every packaged flag list already, so this and the scenario file are all a switch of
    release needs (tests/integration/loop/scenario_switch.py)."""
    facts = release(version)
    package = root / NODE_SITE / "sglang"
    version_file = package / "_version.py"
    version_file.write_text(
        f'"""The SGLang release this twin node is (written by install.py)."""\n\n__version__ = "{version}"\n',
        encoding="utf-8",
    )
    version_file.chmod(0o644)
    benchmark = package / "benchmark"
    if facts.benchmark_package:
        benchmark.mkdir(mode=0o755, exist_ok=True)
        for name in ("__init__.py", "serving.py"):
            wanted = name == "__init__.py" or NEW_BENCH_MODULE in facts.bench_modules
            if wanted:
                shutil.copyfile(_SHIM / "sglang" / "benchmark" / name, benchmark / name)
                (benchmark / name).chmod(0o644)
            else:
                (benchmark / name).unlink(missing_ok=True)
    elif benchmark.exists():
        shutil.rmtree(benchmark)


def systemd_quote(token: str) -> str:
    """One ExecStart word as systemd reads it back: `%` and `$` doubled (specifiers and
    variables), and double quotes around anything beyond plain characters."""
    text = token.replace("%", "%%").replace("$", "$$")
    if _PLAIN.fullmatch(token):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def node_flags(
    document: Mapping[str, Any], *, node_rank: int, dist_init_addr: str | None, host: str, port: int
) -> list[str]:
    """The argv of one node: the scenario's launch flags, then the per-node ones."""
    flags = [str(token) for token in document["launch"]]
    nodes = int(document["nodes"])
    if nodes > 1:
        if not dist_init_addr:
            raise ValueError(f"scenario {document['name']} has {nodes} nodes: dist_init_addr is required")
        if not 0 <= node_rank < nodes:
            raise ValueError(f"node_rank {node_rank} is out of range for {nodes} nodes")
        flags += ["--nnodes", str(nodes), "--node-rank", str(node_rank), "--dist-init-addr", dist_init_addr]
    return [*flags, "--host", host, "--port", str(port)]


def unit_text(
    scenario: str | Path | Mapping[str, Any],
    *,
    node_rank: int,
    dist_init_addr: str | None = None,
    host: str = "0.0.0.0",  # noqa: S104 - the unit serves the testbed bridge, as real units do
    port: int = 30000,
    unit_description: str | None = None,
) -> str:
    """`sglang-qwen.service` for node `node_rank` of the scenario.

    ExecStart runs `/usr/bin/python3 -m sglang.launch_server` with one flag (and its values) per
    continuation line, quoted for systemd.
    """
    document = dict(scenario) if isinstance(scenario, Mapping) else compile_scenario(scenario)
    argv = node_flags(document, node_rank=node_rank, dist_init_addr=dist_init_addr, host=host, port=port)
    lines: list[list[str]] = [[PYTHON, "-m", "sglang.launch_server"]]
    for token in argv:
        if token.startswith("--") or len(lines) == 1:
            lines.append([token])
        else:
            lines[-1].append(token)
    exec_start = " \\\n    ".join(" ".join(systemd_quote(t) for t in words) for words in lines)
    description = unit_description or f"SGLang server ({document['name']} twin, node {node_rank})"
    return (
        "[Unit]\n"
        f"Description={description}\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        "Environment=PYTHONUNBUFFERED=1\n"
        f"ExecStart={exec_start}\n"
        "Restart=on-failure\n"
        "RestartSec=2\n"
        "TimeoutStopSec=30\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )
