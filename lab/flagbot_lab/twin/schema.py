"""The twin's scenario files: YAML a human writes, validated here, compiled to the engine's JSON.

Why two forms: a scenario is hidden truth that tests and the demo rely on, so a typo must fail
loudly on the host, naming the file and the key (pydantic models with `extra="forbid"`);
the node only has the standard library, so it gets a compiled JSON document whose keys are
exactly the engine's dataclass fields (`lab/flagbot_lab/twin/engine/scenario.py`). Compiling also
resolves flag names with flagbot's catalog of the scenario's `sglang_version` (`--tp 2` style
prefixes are refused here: a scenario names flags in full) and parses the launch line with the
twin's own argparse surface of that release, so a scenario cannot ship a launch line the twin
would reject.

The schema is documented key by key in docs/twin.md.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.sglang.catalog import FlagCatalog, UnknownFlagError
from flagbot_lab.twin.engine import args as engine_args
from flagbot_lab.twin.engine.scenario import scenario_from_dict

SCENARIO_DIR = Path(__file__).parent / "scenarios"
RESERVED_LAUNCH_FLAGS = (
    "--nnodes",
    "--node-rank",
    "--dist-init-addr",
    "--nccl-init-addr",
    "--host",
    "--port",
)
"""Flags `install.unit_text` adds per node; a scenario's `launch` must not carry them."""


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _version_text(value: Any) -> str:
    """`12.1`, `"12.1"`, `"10.x"` (any minor) -> `"12.1"`, `"10.99"`."""
    text = str(value).strip()
    major, dot, minor = text.partition(".")
    if minor == "x":
        minor = "99"
    if not major.isdigit() or (dot and not minor.isdigit()):
        raise ValueError(f"expected a version like '12.1', got {value!r}")
    return f"{int(major)}.{int(minor or 0)}"


class Gpu(_Strict):
    name: str
    compute_capability: str
    memory_gib: float = Field(gt=0)
    gpus_per_node: int = Field(ge=1)
    cuda_version: str
    driver_version: str = "580.95.05"
    idle_used_gib: float = Field(default=0.5, ge=0)
    flashinfer_available: bool = True

    _versions = field_validator("compute_capability", "cuda_version", mode="before")(_version_text)


class Hybrid(_Strict):
    full_attention_layers: int = Field(ge=1)
    state_bytes_per_request: int = Field(ge=1)


class Vision(_Strict):
    num_layers: int = Field(ge=1)
    hidden_size: int = Field(ge=1)


class Quantization(_Strict):
    method: str
    fmt: str | None = None


class Draft(_Strict):
    weight_gib: float = Field(ge=0)
    architecture: str


class Model(_Strict):
    path: str
    architecture: str
    model_type: str
    weight_gib: float = Field(gt=0)
    num_layers: int = Field(ge=1)
    num_kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    context_length: int = Field(ge=1)
    kv_dtype_bytes: int = Field(default=2, ge=1)
    v_head_dim: int | None = None
    hybrid: Hybrid | None = None
    moe_top_k: int | None = None
    quantization: Quantization | None = None
    checkpoint_shards: int = Field(default=1, ge=1)
    draft: Draft | None = None
    multimodal: bool = False
    vision: Vision | None = None
    piecewise_unsupported: bool = False


class MemoryOverheads(_Strict):
    dist_init_gib: float = Field(default=0.5, ge=0)
    pre_graph_gib: float = Field(default=0.15, ge=0)
    cuda_graph_gib_per_bs: float = Field(default=0.025, ge=0)
    piecewise_gib_per_size: float = Field(default=0.01, ge=0)


class Timings(_Strict):
    startup_scale: float = Field(default=1.0, gt=0)
    decode_scale: float = Field(default=1.0, gt=0)
    import_s: float = Field(default=5.0, ge=0)
    dist_init_s: float = Field(default=2.0, ge=0)
    weight_load_s: float = Field(default=30.0, ge=0)
    kv_alloc_s: float = Field(default=0.5, ge=0)
    cuda_graph_s: float = Field(default=10.0, ge=0)
    piecewise_s: float = Field(default=30.0, ge=0)
    draft_s: float = Field(default=5.0, ge=0)
    server_start_s: float = Field(default=2.0, ge=0)
    warmup_s: float = Field(default=1.0, ge=0)
    rendezvous_timeout_s: float = Field(default=60.0, gt=0)


