"""What one experiment costs flagbot, in counts rather than seconds (issue 16, item 9).

On a loaded machine wall-clock timings say nothing; counts do. This runs the built-in `try`
playbook with its real steps and a real SQLite store on the loop's fake target layer
(tests/support/loop_fake_target.py: no SSH, no server), `--runs` times, and prints per
experiment: its steps, the Python function calls on the event loop's thread (cProfile), the
store's SQL statements (SQLAlchemy `before_cursor_execute`, every thread) by kind, and the
strings and bytes redacted (`bot.redaction`, where that module exists). With
`--top N` it also prints the N functions called most per experiment and the N most frequent
statements, to diff between two commits.

It runs against another checkout too: `--root DIR` imports `bot` from DIR (e.g. an old commit,
with its own venv) and patches the target layer's functions where that checkout keeps them.
Prints figures; not a test. No root, no network.

    .venv/bin/python bench/experiment_counts.py [--runs 3] [--top 25] [--root DIR]
    .venv/bin/python bench/experiment_counts.py --ssh DIR/.venv/bin/flagbot
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import cProfile
import importlib
import importlib.util
import pstats
import re
import sys
import tempfile
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parents[1]

VALUES = ("0.85", "0.86")
"""`--mem-fraction-static` values set in turn: each run changes something, the fake's capacity stays."""

# (module, attribute, the fake's method): every place a checkout may keep a target-layer function
# the steps call. A name a checkout lacks is skipped (an older commit imports some inside functions,
# from their home modules, which are patched too).
SWAPS = (
    ("bot.loop.steps.target_steps", "heal_if_diverged", "heal_if_diverged"),
    ("bot.loop.steps.target_steps", "observe", "observe"),
    ("bot.loop.steps.target_steps", "read_unit", "read_unit"),
    ("bot.loop.steps.target_steps", "probe_health", "probe_health"),
    ("bot.loop.steps.target_steps", "apply_and_restart", "apply_and_restart"),
    ("bot.loop.steps.target_steps", "ensure_ready", "ensure_ready"),
    ("bot.loop.steps.analysis_steps", "run_preflight", "preflight"),
    ("bot.loop.preflight", "preflight", "preflight"),
    ("bot.loop.steps.measure_steps", "bench_plan", "bench_plan"),
    ("bot.loop.steps.analysis_steps", "bench_plan", "bench_plan"),
    ("bot.loop.steps.measure_steps", "run_plan", "run_plan"),
    ("bot.loop.steps.analysis_steps", "run_plan", "run_plan"),
    ("bot.bench.run", "run_plan", "run_plan"),
    ("bot.loop.steps.measure_steps", "compare_by_id", "compare_by_id"),
    ("bot.store.bench_repo", "compare_by_id", "compare_by_id"),
    ("bot.bench.compare_sets", "compare_by_id", "compare_by_id"),
    ("bot.loop.steps.state_steps", "observe", "observe"),
    ("bot.loop.steps.state_steps", "read_unit", "read_unit"),
)


def _fake_module() -> ModuleType:
    """This checkout's loop fake, loaded by path (an old checkout may not have it)."""
    spec = importlib.util.spec_from_file_location(
        "_loop_fake_target", HERE / "tests/support/loop_fake_target.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _patch(fake: Any) -> None:
    for module_name, attribute, method in SWAPS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, attribute):
            setattr(module, attribute, getattr(fake, method))
    target_steps = importlib.import_module("bot.loop.steps.target_steps")
    target_steps._while_the_server_loads = lambda: None  # type: ignore[attr-defined]
    for module_name in ("bot.loop.steps.measure_steps", "bot.bench.chart"):
        module = importlib.import_module(module_name)
        if hasattr(module, "render_chart"):
            module.render_chart = lambda *_a, **_k: None  # type: ignore[attr-defined]


class InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs what is submitted at once, on the caller's thread, so the profile of the event loop's
    thread holds the store's work too (the store's thread and `asyncio.to_thread`)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the awaiting caller, as a thread's would be
            future.set_exception(exc)
        return future


class Counts:
    """What one experiment did: statements by kind, redaction calls and bytes."""

    def __init__(self) -> None:
        self.statements: collections.Counter[str] = collections.Counter()
        self.redact_calls = 0
        self.redact_bytes = 0
        self.redact_data_calls = 0


