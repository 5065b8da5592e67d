"""How soon `flagbot status|log|help|explain` reach their first network or database call (issue 22).

Each command runs three times as a fresh process (`python -c WRAPPER ARGS`): the wrapper installs
an audit hook (`sys.addaudithook`) before anything of flagbot is imported, notes the first
`socket.getaddrinfo`, `socket.connect` or `sqlite3.connect` event, and at exit writes the time it
came (wall clock since this script started the process, and the process's own CPU time then),
the process's end, and which heavy packages it had imported. A command that makes no such call
(`help`) reports its exit instead. Aim: the first call within 0.3 s of process start on an idle
machine; CPU time is printed beside wall time because a loaded machine stretches the wall clock.
The measured tree's bytecode is written first, as an installed flagbot has it (`compile_bytecode`).

Without `--instance` the target listens nowhere (127.0.0.1 port 9, an empty known_hosts and a
fresh key: the SSH connect is refused at once) over a migrated SQLite store. With `--instance N`
the commands run against a two-node testbed running the twin (booted here, taken down at the
end), and `status` end to end is held to its aim of 1 s. Needs root and the testbed's Debian
packages for `--instance`. Prints figures; not a test.

    .venv/bin/python bench/cli_startup.py [--runs 3] [--instance 233] [--code DIR]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import asyncssh

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests.support` from this checkout

import bot
from bot.store import Store
from flagbot_lab.testbed import Testbed, TestbedError, unavailable_reason
from tests.support.cli_config import lab_config

FIRST_CALL_AIM_S = 0.3
STATUS_AIM_S = 1.0
HEAVY = (
    "typer",
    "rich",
    "sqlalchemy",
    "alembic",
    "asyncssh",
    "httpx",
    "numpy",
    "scipy",
    "slack_bolt",
    "flagbot_lab",
)

LIBRARY_FLOORS = {
    "the interpreter alone": (),
    "the console (typer, rich)": ("typer", "rich.console"),
    "the settings (pydantic-settings)": ("pydantic_settings",),
    "the store (sqlmodel over SQLAlchemy's ORM)": ("sqlalchemy.orm", "sqlmodel"),
    "store + settings + console (log's first call needs them)": (
        "typer",
        "rich.console",
        "pydantic_settings",
        "sqlalchemy.orm",
        "sqlmodel",
    ),
    "the same + asyncssh (status and explain)": (
        "typer",
        "rich.console",
        "pydantic_settings",
        "sqlalchemy.orm",
        "sqlmodel",
        "asyncssh",
    ),
}
"""What a command imports before its first call, by layer: each set is imported by a fresh
interpreter whose CPU time is then read."""

WRAPPER = """
import atexit, os, sys, time
HEAVY = HEAVY_NAMES
_mark = os.environ.pop("FLAGBOT_BENCH_MARK")
_first = []
def _hook(event, args):
    if _first or event not in ("socket.getaddrinfo", "socket.connect", "sqlite3.connect"):
        return
    _first.append((event, repr(args[-1] if event != "sqlite3.connect" else args[0])[:80], time.time(), time.process_time()))
def _write():
    heavy = [name for name in HEAVY if name in sys.modules]
    line = repr((_first[0] if _first else None, time.time(), time.process_time(), heavy))
    fd = os.open(_mark, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, line.encode())
    os.close(fd)
