"""The read-only loop commands as data: hypothesis add/list/show/close, knowledge list/show/forget,
log, baseline show/diff.

Why data (tables and lines) and not printing: the CLI prints it with rich, Slack renders the
same tables as Block Kit, and `--json` hands it to scripts; all three read the same rows the
same way (`bot.store` repositories, `bot.loop.logbook`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.bench.samples import level_of
from bot.commands import Invocation
from bot.config.section_base import parse_duration
from bot.loop.logbook import prediction_points, story
from bot.loop.postmortem import experiment_markdown
from bot.loop.run_state import band_text, flags_from_json
from bot.loop.snapshot_values import snapshot_value
from bot.sglang.change import diff_flagsets
from bot.store import KnowledgeObservation, Store
from bot.store.baselines import current_baseline
from bot.store.bench_repo import load_set
from bot.store.hypotheses import (
    add_hypothesis,
    experiments_of,
    get_hypothesis,
    list_hypotheses,
    resolve_hypothesis,
)
from bot.store.observations import get_observation, list_observations, retract_observation
from bot.store.records import audit
from bot.store.snapshots import get_snapshot

FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    return {
        "title": title,
        "columns": columns,
        "rows": [[("-" if c is None else str(c)) for c in r] for r in rows],
    }


def read(store: Store, invocation: Invocation, target: str, *, actor: str) -> dict[str, Any]:
    if invocation.name == "hypothesis":
        return _hypothesis(store, invocation, target, actor)
    if invocation.name == "knowledge":
        return _knowledge(store, invocation, actor)
    if invocation.name == "log":
        return _log(store, invocation, target)
    if invocation.name == "baseline":
        return _baseline(store, target, diff=invocation.sub == "diff")
    raise ValueError(f"{invocation.name} is not a read-only loop command")


def _hypothesis(store: Store, invocation: Invocation, target: str, actor: str) -> dict[str, Any]:
    sub = invocation.sub or "list"
    options = invocation.options
    if sub == "add":
        statement = str(invocation.positionals["text"])
        found = FLAG.search(statement)
        row = add_hypothesis(
            store,
            target=target,
            statement=statement,
            variable=options.get("variable") or (found.group(0) if found else None),
            expectations=[str(e) for e in invocation.expectations],
            because=options.get("because"),
            created_by=actor,
        )
        return {"hypothesis": row.model_dump(mode="json"), "lines": [f"hypothesis #{row.id} recorded (open)"]}
    if sub == "close":
        hypothesis_id = int(str(invocation.positionals["id"]))
        row = resolve_hypothesis(
            store,
            hypothesis_id,
            status=str(invocation.positionals["verdict"]),
            because=options.get("because"),
        )
        return {"hypothesis": row.model_dump(mode="json"), "lines": [f"hypothesis #{row.id}: {row.status}"]}
    if sub == "show":
        hypothesis_id = int(str(invocation.positionals["id"]))
        shown = get_hypothesis(store, hypothesis_id)
        if shown is None:
            raise LookupError(f"no hypothesis #{hypothesis_id}")
        row = shown
        experiments = experiments_of(store, hypothesis_id)
        rows = [[e.id, e.playbook, e.status, e.verdict, e.summary] for e in experiments]
        return {
            "hypothesis": row.model_dump(mode="json"),
            "experiments": [e.model_dump(mode="json") for e in experiments],
            "lines": [
                f"hypothesis #{row.id} ({row.status}): {row.statement}",
                f"variable: {row.variable or '-'}; expectations: {', '.join(row.expectations) or '-'}",
                f"because: {row.because or '-'}",
            ],
            "tables": [
                _table("Experiments that tested it", ["id", "playbook", "status", "verdict", "summary"], rows)
            ],
        }
    rows_found = list_hypotheses(store, target, status=options.get("status"))
    rows = [
        [
            h.id,
            h.status,
            h.statement,
            h.variable,
            ", ".join(h.expectations),
            len(experiments_of(store, int(h.id or 0))),
        ]
        for h in rows_found
    ]
    return {
        "hypotheses": [h.model_dump(mode="json") for h in rows_found],
        "tables": [
            _table(
                f"Hypotheses on {target}",
                ["id", "status", "statement", "variable", "expects", "experiments"],
                rows,
            )
        ],
    }


def _fact_row(obs: KnowledgeObservation) -> list[Any]:
    status = "learned" if obs.retracted_at is None else f"retracted ({obs.retracted_because})"
    where = obs.gpu_name or "-"
    return [obs.id, obs.flag, obs.kind, obs.text, where, obs.experiment_id, status]


FACT_COLUMNS = ["id", "flag", "kind", "fact", "GPU", "experiment", "status"]


def _knowledge(store: Store, invocation: Invocation, actor: str) -> dict[str, Any]:
    """`knowledge list|show|forget`: the learned facts; `forget` retracts one (kept, marked, never
    cited again) and writes the reason to the audit trail."""
    sub = invocation.sub or "list"
    options = invocation.options
    if sub in ("show", "forget"):
        fact_id = int(str(invocation.positionals["id"]))
        found = get_observation(store, fact_id)
        if found is None:
            raise LookupError(f"no knowledge fact #{fact_id}; `knowledge list` shows them")
        if sub == "forget":
            because = str(options.get("because") or "")
            row = retract_observation(store, fact_id, actor=actor, because=because)
            audit(
                store,
                actor=actor,
                target=row.target,
                action="knowledge forget",
                detail={"observation_id": fact_id, "because": row.retracted_because, "fact": row.text},
                experiment_id=row.experiment_id,
            )
            return {
                "observation": row.model_dump(mode="json"),
                "lines": [
                    f"knowledge fact #{fact_id} retracted: {row.text} (because: {row.retracted_because}); "
                    "ranking and preflight no longer cite it"
                ],
            }
        return {
            "observation": found.model_dump(mode="json"),
            "lines": [
                f"knowledge fact #{found.id} ({found.kind}, {found.flag}): {found.text}",
                f"learned on {found.target} by experiment #{found.experiment_id or '-'}; "
                f"evidence: {found.detail.get('evidence') or '-'}",
                "status: learned"
                if found.retracted_at is None
                else f"status: retracted by {found.retracted_by}: {found.retracted_because}",
            ],
        }
    rows_found = list_observations(
        store, flag=options.get("flag"), retracted=options.get("retracted") == "yes"
    )
    return {
        "observations": [o.model_dump(mode="json") for o in rows_found],
        "tables": [
            _table("What the knowledge base learned", FACT_COLUMNS, [_fact_row(o) for o in rows_found])
        ],
    }


def _log(store: Store, invocation: Invocation, target: str) -> dict[str, Any]:
    experiment = invocation.positionals.get("experiment")
    markdown = invocation.options.get("markdown") == "yes"
    if experiment is None and markdown:
        raise ValueError("markdown=yes shows one experiment: give its id, e.g. log 12 markdown=yes")
    if experiment is not None:
        text = experiment_markdown(store, int(str(experiment).lstrip("#")), target)
        if markdown:
            return {"experiment": int(str(experiment).lstrip("#")), "markdown": text, "lines": [text]}
        return {"experiment": int(str(experiment).lstrip("#")), "lines": [text]}
    limit = int(invocation.options.get("limit", 50))
    since_text = invocation.options.get("since")
    since = None
    if since_text:
        window = parse_duration(since_text)
        assert isinstance(window, timedelta)
        since = datetime.now(UTC) - window
    entries = story(store, target, since=since, limit=limit)
    rows = [[e.at.strftime("%Y-%m-%d %H:%M:%S"), e.kind, e.ref, e.text] for e in entries]
    tables = [
        _table(
            f"What was tried on {target}, and what was learned",
            ["when (UTC)", "kind", "ref", "what"],
            rows,
        )
    ]
    points = prediction_points(store, target, since=since, limit=limit)
    if points:
        tables.append(
            _table(
                "Capacity predicted before each try, and measured after it (effective max_running_requests)",
                ["when (UTC)", "experiment", "predicted (band)", "measured", "error", "outside the band"],
                [
                    [
                        p.at.strftime("%Y-%m-%d %H:%M:%S"),
                        f"#{p.experiment_id}",
                        band_text(p.predicted, p.low, p.high),
                        p.measured,
                        None if p.error is None else f"{p.error:+d}",
                        None if p.missed is None else ("yes" if p.missed else "no"),
                    ]
                    for p in points
                ],
            )
        )
    return {"entries": [e.to_json() for e in entries], "tables": tables}


def _baseline(store: Store, target: str, *, diff: bool) -> dict[str, Any]:
    base = current_baseline(store, target)
    if base is None:
        return {
            "ok": False,
            "lines": [f"no baseline pinned on {target}: `flagbot baseline pin` measures and pins one"],
        }
    snap = get_snapshot(store, base.snapshot_id)
    loaded = load_set(store, base.set_id) if base.set_id is not None else None
    lines = [
        f"baseline #{base.id} pinned {base.pinned_at:%Y-%m-%d %H:%M} UTC by {base.pinned_by}: snapshot #{base.snapshot_id}, "
        f"set #{base.set_id}" + (f" ({base.note})" if base.note else ""),
        f"effective max_running_requests {snapshot_value(snap, 'max_running_requests')} "
        f"(parsed {snapshot_value(snap, 'parsed.max_running_requests')})",
    ]
    data: dict[str, Any] = {"baseline": base.model_dump(mode="json"), "lines": lines}
    if loaded is not None:
        rows = [
            [
                level["concurrency"]  # a rate sweep's level has none: shown as rate=R
                if level["concurrency"] is not None
                else level_of(None, level.get("request_rate")),
                level.get("output_throughput"),
                level.get("median_ttft_ms"),
            ]
            for level in loaded.set.summary.get("levels", [])
        ]
        data["tables"] = [_table("Baseline benchmark", ["concurrency", "out tok/s", "TTFT p50 ms"], rows)]
    if diff and snap is not None:
        latest = store.latest_snapshot(target)
        if latest is not None:
            changes = diff_flagsets(
                flags_from_json(snap.requested_flags), flags_from_json(latest.requested_flags)
            )
            data["diff"] = [c.to_json() for c in changes]
            lines.append(
                f"now (snapshot #{latest.id}): "
                + (", ".join(c.describe() for c in changes) or "the same flags as the baseline")
                + f"; effective max_running_requests {snapshot_value(latest, 'max_running_requests')}"
            )
    return data