def _kind(statement: str) -> str:
    """`SELECT experiment`, `UPDATE lease`, ...: the verb and the first table."""
    words = statement.split()
    verb = words[0].upper() if words else "?"
    table = re.search(r"\b(?:FROM|INTO|UPDATE)\s+\"?(\w+)", statement, re.IGNORECASE)
    return f"{verb} {table.group(1) if table else ''}".strip()


def _count_redaction(counts: Counts) -> bool:
    """Count what `bot.redaction` is given from now on (False: this checkout has none)."""
    try:
        redaction = importlib.import_module("bot.redaction")
    except ImportError:
        return False
    redactor = redaction.Redactor
    inner_redact, inner_data = redactor.redact, redactor.redact_data

    def redact(self: Any, text: str) -> str:
        counts.redact_calls += 1
        counts.redact_bytes += len(text.encode()) if text else 0
        return str(inner_redact(self, text))

    def redact_data(self: Any, value: Any) -> Any:
        counts.redact_data_calls += 1
        return inner_data(self, value)

    redactor.redact = redact
    redactor.redact_data = redact_data
    return True


def _who() -> str:
    """The product's frames on the stack, innermost first (where a statement came from)."""
    frames = traceback.extract_stack()
    return " <- ".join(f"{Path(f.filename).stem}:{f.name}" for f in reversed(frames) if "/bot/" in f.filename)


