"""Preflight: what a flag change would do, found out before it costs a restart.

Why: every restart of the seeds' server cost a model load, and three of the incident's surprises
were knowable up front: a flag that is inert on the GPU (hardware gating from the knowledge
base), a flag another flag switches on or off (implied flags, from the knowledge base and from
SGLang's own argument resolution on the host: the dry run), and an unknown or mistyped flag
that would exit 2 (the host's own flag list). Preflight reads, never writes: the unit on node 0,
the host's flag list and GPU facts, stored snapshots for the expected downtime, and it renders
the drop-in it would write as a diff against the current one.

A change that cannot work is `refused` (with the reason, in the words of the catalog or of
SGLang's argparse); everything else is a warning with its provenance.
"""

from __future__ import annotations

import asyncio
import difflib
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.aio import stop_tasks
from bot.loop.knowledge import FlagContext, Gate, ImpliedFlag, KnowledgeBase, ObservationLike
from bot.sglang.catalog import AmbiguousFlagError, FlagCatalog, FlagValueError, UnknownFlagError
from bot.sglang.change import Change, ChangeConflictError, apply_changes
from bot.sglang.flagset import FlagSet
from bot.target.dropin import render_dropin
from bot.target.dryrun import DryRunResult
from bot.target.dryrun import dry_run as run_dry
from bot.target.evidence import Evidence, TableBlock, TextBlock
from bot.target.flaglist import host_answered, host_catalog, host_version, remember_target
from bot.target.launcher import SglangInvoker, sglang_invoker
from bot.target.observe import read_gpus
from bot.target.restart import dropin_spec, flags_for_nodes
from bot.target.session import TargetSession
from bot.target.snapshot_facts import ALWAYS_DERIVED, implied_flags, release_defaults, requested_values
from bot.target.unit import UnitView, read_unit

DOWNTIME_STARTS = 10
"""Recent stored starts whose median startup time predicts the next one."""


@dataclass(frozen=True)
class Finding:
    """A warning and where it comes from (knowledge base source, dry run, flag list)."""

    text: str
    source: str

    def to_json(self) -> dict[str, str]:
        return {"text": self.text, "source": self.source}


