"""The shape of `flagbot.toml`: every section later features fill, published now so configs stay valid.

Every model forbids unknown keys: a typo in a config must fail loudly at start, not silently
fall back to a default on a production GPU host.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger
from pydantic import AfterValidator, AwareDatetime, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from bot.config.change_rules import (
    DEFAULT_ENV_ALLOW,
    DEFAULT_PROTECTED_FLAGS,
    ChangeRules,
    ProtectedMode,
)
from bot.config.datasets import DatasetError, parse_dataset
from bot.config.drain import CommandHook, DrainPolicy
from bot.config.replicas import ReplicaSettings
from bot.config.section_base import Duration, Strict
from bot.config.slack_settings import SlackSettings, TargetRBAC
from bot.config.unit_names import check_service_name, is_template, template_instance
from bot.config.verdicts import Verdicts
from bot.redaction import DEFAULT_SECRET_FLAGS, DEFAULT_SECRET_NAMES, install_log_redaction
from bot.redaction import configure as configure_redaction

TARGET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


class Node(Strict):
    """One host of a target. Node 0 of a target serves HTTP and prints the capacity line."""

    host: str
    port: int = Field(22, ge=1, le=65535)
    user: str = "flagbot"
    unit: str | None = None
    """This node's own service when it differs from the target's `unit` (a head/worker pair such
    as `sglang-head.service` and `sglang-worker.service`, or one instance of a template such as
    `sglang@1.service`); None: the target's. Every command for this node uses it."""

    @field_validator("unit")
    @classmethod
    def _node_unit(cls, value: str | None) -> str | None:
        return None if value is None else check_service_name(value)


class JumpHost(Strict):
    host: str
    port: int = Field(22, ge=1, le=65535)
    user: str = "flagbot"


class SSHSettings(Strict):
    """How flagbot reaches a target's nodes. Host keys are always verified against `known_hosts`."""

    key_path: Path = Path("~/.ssh/flagbot_ed25519")
    known_hosts: Path = Path("~/.ssh/known_hosts")
    jump_host: JumpHost | None = None
    sudo: bool = True
    connect_timeout: Duration = timedelta(seconds=10)
    command_timeout: Duration = timedelta(seconds=60)


class TargetTimeouts(Strict):
    """Upper bounds, not waits: readiness is detected from the journal and /health."""

    ready: Duration = timedelta(minutes=30)
    warmup: Duration = timedelta(minutes=5)
    """How long `/health` may answer 503 (uvicorn up, SGLang's warmup request running) before
    the start counts as hung in its warmup and is rolled back; the load itself is bounded by
    `ready`. SGLang's warmup is one short `/generate`: seconds on a healthy server."""
    stall_distributed_init: Duration = timedelta(minutes=10)
    """How long a start may stay silent in its distributed init (the rendezvous and NCCL setup)
    before it counts as stalled there and is rolled back: a rank whose peer never arrives stops
    logging after the NCCL line and waits (`bot.target.stalls`)."""
    stall_weight_load: Duration = timedelta(minutes=30)
    """The same for the weight load and KV pool allocation (a large checkpoint on a slow disk
    prints nothing between `Load weight begin` and `Load weight end`)."""
    stall_graph_capture: Duration = timedelta(minutes=15)
    """The same for CUDA graph capture (through the capacity line)."""
    stop: Duration = timedelta(minutes=3)
    benchmark: Duration = timedelta(minutes=30)

    @field_validator("stall_distributed_init", "stall_weight_load", "stall_graph_capture")
    @classmethod
    def _positive_stall_bound(cls, value: timedelta) -> timedelta:
        """A zero bound would call every start stalled at its first silent moment."""
        if value <= timedelta(0):
            raise ValueError("a stall bound must be longer than 0s")
        return value


MAX_ASK_TIMEOUT = timedelta(hours=24)
"""The longest a regressed change may wait, applied, for someone to answer Keep or Revert."""