async def measure(runs: int, top: int, callers: list[str], trace: list[str]) -> None:
    from sqlalchemy import event

    from bot.loop.engine import Engine
    from bot.loop.report import MemoryReporter
    from bot.sglang.change import Change
    from bot.store import AsyncStore, Store
    from bot.store.experiments import list_steps

    fake_target = _fake_module()
    base = Path(tempfile.mkdtemp(prefix="flagbot-experiment-counts-"))
    opened = Store.open(None, sqlite_path=base / "state" / "flagbot.db")
    opened.upgrade()
    store = AsyncStore(opened)
    store._executor.shutdown(wait=True)
    store._executor = InlineExecutor()  # type: ignore[assignment]
    asyncio.get_running_loop().set_default_executor(InlineExecutor())
    engine = Engine(fake_target.settings(base), store, MemoryReporter(), cache_dir=base / "cache")
    counts: list[Counts] = [Counts()]

    @event.listens_for(opened.engine, "before_cursor_execute")
    def _statement(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        kind = _kind(statement)
        counts[-1].statements[kind] += 1
        if kind in trace and len(counts) == runs + 1:  # the last profiled run: who asked
            print(f"{kind} <- {_who()}")

    fake = fake_target.FakeTarget(opened)
    _patch(fake)
    calls: collections.Counter[str] = collections.Counter()
    statements: collections.Counter[str] = collections.Counter()

    async def one(run: int) -> tuple[Any, int]:
        counts.append(Counts())
        change = Change("set", "--mem-fraction-static", VALUES[run % 2])
        outcome = await engine.run(
            "try",
            {"changes": [change.to_json()], "keep": "always"},
            target=fake_target.TARGET,
            actor="cli:bench",
        )
        return outcome, len(list_steps(opened, outcome.experiment_id))

    try:
        for run in range(1, runs + 1):
            profile = cProfile.Profile()
            profile.enable()
            outcome, steps = await one(run)
            profile.disable()
            stats = pstats.Stats(profile)
            total = stats.total_calls  # type: ignore[attr-defined]
            if run == runs and callers:
                stats.print_callers(*callers)
            if run > 1:  # the first run pays imports and first-use caches
                for (filename, _line, name), row in stats.stats.items():  # type: ignore[attr-defined]
                    calls[f"{_short(filename)}:{name}"] += row[1]
                statements.update(counts[-1].statements)
            sql = sum(counts[-1].statements.values())
            print(
                f"run {run}: {outcome.status}, {steps} steps; calls {total} ({total // max(steps, 1)} per step);"
                f" SQL statements {sql} ({sql / max(steps, 1):.1f} per step)",
                flush=True,
            )
        # Redaction is counted in one more run, not profiled (the counting would add calls).
        redacted = Counts()
        if _count_redaction(redacted):
            outcome, steps = await one(runs + 1)
            print(
                f"run {runs + 1} (not profiled): {outcome.status}, {steps} steps; redact() {redacted.redact_calls}"
                f" calls, {redacted.redact_bytes} bytes; redact_data() {redacted.redact_data_calls} calls"
            )
        else:
            print("no bot.redaction in this checkout: nothing redacted")
        measured = max(runs - 1, 1)
        if top and runs > 1:
            print(f"\nstatements per experiment (mean of runs 2..{runs}):")
            for kind, n in statements.most_common():
                print(f"  {n / measured:8.1f}  {kind}")
            print(f"\nmost called functions per experiment (mean of runs 2..{runs}):")
            for name, n in calls.most_common(top):
                print(f"  {n / measured:9.1f}  {name}")
    finally:
        store._executor.shutdown(wait=True)
        opened.close()


async def count_ssh(flagbot: Path, words: list[str]) -> None:
    """One `flagbot try ...` (the console script given, of any checkout) against a fake node on
    loopback (tests/support/fake_node.py: asyncssh, systemd modelled, SGLang 0.5.23's
    `--help`): its SSH logins and the commands node 0 received, by kind."""
    sys.path.insert(0, str(HERE))  # the fake node of this checkout's tests
    flagbot = flagbot.absolute()
    from tests.support.fake_node import FakeNode, FakeSystemd, Keys
    from tests.support.host_flags import host_help

    base = Path(tempfile.mkdtemp(prefix="flagbot-experiment-ssh-"))
    keys = Keys.make(base, 1)
    node = FakeNode(FakeSystemd(), sglang_version="0.5.23", help_text=host_help())
    await node.start(keys.host_keys[0], keys.client_public)
    config = base / "flagbot.toml"
    config.write_text(
        'default_target = "lab"\n'
        f'[database]\nsqlite_path = "{base / "state" / "flagbot.db"}"\n'
        '[targets.lab]\nunit = "sglang-qwen.service"\nbase_url = "http://127.0.0.1:9"\n'
        f'nodes = [{{ host = "127.0.0.1", port = {node.port}, user = "ops" }}]\n'
        "[targets.lab.ssh]\nconnect_timeout = 5\ncommand_timeout = 30\n"
        f'key_path = "{keys.client_key}"\nknown_hosts = "{keys.known_hosts([node.port])}"\n'
    )
    try:
        upgrade = await asyncio.create_subprocess_exec(
            str(flagbot),
            "--config",
            str(config),
            "db",
            "upgrade",
            cwd=base,
            stdout=asyncio.subprocess.DEVNULL,
        )
        await upgrade.wait()  # an older flagbot does not create its SQLite schema on first use
        process = await asyncio.create_subprocess_exec(
            str(flagbot),
            "--config",
            str(config),
            *words,
            cwd=base,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
    finally:
        await node.stop()
    last = (out.decode().strip().splitlines() or err.decode().strip().splitlines() or ["(no output)"])[-1]
    kinds = collections.Counter(_command_kind(text) for text in node.received)
    print(f"flagbot {' '.join(words)}: exit {process.returncode}; {last}")
    print(
        f"  SSH logins {node.logins}, commands {len(node.received)}: "
        + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    )


def _command_kind(text: str) -> str:
    """`systemctl show`, `cat`, `python -c` (the version or --help), ...: what a command is."""
    words = [w for w in text.split() if w not in ("sudo", "-n", "env", "--") and "=" not in w]
    if not words:
        return "?"
    head = Path(words[0]).name
    if head.startswith("python"):
        return "python " + ("--help" if "--help" in text else "-c")
    return f"{head} {words[1]}" if head == "systemctl" and len(words) > 1 else head


def _short(filename: str) -> str:
    for marker in ("/site-packages/", "/bot/", "/lib/python"):
        if marker in filename:
            return (
                filename.split(marker, 1)[1] if marker != "/bot/" else "bot/" + filename.split(marker, 1)[1]
            )
    return filename


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--top", type=int, default=0, help="print the N most called functions too")
    parser.add_argument("--root", type=Path, default=HERE, help="the checkout whose `bot` is measured")
    parser.add_argument(
        "--callers", nargs="*", default=[], help="print the callers of functions matching these"
    )
    parser.add_argument(
        "--trace",
        nargs="*",
        default=[],
        help="statement kinds (e.g. 'SELECT baseline') to print the callers of",
    )
    parser.add_argument(
        "--ssh",
        type=Path,
        metavar="FLAGBOT",
        help="instead: count one `try` of this console script against a fake SSH node (logins, commands)",
    )
    args = parser.parse_args()
    if args.ssh is not None:
        words = ["try", "add", "--enable-metrics", "dry-run=yes"]
        asyncio.run(count_ssh(args.ssh, words))
        return
    sys.path.insert(0, str(args.root.resolve()))
    asyncio.run(measure(args.runs, args.top, args.callers, args.trace))


if __name__ == "__main__":
    main()
