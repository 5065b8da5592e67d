"""`nvidia-smi` on a twin node: the queries flagbot makes about a GPU host, answered from the scenario.

Why: flagbot reads node facts with `nvidia-smi --query-gpu=name,compute_cap,memory.total,
memory.used --format=csv,noheader,nounits` and `nvidia-smi -L`, and hardware gating (a flag
that needs SM 9.x) depends on the answer. The node has no GPU, so this script answers for the
scenario's GPUs (`gpu.gpus_per_node` of them), with memory.used from the runtime's state file
while a twin server runs.

State file contract (written by the runtime, `statefile.py`): `/run/sglang-twin/state.json`
(directory overridable with `SGLANG_TWIN_RUN_DIR`) holding `{"pid": <int>,
"gpu_memory_used_mib": [<int per local GPU>] | <int>, ...}`; `used_mib_per_gpu` is accepted as
a synonym. It counts only while `pid` is alive; otherwise memory.used is the idle figure
(`gpu.idle_used_gib`). Unknown options exit 2 ("invalid argument", as nvidia-smi documents).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from .scenario import Scenario, load_scenario
from .statefile import state_path

SCENARIO_ENV = "SGLANG_TWIN_SCENARIO"
DEFAULT_SCENARIO = "/etc/sglang-twin/scenario.json"
EXIT_INVALID_ARGUMENT = 2

_UNITS = {"memory.total": "MiB", "memory.used": "MiB", "memory.free": "MiB", "utilization.gpu": "%"}
_FIELDS = (
    "index",
    "name",
    "uuid",
    "compute_cap",
    "driver_version",
    "pci.bus_id",
    "memory.total",
    "memory.used",
    "memory.free",
    "utilization.gpu",
    "temperature.gpu",
)


def gpu_uuid(scenario: Scenario, index: int, host: str | None = None) -> str:
    """A stable per-node, per-GPU UUID in NVIDIA's `GPU-xxxxxxxx-xxxx-...` shape."""
    digest = hashlib.sha256(
        f"{host or socket.gethostname()}:{scenario.gpu.name}:{index}".encode()
    ).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def used_mib(scenario: Scenario, path: str | None = None) -> list[int]:
    """memory.used per local GPU: the running twin's figures, else the idle figure."""
    count = scenario.gpu.gpus_per_node
    idle = [round(scenario.gpu.idle_used_gib * 1024)] * count
    try:
        with open(path or state_path(), encoding="utf-8") as fh:
            state: Any = json.load(fh)
    except (OSError, ValueError):
        return idle
    if not isinstance(state, dict) or not isinstance(state.get("pid"), int) or not _pid_alive(state["pid"]):
        return idle
    used = state.get("gpu_memory_used_mib", state.get("used_mib_per_gpu"))
    if isinstance(used, int | float):
        return [int(used)] * count
    if isinstance(used, list) and used:
        values = [int(v) for v in used if isinstance(v, int | float)]
        return (values + [values[-1]] * count)[:count] if values else idle
    return idle


def _value(field: str, scenario: Scenario, index: int, used: int) -> str:
    gpu = scenario.gpu
    total = gpu.memory_mib
    values: dict[str, Any] = {
        "index": index,
        "name": gpu.name,
        "uuid": gpu_uuid(scenario, index),
        "compute_cap": gpu.capability,
        "driver_version": gpu.driver_version,
        "pci.bus_id": f"00000000:{0x18 + index * 0x10:02X}:00.0",
        "memory.total": total,
        "memory.used": used,
        "memory.free": max(0, total - used),
        "utilization.gpu": 0,
        "temperature.gpu": 34,
    }
    return str(values[field])


def query(
    scenario: Scenario, fields: Sequence[str], fmt: Sequence[str], *, ids: Sequence[int] | None = None
) -> str:
    """CSV for `--query-gpu=<fields> --format=csv[,noheader][,nounits]`."""
    used = used_mib(scenario)
    indexes = list(range(scenario.gpu.gpus_per_node)) if ids is None else list(ids)
    units = "nounits" not in fmt
    lines: list[str] = []
    if "noheader" not in fmt:
        lines.append(", ".join(f"{f} [{_UNITS[f]}]" if f in _UNITS else f for f in fields))
    for i in indexes:
        cells = []
        for f in fields:
            text = _value(f, scenario, i, used[i])
            cells.append(f"{text} {_UNITS[f]}" if units and f in _UNITS else text)
        lines.append(", ".join(cells))
    return "\n".join(lines) + "\n"