class TargetPolicy(Strict):
    """What flagbot may do to this target on its own."""

    on_regression: Literal["revert", "keep", "ask"] = "revert"
    ask_timeout: Duration = timedelta(minutes=30)
    """`on_regression = "ask"`: how long the question in the thread waits for Keep or Revert."""
    ask_default: Literal["revert", "keep"] = "revert"
    """`on_regression = "ask"`: what flagbot does when nobody answers by the deadline."""
    on_failed_start: Literal["rollback", "leave"] = "rollback"
    require_approval: bool = False
    """A production target: a restart in Slack waits for an approver other than the requester,
    and `force=` / `keep=always` on it need the admin role."""
    confirm_restart: bool = False
    """A restart in Slack waits for the requester's own confirmation click."""
    approval_expiry: Duration = timedelta(hours=1)
    """How long an approval request stays valid; later it must be requested again."""
    max_restarts_per_hour: int = Field(6, ge=0)
    env_allow: list[str] = Field(default_factory=lambda: list(DEFAULT_ENV_ALLOW))
    """Environment names (fnmatch patterns, case-sensitive) an operator may `env set|unset`;
    start-up names and the deny-list of `bot/config/change_rules.py` stay refused whatever it says."""
    env_admin_allow: list[str] = Field(default_factory=list)
    """Exact variable names only an admin may change (also a start-up or deny-listed name)."""
    protected_flags: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTECTED_FLAGS))
    """SGLang flags (canonical names) only an admin may change (or nobody: `protected_flags_mode`)."""
    protected_flags_mode: ProtectedMode = "admin"
    """`admin`: only an admin may change a protected flag; `refuse`: nobody, through flagbot."""

    @field_validator("approval_expiry", mode="after")
    @classmethod
    def _positive_expiry(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("an approval must stay valid for some time, e.g. 15m or 1h")
        return value

    @field_validator("ask_timeout", mode="after")
    @classmethod
    def _ask_window(cls, value: timedelta) -> timedelta:
        if value < timedelta(minutes=1) or value > MAX_ASK_TIMEOUT:
            raise ValueError("ask_timeout must be between 1m and 24h, e.g. 30m")
        return value

    @field_validator("env_allow", mode="after")
    @classmethod
    def _env_patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not _ENV_PATTERN.match(pattern):
                raise ValueError(
                    f"{pattern!r} is not a variable name pattern (letters, digits, _ and the "
                    "wildcards * ? [...]), e.g. NCCL_*"
                )
        return value

    @field_validator("env_admin_allow", mode="after")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _ENV_EXACT.match(name):
                raise ValueError(f"{name!r}: give exact variable names (no wildcard), e.g. LD_LIBRARY_PATH")
        return value

    @field_validator("protected_flags", mode="after")
    @classmethod
    def _flag_names(cls, value: list[str]) -> list[str]:
        for flag in value:
            if not _FLAG_NAME.match(flag):
                raise ValueError(f"{flag!r} is not an SGLang flag name; write it as --model-path")
        return value

    def change_rules(self, target: str) -> ChangeRules:
        """The rules of `bot/config/change_rules.py` with this target's settings."""
        return ChangeRules(
            target=target,
            env_allow=tuple(self.env_allow),
            env_admin_allow=tuple(self.env_admin_allow),
            protected_flags=tuple(self.protected_flags),
            protected_flags_mode=self.protected_flags_mode,
        )


_ENV_PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]!]+$")
_ENV_EXACT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FLAG_NAME = re.compile(r"^--[a-z0-9][a-z0-9-]*$")


_NODE_PATH = re.compile(r"^/[A-Za-z0-9._+/-]{1,255}$")


def _node_path(value: str) -> str:
    """An absolute path on a node without `.`/`..` parts or shell characters: it is run there."""
    if not _NODE_PATH.match(value) or any(part in (".", "..") for part in value.split("/")):
        raise ValueError(f"{value!r}: give an absolute path of letters, digits and . _ + - / (no .. parts)")
    return value


NodePath = Annotated[str, AfterValidator(_node_path)]


class BenchServingCommand(Strict):
    """How `python -m sglang.bench_serving` is started on node 0 (`backend = "bench_serving"`)."""

    python: NodePath = "/usr/bin/python3"
    module: Literal["sglang.bench_serving", "sglang.benchmark.serving"] | None = None
    """None: the module the host's SGLang has (`sglang.benchmark.serving` from 0.5.15), asked once per benchmark."""
    backend: Literal["sglang-oai", "sglang-oai-chat", "vllm", "vllm-chat", "sglang"] | None = None
    """bench_serving's `--backend`; default from the profile's endpoint (sglang-oai / sglang-oai-chat)."""
    base_url: str | None = Field(
        None, description="the URL bench_serving uses on node 0; default the target's"
    )
    tokenizer: NodePath | None = None


def _absolute_path(value: Path | None, what: str) -> Path | None:
    """A path read on the bot host must not depend on the directory flagbot was started in."""
    if value is not None and not value.is_absolute():
        raise ValueError(f"{value}: give an absolute path {what}")
    return value