sys.addaudithook(_hook)
atexit.register(_write)
sys.argv = ["flagbot", *sys.argv[1:]]
from bot.main import main
main()
""".replace("HEAVY_NAMES", repr(HEAVY))


@dataclass(frozen=True)
class Run:
    """One process: when its first network or database call came, and when it ended."""

    event: str | None
    detail: str
    first_wall_s: float | None
    first_cpu_s: float | None
    end_wall_s: float
    end_cpu_s: float
    exited_wall_s: float
    """When the process had exited (its interpreter's teardown after the last `atexit` call
    included): what the user waits for before the prompt returns."""
    exit_code: int
    heavy: tuple[str, ...]


def run_once(args: list[str], workdir: Path, code: Path | None) -> Run:
    mark = workdir / "mark.txt"
    mark.unlink(missing_ok=True)
    env = {**os.environ, "FLAGBOT_BENCH_MARK": str(mark), "COLUMNS": "100"}
    if code is not None:  # flagbot from another checkout (a before/after comparison)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    exited = time.time()
    if not mark.exists():
        raise RuntimeError(
            f"flagbot {' '.join(args)} left no mark (exit {done.returncode}):\n{done.stderr[-2000:]}"
        )
    first, end_wall, end_cpu, heavy = eval(mark.read_text())  # our own repr, written above
    return Run(
        event=first[0] if first else None,
        detail=first[1] if first else "",
        first_wall_s=first[2] - started if first else None,
        first_cpu_s=first[3] if first else None,
        end_wall_s=end_wall - started,
        end_cpu_s=end_cpu,
        exited_wall_s=exited - started,
        exit_code=done.returncode,
        heavy=tuple(heavy),
    )


def nowhere_config(directory: Path) -> Path:
    """The console tests' target listening nowhere (`tests/support/cli_config.py`) over a migrated
    SQLite store, with a key and an empty known_hosts of its own: the SSH connect is made, and
    refused at once."""
    key = directory / "id_ed25519"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key))
    key.chmod(0o600)
    known_hosts = directory / "known_hosts"
    known_hosts.write_text("")
    # appended to the config's [targets.lab.ssh] table
    ssh = f"key_path = {json.dumps(str(key))}\nknown_hosts = {json.dumps(str(known_hosts))}\n"
    return lab_config(directory, after=ssh)


def testbed_config(bed: Testbed, directory: Path) -> Path:
    """The testbed's own config with a database of this run's, migrated."""
    database = directory / "state" / "flagbot.db"
    path = directory / "flagbot.toml"
    path.write_text(
        bed.config_path.read_text() + f"\n[database]\nsqlite_path = {json.dumps(str(database))}\n",
        encoding="utf-8",
    )
    store = Store.open(None, sqlite_path=database)
    store.upgrade()
    store.close()
    return path


def commands(config: Path) -> dict[str, list[str]]:
    with_config = ["--config", str(config)]
    return {
        "status": [*with_config, "status"],
        "log": [*with_config, "log"],
        "help": ["help", "try"],
        "explain": [*with_config, "explain", "try", "--enable-x"],
    }


def seconds(value: float | None) -> str:
    return "   -  " if value is None else f"{value:6.3f}"


def report(name: str, runs: list[Run], *, end_to_end_aim: float | None) -> None:
    for index, run in enumerate(runs, 1):
        what = f"{run.event} {run.detail}" if run.event else "no network or database call"
        print(
            f"  {name:8} run {index}: first call {seconds(run.first_wall_s)} s wall {seconds(run.first_cpu_s)} s CPU"
            f" | end {run.end_wall_s:6.3f} s wall {run.end_cpu_s:6.3f} s CPU, exited {run.exited_wall_s:6.3f} s,"
            f" exit {run.exit_code} | {what}"
        )
    firsts = [run.first_wall_s for run in runs if run.first_wall_s is not None]
    cpus = [run.first_cpu_s for run in runs if run.first_cpu_s is not None]
    if firsts:
        verdict = "OK" if statistics.median(firsts) <= FIRST_CALL_AIM_S else "over"
        print(
            f"  {name:8} first call median {statistics.median(firsts):.3f} s wall, "
            f"{statistics.median(cpus):.3f} s CPU (aim <= {FIRST_CALL_AIM_S} s) -> {verdict}"
        )
    else:
        ends = [run.end_wall_s for run in runs]
        print(f"  {name:8} no call; exited after median {statistics.median(ends):.3f} s wall")
    if end_to_end_aim is not None:
        ends = [run.exited_wall_s for run in runs]
        verdict = "OK" if statistics.median(ends) <= end_to_end_aim else "over"
        print(
            f"  {name:8} end to end (start to exited) median {statistics.median(ends):.3f} s wall "
            f"(aim <= {end_to_end_aim} s) -> {verdict}"
        )
    print(f"  {name:8} imported: {', '.join(runs[-1].heavy) or 'none of ' + ', '.join(HEAVY)}")


def measure(config: Path, workdir: Path, runs: int, *, on_testbed: bool, code: Path | None) -> None:
    for name, args in commands(config).items():
        found = [run_once(args, workdir, code) for _ in range(runs)]
        report(name, found, end_to_end_aim=STATUS_AIM_S if on_testbed and name == "status" else None)


def import_floor_s(modules: tuple[str, ...], runs: int) -> float:
    """The fastest of `runs` fresh interpreters' CPU time once `modules` are imported."""
    probe = "".join(f"import {name}\n" for name in modules) + "import time\nprint(time.process_time())\n"
    times = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", probe],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        times.append(float(done.stdout.strip()))
    return min(times)


