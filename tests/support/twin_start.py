"""One start of the twin's engine, in-process, stored as `observe` stores a snapshot: what a
`predict` test reads (no process, no SSH: the engine's own startup lines, parsed by flagbot)."""

from __future__ import annotations

from bot.sglang.capacity_model.figures import figures_json
from bot.sglang.log import parse_log_lines
from bot.sglang.log_report import StartReport
from bot.store.models import Snapshot
from flagbot_lab.twin.engine.scenario import Scenario, launch_argv, scenario_from_dict
from flagbot_lab.twin.engine.startup import resolve
from flagbot_lab.twin.schema import compile_scenario


def twin_scenario(name: str) -> Scenario:
    """A shipped twin scenario (lab/flagbot_lab/twin/scenarios/NAME.yaml)."""
    return scenario_from_dict(compile_scenario(name))


def twin_start(scenario: Scenario, extra: list[str] | None = None, *, seed: int = 1) -> StartReport:
    """The parsed start of the scenario's launch line (plus `extra`); it must reach its capacity line."""
    resolved = resolve(launch_argv(scenario, extra or []), scenario, start_seed=seed, env={})
    assert resolved.failure is None, resolved.failure
    return parse_log_lines([step.render(0.0) for step in resolved.steps]).current


def twin_snapshot(
    target: str, scenario: Scenario, extra: list[str] | None = None, *, seed: int = 1
) -> Snapshot:
    """The snapshot `observe` would store for that start (the fields `predict` reads)."""
    start = twin_start(scenario, extra, seed=seed)
    argv = launch_argv(scenario, extra or [])
    return Snapshot(
        target=target,
        node="node0",
        sglang_version=scenario.sglang_version,
        requested_flags=[{"flag": word, "value": None} for word in argv if word.startswith("--")],
        server_args=start.server_args,
        effective={
            **start.effective,
            "start_figures": figures_json(start),
            "gpus": {"node0": [{"memory.total": scenario.gpu.memory_mib}]},
        },
        ready=True,
    )
