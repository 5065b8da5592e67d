"""A compiled scenario: the hidden truth one twin deployment runs on, as frozen dataclasses.

Why JSON and plain dataclasses: the YAML a human writes is validated on the host
(`lab/flagbot_lab/twin/schema.py`, pydantic) and compiled to JSON; the node has no YAML or pydantic, so the
engine only reads that JSON here. Every key of the JSON is a field name below; `load_scenario`
fills the defaults, so an older compiled file keeps loading.

The runtime reads `throughput`, `noise`, `faults` and `timings`; those field names are part of
the contract documented in docs/twin.md and must stay stable.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

Version = tuple[int, int]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Gpu:
    """The GPUs of one node (all alike). `idle_used_gib` is memory that is not free before the
    server starts (driver, display, on unified-memory parts like GB10 the OS itself)."""

    name: str
    compute_capability: Version
    memory_gib: float
    gpus_per_node: int
    cuda_version: Version
    driver_version: str = "580.95.05"
    idle_used_gib: float = 0.5
    flashinfer_available: bool = True

    @property
    def memory_mib(self) -> int:
        """Total memory as SGLang's `get_device_memory_capacity` reports it (MiB)."""
        return round(self.memory_gib * 1024)

    @property
    def capability(self) -> str:
        """`"12.1"`: what nvidia-smi prints as `compute_cap`."""
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"


@dataclass(frozen=True)
class Hybrid:
    """A hybrid linear-attention (mamba-like) model: only `full_attention_layers` hold KV cache;
    every running request also needs one slot of recurrent state of `state_bytes_per_request`
    bytes per rank (SGLang's `mamba_cache_per_req`: conv + ssm state of all linear layers; the
    speculative intermediate states are reserved apart, `hybrid.size_state_cache`)."""

    full_attention_layers: int
    state_bytes_per_request: int


@dataclass(frozen=True)
class Vision:
    """A multimodal model's vision tower, as `config.json`'s `vision_config` gives it: what
    SGLang's `adjust_mem_fraction_for_vlm` weighs to lower an automatic `mem_fraction_static`."""

    num_layers: int
    hidden_size: int


@dataclass(frozen=True)
class Quantization:
    """Shown in `Load weight end` as `quant=<method>, fmt=<fmt>`."""

    method: str
    fmt: str | None = None


@dataclass(frozen=True)
class Draft:
    """The speculative draft module (MTP head / EAGLE model) loaded when spec decoding is on."""

    weight_gib: float
    architecture: str


@dataclass(frozen=True)
class Model:
    """What SGLang would read from `config.json` and the checkpoint.

    `weight_gib` is the whole checkpoint in memory; each GPU holds `weight_gib / tp_size`.
    `kv_dtype_bytes` is the KV element size (2 for bf16, 1 for fp8).
    """

    path: str
    architecture: str
    model_type: str
    weight_gib: float
    num_layers: int
    num_kv_heads: int
    head_dim: int
    context_length: int
    kv_dtype_bytes: int = 2
    v_head_dim: int | None = None
    hybrid: Hybrid | None = None
    moe_top_k: int | None = None
    quantization: Quantization | None = None
    checkpoint_shards: int = 1
    draft: Draft | None = None
    multimodal: bool = False
    vision: Vision | None = None
    piecewise_unsupported: bool = False

    @property
    def kv_layers(self) -> int:
        """Layers that hold KV cache: all of them, or the full-attention ones of a hybrid."""
        return self.hybrid.full_attention_layers if self.hybrid else self.num_layers

    @property
    def value_head_dim(self) -> int:
        return self.head_dim if self.v_head_dim is None else self.v_head_dim


@dataclass(frozen=True)
class MemoryOverheads:
    """Memory the startup takes outside weights and pools, per GPU (GiB)."""

    dist_init_gib: float = 0.5
    pre_graph_gib: float = 0.15
    cuda_graph_gib_per_bs: float = 0.025
    piecewise_gib_per_size: float = 0.01


@dataclass(frozen=True)
class Timings:
    """Seconds of each startup phase at scale 1, plus the two wall-clock multipliers.

    The runtime waits `seconds * startup_scale` for startup phases and `seconds * decode_scale`
    for serving (prefill and token gaps); the two are separate so a test can start fast yet
    decode at the scenario's true speed, or the reverse.
    """

    startup_scale: float = 1.0
    decode_scale: float = 1.0
    import_s: float = 5.0
    dist_init_s: float = 2.0
    weight_load_s: float = 30.0
    kv_alloc_s: float = 0.5
    cuda_graph_s: float = 10.0
    piecewise_s: float = 30.0
    draft_s: float = 5.0
    server_start_s: float = 2.0
    warmup_s: float = 1.0
    rendezvous_timeout_s: float = 60.0


