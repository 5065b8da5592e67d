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

`--testbed` counts on the real path instead (root, the testbed's Debian packages): it boots the
two-node twin testbed bench/experiment_overhead.py boots (`--instance`), with that script's own
helpers from the measured checkout (its `Testbed`, `write_config`, `long_running`: the old commit
runs the engine directly, main `run_playbook` as `flagbot serve` does), runs one `flagbot try`
process to set the flag, then `--runs` experiments in this process with pooled SSH, and prints
per experiment, split into the time inside the steps' actions ("steps"), the rest of the
engine's run ("between": step rows, state, reports, the boundary checks) and what the caller did
around it ("around": `run_playbook`'s checks and settling): SSH logins and commands per node and
the bytes they returned (journald's too), SQL statements by kind, store round trips through the
AsyncStore worker thread by function, Python calls on the event loop's thread and on the store's
thread (cProfile), and the event loop's callbacks run (task wake-ups) by task.

    .venv/bin/python bench/experiment_counts.py [--runs 3] [--top 25] [--root DIR]
    .venv/bin/python bench/experiment_counts.py --ssh DIR/.venv/bin/flagbot
    .venv/bin/python bench/experiment_counts.py --testbed --instance 219 [--runs 3] [--top 25]
    /work/before/.venv/bin/python bench/experiment_counts.py --testbed --instance 219 --root /work/before
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import cProfile
import importlib
import importlib.util
import inspect
import os
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


PHASES = ("around", "between", "steps")
"""Where in an experiment the work happened: the caller's checks and settling around the engine's
run, the engine's own work between the steps' actions, the actions themselves."""


class Phase:
    """Counts of one phase of one experiment on the real path."""

    def __init__(self) -> None:
        self.logins: collections.Counter[str] = collections.Counter()
        self.commands: collections.Counter[str] = collections.Counter()
        self.received: collections.Counter[str] = collections.Counter()
        self.statements: collections.Counter[str] = collections.Counter()
        self.round_trips: collections.Counter[str] = collections.Counter()
        self.wakeups: collections.Counter[str] = collections.Counter()
        self.loop_profile = cProfile.Profile()
        self.store_profile = cProfile.Profile()
        self.loop_calls: collections.Counter[str] = collections.Counter()
        self.store_calls: collections.Counter[str] = collections.Counter()


class Tally:
    """The phase the event loop's thread is in now, and every experiment's phases so far."""

    def __init__(self) -> None:
        self.phase = "around"
        self.counting = False
        self.experiments: list[dict[str, Phase]] = []
        self.channel_kinds: dict[int, str] = {}

    def current(self) -> Phase | None:
        return self.experiments[-1][self.phase] if self.counting and self.experiments else None

    def enter(self, phase: str) -> str:
        """Switch the loop thread's profile to `phase`; return the phase left."""
        left = self.phase
        now = self.current()
        if now is not None:
            now.loop_profile.disable()
        self.phase = phase
        then = self.current()
        if then is not None:
            then.loop_profile.enable()
        return left

    def begin_experiment(self) -> None:
        self.enter("around")
        current = self.current()
        if current is not None:
            current.loop_profile.disable()
        self.experiments.append({name: Phase() for name in PHASES})
        self.counting = True
        self.enter("around")

    def stop(self) -> None:
        current = self.current()
        if current is not None:
            current.loop_profile.disable()
        self.counting = False


def _node_of(conn: Any) -> str:
    peer = conn.get_extra_info("peername") or ("?",)
    return str(peer[0])


def _wakeup_label(callback: Any) -> str:
    """A task's coroutine (what a wake-up resumes), else the callback's name."""
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        return "task " + str(getattr(coro, "__qualname__", type(coro).__name__))
    return "callback " + str(getattr(callback, "__qualname__", type(callback).__name__))


def _instrument(tally: Tally, opened_stores: list[Any]) -> None:
    """Hook asyncssh, the loop's callbacks, the store's round trips and the steps' actions of
    whatever `bot` is imported (the measured checkout's), counting into `tally`."""
    import asyncssh
    from asyncssh.channel import SSHChannel
    from sqlalchemy import event

    from bot.loop import runner
    from bot.loop.engine import Engine
    from bot.store import AsyncStore, Store

    connect = asyncssh.connect

    async def counted_connect(host: str, *args: Any, **kwargs: Any) -> Any:
        phase = tally.current()
        if phase is not None:
            phase.logins[f"{host}:{kwargs.get('port', 22)}"] += 1
        return await connect(host, *args, **kwargs)

    asyncssh.connect = counted_connect  # type: ignore[assignment]
    create_process = asyncssh.SSHClientConnection.create_process

    async def counted_process(self: Any, *args: Any, **kwargs: Any) -> Any:
        command = str(args[0] if args else kwargs.get("command", ""))
        kind = f"{_node_of(self)} {_command_kind(command)}"
        phase = tally.current()
        if phase is not None:
            phase.commands[kind] += 1
        process = await create_process(self, *args, **kwargs)
        tally.channel_kinds[id(process.channel)] = kind
        return process

    asyncssh.SSHClientConnection.create_process = counted_process  # type: ignore[method-assign,assignment]
    accept = SSHChannel._accept_data

    def counted_data(self: Any, data: bytes, datatype: Any = None) -> None:
        phase = tally.current()
        if phase is not None and data:
            phase.received[tally.channel_kinds.get(id(self), "other")] += len(data)
        accept(self, data, datatype)

    SSHChannel._accept_data = counted_data  # type: ignore[method-assign]
    handle_run = asyncio.events.Handle._run

    def counted_run(self: asyncio.events.Handle) -> None:
        phase = tally.current()
        if phase is not None:
            phase.wakeups[_wakeup_label(self._callback)] += 1  # type: ignore[attr-defined]
        handle_run(self)

    asyncio.events.Handle._run = counted_run  # type: ignore[method-assign]
    store_run = AsyncStore.run

    async def counted_round_trip(self: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        phase = tally.current()
        if phase is None:
            return await store_run(self, func, *args, **kwargs)
        phase.round_trips[getattr(func, "__name__", type(func).__name__)] += 1

        def profiled() -> Any:  # on the store's worker thread
            return phase.store_profile.runcall(func, *args, **kwargs)

        return await store_run(self, profiled)

    AsyncStore.run = counted_round_trip  # type: ignore[method-assign]
    store_open = Store.open

    def counted_open(*args: Any, **kwargs: Any) -> Any:
        opened = store_open(*args, **kwargs)

        @event.listens_for(opened.engine, "before_cursor_execute")
        def _statement(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            phase = tally.current()
            if phase is not None:
                phase.statements[_kind(statement)] += 1

        opened_stores.append(opened)
        return opened

    Store.open = counted_open  # type: ignore[method-assign]
    engine_run = Engine.run

    async def counted_engine_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        left = tally.enter("between")
        try:
            return await engine_run(self, *args, **kwargs)
        finally:
            tally.enter(left)

    Engine.run = counted_engine_run  # type: ignore[method-assign]
    get_action = runner.get_action  # type: ignore[attr-defined]

    def counted_action(name: str) -> Any:
        found = get_action(name)
        if found is None:
            return None
        func = found.func

        async def in_step(*args: Any, **kwargs: Any) -> Any:
            left = tally.enter("steps")
            try:
                return await func(*args, **kwargs)
            finally:
                tally.enter(left)

        return _WithFunc(found, in_step)

    runner.get_action = counted_action  # type: ignore[attr-defined]


class _WithFunc:
    """An action as the runner sees it, with its function wrapped (everything else the same)."""

    def __init__(self, action: Any, func: Any) -> None:
        self._action = action
        self.func = func

    def __getattr__(self, name: str) -> Any:
        return getattr(self._action, name)


def _overhead_script(root: Path) -> ModuleType:
    """The measured checkout's own bench/experiment_overhead.py (its testbed, config, long run)."""
    spec = importlib.util.spec_from_file_location(
        "_experiment_overhead", root / "bench/experiment_overhead.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def testbed_counts(root: Path, instance: int, runs: int, top: int) -> int:
    """Boot the testbed, set the flag with one `flagbot try`, count `runs` experiments in this process."""
    os.chdir(root)  # the load generator's workers import `bot` from the working directory too
    script = _overhead_script(root)
    if reason := script.unavailable_reason():
        print(f"error: {reason}", file=sys.stderr)
        return 2
    args = argparse.Namespace(
        flag="--enable-metrics", concurrency="1,8", repeats=2, requests=8, scenario="seed-gb10"
    )
    tally = Tally()
    opened: list[Any] = []
    _instrument(tally, opened)
    original_run = None
    try:
        from bot.app import runs as app_runs  # main: the caller's checks and settling are "around"

        original_run = app_runs.run_playbook

        async def each_experiment(*a: Any, **k: Any) -> Any:
            tally.begin_experiment()
            try:
                return await original_run(*a, **k)
            finally:
                tally.stop()

        app_runs.run_playbook = each_experiment
    except ImportError:  # the old commit: its script calls the engine directly
        from bot.loop.engine import Engine

        engine_run = Engine.run

        async def each_engine_run(self: Any, *a: Any, **k: Any) -> Any:
            tally.begin_experiment()
            try:
                return await engine_run(self, *a, **k)
            finally:
                tally.stop()

        Engine.run = each_engine_run  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="flagbot-experiment-counts-testbed-") as tmp:
        base = Path(tmp)
        bed = script.Testbed(instance, base, 2, args.scenario)
        bed.up(replace=True)
        try:
            bed.wait_healthy(300)
            config = script.write_config(bed, base, args)
            for words in (("db", "upgrade"), ("try", args.flag, "keep=always", "--json")):
                done = script.flagbot(config, *words)
                if done.returncode != 0:
                    why = (done.stderr.strip() or done.stdout.strip())[-2000:]
                    print(f"error: flagbot {' '.join(words)} ({done.returncode}): {why}", file=sys.stderr)
                    return 1
            # main's long_running is told the flag is set (the one `try` above set it); the old one
            # alternates on its own
            extra = (True,) if "added" in inspect.signature(script.long_running).parameters else ()
            finished = asyncio.run(script.long_running(config, args.flag, runs, *extra))
        finally:
            bed.down()
    print(f"root {root}; instance {instance}; {runs} experiments in one process (`try` of {args.flag})")
    for (eid, status, what), phases in zip(finished, tally.experiments, strict=True):
        print(f"\nexperiment #{eid} ({what}): {status}")
        _print_phases(phases, top=0)
    if runs > 1:
        print(f"\n== per experiment, mean of experiments 2..{runs}")
        _print_phases(_mean(tally.experiments[1:]), top=top, share=runs - 1)
    return 0


def _mean(experiments: list[dict[str, Phase]]) -> dict[str, Phase]:
    """The experiments' phases added up (printed divided by their number)."""
    summed = {name: Phase() for name in PHASES}
    for phases in experiments:
        for name, phase in phases.items():
            into = summed[name]
            for field in ("logins", "commands", "received", "statements", "round_trips", "wakeups"):
                getattr(into, field).update(getattr(phase, field))
            into.loop_calls.update(_calls(phase.loop_profile))
            into.store_calls.update(_calls(phase.store_profile))
    return summed


def _calls(profile: cProfile.Profile) -> collections.Counter[str]:
    """Calls per function of a profile (none if it never ran)."""
    calls: collections.Counter[str] = collections.Counter()
    try:
        stats = pstats.Stats(profile)
    except TypeError:  # an empty profile
        return calls
    for (filename, _line, name), row in stats.stats.items():  # type: ignore[attr-defined]
        calls[f"{_short(filename)}:{name}"] += row[1]
    return calls


def _print_phases(phases: dict[str, Phase], *, top: int, share: int = 1) -> None:
    def line(counter: collections.Counter[str], what: str, limit: int) -> None:
        total = sum(counter.values())
        items = counter.most_common(limit or None) if limit >= 0 else []
        print(f"    {what}: {total / share:,.1f}")
        for key, n in items:
            print(f"      {n / share:10,.1f}  {key}")

    for name in PHASES:
        phase = phases[name]
        print(f"  [{name}]")
        line(phase.logins, "SSH logins", 0)
        line(phase.commands, "SSH commands (node, kind)", 0)
        line(phase.received, "bytes received (node, command kind)", 0)
        line(phase.statements, "SQL statements", 0)
        line(phase.round_trips, "store round trips", 0)
        line(phase.wakeups, "event-loop callbacks run", top or 12)
        line(phase.loop_calls or _calls(phase.loop_profile), "Python calls, event loop's thread", top or -1)
        line(phase.store_calls or _calls(phase.store_profile), "Python calls, store's thread", top or -1)


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
    parser.add_argument("--testbed", action="store_true", help="instead: count on the twin testbed (root)")
    parser.add_argument("--instance", type=int, default=219, help="the testbed instance for --testbed")
    args = parser.parse_args()
    if args.testbed:
        sys.path.insert(0, str(args.root.resolve()))
        sys.exit(testbed_counts(args.root.resolve(), args.instance, args.runs, args.top))
    if args.ssh is not None:
        words = ["try", "add", "--enable-metrics", "dry-run=yes"]
        asyncio.run(count_ssh(args.ssh, words))
        return
    sys.path.insert(0, str(args.root.resolve()))
    asyncio.run(measure(args.runs, args.top, args.callers, args.trace))


if __name__ == "__main__":
    main()
