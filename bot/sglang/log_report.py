"""What the log parser found, per server start, and its JSON and human forms.

The report keeps the *parsed* arguments (what `server_args=` says after post-init) apart from
the *effective* capacity (what the scheduler printed once the KV pool existed), because the
two differ in ways a flag-tuning bot must show: speculative decoding resets
max_running_requests to 48, DP attention divides it per DP worker, a capacity line can clamp it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from bot.sglang.logline import parse_ranks
from bot.sglang.server_args import ServerArgsRead

PARSED_KEYS: tuple[str, ...] = (
    "max_running_requests",
    "tp_size",
    "model_path",
    "chunked_prefill_size",
    "dp_size",
    "mem_fraction_static",
    "speculative_algorithm",
    "context_length",
    "pp_size",
    "ep_size",
    "nnodes",
    "node_rank",
    "max_total_tokens",
    "max_prefill_tokens",
    "cuda_graph_max_bs",
    "disable_cuda_graph",
    "disable_piecewise_cuda_graph",
    "enable_dp_attention",
    "attention_backend",
    "kv_cache_dtype",
    "dtype",
    "quantization",
    "page_size",
    "served_model_name",
    "speculative_draft_model_path",
    "speculative_num_draft_tokens",
    "disaggregation_mode",
)
"""The server_args keys copied into `parsed` (null when the line lacks them)."""

EFFECTIVE_KEYS: tuple[str, ...] = (
    "max_running_requests",
    "max_total_num_tokens",
    "context_len",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "available_gpu_mem_gb",
)
_RANK_ORDER = ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP")

_LINE_KINDS = ("kv_cache", "weights", "cuda_graph", "mamba_cache")
LIST_CAP = 256
"""Per-start cap on kv_cache / weights / cuda_graph / warnings / errors entries (memory bound)."""


def _rank_key(label: str) -> tuple[int, ...]:
    ranks = parse_ranks(label)
    return tuple(ranks.get(name, 0) for name in _RANK_ORDER) + tuple(
        num for name, num in ranks.items() if name not in _RANK_ORDER
    )


def lowest_rank(labels: list[str]) -> str | None:
    """The label of the lowest rank ("" for the main process, else e.g. "TP0"); None if none."""
    return min(labels, key=_rank_key) if labels else None


@dataclass
class StartReport:
    """One server start: from its first line (or a `server_args=` / journald boundary) on."""

    first_line: int
    last_line: int = 0
    server_args: dict[str, Any] | None = None
    has_server_args: bool = False
    server_args_line: int | None = None
    server_args_complete: bool | None = None
    server_args_form: str | None = None
    """"repr" (`server_args=ServerArgs(...)`, 0.5.9-0.5.18) or "dict" (`server_args={...}`, 0.5.19+)."""
    server_args_nested: dict[str, str] = field(default_factory=dict)
    """Flat name -> the nested path it was read from (0.5.14+ graph settings; server_args.py)."""
    unparsed: dict[str, str] = field(default_factory=dict)
    """What this start printed but the parser could not read: name -> reason (never a silent null)."""
    parsed: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(PARSED_KEYS))
    per_rank: dict[str, dict[str, Any]] = field(default_factory=dict)
    distributed_init: list[dict[str, Any]] = field(default_factory=list)
    """`Init torch distributed begin.` / the NCCL line / `... ends.`, per rank (`log_events.distributed_init`)."""
    kv_cache: list[dict[str, Any]] = field(default_factory=list)
    weights: list[dict[str, Any]] = field(default_factory=list)
    cuda_graph: list[dict[str, Any]] = field(default_factory=list)
    mamba_cache: list[dict[str, Any]] = field(default_factory=list)
    """Hybrid models' state pool lines (`Mamba Cache is allocated. max_mamba_cache_size: N, ...`)."""
    mamba_cap: dict[str, Any] | None = None
    kv_dtype: str | None = None
    """`Using KV cache dtype: torch.bfloat16`, the KV pool's element type (`log_events.kv_dtype`)."""
    """0.5.23's `max_running_requests is capped to N by the mamba state cache (...)`, read."""
    warnings: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    ready: bool = False
    ready_line: int | None = None
    stage: str | None = None
    warnings_count: int = 0
    last_event_line: int = 0
    _warning_index: dict[str, int] = field(default_factory=dict, repr=False)

    def set_server_args(
        self, values: dict[str, Any] | None, complete: bool, line: int, read: ServerArgsRead | None = None
    ) -> None:
        self.server_args = values
        self.has_server_args = values is not None
        self.server_args_line = line
        self.server_args_complete = complete if values is not None else None
        self.parsed = {key: (values or {}).get(key) for key in PARSED_KEYS}
        self.server_args_form = read.form if read is not None else None
        self.server_args_nested = dict(read.nested) if read is not None else {}
        # a later server_args line replaces the earlier one's reasons; the line kinds' stay
        self.unparsed = {k: v for k, v in self.unparsed.items() if k in _LINE_KINDS}
        if read is not None:
            self.unparsed.update(read.unparsed)

    def add_warning(self, entry: dict[str, Any]) -> None:
        """Record a warning once per text; repeats (one per rank) only raise its count."""
        self.warnings_count += 1
        index = self._warning_index.get(entry["text"])
        if index is not None:
            self.warnings[index]["count"] += 1
        elif len(self.warnings) < LIST_CAP:
            self._warning_index[entry["text"]] = len(self.warnings)
            self.warnings.append({**entry, "count": 1})

    @property
    def effective(self) -> dict[str, Any]:
        """The capacity line of the lowest rank (TP0; or the first printed when unranked)."""
        values: dict[str, Any] = dict.fromkeys(EFFECTIVE_KEYS)
        if self.per_rank:
            order = {label: i for i, label in enumerate(self.per_rank)}
            label = min(self.per_rank, key=lambda lb: (_rank_key(lb), order[lb]))
            chosen = self.per_rank[label]
            values.update({key: chosen.get(key) for key in EFFECTIVE_KEYS})
        if values["chunked_prefill_size"] is None:
            values["chunked_prefill_size"] = self.parsed.get("chunked_prefill_size")
        return values

    @property
    def state_cache(self) -> dict[str, Any] | None:
        """The lowest rank's Mamba Cache line (with `line` and `rank`), or None for a model without one."""
        if not self.mamba_cache:
            return None
        label = lowest_rank([entry["rank"] for entry in self.mamba_cache])
        return next(entry for entry in self.mamba_cache if entry["rank"] == label)

    @property
    def startup_error_chain(self) -> list[dict[str, Any]]:
        """The error entries of the failed start's traceback chain, oldest first; [] if none.

        Python prints a chained traceback oldest first, each joined to the next by "During handling
        of the above exception, another exception occurred:" or "The above exception was the direct
        cause of the following exception:"; the last exception is the one that killed the start.
        The chain begins at the first fatal line before readiness (else the first weak one).
        """
        before = [e for e in self.errors if not e["after_ready"]]
        first = next((e for e in before if e["severity"] == "fatal"), None)
        if first is None:
            return [next(e for e in before if e["severity"] == "weak")] if before else []
        chain = [first]
        by_previous = {e["follows"]["line"]: e for e in before if "follows" in e}
        while (after := by_previous.get(chain[-1]["line"])) is not None and len(chain) <= LIST_CAP:
            chain.append(after)
        return chain

    @property
    def startup_error(self) -> str | None:
        """The last exception of the first fatal chain before readiness, else the first
        'something died' line (`startup_error_chain`)."""
        chain = self.startup_error_chain
        return str(chain[-1]["text"]) if chain else None

    def compact(self) -> None:
        """Drop the bulky parts of a start that is over; its summary stays in `starts`."""
        self.server_args = None
        self.kv_cache, self.weights, self.cuda_graph, self.warnings = [], [], [], []
        self.distributed_init = []
        self.mamba_cache = [entry for entry in [self.state_cache] if entry is not None]
        self.errors = [e for e in self.errors[:8] if not e["after_ready"]]
        self._warning_index = {}

    def summary_json(self) -> dict[str, Any]:
        return {
            "first_line": self.first_line,
            "last_line": self.last_line,
            "has_server_args": self.has_server_args,
            "server_args_line": self.server_args_line,
            "parsed": dict(self.parsed),
            "effective": self.effective,
            "ready": self.ready,
            "ready_line": self.ready_line,
            "startup_error": self.startup_error,
            "stage": self.stage,
            "warnings_count": self.warnings_count,
            "server_args_form": self.server_args_form,
            "unparsed": dict(self.unparsed),
        }