def list_gpus(scenario: Scenario) -> str:
    """`nvidia-smi -L`."""
    return "".join(
        f"GPU {i}: {scenario.gpu.name} (UUID: {gpu_uuid(scenario, i)})\n"
        for i in range(scenario.gpu.gpus_per_node)
    )


def table(scenario: Scenario, *, now: float | None = None) -> str:
    """Plain `nvidia-smi`: a short version of the usual table."""
    gpu = scenario.gpu
    used = used_mib(scenario)
    rule = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    cuda = f"{gpu.cuda_version[0]}.{gpu.cuda_version[1]}"
    out = [
        time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now)),
        "+" + "-" * 89 + "+",
        f"| NVIDIA-SMI {gpu.driver_version:<22} Driver Version: {gpu.driver_version:<14} CUDA Version: {cuda:<9}|",
        rule,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for i in range(gpu.gpus_per_node):
        memory = f"{used[i]}MiB / {gpu.memory_mib}MiB"
        out.append(
            f"| {i:>3}  {gpu.name:<30} On  | {_value('pci.bus_id', scenario, i, 0):>18} Off |{'N/A':>21} |"
        )
        out.append(f"| N/A   34C    P0             40W /  N/A  | {memory:>22} |      0%      Default |")
        out.append(rule)
    return "\n".join(out) + "\n"


def _split(argv: Sequence[str]) -> list[tuple[str, str | None]]:
    """(option, value) pairs; `--opt=value` and `--opt value` both work, as in nvidia-smi."""
    takes_value = {"--query-gpu", "--format", "-i", "--id"}
    pairs: list[tuple[str, str | None]] = []
    items = list(argv)
    while items:
        token = items.pop(0)
        name, eq, value = token.partition("=")
        if name in takes_value:
            if not eq:
                value = items.pop(0) if items else ""
            pairs.append((name, value))
        else:
            pairs.append((token, None))
    return pairs


def main(
    argv: Sequence[str],
    *,
    scenario: Scenario | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run `nvidia-smi <argv>`; returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    options = _split(argv)
    known = {"--query-gpu", "--format", "-i", "--id", "-L", "--list-gpus", "-h", "--help"}
    for name, _unused in options:
        if name not in known:
            err.write("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")
            return EXIT_INVALID_ARGUMENT
    opts = dict(options)
    if "-h" in opts or "--help" in opts:
        out.write(
            "NVIDIA System Management Interface -- twin of the node's GPUs (see flagbot docs/twin.md)\n"
        )
        out.write("Supported: -L, --query-gpu=<fields> --format=csv[,noheader][,nounits], -i <index>\n")
        return 0
    if scenario is None:
        scenario = load_scenario(os.environ.get(SCENARIO_ENV) or DEFAULT_SCENARIO)
    ids: list[int] | None = None
    id_text = opts.get("-i") or opts.get("--id")
    if id_text is not None:
        try:
            ids = [int(part) for part in id_text.split(",")]
        except ValueError:
            ids = [-1]
        if any(not 0 <= i < scenario.gpu.gpus_per_node for i in ids):
            err.write(f"No devices were found matching the id {id_text!r}.\n")
            return 6
    if "-L" in opts or "--list-gpus" in opts:
        out.write(list_gpus(scenario))
        return 0
    if "--query-gpu" in opts:
        fields = [f.strip() for f in (opts["--query-gpu"] or "").split(",") if f.strip()]
        bad = next((f for f in fields if f not in _FIELDS), None)
        if bad is not None or not fields:
            err.write(f'Field "{bad or ""}" is not a valid field to query.\n\n')
            return EXIT_INVALID_ARGUMENT
        fmt = [f.strip() for f in (opts.get("--format") or "").split(",")]
        if "csv" not in fmt or any(f not in ("csv", "noheader", "nounits") for f in fmt):
            err.write('"--format" must be "csv" with optional "noheader" and "nounits".\n')
            return EXIT_INVALID_ARGUMENT
        out.write(query(scenario, fields, fmt, ids=ids))
        return 0
    out.write(table(scenario))
    return 0
