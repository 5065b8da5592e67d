"""The knowledge base's file format (pydantic, unknown keys refused) and its two small languages.

Why a schema: the knowledge base is data a human edits (`playbooks/knowledge/flags.yaml` and
files under `playbook_dirs`), and a typo (`unverifed: true`, `any_off:`) must fail loudly at
load with the file, the flag and the key, not silently weaken a warning shown before a fifteen
minute restart. Why the languages: a flag's facts hold only for some SGLang versions
(`>=0.5.10,<0.5.14`) and some GPUs (compute capability `9.x`, `10.0`), and both are compared,
not matched as text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

SourceKind = Literal["sglang-source", "sglang-docs", "seeds", "observed"]
Fact = Literal["summary", "versions", "auto_set", "requires", "implied", "memory", "speed"]
CapacityEffect = Literal["lowers", "raises", "depends", "none", "unknown"]
SpeedDirection = Literal["faster", "slower", "depends", "none", "unknown"]
FLAG_NAME = re.compile(r"^--[a-z0-9][a-z0-9-]*$")

# --- versions -----------------------------------------------------------------------------------

_VERSION = re.compile(r"^(\d+(?:\.\d+)*)(?:\.?(a|b|rc|dev|post)(\d*))?(?:\+[A-Za-z0-9.]+)?$")
_STAGES = {"dev": -4, "a": -3, "b": -2, "rc": -1, "post": 1}
_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*(\S+)\s*$")


def version_key(text: str) -> tuple[int, ...]:
    """A sortable key: `0.5.10rc0` < `0.5.10` < `0.5.10.post1` < `0.5.11`. ValueError if unreadable."""
    match = _VERSION.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a version like 0.5.10")
    release = [int(part) for part in match[1].split(".")][:4]
    release += [0] * (4 - len(release))
    stage = _STAGES.get(match[2] or "", 0)
    return (*release, stage, int(match[3] or 0))


def parse_specifier(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """`>=0.5.10,<0.5.14` -> [(">=", key), ("<", key)]; ValueError names the bad clause."""
    clauses = []
    for raw in text.split(","):
        match = _CLAUSE.match(raw)
        if match is None:
            raise ValueError(f"{raw.strip()!r} is not a clause like >=0.5.10")
        clauses.append((match[1], version_key(match[2])))
    return clauses


def version_in(version: str, specifier: str) -> bool | None:
    """Whether `version` satisfies `specifier`; None when the version cannot be read."""
    try:
        key = version_key(version)
    except ValueError:
        return None
    checks = {
        ">=": lambda a, b: a >= b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        "<": lambda a, b: a < b,
        "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
    }
    return all(checks[op](key, bound) for op, bound in parse_specifier(specifier))


# --- compute capability -------------------------------------------------------------------------

_CAPABILITY = re.compile(r"^(\d+)\.(\d+|x)$")


def capability_key(text: str, *, upper: bool = False) -> tuple[int, int]:
    """`12.1` -> (12, 1); `10.x` -> (10, 0), or (10, 999) as an upper bound. ValueError otherwise."""
    match = _CAPABILITY.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a compute capability like 9.0 or 10.x")
    minor = match[2]
    return int(match[1]), (999 if upper else 0) if minor == "x" else int(minor)


def _checked(check: Callable[[str], object]) -> AfterValidator:
    def validate(value: str) -> str:
        check(value)
        return value

    return AfterValidator(validate)


Specifier = Annotated[str, _checked(parse_specifier)]
"""A version specifier such as `>=0.5.10,<0.5.14`, checked when the file is read."""
Capability = Annotated[str, _checked(capability_key)]
"""A compute capability such as `9.0` or `10.x`, checked when the file is read."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CapabilityRule(_Model):
    """The GPUs a flag acts on: `any_of` (`9.0` exact, `10.x` any minor) and/or `min`/`max`."""

    any_of: list[Capability] = Field(default_factory=list)
    min: Capability | None = None
    max: Capability | None = None
    checked_in: str = ""
    """Where SGLang makes the check, in words a human can grep for."""

    def allows(self, capability: str) -> bool | None:
        """Whether a GPU of `capability` is inside; None when `capability` cannot be read."""
        try:
            major, minor = capability_key(capability)
        except ValueError:
            return None
        if self.any_of and not any(
            (item.endswith(".x") and capability_key(item)[0] == major)
            or capability_key(item) == (major, minor)
            for item in self.any_of
        ):
            return False
        if self.min is not None and (major, minor) < capability_key(self.min):
            return False
        return not (self.max is not None and (major, minor) > capability_key(self.max, upper=True))

    def describe(self) -> str:
        """`9.x or 10.x`, `at least 8.0`, `9.0 or 10.x, at most 10.x`."""
        parts = []
        if self.any_of:
            items = self.any_of
            parts.append(items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1])
        if self.min is not None and self.max is not None:
            parts.append(f"between {self.min} and {self.max}")
        elif self.min is not None:
            parts.append(f"at least {self.min}")
        elif self.max is not None:
            parts.append(f"at most {self.max}")
        return ", ".join(parts) or "any"