class TargetBench(Strict):
    """What flagbot's own load generator needs to know about a target (`[targets.NAME.bench]`)."""

    tokenizer: Path | None = None
    """A Hugging Face `tokenizer.json` on the bot host: counts the tokens of each streamed chunk
    when the server sends no running usage (`bot.bench.tokenizer`). Read from this file only,
    never fetched; without the `tokenizers` package only a WordLevel file is accepted."""

    _absolute = field_validator("tokenizer")(lambda value: _absolute_path(value, "to the tokenizer file"))


class FreezeWindow(Strict):
    """A change freeze planned in the config (`[targets.NAME] freeze = [...]`): from `start`
    (inclusive) to `end` (exclusive) every command that changes the target is refused with
    `reason` (`bot.app.freeze`). Times carry their offset (`2026-12-24T00:00:00Z`)."""

    start: AwareDatetime
    end: AwareDatetime
    reason: str = Field(min_length=1, max_length=500)

    @model_validator(mode="after")
    def _ordered(self) -> FreezeWindow:
        if self.end <= self.start:
            raise ValueError(
                f"freeze window: end {self.end.isoformat()} is not after start {self.start.isoformat()}"
            )
        return self

    def covers(self, at: datetime) -> bool:
        return self.start <= at < self.end


class Target(Strict):
    """One SGLang deployment: a systemd unit on one or more nodes."""

    unit: str
    """The service on every node that names none of its own. A template (`sglang@.service`)
    means one instance per node, the node's index as the instance: `sglang@0.service` on
    node 0, `sglang@1.service` on node 1 (`unit_of`)."""
    nodes: list[Node] = Field(min_length=1)
    base_url: str | None = Field(None, description="node 0's HTTP base, e.g. http://10.0.0.1:30000")
    sglang_version: str | None = None
    benchmark_profile: str = "quick"
    channel: str | None = Field(None, pattern=r"^(#[a-z0-9][a-z0-9_-]{0,79}|[CG][A-Z0-9]{2,})$")
    """This target's own Slack channel (an id C…/G…, or #name): flagbot answers there too,
    beside `[slack] channels` (`bot.app.channels`)."""
    bench_serving: BenchServingCommand = BenchServingCommand()
    bench: TargetBench = TargetBench()
    ssh: SSHSettings = SSHSettings()
    timeouts: TargetTimeouts = TargetTimeouts()
    policy: TargetPolicy = TargetPolicy()
    freeze: list[FreezeWindow] = Field(default_factory=list)
    """Planned change freezes (`bot.app.freeze`); `freeze`/`unfreeze` add one from chat or the CLI."""
    drain: DrainPolicy | None = None
    """Drain before every restart (`bot.target.drain`); absent: a restart drops requests in flight."""
    rbac: TargetRBAC = Field(default_factory=lambda: TargetRBAC())
    """This target's own role lists (`[targets.NAME.rbac]`): a list given here replaces the one
    of `[slack.rbac]` for this target only, so team A's operators operate team A's targets and
    nothing else (`bot.slack.rbac.role_table`)."""
    http_via: Literal["auto", "direct", "ssh"] = "auto"
    """How the bot host reaches node 0's HTTP port (`bot.target.http_route`): `auto` probes
    directly, then node 0's loopback through an SSH forward; `direct`/`ssh` force one way."""

    @field_validator("unit")
    @classmethod
    def _target_unit(cls, value: str) -> str:
        return check_service_name(value, template_ok=True)

    @model_validator(mode="after")
    def _hooks_on_own_nodes(self) -> Target:
        """A command hook runs on one of this target's nodes; an index past the list is a typo
        that would otherwise surface only at the first restart."""
        hooks = (self.drain.stop_hook, self.drain.resume_hook) if self.drain is not None else ()
        for name, hook in zip(("stop_hook", "resume_hook"), hooks, strict=False):
            if isinstance(hook, CommandHook) and hook.node >= len(self.nodes):
                raise ValueError(
                    f"drain.{name} runs on node {hook.node}, but the target has {len(self.nodes)} node(s) "
                    f"(0 to {len(self.nodes) - 1})"
                )
        return self

    def unit_of(self, index: int) -> str:
        """The service node `index` runs: its own `unit`, else the target's (a template's
        instance `index`). Every command, drop-in path and sudoers line for a node uses this."""
        own = self.nodes[index].unit
        if own is not None:
            return own
        return template_instance(self.unit, str(index)) if is_template(self.unit) else self.unit

    def http_base(self) -> str:
        """Node 0 serves HTTP; the default port is SGLang's 30000."""
        return self.base_url or f"http://{self.nodes[0].host}:30000"