class Throughput(_Strict):
    single_stream_tok_s: float = Field(gt=0)
    aggregate_curve: list[tuple[int, float]] = Field(min_length=1)
    prefill_tok_s: float = Field(gt=0)

    @field_validator("aggregate_curve")
    @classmethod
    def _increasing(cls, points: list[tuple[int, float]]) -> list[tuple[int, float]]:
        running = [n for n, _ in points]
        if any(n < 1 for n in running) or running != sorted(set(running)):
            raise ValueError("points must have strictly increasing running counts >= 1")
        if any(v <= 0 for _, v in points):
            raise ValueError("aggregate tok/s must be > 0")
        return points


class Noise(_Strict):
    seed: int = 0
    run_cv: float = Field(default=0.0, ge=0, lt=1)
    request_cv: float = Field(default=0.0, ge=0, lt=1)
    restart_memory_jitter_gib: float = Field(default=0.0, ge=0)


HangStage = Literal["distributed_init", "weight_load", "graph_capture", "warmup"]
"""A startup stage the twin can hang in silently (`engine/hangs.py`)."""


class Faults(_Strict):
    request_failure_fraction: float = Field(default=0.0, ge=0, le=1)
    hang_during_warmup: bool = False
    crash_after_s: float | None = Field(default=None, gt=0)
    oom_start: bool = False
    hang_in: HangStage | None = None
    hang_node: int | None = Field(default=None, ge=0)


class CapabilityRange(_Strict):
    min: str
    max: str
    min_cuda: str | None = None

    _versions = field_validator("min", "max", "min_cuda", mode="before")(
        lambda v: None if v is None else _version_text(v)
    )


class Effect(_Strict):
    memory_gib: float = Field(default=0.0, ge=0)
    lazy_memory_gib: float = Field(default=0.0, ge=0)
    implies: dict[str, Any] = Field(default_factory=dict)
    throughput_factor: float = Field(default=1.0, gt=0)
    crash: str | None = None
    startup_extra_s: float = Field(default=0.0, ge=0)
    hang_during_warmup: bool = False
    hang_in: HangStage | None = None
    hang_node: int | None = Field(default=None, ge=0)


class _RuleBase(Effect):
    """A rule's effect (the keys of `Effect`, applied where `requires_compute_capability`
    holds: elsewhere the flag is a no-op) and its `side_effects` (applied everywhere)."""

    requires_compute_capability: CapabilityRange | None = None
    side_effects: Effect = Field(default_factory=Effect)


class FlagRule(_RuleBase):
    """One flag's rule; `value` matches a flag that takes a value (default: any truthy value)."""

    value: Any = None


class FlagMatch(_Strict):
    flag: str
    value: Any = None


class InteractionRule(_RuleBase):
    """Effects that appear only when all `flags` hold at once."""

    flags: list[str | FlagMatch] = Field(min_length=2)


class ScenarioFile(_Strict):
    name: str
    description: str = ""
    sglang_version: Literal["0.5.9", "0.5.10", "0.5.23"] = "0.5.10"
    """The release the twin is (engine/releases.py): its flags, post-init, log lines, bench module."""
    nccl_version: str = "2.27.5"
    gpu: Gpu
    nodes: int = Field(ge=1)
    model: Model
    launch: list[str] = Field(min_length=2)
    timings: Timings = Field(default_factory=Timings)
    throughput: Throughput
    noise: Noise = Field(default_factory=Noise)
    faults: Faults = Field(default_factory=Faults)
    memory: MemoryOverheads = Field(default_factory=MemoryOverheads)
    flags: dict[str, FlagRule] = Field(default_factory=dict)
    interactions: list[InteractionRule] = Field(default_factory=list)

    @field_validator("launch", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return value.split() if isinstance(value, str) else value


# -- loading and compiling --------------------------------------------------------------------


def scenario_names() -> list[str]:
    """The shipped scenarios (`lab/flagbot_lab/twin/scenarios/*.yaml`), by name."""
    return sorted(path.stem for path in SCENARIO_DIR.glob("*.yaml"))


def scenario_path(name_or_path: str | Path) -> Path:
    """A shipped scenario's file for a bare name, else the path as given."""
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or "/" in text or text.endswith((".yaml", ".yml")):
        return Path(name_or_path)
    path = SCENARIO_DIR / f"{text}.yaml"
    if not path.is_file():
        raise ScenarioError(f"no scenario named {text!r}; shipped: {', '.join(scenario_names())}")
    return path


def _validated(name_or_path: str | Path) -> tuple[Path, ScenarioFile]:
    path = scenario_path(name_or_path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: a scenario must be a mapping of keys")
    try:
        parsed = ScenarioFile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}" for err in exc.errors()
        )
        raise ScenarioError(f"{path}: {problems}") from None
    if not isinstance(name_or_path, Path) and str(name_or_path) == path.stem and parsed.name != path.stem:
        raise ScenarioError(f"{path}: name: {parsed.name!r} does not match the file name {path.stem!r}")
    return path, parsed