@dataclass(frozen=True)
class Throughput:
    """Decode and prefill speed at throughput factor 1, without noise.

    `aggregate_curve` is (running requests, total decode tok/s) points; between points the
    speed is interpolated linearly, beyond the last point it stays flat, and (1,
    `single_stream_tok_s`) is the first point when the curve does not give one.
    """

    single_stream_tok_s: float
    aggregate_curve: tuple[tuple[int, float], ...]
    prefill_tok_s: float

    def points(self) -> list[tuple[int, float]]:
        pts = sorted((int(n), float(v)) for n, v in self.aggregate_curve)
        if not pts or pts[0][0] > 1:
            pts.insert(0, (1, float(self.single_stream_tok_s)))
        return pts

    def aggregate_at(self, running: int) -> float:
        """Total decode tok/s with `running` requests in the batch (0 for an empty batch)."""
        if running <= 0:
            return 0.0
        pts = self.points()
        prev_n, prev_v = 0, 0.0
        for n, v in pts:
            if running <= n:
                return prev_v + (v - prev_v) * (running - prev_n) / (n - prev_n)
            prev_n, prev_v = n, v
        return prev_v

    def per_stream_at(self, running: int) -> float:
        """Decode tok/s of one stream when `running` requests share the batch."""
        return self.aggregate_at(running) / running if running > 0 else 0.0


@dataclass(frozen=True)
class Noise:
    """Seeded noise. `run_cv`: one multiplicative factor per server start; `request_cv`: per
    request; `restart_memory_jitter_gib`: half-width of the uniform jitter of free memory
    measured at each start (bounded, so a scenario can promise its effective values)."""

    seed: int = 0
    run_cv: float = 0.0
    request_cv: float = 0.0
    restart_memory_jitter_gib: float = 0.0


@dataclass(frozen=True)
class Faults:
    """Injected failures the runtime (requests, warmup, crash) and the memory model (OOM) act on."""

    request_failure_fraction: float = 0.0
    hang_during_warmup: bool = False
    crash_after_s: float | None = None
    oom_start: bool = False
    hang_in: str | None = None
    """A stage the start hangs in, silent (`engine/hangs.py`); `hang_node`: the node rank that
    hangs (None: every node)."""
    hang_node: int | None = None


@dataclass(frozen=True)
class CapabilityRange:
    """Compute capabilities (inclusive) and minimum CUDA a feature needs to take effect."""

    min: Version
    max: Version
    min_cuda: Version | None = None

    def contains(self, gpu: Gpu) -> bool:
        if not self.min <= gpu.compute_capability <= self.max:
            return False
        return self.min_cuda is None or gpu.cuda_version >= self.min_cuda


@dataclass(frozen=True)
class Effect:
    """What a flag (or a combination) does to the twin.

    `memory_gib`: taken before the KV pool is sized (fewer tokens); `lazy_memory_gib`: taken
    after startup (only the free memory shown drops); a hybrid model's state cache is sized from
    what `memory_gib` leaves, as SGLang sizes it (`hybrid.py`), so it costs state slots too;
    `implies`: ServerArgs fields set as if by SGLang's post-init; `throughput_factor` multiplies
    decode speed; `crash`: the start fails with this exception line; `startup_extra_s` is added
    to CUDA graph capture; `hang_during_warmup`: uvicorn comes up (so `/health` answers 503) but
    the warmup request never completes, as a collective that deadlocks on the first forward pass;
    `hang_in` / `hang_node`: the start stops printing in that stage on that node rank (None:
    every node) and never becomes ready (`engine/hangs.py`).
    """

    memory_gib: float = 0.0
    lazy_memory_gib: float = 0.0
    implies: Mapping[str, Any] = field(default_factory=dict)
    throughput_factor: float = 1.0
    crash: str | None = None
    startup_extra_s: float = 0.0
    hang_during_warmup: bool = False
    hang_in: str | None = None
    hang_node: int | None = None


@dataclass(frozen=True)
class Condition:
    """`field` of the post-init ServerArgs is truthy (`equals` False) or equals `value`."""

    flag: str
    field: str
    value: Any = None
    equals: bool = False

    def holds(self, server_args: Mapping[str, Any]) -> bool:
        current = server_args.get(self.field)
        return current == self.value if self.equals else bool(current)