@dataclass
class PreflightReport:
    """What preflight found; `refused` is set when the change must not be applied."""

    target: str
    node: str
    changes: list[Change]
    refused: str | None = None
    warnings: list[Finding] = field(default_factory=list)
    new_flags: FlagSet | None = None
    env: dict[str, str] = field(default_factory=dict)
    sglang_version: str | None = None
    flag_list: dict[str, Any] = field(default_factory=dict)
    gpus: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    gpus_read_at: float | None = None
    """When `gpus` was read (Unix seconds): a snapshot moments later may reuse it."""
    compute_capability: str | None = None
    gates: list[Gate] = field(default_factory=list)
    predicted: list[ImpliedFlag] = field(default_factory=list)
    dry_run: DryRunResult | None = None
    dry_run_current: DryRunResult | None = None
    implied: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Post-init fields the dry run printed differently from the request (all of them)."""
    implied_changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Fields SGLang resolves differently after the change than before it (beyond the change itself)."""
    downtime_s: float | None = None
    downtime_starts: int = 0
    dropin_diff: str = ""

    @property
    def ok(self) -> bool:
        return self.refused is None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "node": self.node,
            "ok": self.ok,
            "changes": [change.to_json() for change in self.changes],
            "refused": self.refused,
            "warnings": [warning.to_json() for warning in self.warnings],
            "new_flags": self.new_flags.to_json() if self.new_flags is not None else None,
            "env": dict(self.env),
            "sglang_version": self.sglang_version,
            "flag_list": self.flag_list,
            "gpus": self.gpus,
            "gpus_read_at": self.gpus_read_at,
            "compute_capability": self.compute_capability,
            "gates": [gate.to_json() for gate in self.gates],
            "predicted": [item.to_json() for item in self.predicted],
            "dry_run": self.dry_run.to_json() if self.dry_run is not None else None,
            "dry_run_current": self.dry_run_current.to_json() if self.dry_run_current is not None else None,
            "implied": self.implied,
            "implied_changes": self.implied_changes,
            "downtime_s": self.downtime_s,
            "downtime_starts": self.downtime_starts,
            "dropin_diff": self.dropin_diff,
        }

    def evidence(self) -> list[Evidence]:
        """Blocks for a human: refusal, warnings with provenance, predicted implied flags, downtime, diff."""
        blocks: list[Evidence] = []
        if self.refused:
            blocks.append(TextBlock(self.refused, "Preflight: refused"))
        if self.warnings:
            lines = [f"• {warning.text} [{warning.source}]" for warning in self.warnings]
            blocks.append(TextBlock("\n".join(lines), "Preflight warnings"))
        rows = [
            (item.field, _cell(item.value), item.trigger, "knowledge base: " + _refs(item))
            for item in self.predicted
        ]
        rows += [
            (
                name,
                f"{_cell(entry['before'])} -> {_cell(entry['after'])}",
                "the change",
                "dry run on the host",
            )
            for name, entry in sorted(self.implied_changes.items())
        ]
        if rows:
            blocks.append(
                TableBlock("Predicted implied flags", ("field", "value", "because of", "source"), tuple(rows))
            )
        if self.dry_run is not None and not self.dry_run.ok:
            why = self.dry_run.error or self.dry_run.reason or "no answer"
            blocks.append(TextBlock(f"{why}\ncommand: {self.dry_run.command}", "Dry run"))
        downtime = (
            f"about {self.downtime_s:.0f} s (median of the last {self.downtime_starts} starts)"
            if self.downtime_s is not None
            else "unknown: no stored start of this target yet"
        )
        blocks.append(TextBlock(f"Expected downtime: {downtime}", "Downtime"))
        if self.dropin_diff:
            blocks.append(TextBlock(self.dropin_diff, f"Drop-in change on {self.node}"))
        return blocks


def _cell(value: object) -> str:
    return "model-dependent" if value is None else str(value)


def _refs(item: ImpliedFlag) -> str:
    return "; ".join(source.ref for source in item.sources[:2]) or "no source"


def _source_refs(gate: Gate) -> str:
    return "knowledge base: " + ("; ".join(source.ref for source in gate.sources[:2]) or "no source")


async def expected_downtime(ts: TargetSession, limit: int = DOWNTIME_STARTS) -> tuple[float | None, int]:
    """(median startup seconds of recent stored starts, how many); (None, 0) when none is known."""
    if ts.store is None:
        return None, 0
    rows = await ts.store.run(ts.store.store.snapshots, ts.name)
    seconds = [row.startup_seconds for row in rows if row.startup_seconds is not None][:limit]
    return (float(statistics.median(seconds)), len(seconds)) if seconds else (None, 0)


def _check_changes(changes: Sequence[Change], catalog: FlagCatalog) -> str | None:
    """The catalog's own refusal for a flag the host's SGLang lacks or a value it would refuse."""
    for change in changes:
        if change.flag is None or change.op == "remove":
            continue
        try:
            spec = catalog.resolve(change.flag)
            catalog.check_value(spec, change.value)
        except (UnknownFlagError, AmbiguousFlagError, FlagValueError) as exc:
            return f"{change.describe()}: {exc}"
    return None


def _dropin_spec_env(env: dict[str, str], changes: Sequence[Change]) -> dict[str, str] | None:
    """The environment change the drop-in would carry (None: none; `dropin_spec` keeps what is
    there), as `apply_and_restart` is given it."""
    if any(change.op in ("env-set", "env-unset") for change in changes):
        return env
    return None


def _drop_in_diff(view: UnitView, flags: FlagSet, env: dict[str, str] | None) -> str:
    current = view.flagbot_dropin.text if view.flagbot_dropin is not None else ""
    would = render_dropin(dropin_spec(view, flags, env))
    lines = difflib.unified_diff(
        current.splitlines(keepends=True),
        would.splitlines(keepends=True),
        fromfile=f"{view.unit}.d/50-flagbot.conf now" if current else "(no flagbot drop-in)",
        tofile="after the change",
    )
    return "".join(lines)