def load_scenario_yaml(name_or_path: str | Path) -> dict[str, Any]:
    """The validated scenario (defaults filled) as plain data; raises ScenarioError."""
    return _validated(name_or_path)[1].model_dump(mode="json")


def _field(catalog: FlagCatalog, flag: str, where: str) -> tuple[str, bool]:
    """(ServerArgs field, takes a value) of a flag named in full."""
    spec = catalog.get(flag)
    if spec is None:
        try:
            hint = f"; did you mean {catalog.resolve(flag).name}?"
        except (UnknownFlagError, ValueError):
            hint = ""
        raise ScenarioError(f"{where}: {flag} is not an SGLang {catalog.version} flag{hint}")
    if spec.field is None:
        raise ScenarioError(f"{where}: {flag} sets no ServerArgs field (deprecated no-op)")
    return spec.field, spec.takes_value


def _condition(catalog: FlagCatalog, flag: str, value: Any, where: str) -> dict[str, Any]:
    name, takes_value = _field(catalog, flag, where)
    if takes_value and value is None:
        raise ScenarioError(f"{where}: {flag} takes a value; say which with `value:`")
    condition: dict[str, Any] = {"flag": flag, "field": name}
    if value is not None:
        condition.update(value=value, equals=True)
    return condition


def _effect(catalog: FlagCatalog, effect: Effect, where: str) -> dict[str, Any]:
    data = effect.model_dump(include=set(Effect.model_fields))
    implies: dict[str, Any] = {}
    for flag, value in effect.implies.items():
        name, takes_value = _field(catalog, flag, f"{where}.implies")
        if not takes_value and not isinstance(value, bool):
            raise ScenarioError(f"{where}.implies: {flag} is a switch; its value must be true or false")
        implies[name] = value
    data["implies"] = implies
    return data


def _rule(catalog: FlagCatalog, rule: _RuleBase, when: list[dict[str, Any]], where: str) -> dict[str, Any]:
    req = rule.requires_compute_capability
    return {
        "when": when,
        "effect": _effect(catalog, rule, where),
        "side_effects": _effect(catalog, rule.side_effects, f"{where}.side_effects"),
        "requires": None if req is None else req.model_dump(),
    }


def _check_launch(path: Path, launch: list[str], version: str) -> None:
    for token in launch:
        if token.split("=", 1)[0] in RESERVED_LAUNCH_FLAGS:
            raise ScenarioError(f"{path}: launch: {token} is added per node by the unit; leave it out")
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            engine_args.parse(launch, version)
    except SystemExit:
        message = err.getvalue().strip().splitlines()[-1:] or ["argparse refused it"]
        raise ScenarioError(f"{path}: launch: {message[0]}") from None


def compile_scenario(name_or_path: str | Path) -> dict[str, Any]:
    """The engine's JSON document for a scenario (what install.py writes to the node)."""
    path, parsed = _validated(name_or_path)
    _check_launch(path, parsed.launch, parsed.sglang_version)
    catalog = FlagCatalog.load(parsed.sglang_version)
    document = parsed.model_dump(mode="json", exclude={"flags", "interactions"})
    document["launch"] = list(parsed.launch)
    document["flags"] = [
        _rule(
            catalog,
            rule,
            [_condition(catalog, flag, rule.value, f"{path}: flags.{flag}")],
            f"{path}: flags.{flag}",
        )
        for flag, rule in parsed.flags.items()
    ]
    document["interactions"] = []
    for i, rule in enumerate(parsed.interactions):
        where = f"{path}: interactions[{i}]"
        when = [
            _condition(catalog, m, None, where)
            if isinstance(m, str)
            else _condition(catalog, m.flag, m.value, where)
            for m in rule.flags
        ]
        document["interactions"].append(_rule(catalog, rule, when, where))
    try:
        scenario_from_dict(document)
    except ValueError as exc:  # a schema/engine mismatch is a bug here, but say where
        raise ScenarioError(f"{path}: does not load in the engine: {exc}") from None
    return document