@dataclass(frozen=True)
class Rule:
    """One per-flag effect (one condition) or interaction (several, all must hold).

    `effect` applies only where `requires` holds for the node's GPU (elsewhere the flag is a
    no-op); `side_effects` apply whenever the conditions hold.
    """

    when: tuple[Condition, ...]
    effect: Effect = field(default_factory=Effect)
    side_effects: Effect = field(default_factory=Effect)
    requires: CapabilityRange | None = None

    @property
    def name(self) -> str:
        return " + ".join(c.flag for c in self.when)

    def matches(self, server_args: Mapping[str, Any]) -> bool:
        return all(c.holds(server_args) for c in self.when)

    def effects_on(self, gpu: Gpu) -> list[Effect]:
        """The effects that apply on `gpu` once the conditions hold."""
        met = self.requires is None or self.requires.contains(gpu)
        return [self.side_effects, self.effect] if met else [self.side_effects]


@dataclass(frozen=True)
class Scenario:
    """Everything the twin pretends: hardware, model, deployment, speed, noise, flag effects."""

    name: str
    gpu: Gpu
    nodes: int
    model: Model
    launch: tuple[str, ...]
    throughput: Throughput
    timings: Timings = field(default_factory=Timings)
    noise: Noise = field(default_factory=Noise)
    faults: Faults = field(default_factory=Faults)
    memory: MemoryOverheads = field(default_factory=MemoryOverheads)
    flags: tuple[Rule, ...] = ()
    interactions: tuple[Rule, ...] = ()
    description: str = ""
    sglang_version: str = "0.5.10"
    nccl_version: str = "2.27.5"

    def rules(self) -> tuple[Rule, ...]:
        return self.flags + self.interactions

    def active_effects(self, server_args: Mapping[str, Any]) -> list[tuple[Rule, Effect]]:
        """(rule, effect) for every effect that applies with these post-init arguments."""
        found: list[tuple[Rule, Effect]] = []
        for rule in self.rules():
            if rule.matches(server_args):
                found.extend((rule, effect) for effect in rule.effects_on(self.gpu))
        return found


# -- loading ----------------------------------------------------------------------------------


def _convert(hint: Any, value: Any, where: str) -> Any:
    """Convert one JSON value to the annotated type (dataclasses, tuples, versions, scalars)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return _convert(next(a for a in args if a is not type(None)), value, where)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected an object, got {value!r}")
        return _build(hint, value, where)
    if origin is tuple:
        if isinstance(value, str):  # a version written "12.1"
            major, _, minor = value.partition(".")
            return int(major), int(minor or 0)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
        if len(value) != len(args):
            raise ValueError(f"{where}: expected {len(args)} items, got {value!r}")
        return tuple(
            _convert(a, item, f"{where}[{i}]") for i, (a, item) in enumerate(zip(args, value, strict=True))
        )
    if origin is Mapping or hint is Mapping:
        return dict(value)
    if hint in (int, float, str, bool):
        if hint in (int, float) and isinstance(value, bool | str):
            raise ValueError(f"{where}: expected a number, got {value!r}")
        return hint(value)
    return value


def _build(cls: type[_T], data: Mapping[str, Any], where: str) -> _T:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}")
    kwargs = {name: _convert(hints[name], value, f"{where}.{name}") for name, value in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}") from None


def scenario_from_dict(document: Mapping[str, Any]) -> Scenario:
    """Build a Scenario from the compiled JSON document (see `lab/flagbot_lab/twin/schema.py`); keys are the
    dataclass field names, missing optional keys take the defaults above."""
    return _build(Scenario, document, "scenario")


def load_scenario(path: str | Path) -> Scenario:
    """Read a compiled scenario JSON file (what `install.py` writes to /etc/sglang-twin/)."""
    with open(path, encoding="utf-8") as fh:
        document = json.load(fh)
    if not isinstance(document, dict):
        raise ValueError(f"{path}: a scenario must be a JSON object")
    return scenario_from_dict(document)


def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    """The JSON document `load_scenario` reads back into an equal Scenario."""
    document: dict[str, Any] = _plain(dataclasses.asdict(scenario))
    return document


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def launch_argv(scenario: Scenario, extra: Sequence[str] = ()) -> list[str]:
    """The scenario's baseline flags followed by `extra` (what a unit's ExecStart passes)."""
    return [*scenario.launch, *extra]