class SharedPrefixShape(Strict):
    """bench_serving's `generated-shared-prefix` dataset (`--gsp-*`, 0.5.10's defaults):
    `num_groups` system prompts of `system_prompt_len` tokens, each shared by
    `prompts_per_group` requests with their own `question_len`-token question."""

    num_groups: int = Field(64, ge=1, le=100_000)
    prompts_per_group: int = Field(16, ge=1, le=100_000)
    system_prompt_len: int = Field(2048, ge=1, le=1_000_000)
    question_len: int = Field(128, ge=1, le=1_000_000)
    output_len: int = Field(256, ge=1, le=1_000_000)


class ServiceLevelObjectives(Strict):
    """What a request must meet to count in goodput (vLLM's `--goodput ttft:… tpot:… e2el:…`)."""

    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    e2e_ms: float | None = Field(None, gt=0)


def _dataset_word(value: str) -> str:
    try:
        parse_dataset(value)
    except DatasetError as exc:
        raise ValueError(str(exc)) from None
    return value.strip()


class BenchProfile(Strict):
    """A named benchmark shape: a dataset (bench_serving's random one with fixed lengths by
    default) and a load shape (docs/bench.md).

    Levels are `concurrency` values: closed loop (each slot sends its next request when its last
    one ends), or with `request_rate` Poisson arrivals capped at that many in flight, exactly as
    bench_serving's `--request-rate` with `--max-concurrency`. Each level runs
    `max(num_requests, rounds * concurrency)` requests (or `duration`), `repeats` times, levels
    interleaved within each repeat so slow drift spreads over all of them.
    """

    concurrency: list[Annotated[int, Field(ge=1, le=100_000)]] = Field(
        default_factory=lambda: [1, 64], min_length=1
    )
    request_rate: float | None = Field(None, gt=0)
    input_len: int = Field(1024, ge=1)
    output_len: int = Field(256, ge=1)
    num_requests: int = Field(16, ge=1)
    rounds: int = Field(2, ge=1, description="each level sends at least rounds x concurrency requests")
    duration: Duration | None = None
    warmup_requests: int = Field(2, ge=0)
    repeats: int = Field(3, ge=1)
    endpoint: Literal["chat", "completions"] = "completions"
    backend: Literal["builtin", "bench_serving"] = "builtin"
    seed: int = Field(1, ge=0)
    request_timeout: Duration = timedelta(minutes=10)
    level_timeout: Duration = timedelta(minutes=20)
    client_workers: int = Field(1, ge=1, le=64)
    dataset: Annotated[str, AfterValidator(_dataset_word)] = "random"
    gsp: SharedPrefixShape = SharedPrefixShape()
    sharegpt_output_len: int | None = Field(None, ge=4)
    sharegpt_context_len: int | None = Field(None, ge=2)
    request_rates: list[Annotated[float, Field(gt=0)]] | None = Field(None, min_length=1)
    max_concurrency: int | None = Field(None, ge=1, le=100_000)
    burstiness: float = Field(1.0, gt=0, le=1000)
    slo: ServiceLevelObjectives = ServiceLevelObjectives()

    @model_validator(mode="after")
    def _one_sweep(self) -> BenchProfile:
        """A rate sweep's levels are its rates; a single `request_rate` beside them would be ignored."""
        if self.request_rates is not None and self.request_rate is not None:
            raise ValueError(
                "give request_rate (one rate, levels by concurrency) or request_rates (a rate sweep), not both"
            )
        if self.max_concurrency is not None and self.request_rates is None:
            raise ValueError(
                "max_concurrency caps a rate sweep (request_rates); a concurrency sweep caps by its levels"
            )
        return self

    def requests_at(self, concurrency: int) -> int:
        """Requests one level sends: enough that every slot is refilled `rounds` times."""
        return max(self.num_requests, self.rounds * concurrency)


def _shipped_profiles() -> dict[str, BenchProfile]:
    return {
        "quick": BenchProfile(),
        "full": BenchProfile(concurrency=[1, 2, 4, 8, 16, 32, 64, 128], repeats=3),
    }


ALL_TARGETS = "all"
"""`target=all`: the fleet at a glance (`status`, `checks`), so no target may be named so."""


def _valid_timezone(value: str) -> str:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r}; use an IANA name such as Europe/Berlin") from None
    return value


def _valid_cron(value: str) -> str:
    try:
        CronTrigger.from_crontab(value)
    except ValueError as exc:
        raise ValueError(
            f"{value!r} is not a crontab expression (minute hour day month weekday): {exc}"
        ) from None
    return value


