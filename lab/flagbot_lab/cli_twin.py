"""`flagbot twin up|down|status`: the demo's GPU nodes, booted on this machine (as root).

`up` boots the testbed (real systemd, journald, sshd and sudo per node in systemd-nspawn) with
the SGLang twin as `sglang-qwen.service`, and writes `state/twin.toml`, a flagbot config whose
default target is those nodes: every other command then runs against them with
`flagbot --config state/twin.toml ...`. Every failure is one line on stderr, never a traceback.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flagbot_lab.testbed.layout import DEFAULT_BASE_DIR, DEFAULT_INSTANCE, STATE_DIR, TestbedError

if TYPE_CHECKING:
    from flagbot_lab.testbed import Testbed

twin_app = typer.Typer(
    help="Boot, inspect and stop the twin's GPU nodes on this machine (root; see docs/testbed.md).",
    no_args_is_help=True,
)

InstanceOption = Annotated[
    int,
    typer.Option(
        "--instance",
        "-i",
        help="Testbed instance 1..254 (10.200.<i>.0/24); the tests use 201.",
        min=1,
        max=254,
    ),
]


def _config_path(instance: int) -> Path:
    """`state/twin.toml` for the demo's instance, `state/twin-<i>.toml` for any other."""
    name = "twin.toml" if instance == DEFAULT_INSTANCE else f"twin-{instance}.toml"
    return STATE_DIR / name


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _preflight() -> None:
    from flagbot_lab.testbed import unavailable_reason

    reason = unavailable_reason()
    if reason:
        raise _fail(reason, code=2)


@twin_app.command("up")
def up(
    scenario: Annotated[str, typer.Option(help="Twin scenario (the hidden truth), see docs/twin.md.")] = (
        "seed-gb10"
    ),
    nodes: Annotated[int, typer.Option(help="Number of nodes.", min=1, max=16)] = 2,
    instance: InstanceOption = DEFAULT_INSTANCE,
    wait: Annotated[bool, typer.Option(help="Wait for node 0's /health to answer 200.")] = True,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for /health.")] = 300.0,
) -> None:
    """Boot the nodes, start the twin, write state/twin.toml."""
    from flagbot_lab.testbed import Testbed

    _preflight()
    config = _config_path(instance)
    bed = Testbed(instance, DEFAULT_BASE_DIR, nodes, scenario, config_path=config)
    try:
        times = bed.up()
    except TestbedError as exc:
        raise _fail(str(exc)) from None
    except KeyboardInterrupt:
        raise _fail("interrupted; what was started has been removed", code=130) from None
    layout = bed.layout
    typer.echo(
        f"testbed instance {instance}: {nodes} node(s) up, sshd answering after {times.sshd:.1f} s "
        f"(scenario {scenario})"
    )
    for k in range(nodes):
        typer.echo(
            f"  node {k}  {layout.hostname(k):<12} {layout.address(k):<15} ssh ops@{layout.address(k)}"
        )
    healthy = True
    if wait:
        try:
            waited = bed.wait_healthy(timeout)
            typer.echo(f"{bed.base_url}/health is 200 after another {waited:.1f} s")
        except TestbedError as exc:
            healthy = False
            typer.echo(f"warning: {exc}; the nodes stay up for a look (see docs/testbed.md)", err=True)
        except KeyboardInterrupt:
            healthy = False
            typer.echo("interrupted while waiting for /health; the nodes stay up", err=True)
    typer.echo(f"config: {config}")
    typer.echo(f"use it: flagbot --config {config} <command>   (target `twin`, the default in that file)")
    typer.echo(
        f"ssh:    ssh -i {layout.client_key} -o UserKnownHostsFile={layout.known_hosts} ops@{layout.address(0)}"
    )
    stop = "flagbot twin down" + ("" if instance == DEFAULT_INSTANCE else f" --instance {instance}")
    typer.echo(f"stop:   {stop}")
    if not healthy:
        raise typer.Exit(1)


@twin_app.command("down")
def down(instance: InstanceOption = DEFAULT_INSTANCE) -> None:
    """Stop the nodes and remove every mount, namespace, link, route, cgroup and process."""
    from flagbot_lab.testbed import Testbed, leftovers

    _preflight()
    bed = Testbed.attach(instance, DEFAULT_BASE_DIR)
    try:
        bed.down()
    except TestbedError as exc:
        raise _fail(str(exc)) from None
    left = leftovers(instance)
    if left:
        raise _fail(f"left behind: {'; '.join(left)}")
    typer.echo(f"testbed instance {instance}: down, nothing left behind")


def _unit_rows(bed: Testbed) -> list[str]:
    states = asyncio.run(bed.unit_states())
    codes = bed.health_codes()
    rows = []
    for k, (state, code) in enumerate(zip(states, codes, strict=True)):
        unit = state.error or f"{state.active}/{state.sub}"
        health = "refused" if code is None else str(code)
        restarts = state.restarts if state.error is None else "-"
        rows.append(f"{k:<5} {bed.layout.address(k):<15} {unit:<24} {restarts:<9} {health}")
    return rows


@twin_app.command("status")
def status(instance: InstanceOption = DEFAULT_INSTANCE) -> None:
    """Nodes, addresses, the unit's state (over SSH as ops) and /health of every node."""
    from flagbot_lab.testbed import Testbed

    _preflight()
    bed = Testbed.attach(instance, DEFAULT_BASE_DIR)
    try:
        info = bed.status()
    except TestbedError as exc:
        raise _fail(str(exc)) from None
    if info.state == "down" or not info.nodes:
        typer.echo(f"testbed instance {instance}: down (start it with `flagbot twin up`)")
        return
    typer.echo(f"testbed instance {instance}: {info.state} (scenario {info.scenario}); config {info.config}")
    typer.echo(f"{'node':<5} {'address':<15} {'sglang-qwen.service':<24} {'restarts':<9} /health")
    for line in _unit_rows(bed):
        typer.echo(line)
    stopped = [str(n.index) for n in info.nodes if not n.running]
    if stopped:
        raise _fail(f"node(s) {', '.join(stopped)} are not running; `flagbot twin down` then `up` again")
