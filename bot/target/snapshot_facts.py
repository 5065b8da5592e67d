"""Pure functions that turn what observe read into snapshot facts: implied flags, capacity, GPUs.

Implied flags: SGLang prints `server_args=` *after* its own adjustments, and most adjustment
messages never reach the log (python/sglang/srt/server_args.py: `__post_init__` logs before logging is configured). Diffing the printed values against what
the launch line asked for shows what SGLang (or a flag's side effect) changed behind the
operator's back. A field the launch line did not set is compared with the default of the
release the host runs (`ReleaseDefaults`): the packaged list of that release when there is one;
otherwise the nearest packaged list, named, and the differences from it are marked as
differences from another release (`same_release: false`), not shown as implications. SGLang's
`--help` prints no defaults (its parser uses argparse's plain formatter, `prepare_server_args`
in `sglang/srt/server_args.py`), so the host's own list cannot supply them. Some fields are
filled on every start whatever the flags (tokenizer path = model path, a random seed, capture
sizes from memory): they are kept apart as `derived`, so `implied` holds only real changes.

Capacity: the parsed `max_running_requests` (post-init arguments) is what the server was told;
the capacity line and `/server_info`'s `internal_states[i].effective_max_running_requests_per_dp`
are what it runs with. The seeds' incident was exactly this difference (48 parsed, 26
effective), so all three are kept side by side and any disagreement is a note, never hidden.

Under DP attention (`--enable-dp-attention --dp N`) the parsed value is the total and each DP
rank runs with its share: `_resolve_max_num_reqs` in
python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py takes
`max_running_requests // self.dp_size`, where `self.dp_size` is `dp_size` only with DP attention
(model_runner.py), and python/sglang/srt/managers/scheduler.py reports that per-rank value as
`effective_max_running_requests_per_dp` (one `internal_states` entry per DP rank) and prints the
capacity line only on `tp_rank == 0`, i.e. DP rank 0. So each rank's effective value is compared
with the share, not the total, and the effective total is the sum across ranks.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.sglang.catalog import AmbiguousFlagError, FlagCatalog, UnknownFlagError
from bot.sglang.flag_types import CONVERTERS
from bot.sglang.flagset import FlagSet
from bot.sglang.json_value import JsonValue
from bot.sglang.log_report import LogReport, lowest_rank
from bot.sglang.server_args import GRAPH_CONFIG, NESTED_FIELDS, PIECEWISE_DISABLED, flatten_nested, jsonable
from bot.sglang.state_cache import explain as explain_state_cache
from bot.target.lines import split_lines

ALWAYS_DERIVED = frozenset(
    {
        "cuda_graph_bs",
        "piecewise_cuda_graph_tokens",
        "random_seed",
        "tokenizer_path",
        "served_model_name",
        "device",
        "load_balance_method",
        "grammar_backend",
        "mamba_scheduler_strategy",
        "speculative_moe_runner_backend",
        "expert_distribution_recorder_buffer_size",
        "custom_weight_loader",
        "mm_process_config",
    }
)
"""Fields SGLang fills on every start (tokenizer path, random seed, capture sizes: python/sglang/srt/server_args.py `__post_init__`)."""
DERIVED_PREFIXES = ("kt_",)
GPU_FIELDS = ("index", "name", "uuid", "compute_cap", "driver_version", "memory.total", "memory.used")


def _convert(spec_type: str | None, value: str) -> JsonValue:
    converter = CONVERTERS.get(spec_type or "str", str)
    try:
        return converter(value)
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return value


def requested_values(flags: FlagSet, catalog: FlagCatalog) -> tuple[dict[str, Any], list[str]]:
    """(`ServerArgs` field -> value the launch line asks for, flags the catalog does not know).

    Names are resolved as SGLang's argparse would (aliases, unambiguous prefixes: `--tp 2` sets
    `tp_size`); values are converted with the flag's own type; the last occurrence wins.
    """
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for item in flags.items:
        try:
            spec = catalog.resolve(item.flag)
        except (UnknownFlagError, AmbiguousFlagError):
            unknown.append(item.flag)
            continue
        if spec.field is None:
            continue
        if spec.negates is not None:
            value: Any = False
        elif not spec.takes_value:
            value = spec.action != "store_false"
        else:
            words = item.value if isinstance(item.value, tuple) else (item.value,) if item.value else ()
            converted = [_convert(spec.type_name, word) for word in words]
            many = spec.nargs in ("+", "*") or (isinstance(spec.nargs, int) and spec.nargs > 1)
            value = converted if many else (converted[0] if converted else None)
        values[spec.field] = jsonable(value)
    return values, unknown


def _same(printed: object, expected: object) -> bool:
    if isinstance(printed, dict) and set(printed) == {"raw"} and not isinstance(expected, dict):
        raw = str(printed["raw"])
        return expected is not None and (repr(expected) in raw or str(expected) == raw)
    if isinstance(printed, float) or isinstance(expected, float):
        a, b = _float(printed), _float(expected)
        return a is not None and b is not None and abs(a - b) < 1e-9
    return bool(jsonable(printed) == jsonable(expected))


def _float(value: object) -> float | None:
    """`float(value)` for a number or numeric text; None for anything else."""
    if not isinstance(value, str | int | float):
        return None
    try:
        return float(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class ReleaseDefaults:
    """The defaults an implied-flag diff compares with, and whose they are.

    `catalog` holds the defaults (a packaged list); `running` is the SGLang version the host
    runs (None when unknown). They are the running release's own only when the packaged list is
    of exactly that version.
    """

    catalog: FlagCatalog
    running: str | None

    @property
    def same_release(self) -> bool:
        return self.running is not None and self.catalog.version == self.running

    @property
    def label(self) -> str:
        """Where each default comes from, as the table's `default from` column shows it."""
        return f"SGLang {self.catalog.version} list"

    def note(self) -> str | None:
        """Why the defaults may not be the host's; None when they are its release's own."""
        if self.same_release:
            return None
        host = (
            f"the host runs SGLang {self.running}, which has no packaged list"
            if self.running is not None
            else "the host's SGLang version is unknown"
        )
        return (
            f"{host} (and SGLang's --help prints no defaults), so defaults are those of the "
            f"nearest packaged list, SGLang {self.catalog.version}: a field that differs from them "
            "may differ by release, not be implied by a flag"
        )

    def to_json(self) -> dict[str, Any]:
        return {"from": self.label, "version": self.catalog.version, "same_release": self.same_release}