# --- entries ------------------------------------------------------------------------------------


class Source(_Model):
    """Where a fact comes from. A claim the reference contradicts is `unverified` with `reference_says`."""

    kind: SourceKind
    ref: str
    says: str
    unverified: bool = False
    reference_says: str | None = None
    about: list[Fact] = Field(default_factory=list)
    """The facts of the entry this source supports (empty: the entry in general)."""

    def line(self) -> str:
        """One line for a report: `[sglang-source] says (ref)`, doubts and contradictions shown."""
        text = f"[{self.kind}{', unverified' if self.unverified else ''}] {self.says} ({self.ref})"
        if self.reference_says:
            text += f"; SGLang's source says: {self.reference_says}"
        return text


class Requires(_Model):
    compute_capability: CapabilityRule | None = None
    conditions: list[str] = Field(default_factory=list)
    """Other conditions, as text (model kind, tensor parallelism, CUDA version, ...)."""


class ImpliedRule(_Model):
    """A field SGLang sets as a consequence of the flag, and when."""

    field: str
    value: Any = None
    """The value SGLang sets; null when it depends on the model or the GPU (`when` says how)."""
    flag: str | None = None
    """The flag that spells `field`, when there is one (`--disable-piecewise-cuda-graph`)."""
    when: str = ""
    versions: Specifier | None = None
    unless_flags: list[str] = Field(default_factory=list)
    """Does not happen when one of these flags is given (SGLang respects an explicit value)."""
    only_with: list[str] = Field(default_factory=list)
    """Happens only when all of these flags are given too."""
    if_values: list[str] = Field(default_factory=list)
    """Happens only when the flag's own value is one of these."""
    unless_env: list[str] = Field(default_factory=list)
    compute_capability: CapabilityRule | None = None


class MemoryEffect(_Model):
    capacity: CapacityEffect = "unknown"
    """What the flag does to the token capacity and the effective max_running_requests."""
    text: str = ""
    numbers: dict[str, float] = Field(default_factory=dict)


class SpeedEffect(_Model):
    direction: SpeedDirection = "unknown"
    text: str = ""
    numbers: dict[str, float] = Field(default_factory=dict)


class FlagEntry(_Model):
    """Everything the knowledge base holds about one flag."""

    summary: str = ""
    versions: Specifier | None = None
    deprecated: str | None = None
    auto_set: str | None = None
    """When SGLang sets this flag by itself, unasked."""
    requires: Requires = Field(default_factory=Requires)
    implied: list[ImpliedRule] = Field(default_factory=list)
    memory: MemoryEffect = Field(default_factory=MemoryEffect)
    speed: SpeedEffect = Field(default_factory=SpeedEffect)
    sources: list[Source] = Field(default_factory=list)

    def sources_about(self, fact: Fact) -> list[Source]:
        return [source for source in self.sources if fact in source.about or not source.about]


class KnowledgeFile(_Model):
    """One YAML file: `schema: 1` and `flags:` (flag name -> entry; a user file may give a few fields)."""

    schema_: Literal[1] = Field(default=1, alias="schema")
    flags: dict[str, FlagEntry] = Field(default_factory=dict)

    @field_validator("flags")
    @classmethod
    def _names(cls, value: dict[str, FlagEntry]) -> dict[str, FlagEntry]:
        for name in value:
            if not FLAG_NAME.match(name):
                raise ValueError(f"{name!r} is not a flag name like --enable-metrics")
        return value