def report_floors(runs: int) -> None:
    print(f"the libraries' floor: CPU time of a bare interpreter importing them (fastest of {runs}):")
    for what, modules in LIBRARY_FLOORS.items():
        floor = import_floor_s(modules, runs)
        verdict = "over the aim" if floor > FIRST_CALL_AIM_S else "under the aim"
        print(f"  {floor:6.3f} s  {what} ({verdict} of {FIRST_CALL_AIM_S} s)")


def compile_bytecode(code: Path | None) -> str:
    """Write the bytecode of the flagbot tree measured, as `pip install` does for a wheel, and say so.

    An editable checkout gets its bytecode from its first runs, unless the environment forbids
    writing it: this machine kind sets PYTHONDONTWRITEBYTECODE=1, and every start then compiled
    flagbot's ~110 modules from source again (~0.1 s of CPU), which no installed flagbot pays."""
    tree = (code or Path(bot.__file__).resolve().parents[1]) / "bot"
    compileall.compile_dir(str(tree), quiet=1)
    return f"bytecode of {tree} written first (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})"


def machine_line() -> str:
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return f"{os.cpu_count()} CPUs, load average {load} (1, 5, 15 min)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="processes per command (default 3)")
    parser.add_argument("--instance", type=int, help="also run against a two-node testbed of this instance")
    parser.add_argument(
        "--code",
        type=Path,
        help="run flagbot from this source tree instead of the installed one, e.g. a `git archive` of "
        "an older commit unpacked in a temporary folder (a before/after comparison)",
    )
    args = parser.parse_args()
    code = args.code.resolve() if args.code else None
    print(f"machine: {machine_line()}; flagbot from {code or 'the installed package'}")
    print(compile_bytecode(code))
    report_floors(max(args.runs, 3))
    with tempfile.TemporaryDirectory(prefix="flagbot-cli-startup-") as tmp:
        base = Path(tmp)
        print("target listening nowhere (127.0.0.1:9), migrated SQLite store:")
        quiet = base / "nowhere"
        quiet.mkdir()
        measure(nowhere_config(quiet), quiet, args.runs, on_testbed=False, code=code)
        if args.instance is None:
            return 0
        reason = unavailable_reason()
        if reason:
            print(f"cannot boot the testbed: {reason}", file=sys.stderr)
            return 2
        bed = Testbed(args.instance, base / "testbed", nodes=2, scenario="seed-gb10")
        try:
            bed.up(replace=True)
            bed.wait_healthy(timeout=180)
            work = base / "on-testbed"
            work.mkdir()
            print(f"two-node testbed, instance {args.instance} (the SGLang twin, scenario seed-gb10):")
            measure(testbed_config(bed, work), work, args.runs, on_testbed=True, code=code)
        except TestbedError as exc:
            print(f"testbed: {exc}", file=sys.stderr)
            return 1
        finally:
            bed.down()
        print(f"machine after: {machine_line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