TimeZoneName = Annotated[str, AfterValidator(_valid_timezone)]
Cron = Annotated[str, AfterValidator(_valid_cron)]


class Schedules(Strict):
    timezone: TimeZoneName = "UTC"
    check_after: list[Duration] = Field(default_factory=lambda: [timedelta(minutes=10), timedelta(hours=24)])
    drift_cron: Cron = "*/30 * * * *"
    digest_cron: Cron = "0 9 * * MON"
    digest_channel: str | None = None


class DatabaseSettings(Strict):
    """SQLite by default; `FLAGBOT_DATABASE_URL` (environment only) selects PostgreSQL."""

    sqlite_path: Path = Path("state/flagbot.db")


def _secret_patterns(what: str, value: list[str]) -> list[str]:
    for pattern in value:
        if not pattern or any(char.isspace() for char in pattern):
            raise ValueError(f"{what} pattern {pattern!r}: give a name or a glob (*, ?) without spaces")
    return value


class RedactionSettings(Strict):
    """What counts as a secret in flagbot's output (`bot/redaction.py`, docs/security.md)."""

    secret_names: list[str] = Field(default_factory=lambda: list(DEFAULT_SECRET_NAMES))
    """Environment names (globs, case-sensitive) whose values are secrets: `HF_TOKEN=...`."""
    secret_flags: list[str] = Field(default_factory=lambda: list(DEFAULT_SECRET_FLAGS))
    """Command-line flags (globs, with their dashes) whose values are secrets: `--api-key ...`."""

    @field_validator("secret_names", mode="after")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        return _secret_patterns("secret_names", value)

    @field_validator("secret_flags", mode="after")
    @classmethod
    def _flags(cls, value: list[str]) -> list[str]:
        for pattern in _secret_patterns("secret_flags", value):
            if not pattern.startswith("-"):
                raise ValueError(
                    f"secret_flags pattern {pattern!r}: a flag starts with '--' (e.g. '--api-key')"
                )
        return value


class Settings(BaseSettings):
    """The whole of `flagbot.toml`.

    Only the values given to the constructor count (the loader passes the TOML file's tables):
    no environment variable can change a setting behind the file's back. Secrets live in
    `Secrets`, which reads the environment only.
    """

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    default_target: str | None = None
    playbook_dirs: list[Path] = Field(default_factory=list)
    targets: dict[str, Target] = Field(default_factory=dict)
    bench: dict[str, BenchProfile] = Field(default_factory=_shipped_profiles)
    bench_prompt_dir: Path | None = None
    """The only directory prompt files (`dataset = "sharegpt:FILE"`) are read from (None: none are)."""
    slack: SlackSettings = SlackSettings()
    schedules: Schedules = Schedules()
    database: DatabaseSettings = DatabaseSettings()
    verdicts: Verdicts = Verdicts()
    redaction: RedactionSettings = RedactionSettings()
    replicas: ReplicaSettings = ReplicaSettings()
    """Several `flagbot serve` on one PostgreSQL, and each one's health endpoint (bot.config.replicas)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)

    _absolute_prompt_dir = field_validator("bench_prompt_dir")(
        lambda value: _absolute_path(value, "for bench_prompt_dir")
    )

    @field_validator("bench", mode="after")
    @classmethod
    def _keep_shipped_profiles(cls, value: dict[str, BenchProfile]) -> dict[str, BenchProfile]:
        """`quick` and `full` exist unless the file redefines them: a `[bench.soak]` adds, never removes."""
        return {**_shipped_profiles(), **value}

    @model_validator(mode="after")
    def _references_exist(self) -> Settings:
        for name in self.targets:
            if not TARGET_NAME.match(name):
                raise ValueError(
                    f"target name {name!r}: use letters, digits, '-' and '_' (it is typed in chat)"
                )
            if name == ALL_TARGETS:
                raise ValueError(
                    f"target name {ALL_TARGETS!r} is reserved: `status target={ALL_TARGETS}` shows every target"
                )
        if self.default_target is not None and self.default_target not in self.targets:
            known = ", ".join(sorted(self.targets)) or "none"
            raise ValueError(f"default_target {self.default_target!r} is not a target (targets: {known})")
        for name, target in self.targets.items():
            if target.benchmark_profile not in self.bench:
                raise ValueError(
                    f"targets.{name}.benchmark_profile {target.benchmark_profile!r} is not in [bench]"
                )
        # the settings last validated say what is secret in everything the process prints or stores
        configure_redaction(self.redaction.secret_names, self.redaction.secret_flags)
        install_log_redaction()
        return self