def _changed(before: dict[str, Any], after: dict[str, Any], skip: set[str]) -> dict[str, dict[str, Any]]:
    keys = (set(before) | set(after)) - skip
    return {
        key: {"before": before.get(key), "after": after.get(key)}
        for key in sorted(keys)
        if before.get(key) != after.get(key)
    }


async def preflight(
    ts: TargetSession,
    *,
    changes: Sequence[Change],
    kb: KnowledgeBase,
    observations: Sequence[ObservationLike],
    cache_dir: Path | None,
    dry_run: bool = True,
    dry_run_timeout: float = 120,
) -> PreflightReport:
    """Check `changes` against the target of `ts` without touching it (see the module docstring).

    The GPU query needs nothing else and is the slowest read: it is asked first and answers
    while the unit, version and flag list are read; the dry runs then run while it finishes."""
    node = ts.node0
    report = PreflightReport(ts.name, node.name, list(changes))
    gpus = asyncio.ensure_future(read_gpus(ts))
    dry_runs: asyncio.Future[tuple[DryRunResult, DryRunResult]] | None = None
    try:
        resolved = await _resolve(ts, report, changes, cache_dir)
        if resolved is None:
            return report
        view, catalog, python = resolved
        assert report.new_flags is not None
        node_flags = flags_for_nodes(report.new_flags, len(ts.nodes))[0]
        if dry_run and python is not None:
            current_flags = flags_for_nodes(view.flags, len(ts.nodes))[0]
            dry_runs = asyncio.gather(  # `${NAME}` from an EnvironmentFile= as the process gets it
                run_dry(node, python=python, argv=view.expand(node_flags.argv()), timeout=dry_run_timeout),
                run_dry(node, python=python, argv=view.expand(current_flags.argv()), timeout=dry_run_timeout),
            )
        report.gpus = await gpus
        report.gpus_read_at = time.time()
        _gpu_findings(report)
        _knowledge_findings(
            report,
            kb,
            catalog,
            changes,
            FlagContext.of(
                report.new_flags,
                canonical=catalog.canonical,
                sglang_version=report.sglang_version,
                compute_capability=report.compute_capability,
                env=report.env,
            ),
        )
        if dry_run and python is None:
            report.warnings.append(
                Finding("no dry run: the unit does not start SGLang with a python interpreter", "unit")
            )
        elif dry_runs is not None:
            report.dry_run, report.dry_run_current = await dry_runs
            _dry_run_findings(report, catalog, view.expanded_flags(node_flags), changes, node.name)
        report.downtime_s, report.downtime_starts = await expected_downtime(ts)
        try:
            report.dropin_diff = _drop_in_diff(view, node_flags, _dropin_spec_env(report.env, changes))
        except ValueError as exc:  # e.g. a container's `-e` that cannot be rewritten in place
            report.refused = str(exc)
            return report
        _observed_findings(report, changes, observations)
        return report
    finally:  # refused, or failed, before a read started ahead was needed
        await stop_tasks([future for future in (gpus, dry_runs) if future is not None])


async def _resolve(
    ts: TargetSession, report: PreflightReport, changes: Sequence[Change], cache_dir: Path | None
) -> tuple[UnitView, FlagCatalog, SglangInvoker | None] | None:
    """The unit, the host's SGLang version and flag list, and the new flags (into `report`);
    None when the change is refused (`report.refused` says why)."""
    node = ts.node0
    view = await read_unit(node)
    python = sglang_invoker(view.prefix, view.launch.kind)
    reported = await host_version(node, python)
    version = reported or ts.target.sglang_version
    catalog, source = await host_catalog(node, python=python, version=version, cache_dir=cache_dir)
    if reported is not None and host_answered(source):  # the next command is judged by this list
        remember_target(cache_dir, ts.name, ts.target, reported)
    report.sglang_version = version
    report.flag_list = {"source": source, "version": catalog.version, "flags": len(catalog)}
    report.refused = _check_changes(changes, catalog)
    if report.refused is not None:
        return None
    try:
        report.new_flags, report.env = apply_changes(
            view.flags, view.env, changes, canonical=catalog.canonical
        )
    except ChangeConflictError as exc:
        report.refused = str(exc)
        return None
    return view, catalog, python