@dataclass
class LogReport:
    """The whole input: every start found, the last one described in full at the top level."""

    starts: list[StartReport]
    lines: int = 0
    starts_dropped: int = 0

    @property
    def current(self) -> StartReport:
        return self.starts[-1]

    @property
    def server_args(self) -> dict[str, Any] | None:
        return self.current.server_args

    @property
    def parsed(self) -> dict[str, Any]:
        return dict(self.current.parsed)

    @property
    def effective(self) -> dict[str, Any]:
        return self.current.effective

    @property
    def per_rank(self) -> dict[str, dict[str, Any]]:
        return self.current.per_rank

    @property
    def ready(self) -> bool:
        return self.current.ready

    @property
    def startup_error(self) -> str | None:
        return self.current.startup_error

    @property
    def warnings(self) -> list[dict[str, Any]]:
        return self.current.warnings

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types only; the key set is the same whatever the log held."""
        cur = self.current
        return copy.deepcopy(
            {
                "server_args": cur.server_args,
                "parsed": dict(cur.parsed),
                "effective": cur.effective,
                "per_rank": cur.per_rank,
                "ready": cur.ready,
                "startup_error": cur.startup_error,
                "startup_error_chain": cur.startup_error_chain,
                "warnings": cur.warnings,
                "starts": [start.summary_json() for start in self.starts],
                "server_args_line": cur.server_args_line,
                "server_args_complete": cur.server_args_complete,
                "server_args_form": cur.server_args_form,
                "server_args_nested": cur.server_args_nested,
                "unparsed": cur.unparsed,
                "ready_line": cur.ready_line,
                "stage": cur.stage,
                "errors": cur.errors,
                "distributed_init": cur.distributed_init,
                "kv_cache": cur.kv_cache,
                "weights": cur.weights,
                "cuda_graph": cur.cuda_graph,
                "mamba_cache": cur.mamba_cache,
                "state_cache": cur.state_cache,
                "mamba_cap": cur.mamba_cap,
                "lines": self.lines,
                "starts_dropped": self.starts_dropped,
            }
        )

    def summary(self) -> str:
        """A few lines for a chat reply: model, parallelism, parsed vs effective, status."""
        cur, parsed, eff = self.current, self.current.parsed, self.current.effective
        asked, got = parsed["max_running_requests"], eff["max_running_requests"]
        differs = "  <- effective differs from parsed" if None not in (asked, got) and asked != got else ""
        memory = eff["available_gpu_mem_gb"]
        out = [
            f"model: {_fmt(parsed['model_path'])}  tp={_fmt(parsed['tp_size'])} "
            f"dp={_fmt(parsed['dp_size'])}  spec={_fmt(parsed['speculative_algorithm'])}",
            f"max_running_requests: parsed={_fmt(parsed['max_running_requests'])} "
            f"effective={_fmt(eff['max_running_requests'])}{differs}",
            f"max_total_num_tokens={_fmt(eff['max_total_num_tokens'])} context_len={_fmt(eff['context_len'])} "
            f"chunked_prefill_size={_fmt(eff['chunked_prefill_size'])} "
            f"available_gpu_mem={'-' if memory is None else f'{memory} GB'}",
        ]
        if cur.ready:
            status = f"ready (line {cur.ready_line})"
        elif cur.startup_error:
            status = f"FAILED: {cur.startup_error[:300]}"
        else:
            status = f"not ready (last stage: {cur.stage or 'none seen'})"
        out.append(f"status: {status}")
        first = f" (first: {cur.warnings[0]['text'][:160]})" if cur.warnings else ""
        out.append(f"warnings: {cur.warnings_count}{first}")
        if cur.unparsed:
            unread = "; ".join(f"{key} ({reason})" for key, reason in sorted(cur.unparsed.items()))
            out.append(f"not read: {unread[:400]}")
        if len(self.starts) > 1 or self.starts_dropped:
            total = len(self.starts) + self.starts_dropped
            out.append(f"starts: {total}; this is the last (lines {cur.first_line}-{cur.last_line})")
        return "\n".join(out)


def chain_text(chain: list[dict[str, Any]]) -> str:
    """A chained traceback's exceptions, oldest first, each with how it follows the one before
    ("during handling of it", "caused by it") and its line number; "" for fewer than two."""
    if len(chain) < 2:
        return ""
    steps = [f"line {chain[0]['line']}: {chain[0]['text']}"]
    for entry in chain[1:]:
        how = (entry.get("follows") or {}).get("link", "then")
        steps.append(f"{how} it, line {entry['line']}: {entry['text']}")
    return "the whole chain, oldest first (the last one killed the start):\n" + "\n".join(steps)


def chain_of(report: LogReport, fatal: str | None) -> list[dict[str, Any]]:
    """The startup error chain holding `fatal` (a line readiness saw), newest start first; with
    no `fatal`, the last start's chain."""
    for start in reversed(report.starts):
        chain = start.startup_error_chain
        if chain and (fatal is None or any(entry["text"] == fatal for entry in chain)):
            return chain
    return []


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict) and "raw" in value:
        return str(value["raw"])[:80]
    return str(value)