def release_defaults(version: str | None) -> ReleaseDefaults:
    """The defaults of SGLang `version`: its packaged list, else the nearest (`FlagCatalog.nearest`)."""
    catalog, _ = FlagCatalog.nearest(version)
    return ReleaseDefaults(catalog, version)


def implied_flags(
    server_args: Mapping[str, Any],
    requested: Mapping[str, Any],
    catalog: FlagCatalog,
    defaults: ReleaseDefaults | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(implied, derived): printed fields that differ from the request or the release's default.

    Each entry is `{"value": printed, "was": requested-or-default, "source": "requested" |
    "default"}`; a default entry also has `default_from` (the list it came from) and
    `same_release` (False: that list is another release's, so the difference may be one of
    release). `defaults` defaults to `catalog`'s own, taken as the running release's. Fields no
    flag sets (no known baseline) are left out.

    0.5.14+ print the graph settings nested (`cuda_graph_config.decode.max_bs`): they are
    compared under their flat names (`cuda_graph_max_bs`, `disable_piecewise_cuda_graph`; see
    `bot.sglang.server_args.NESTED_FIELDS`), with `"printed_as"` naming the nested path, and the
    baseline of the 0.5.14+ flag that sets them when the catalog has no flat flag; the nested
    record itself is not compared again.
    """
    defaults = defaults if defaults is not None else ReleaseDefaults(catalog, catalog.version)
    known = {spec.field: spec.default for spec in defaults.catalog if spec.field and spec.negates is None}
    added, nested, _unparsed = flatten_nested(dict(server_args))
    implied: dict[str, dict[str, Any]] = {}
    derived: dict[str, dict[str, Any]] = {}
    for key, printed in {**server_args, **added}.items():
        if key == GRAPH_CONFIG and nested:
            continue
        if key in requested:
            base, source = requested[key], "requested"
        elif key in known:
            base, source = jsonable(known[key]), "default"
        elif key in nested and (found := _nested_baseline(key, requested, known)) is not None:
            base, source = found
        else:
            continue
        if _same(printed, base):
            continue
        entry: dict[str, Any] = {"value": printed, "was": base, "source": source}
        if source == "default":
            entry |= {"default_from": defaults.label, "same_release": defaults.same_release}
        if key in nested:
            entry["printed_as"] = nested[key]
        noise = key in ALWAYS_DERIVED or key.startswith(DERIVED_PREFIXES)
        (derived if noise else implied)[key] = entry
    return implied, derived


def is_release_difference(entry: Mapping[str, Any]) -> bool:
    """True for an implied entry that differs only from another release's default."""
    return entry.get("source") == "default" and entry.get("same_release") is False


def _nested_baseline(
    key: str, requested: Mapping[str, Any], defaults: Mapping[str, Any]
) -> tuple[Any, str] | None:
    """The baseline of a flat graph field from the 0.5.14+ flag that now sets it (or None)."""
    if key == PIECEWISE_DISABLED:
        if requested.get("cuda_graph_backend_prefill") is not None:
            return requested["cuda_graph_backend_prefill"] == "disabled", "requested"
        if "disable_prefill_cuda_graph" in requested:
            return bool(requested["disable_prefill_cuda_graph"]), "requested"
        if "disable_prefill_cuda_graph" in defaults:
            return bool(defaults["disable_prefill_cuda_graph"]), "default"
        return None
    new = next((field for flat, _phase, _key, field in NESTED_FIELDS if flat == key), None)
    if new is None:
        return None
    if new in requested:
        return requested[new], "requested"
    if new in defaults:
        return jsonable(defaults[new]), "default"
    return None


def dp_attention_size(server_args: Mapping[str, Any] | None) -> int:
    """How many DP ranks split `max_running_requests`: `dp_size` under DP attention, else 1.

    Without DP attention each DP replica is a whole server with the whole limit (SGLang's
    model_runner.py: `self.dp_size = server_args.dp_size if server_args.enable_dp_attention else 1`).
    """
    args = server_args or {}
    size = args.get("dp_size")
    if args.get("enable_dp_attention") is True and isinstance(size, int) and size > 1:
        return size
    return 1


def per_dp_share(parsed: int | None, dp_ranks: int) -> int | None:
    """The part of the parsed total one DP rank may run (`max_running_requests // dp_size`)."""
    return None if parsed is None else parsed // dp_ranks


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def capacity(
    report: LogReport, server_info: Mapping[str, Any] | None, version: str | None = None
) -> dict[str, Any]:
    """Parsed vs effective capacity from the three sources, with notes on every disagreement.

    Each DP rank's effective value is compared with its share of the parsed total (module doc),
    so DP attention alone is no difference; a rank that differs from the others or from its
    share is named. A hybrid model's state cache (`Mamba Cache is allocated.
    max_mamba_cache_size: N`) is shown next to the KV tokens; when it is what caps
    `max_running_requests`, the note says so with SGLang's arithmetic for `version`
    (bot/sglang/state_cache.py).
    """
    info = server_info or {}
    states = [state for state in info.get("internal_states") or [] if isinstance(state, dict)]
    per_dp = [_int_or_none(state.get("effective_max_running_requests_per_dp")) for state in states]
    dp_ranks = dp_attention_size(report.server_args)
    parsed = report.parsed.get("max_running_requests")
    share = per_dp_share(parsed, dp_ranks)
    logged = report.effective.get("max_running_requests")
    tokens_log = report.effective.get("max_total_num_tokens")
    tokens_info = info.get("max_total_num_tokens")
    effective = [value for value in (logged, *per_dp) if value is not None]
    notes: list[str] = []
    if len(set(effective)) > 1:
        ranks = ", ".join(f"{value} (DP{rank})" for rank, value in enumerate(per_dp))
        notes.append(
            f"the capacity line (DP rank 0) says max_running_requests={logged} but /server_info "
            f"says {ranks} per DP rank"
        )
    whole = "" if dp_ranks == 1 else f" (its share of the total {parsed} over {dp_ranks} DP ranks)"
    if share is not None and effective and effective[0] != share:
        notes.append(
            f"effective max_running_requests {effective[0]} differs from the parsed {share}{whole}: "
            "the server runs with a different request limit than its arguments say"
        )
    if tokens_log is not None and tokens_info is not None and tokens_log != tokens_info:
        notes.append(f"max_total_num_tokens: capacity line {tokens_log}, /server_info {tokens_info}")
    state = report.current.state_cache
    cap_line = report.current.mamba_cap
    state_cap = explain_state_cache(
        effective[0] if effective else None, share, state, cap_line, report.server_args, version
    )
    if state_cap is not None:
        notes.append(state_cap)
    known_per_dp = [value for value in per_dp if value is not None]
    total = (
        sum(known_per_dp)
        if known_per_dp and len(known_per_dp) == len(per_dp)
        else (logged * dp_ranks if logged is not None and not per_dp else None)
    )
    return {
        "parsed_max_running_requests": parsed,
        "dp_attention_size": dp_ranks,
        "parsed_max_running_requests_per_dp": share,
        "log_max_running_requests": logged,
        "server_info_max_running_requests": info.get("max_running_requests"),
        "server_info_effective_per_dp": per_dp or None,
        "effective_max_running_requests": effective[0] if effective else None,
        "effective_max_running_requests_total": total,
        "log_max_total_num_tokens": tokens_log,
        "server_info_max_total_num_tokens": tokens_info,
        "agree": len(set(effective)) <= 1,
        "notes": notes,
        "max_mamba_cache_size": (state or {}).get("max_mamba_cache_size")
        if state
        else (cap_line or {}).get("max_mamba_cache_size"),
        "state_cache": dict(state) if state else None,
        "capped_by_state_cache": state_cap,
    }


def effective_values(logged: Mapping[str, Any], cap: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot's `effective` capacity values: the capacity line's, and under DP attention
    `max_running_requests` as the total across DP ranks (the rank's own value kept as
    `max_running_requests_per_dp`).

    Why the total: checks, expectations (`max_running_requests>=48`) and try's before vs after
    compare it with the parsed total or with a start without DP attention; one rank's share
    there would read as a lost capacity that is not.
    """
    effective = dict(logged)
    if effective.get("max_running_requests") is None:
        effective["max_running_requests"] = cap.get("effective_max_running_requests")
    total = cap.get("effective_max_running_requests_total")
    if int(cap.get("dp_attention_size") or 1) > 1 and total is not None:
        effective["max_running_requests_per_dp"] = effective["max_running_requests"]
        effective["max_running_requests"] = total
    return effective


def parse_gpus(text: str, fields: Sequence[str] = GPU_FIELDS) -> list[dict[str, Any]]:
    """`nvidia-smi --query-gpu=... --format=csv,noheader,nounits` -> one dict per GPU."""
    gpus: list[dict[str, Any]] = []
    for line in split_lines(text):
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(fields):
            continue
        gpu: dict[str, Any] = {}
        for key, cell in zip(fields, cells, strict=True):
            gpu[key] = int(cell) if cell.isdigit() else cell  # compute_cap stays "12.1"
        gpus.append(gpu)
    return gpus


def startup_durations(report: LogReport, times: Mapping[int, float]) -> dict[str, float]:
    """Seconds from the invocation's first line to its startup milestones (journal timestamps).

    `times[n]` is the journal timestamp of line `n` (1-based) as given to the parser: line 1
    and the milestones are enough (`InvocationJournal.times`).
    """

    def at(line: int | None) -> float | None:
        return times.get(line) if line is not None else None

    out: dict[str, float] = {}
    first = times.get(1)
    if first is None:
        return out
    capacity_lines = [entry.get("line") for entry in report.per_rank.values()]
    milestones = {
        "server_args_s": at(report.current.server_args_line),
        "capacity_s": at(min((line for line in capacity_lines if line), default=None)),
        "ready_s": at(report.current.ready_line),
    }
    for key, moment in milestones.items():
        if moment is not None:
            out[key] = round(moment - first, 3)
    weights = _one_rank_elapsed(report.current.weights)
    graphs = _one_rank_elapsed(report.current.cuda_graph)
    if weights:
        out["weight_load_s"] = round(sum(weights), 3)
    if graphs:
        out["graph_capture_s"] = round(sum(graphs), 3)
    return out


def _one_rank_elapsed(entries: list[dict[str, Any]]) -> list[float]:
    """The `end` lines' elapsed times of one rank (the lowest): ranks load and capture side by side."""
    ends = [entry for entry in entries if entry.get("phase") == "end"]
    rank = lowest_rank([str(entry.get("rank", "")) for entry in ends])
    return [float(entry.get("elapsed_s") or 0.0) for entry in ends if str(entry.get("rank", "")) == rank]


def args_mismatch(
    node0: Mapping[str, Any], other: Mapping[str, Any], ignore: Iterable[str] = ("node_rank",)
) -> dict[str, tuple[Any, Any]]:
    """Fields where another node's printed arguments differ from node 0's (beyond `ignore`).

    Multi-node SGLang needs the same flags on every node but `--node-rank` (SGLang's docs/references/multi_node_deployment/multi_node.md).
    """
    skip = set(ignore) | ALWAYS_DERIVED
    keys = (set(node0) | set(other)) - skip
    return {key: (node0.get(key), other.get(key)) for key in sorted(keys) if node0.get(key) != other.get(key)}