def _gpu_findings(report: PreflightReport) -> None:
    capabilities = sorted(
        {str(g["compute_cap"]) for gpus in report.gpus.values() for g in gpus if "compute_cap" in g}
    )
    report.compute_capability = capabilities[0] if len(capabilities) == 1 else None
    if len(capabilities) > 1:
        report.warnings.append(
            Finding(f"the nodes' GPUs differ: compute capability {', '.join(capabilities)}", "nvidia-smi")
        )


def _observed_findings(
    report: PreflightReport, changes: Sequence[Change], observations: Sequence[ObservationLike]
) -> None:
    for change in changes:
        if change.flag is not None and change.op != "remove":
            seen = [obs for obs in observations if obs.flag == change.flag]
            for obs in seen[:3]:
                report.warnings.append(
                    Finding(f"{change.flag}: {obs.text}", f"observed on {obs.target} [{obs.kind}]")
                )


def _knowledge_findings(
    report: PreflightReport,
    kb: KnowledgeBase,
    catalog: FlagCatalog,
    changes: Sequence[Change],
    ctx: FlagContext,
) -> None:
    """Gating, deprecation, version coverage and predicted implied flags of every added/set flag."""
    for change in changes:
        if change.flag is None or change.op == "remove":
            continue
        flag = catalog.canonical(change.flag)
        spec = catalog.get(flag)
        if spec is not None and spec.deprecated:
            report.warnings.append(
                Finding(
                    f"{flag} is deprecated in SGLang {catalog.version}: {spec.help}",
                    f"flag list ({report.flag_list['source']})",
                )
            )
        if report.compute_capability is not None:
            gate = kb.gating(flag, report.compute_capability)
            if gate is not None:
                report.gates.append(gate)
                report.warnings.append(Finding(gate.text, _source_refs(gate)))
        if report.sglang_version and kb.covers(flag, report.sglang_version) is False:
            entry = kb.entry(flag)
            versions = entry.versions if entry is not None else "?"
            report.warnings.append(
                Finding(
                    f"the knowledge base's facts on {flag} are for SGLang {versions}; this host runs {report.sglang_version}",
                    "knowledge base",
                )
            )
        report.predicted.extend(kb.implied(flag, ctx))


def _dry_run_findings(
    report: PreflightReport, catalog: FlagCatalog, flags: FlagSet, changes: Sequence[Change], node: str
) -> None:
    """Refuse what SGLang's argparse refuses; otherwise its implied flags and post-init warnings."""
    result, before = report.dry_run, report.dry_run_current
    if result is None:
        return
    if result.available and result.error is not None:
        report.refused = (
            f"SGLang on {node} refuses the new flags (it would exit {result.exit_status}): {result.error}"
        )
        return
    if not result.ok:
        report.warnings.append(Finding(f"no dry run on {node}: {result.reason}", "dry run"))
        return
    requested, _unknown = requested_values(flags, catalog)
    defaults = release_defaults(report.sglang_version)
    report.implied, derived = implied_flags(result.server_args or {}, requested, catalog, defaults)
    for text in result.warnings:
        report.warnings.append(Finding(text, f"SGLang's post-init on {node} (dry run)"))
    if before is not None and before.ok:
        asked = {
            spec.field for change in changes if change.flag is not None and (spec := catalog.get(change.flag))
        }
        skip = set(derived) | set(ALWAYS_DERIVED) | {name for name in asked if name is not None}
        report.implied_changes = _changed(before.server_args or {}, result.server_args or {}, skip)
