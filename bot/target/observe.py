"""Observe the running server and store a snapshot of this start; the last healthy one is known-good.

What one start looked like, read without restarting anything: the journal lines of *this*
invocation only (`_SYSTEMD_INVOCATION_ID=`, read as JSON with `--all` so a 14 KB `server_args=`
line and tqdm's `\\r` lines survive), parsed by the foundation parser; the launch line's flags
against the printed `server_args` (implied flags); the parsed `max_running_requests` next to
the capacity line's and `/server_info`'s effective value; GPU facts from `nvidia-smi` on every
node; startup durations; SGLang's version and the source of its flag list. Other nodes' printed
arguments are compared with node 0's: they must match except `node_rank`.

Snapshot columns: `effective` holds the capacity line's values (the keys expectations use,
e.g. `max_running_requests`; under DP attention that key is the total across DP ranks, the
capacity line's per-rank value is `max_running_requests_per_dp`) plus `parsed_max_running_requests`, `server_info_effective_per_dp`,
`capacity_agree`, `capacity_notes`, `gpus`, `startup`, `readiness`, `flag_list`, `derived`,
`node_mismatch`, `journal` (source command and cursor range) and `start_figures` (the memory lines
`predict` computes from): the foundation's `Snapshot` has
no columns of their own for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bot.aio import gather_all_or_none, stop_tasks
from bot.http import async_client
from bot.redaction import redactor
from bot.sglang.capacity_model.figures import figures_json
from bot.sglang.catalog import FlagCatalog
from bot.sglang.log import parse_log_lines
from bot.sglang.log_report import chain_text
from bot.store.models import Snapshot
from bot.target.evidence import Evidence, TableBlock, TextBlock
from bot.target.flaglist import host_answered, host_catalog, host_version, remember_target
from bot.target.invocation_journal import journal_with_ready, ready_line_into
from bot.target.known_good import store_snapshot
from bot.target.launcher import sglang_invoker
from bot.target.nodestate import NodeLike, node_state, probe_health
from bot.target.readiness_result import Readiness
from bot.target.session import TargetSession
from bot.target.snapshot_facts import (
    GPU_FIELDS,
    args_mismatch,
    capacity,
    effective_values,
    implied_flags,
    is_release_difference,
    parse_gpus,
    release_defaults,
    requested_values,
    startup_durations,
)
from bot.target.unit import read_unit


async def _server_info(client: httpx.AsyncClient, base: str) -> dict[str, Any] | None:
    try:
        response = await client.get(base.rstrip("/") + "/server_info", timeout=10.0)
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return body if isinstance(body, dict) else None


@dataclass
class Observation:
    """One observed start of a target (the snapshot's content, and the evidence to show)."""

    target: str
    node: str
    invocation: str | None
    state: dict[str, Any]
    health: int | None
    requested: list[dict[str, Any]]
    environment: dict[str, str]
    server_args: dict[str, Any] | None
    implied: dict[str, dict[str, Any]]
    derived: dict[str, dict[str, Any]]
    unknown_flags: list[str]
    capacity: dict[str, Any]
    effective: dict[str, Any]
    ready: bool
    startup_error: str | None
    warnings: list[str]
    gpus: dict[str, list[dict[str, Any]]]
    startup: dict[str, float]
    sglang_version: str | None
    flag_list: dict[str, Any]
    node_mismatch: dict[str, dict[str, Any]]
    journal: dict[str, Any]
    readiness: dict[str, Any] | None = None
    snapshot_id: int | None = None
    known_good: bool = False
    evidence: list[Evidence] = field(default_factory=list)
    startup_error_chain: list[dict[str, Any]] = field(default_factory=list)
    """The failed start's chained traceback, oldest first; `startup_error` is its last entry."""
    warning_flags: dict[str, str] = field(default_factory=dict)
    """Adjustment warning text -> the `server_args` field it bears on (bot/sglang/adjustments.py)."""
    start_figures: dict[str, Any] = field(default_factory=dict)
    """The start's memory figures (`capacity_model.figures.figures_json`): what `predict` computes from."""

    @property
    def healthy(self) -> bool:
        """Ready line seen, `/health` 200 and no startup error: this start may become known-good."""
        return self.ready and self.health == 200 and self.startup_error is None

    def to_snapshot(self) -> Snapshot:
        """The store row: the foundation's columns, and the rest under `effective` (module doc)."""
        effective = dict(self.effective)
        effective |= {
            "parsed_max_running_requests": self.capacity["parsed_max_running_requests"],
            "server_info_effective_per_dp": self.capacity["server_info_effective_per_dp"],
            "dp_attention_size": self.capacity["dp_attention_size"],
            "parsed_max_running_requests_per_dp": self.capacity["parsed_max_running_requests_per_dp"],
            "effective_max_running_requests_total": self.capacity["effective_max_running_requests_total"],
            "server_info_max_total_num_tokens": self.capacity["server_info_max_total_num_tokens"],
            "capacity_agree": self.capacity["agree"],
            "capacity_notes": self.capacity["notes"],
            "gpus": self.gpus,
            "startup": self.startup,
            "readiness": self.readiness,
            "flag_list": self.flag_list,
            "derived": sorted(self.derived),
            "node_mismatch": self.node_mismatch,
            "journal": self.journal,
            "health": self.health,
            "start_figures": self.start_figures,
        }
        return Snapshot(
            target=self.target,
            node=self.node,
            invocation_id=self.invocation,
            sglang_version=self.sglang_version,
            requested_flags=self.requested,
            environment=self.environment,
            server_args=self.server_args,
            implied=self.implied,
            effective=effective,
            ready=self.ready,
            startup_error=self.startup_error,
            startup_seconds=self.startup.get("ready_s") or self.startup.get("readiness_total_s"),
            journal_cursor=self.journal.get("last_cursor"),
        )

    def to_json(self) -> dict[str, Any]:
        data = {key: value for key, value in self.__dict__.items() if key != "evidence"}
        data["healthy"] = self.healthy
        data["evidence"] = [block.to_json() for block in self.evidence]
        return data


async def observe(
    ts: TargetSession,
    *,
    readiness: Readiness | None = None,
    cache_dir: Path | None = None,
    client: httpx.AsyncClient | None = None,
    ready_wait_s: float = 5.0,
    store: bool = True,
    promote: bool = True,
    gpus: Mapping[str, list[dict[str, Any]]] | None = None,
) -> Observation:
    """Read the running start of `ts` (all nodes), store it as a snapshot, update known-good.

    `promote=False` stores the snapshot without making it known-good even when healthy: for a
    change still awaiting its verdict (a healthy start can still be a capacity regression).
    `gpus`: every node's GPU facts read moments ago from the same start (a preflight just
    before), used instead of asking nvidia-smi again; ignored unless every node has some.
    A `readiness` that did not stay for the journal's ready line (`ensure_ready`) gets the
    line's moments from the journal read here.
    """
    own = client is None
    http = client or async_client(timeout=5.0)
    gpu_reads: asyncio.Future[dict[str, list[dict[str, Any]]]]
    if gpus is not None and all(gpus.get(node.name) for node in ts.nodes):
        gpu_reads = asyncio.get_running_loop().create_future()
        gpu_reads.set_result(dict(gpus))
    else:  # the longest read, and needs nothing: started first
        gpu_reads = asyncio.ensure_future(read_gpus(ts))
    try:
        return await _observe(ts, gpu_reads, readiness, cache_dir, http, ready_wait_s, store, promote)
    finally:
        await stop_tasks([gpu_reads])  # still running only when a read it was started ahead of failed
        if own:
            await http.aclose()


async def _observe(
    ts: TargetSession,
    gpu_reads: asyncio.Future[dict[str, list[dict[str, Any]]]],
    readiness: Readiness | None,
    cache_dir: Path | None,
    http: httpx.AsyncClient,
    ready_wait_s: float,
    store: bool,
    promote: bool,
) -> Observation:
    base = await ts.http_base()
    view, states, health, info = await gather_all_or_none(
        read_unit(ts.node0),
        gather_all_or_none(*(node_state(node) for node in ts.nodes)),
        probe_health(http, base + "/health"),
        _server_info(http, base),
    )
    invocation = view.state.invocation_id
    python = sglang_invoker(view.prefix, view.launch.kind)

    async def read_flag_list() -> tuple[str | None, FlagCatalog, str]:
        reported = (info or {}).get("version") or await host_version(ts.node0, python)
        version = reported or ts.target.sglang_version
        catalog, source = await host_catalog(ts.node0, python=python, version=version, cache_dir=cache_dir)
        if reported and host_answered(source):  # the next command is judged by this list
            remember_target(cache_dir, ts.name, ts.target, str(reported))
        return version, catalog, source

    # independent reads at once: the journals, the flag list, the GPUs (SSH runs them side by side)
    journals, (version, catalog, source), gpus = await gather_all_or_none(
        gather_all_or_none(
            *(
                journal_with_ready(
                    node, state.invocation, healthy=health == 200 and node.index == 0, wait_s=ready_wait_s
                )
                for node, state in zip(ts.nodes, states, strict=True)
                if state.invocation
            )
        ),
        read_flag_list(),
        gpu_reads,
    )
    main = next((j for j in journals if j.node == ts.node0.name), None)
    if readiness is not None and main is not None:
        ready_line_into(readiness, main)
    report = main.report if main is not None else parse_log_lines([])
    for journal in journals:  # the expanded secrets SGLang printed (e.g. an EnvironmentFile's key)
        redactor().remember_mapping(journal.report.server_args or {})
    requested, unknown = requested_values(view.expanded_flags(view.flags), catalog)
    defaults = release_defaults(version)
    implied, derived = implied_flags(report.server_args or {}, requested, catalog, defaults)
    cap = capacity(report, info, version)
    mismatch = {
        journal.node: {k: list(v) for k, v in args_mismatch(report.server_args or {}, other).items()}
        for journal in journals
        if journal is not main and (other := journal.report.server_args)
    }
    startup = startup_durations(report, main.times if main else {})
    if readiness is not None:
        startup |= {f"readiness_{key}": value for key, value in readiness.timings.items()}
    flag_list = {
        "source": source,
        "version": catalog.version,
        "flags": len(catalog),
        "defaults": {**defaults.to_json(), "note": defaults.note()},
    }
    effective = effective_values(report.effective, cap)
    warnings = [str(w["text"]) for w in report.warnings]
    obs = Observation(
        target=ts.name,
        node=ts.node0.name,
        invocation=invocation,
        state={
            "ActiveState": view.state.active_state,
            "SubState": view.state.sub_state,
            "NRestarts": view.state.n_restarts,
        },
        health=health,
        requested=view.flags.to_json(),
        environment=dict(view.env),
        server_args=report.server_args,
        implied=implied,
        derived=derived,
        unknown_flags=unknown,
        capacity=cap,
        effective=effective,
        ready=report.ready,
        startup_error=report.startup_error,
        warnings=warnings,
        gpus=gpus,
        startup=startup,
        sglang_version=version,
        flag_list=flag_list,
        node_mismatch=mismatch,
        journal=main.range() if main else {},
        readiness=readiness.to_json() if readiness is not None else None,
        startup_error_chain=report.current.startup_error_chain if report.startup_error else [],
        warning_flags={str(w["text"]): str(w["flag"]) for w in report.warnings if w.get("flag")},
        start_figures=figures_json(report.current),
    )
    obs.evidence = observation_evidence(obs)
    if report.current.unparsed:
        unread = "\n".join(f"{key}: {reason}" for key, reason in sorted(report.current.unparsed.items()))
        obs.evidence.insert(-1, TextBlock(unread, "Printed but not read (unknown, not unset)"))
    if store and ts.store is not None:
        good = obs.healthy and promote
        snapshot = await ts.store.run(store_snapshot, ts.store.store, obs.to_snapshot(), good)
        obs.snapshot_id = snapshot.id
        obs.known_good = good
    return obs


async def read_gpus(ts: TargetSession) -> dict[str, list[dict[str, Any]]]:
    """Every node's GPUs (`nvidia-smi --query-gpu`); [] for a node whose query failed."""

    async def one(node: NodeLike) -> list[dict[str, Any]]:
        result = await node.run("gpu-query", gpu_fields=list(GPU_FIELDS), check=False, timeout=30)
        return parse_gpus(result.stdout.decode("utf-8", "replace")) if result.exit_status == 0 else []

    found = await asyncio.gather(*(one(node) for node in ts.nodes), return_exceptions=True)
    return {
        node.name: (gpus if isinstance(gpus, list) else [])
        for node, gpus in zip(ts.nodes, found, strict=True)
    }


def _field_label(key: str, entry: Mapping[str, Any]) -> str:
    """A field's name, with the nested path it was printed under (0.5.14+ graph settings)."""
    nested = entry.get("printed_as")
    return f"{key} (printed as {nested})" if nested else key


def _cell(value: object) -> str:
    return "—" if value is None else str(value)


def implied_tables(implied: dict[str, dict[str, Any]], defaults: dict[str, Any]) -> list[Evidence]:
    """The implied-flags table (each default's source in the `from` column) and, apart, the
    fields that differ only from another release's defaults, with the reason as the note."""
    blocks: list[Evidence] = []
    own = {key: entry for key, entry in implied.items() if not is_release_difference(entry)}
    other = {key: entry for key, entry in implied.items() if is_release_difference(entry)}

    def origin(entry: dict[str, Any]) -> str:
        if entry["source"] != "default":
            return str(entry["source"])
        return f"default ({entry.get('default_from') or 'flag list'})"

    if own:
        rows = tuple(
            (_field_label(key, entry), _cell(entry["value"]), _cell(entry["was"]), origin(entry))
            for key, entry in sorted(own.items())
        )
        blocks.append(
            TableBlock(
                "Implied flags (printed server_args vs request/default)",
                ("field", "printed", "was", "from"),
                rows,
            )
        )
    if other:
        listed = next(iter(other.values())).get("default_from") or "another release's list"
        rows = tuple(
            (_field_label(key, entry), _cell(entry["value"]), _cell(entry["was"]), listed)
            for key, entry in sorted(other.items())
        )
        blocks.append(
            TableBlock(
                f"Not implications: differs from another release's defaults ({listed})",
                ("field", "printed", "that list's default", "from"),
                rows,
                note=str(defaults.get("note") or "these defaults are another release's"),
            )
        )
    return blocks


def max_running_rows(cap: Mapping[str, Any]) -> tuple[tuple[str, str, str, str], ...]:
    """The `max_running_requests` rows: one row, or under DP attention one per DP rank (each
    against its share of the parsed total; only DP rank 0 prints the capacity line) and the total
    across ranks, so a per-rank value never stands next to the parsed total as a difference."""
    per_dp = cap.get("server_info_effective_per_dp") or []
    ranks = int(cap.get("dp_attention_size") or 1)
    if ranks == 1:
        return (
            (
                "max_running_requests",
                _cell(cap["parsed_max_running_requests"]),
                _cell(cap["log_max_running_requests"]),
                _cell(", ".join(str(v) for v in per_dp) if per_dp else None),
            ),
        )
    share = cap.get("parsed_max_running_requests_per_dp")
    rows = tuple(
        (
            f"max_running_requests per DP rank (DP{rank})",
            _cell(None if share is None else f"{share} = {cap['parsed_max_running_requests']} // {ranks}"),
            _cell(cap["log_max_running_requests"] if rank == 0 else None),
            _cell(per_dp[rank] if rank < len(per_dp) else None),
        )
        for rank in range(max(ranks, len(per_dp)))
    )
    total = (
        f"max_running_requests total ({ranks} DP ranks)",
        _cell(cap["parsed_max_running_requests"]),
        "—",
        _cell(cap.get("effective_max_running_requests_total")),
    )
    return (*rows, total)


def _error_text(headline: str, chain: list[dict[str, Any]]) -> str:
    """The headline, then the chained traceback it ends (oldest first) when there is one."""
    whole = chain_text(chain)
    return f"{headline}\n\n{whole}" if whole else headline


def observation_evidence(obs: Observation) -> list[Evidence]:
    """Tables a human reads: capacity side by side, implied flags, GPUs, startup."""
    cap = obs.capacity
    blocks: list[Evidence] = [
        TableBlock(
            "Capacity: parsed vs effective",
            ("value", "parsed (server_args)", "capacity line", "/server_info"),
            (
                *max_running_rows(cap),
                (
                    "max_total_num_tokens",
                    _cell((obs.server_args or {}).get("max_total_tokens")),
                    _cell(cap["log_max_total_num_tokens"]),
                    _cell(cap["server_info_max_total_num_tokens"]),
                ),
                *(
                    (
                        (
                            "max_mamba_cache_size (hybrid state cache)",
                            _cell((obs.server_args or {}).get("max_mamba_cache_size")),
                            _cell(cap["max_mamba_cache_size"]),
                            "—",
                        ),
                    )
                    if cap.get("max_mamba_cache_size") is not None
                    else ()
                ),
            ),
            note="; ".join(cap["notes"]),
        )
    ]
    blocks.extend(implied_tables(obs.implied, (obs.flag_list or {}).get("defaults") or {}))
    gpu_rows = tuple(
        (
            node,
            _cell(g.get("index")),
            _cell(g.get("name")),
            _cell(g.get("compute_cap")),
            f"{g.get('memory.used')}/{g.get('memory.total')} MiB",
        )
        for node, gpus in obs.gpus.items()
        for g in gpus
    )
    if gpu_rows:
        blocks.append(
            TableBlock(
                "GPUs (nvidia-smi)", ("node", "gpu", "name", "compute cap", "memory used/total"), gpu_rows
            )
        )
    if obs.startup:
        blocks.append(
            TableBlock(
                "Startup (s)", ("step", "seconds"), tuple((k, f"{v:.2f}") for k, v in obs.startup.items())
            )
        )
    for node, diff in obs.node_mismatch.items():
        if diff:
            blocks.append(
                TextBlock(
                    f"{node}'s server_args differ from node 0's beyond node_rank: {sorted(diff)}",
                    "Node mismatch",
                )
            )
    if obs.startup_error:
        blocks.append(TextBlock(_error_text(obs.startup_error, obs.startup_error_chain), "Startup error"))
    if obs.warnings:
        lines = [
            f"{text}  [bears on --{obs.warning_flags[text].replace('_', '-')}]"
            if text in obs.warning_flags
            else text
            for text in obs.warnings[:10]
        ]
        blocks.append(TextBlock("\n".join(lines), "SGLang's adjustment warnings"))
    blocks.append(
        TextBlock(f"journal read with: {obs.journal.get('command', '—')} (on {obs.node})", "Source")
    )
    return blocks
