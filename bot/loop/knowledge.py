"""The flag knowledge base: what flagbot knows about a flag before it costs a restart.

Why: the seeds' operator lost hours because "free" flags had effects nobody had written down:
one flag was inert on the GPU (SGLang checks SM90/SM100 only) and the other's memory effect was
a guess. The knowledge base holds those facts as data, each with its source (SGLang's code as
read for the reference, its docs, the seeds, or flagbot's own observations), and says plainly
when a claim is unverified or contradicted by the reference. Preflight uses it for hardware
gating and predicted implied flags; `rank` uses it to order suspects; `cite` puts the facts
next to what was observed on real hosts (`kb_observation` rows).

Files: the packaged `playbooks/knowledge/flags.yaml`, then `knowledge/*.yaml` under each
`playbook_dirs` entry; a later file wins per field of a flag, and its sources are added to the
earlier ones (provenance is never dropped). Format: docs/knowledge.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from bot.loop.kb_schema import FlagEntry, ImpliedRule, KnowledgeFile, Source, version_in
from bot.sglang.flagset import FlagSet, FlagValue

PACKAGED = (Path(__file__).parents[1] / "playbooks").resolve() / "knowledge" / "flags.yaml"

LOWERS_KINDS = frozenset({"capacity-lowered", "culprit", "regression"})
"""Observation kinds that say "this flag lowered the metric" (isolate's finding, a regressed try)."""
CLEARS_KINDS = frozenset({"capacity-unchanged", "not-culprit", "no-effect", "no-op"})
"""Observation kinds that say "this flag did not lower it"."""
_LOWER_WORDS = ("lower", "drop", "fell", "fall", "cut", "reduc", "decreas", "regress")


class KnowledgeError(ValueError):
    """A knowledge file that cannot be used; the message names the file, the flag and the problem."""


class ObservationLike(Protocol):
    """What the knowledge base reads of a `bot.store.loop_models.KnowledgeObservation` row."""

    @property
    def flag(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def gpu_name(self) -> str | None: ...
    @property
    def compute_capability(self) -> str | None: ...
    @property
    def sglang_version(self) -> str | None: ...
    @property
    def experiment_id(self) -> int | None: ...
    @property
    def observed_at(self) -> datetime: ...


@dataclass(frozen=True)
class Gate:
    """A flag whose required GPUs exclude this one: probably a no-op here, with its side effects."""

    flag: str
    compute_capability: str
    needs: str
    checked_in: str
    side_effects: tuple[str, ...]
    claims: tuple[str, ...]
    """Side effects claimed by unverified sources (shown, never counted as known)."""
    sources: tuple[Source, ...]

    @property
    def text(self) -> str:
        where = f" ({self.checked_in})" if self.checked_in else ""
        text = (
            f"{self.flag} needs compute capability {self.needs}{where}; this GPU is "
            f"{self.compute_capability}: probably a no-op here, yet it can still have side effects"
        )
        if self.side_effects:
            text += "; known: " + "; ".join(self.side_effects)
        else:
            text += "; none known to the reference"
        if self.claims:
            text += "; claimed: " + "; ".join(self.claims)
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "flag": self.flag,
            "compute_capability": self.compute_capability,
            "needs": self.needs,
            "text": self.text,
            "side_effects": list(self.side_effects),
            "claims": list(self.claims),
            "sources": [source.model_dump() for source in self.sources],
        }


@dataclass(frozen=True)
class FlagContext:
    """What an implied-flag rule may depend on: the other flags, the SGLang version, the GPU."""

    flags: Mapping[str, FlagValue] = field(default_factory=dict)
    """Canonical flag name -> value (None for a switch)."""
    sglang_version: str | None = None
    compute_capability: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        flags: FlagSet,
        *,
        canonical: Callable[[str], str] | None = None,
        sglang_version: str | None = None,
        compute_capability: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> FlagContext:
        """From a flag set; `canonical(name)` maps spellings (`--tp`) to catalog names."""
        values: dict[str, FlagValue] = {}
        for item in flags.items:
            name = item.flag
            if canonical is not None:
                with contextlib.suppress(ValueError):
                    name = canonical(name)
            values[name] = item.value
        return cls(values, sglang_version, compute_capability, dict(env or {}))


@dataclass(frozen=True)
class ImpliedFlag:
    """A field SGLang is expected to set because of `trigger`."""

    trigger: str
    field: str
    value: Any
    flag: str | None
    when: str
    sources: tuple[Source, ...]

    def describe(self) -> str:
        shown = "a model-dependent value" if self.value is None else repr(self.value)
        name = f"{self.field} ({self.flag})" if self.flag else self.field
        return f"{self.trigger} sets {name} to {shown}" + (f": {self.when}" if self.when else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "trigger": self.trigger,
            "field": self.field,
            "value": self.value,
            "flag": self.flag,
            "when": self.when,
            "sources": [source.ref for source in self.sources],
        }


@dataclass(frozen=True)
class Citation:
    """The static facts about a flag next to what was observed of it."""

    flag: str
    facts: tuple[str, ...]
    sources: tuple[Source, ...]
    observations: tuple[str, ...]

    def text(self) -> str:
        lines = [f"{self.flag}:", *(f"  {fact}" for fact in self.facts)]
        lines += [f"  source {source.line()}" for source in self.sources]
        lines += [f"  {seen}" for seen in self.observations]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "flag": self.flag,
            "facts": list(self.facts),
            "sources": [source.model_dump() for source in self.sources],
            "observations": list(self.observations),
        }


def describe_observation(obs: ObservationLike) -> str:
    """`observed 2026-03-09 on twin (NVIDIA GB10, cc 12.1, SGLang 0.5.10; experiment #4): text`."""
    where = ", ".join(
        part
        for part in (
            obs.gpu_name,
            f"cc {obs.compute_capability}" if obs.compute_capability else None,
            f"SGLang {obs.sglang_version}" if obs.sglang_version else None,
        )
        if part
    )
    experiment = f"; experiment #{obs.experiment_id}" if obs.experiment_id is not None else ""
    detail = f" ({where}{experiment})" if where or experiment else ""
    return f"observed {obs.observed_at:%Y-%m-%d} on {obs.target}{detail} [{obs.kind}]: {obs.text}"


def observation_stance(obs: ObservationLike, metric: str | None = None) -> int:
    """+1: the observation says the flag lowered `metric` (or capacity); -1: it says it did not; 0.

    Kinds first (`LOWERS_KINDS`, `CLEARS_KINDS`); then a numeric `detail` of `{metric, before,
    after}` when the row has one; then an `effect` whose text names the metric with a falling word.
    """
    kind = obs.kind.lower()
    if kind in LOWERS_KINDS:
        return 1
    if kind in CLEARS_KINDS:
        return -1
    detail = getattr(obs, "detail", None)
    if isinstance(detail, Mapping) and (metric is None or detail.get("metric") == metric):
        before, after = detail.get("before"), detail.get("after")
        if isinstance(before, int | float) and isinstance(after, int | float):
            return 1 if after < before else -1
    text = obs.text.lower()
    named = metric is None or metric.lower() in text or "capacity" in text
    if kind == "effect" and named and any(word in text for word in _LOWER_WORDS):
        return 1
    return 0


def knowledge_files(dirs: Iterable[Path]) -> list[Path]:
    """`<dir>/knowledge/*.yaml` of each playbook directory, in order (sorted within a directory)."""
    return [path for directory in dirs for path in sorted((Path(directory) / "knowledge").glob("*.yaml"))]


def _read(path: Path) -> KnowledgeFile:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise KnowledgeError(f"{path}: cannot read: {exc}") from None
    if not isinstance(raw, dict):
        raise KnowledgeError(f"{path}: expected a mapping with `schema: 1` and `flags:`")
    try:
        return KnowledgeFile.model_validate(raw)
    except ValidationError as exc:
        raise KnowledgeError(f"{path}: " + "; ".join(_problem(error) for error in exc.errors())) from None


def _problem(error: ErrorDetails) -> str:
    loc = [str(part) for part in error["loc"]]
    if loc[:1] == ["flags"] and len(loc) > 1:
        where, rest = loc[1], loc[2:]
    else:
        where, rest = "file", loc
    if error["type"] == "extra_forbidden":
        return f"{where}: unknown key {rest[-1]!r}" if rest else f"{where}: unknown key"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {'.'.join(rest) + ': ' if rest else ''}{message}"


_LOADED: dict[tuple[tuple[str, int, int], ...], KnowledgeBase] = {}
"""Knowledge bases loaded in this process, by their files' names and stamps."""


def _stamp(path: Path) -> tuple[int, int]:
    """(modification time in ns, size) of a knowledge file; (-1, -1) when it cannot be read."""
    try:
        stat = path.stat()
    except OSError:
        return -1, -1
    return stat.st_mtime_ns, stat.st_size


class KnowledgeBase:
    """Flag facts by canonical flag name (`--tp-size` style, as the catalog spells it)."""

    def __init__(self, entries: Mapping[str, FlagEntry], files: Sequence[Path] = ()) -> None:
        self._entries = dict(entries)
        self.files = tuple(files)

    @classmethod
    def load(cls, paths: Iterable[Path] = (), *, packaged: Path | None = PACKAGED) -> KnowledgeBase:
        """The packaged file, then `paths` in order: later wins per field, sources accumulate.

        Loaded once per content: every experiment's preflight asks for it, and parsing and
        validating the files cost ~60 ms each time. A file that changed (size or modification
        time), appeared or went away is read again."""
        files = [*([packaged] if packaged is not None else []), *paths]
        key = tuple((str(path), *_stamp(path)) for path in files)
        loaded = _LOADED.get(key)
        if loaded is None:
            loaded = cls._load(files)
            if len(_LOADED) >= 8:
                _LOADED.clear()
            _LOADED[key] = loaded
        return cls(loaded._entries, loaded.files)

    @classmethod
    def _load(cls, files: list[Path]) -> KnowledgeBase:
        merged: dict[str, dict[str, Any]] = {}
        first: dict[str, Path] = {}
        for path in files:
            for name, entry in _read(path).flags.items():
                given = entry.model_dump(include=entry.model_fields_set)
                into = merged.setdefault(name, {})
                first.setdefault(name, path)
                sources = into.get("sources", []) + given.pop("sources", [])
                into.update(given)
                into["sources"] = sources
        entries: dict[str, FlagEntry] = {}
        for name, raw in merged.items():
            entry = FlagEntry.model_validate(raw)
            if not entry.summary:
                raise KnowledgeError(f"{first[name]}: {name}: summary: a flag needs a summary")
            entries[name] = entry
        return cls(entries, files)

    def __contains__(self, flag: object) -> bool:
        return flag in self._entries

    @property
    def flags(self) -> list[str]:
        return sorted(self._entries)

    def entry(self, flag: str) -> FlagEntry | None:
        return self._entries.get(flag)

    def side_effects(self, flag: str) -> tuple[list[str], list[str]]:
        """(known, claimed): what the flag does besides its own job, and unverified claims of it."""
        entry = self._entries.get(flag)
        if entry is None:
            return [], []
        known = [
            f"sets {rule.field}" + (f" = {rule.value!r}" if rule.value is not None else "")
            for rule in entry.implied
            if rule.compute_capability is None
        ]
        if entry.memory.capacity in ("lowers", "raises", "depends"):
            known.append(f"memory ({entry.memory.capacity} capacity): {entry.memory.text.strip()}")
        claims = [
            source.says
            + (f" (SGLang's source says: {source.reference_says})" if source.reference_says else "")
            for source in entry.sources
            if source.unverified and {"implied", "memory"} & set(source.about)
        ]
        return known, claims

    def gating(self, flag: str, compute_capability: str) -> Gate | None:
        """A "probable no-op" finding when the GPU is outside the flag's required set, else None."""
        entry = self._entries.get(flag)
        rule = entry.requires.compute_capability if entry is not None else None
        if entry is None or rule is None or rule.allows(compute_capability) is not False:
            return None
        known, claims = self.side_effects(flag)
        return Gate(
            flag=flag,
            compute_capability=compute_capability,
            needs=rule.describe(),
            checked_in=rule.checked_in,
            side_effects=tuple(known),
            claims=tuple(claims),
            sources=tuple(entry.sources_about("requires")),
        )

    def implied(self, flag: str, context: FlagContext | None = None) -> list[ImpliedFlag]:
        """The fields SGLang is expected to set because of `flag`, in this context."""
        entry = self._entries.get(flag)
        if entry is None:
            return []
        ctx = context or FlagContext()
        sources = tuple(entry.sources_about("implied"))
        return [
            ImpliedFlag(flag, rule.field, rule.value, rule.flag, rule.when, sources)
            for rule in entry.implied
            if _applies(rule, flag, ctx)
        ]

    def covers(self, flag: str, sglang_version: str) -> bool | None:
        """Whether the entry's facts are about this SGLang version (None: no entry or unreadable)."""
        entry = self._entries.get(flag)
        if entry is None or entry.versions is None:
            return None
        return version_in(sglang_version, entry.versions)

    def cite(self, flag: str, observations: Iterable[ObservationLike] = ()) -> Citation:
        """Static facts and the observations of `flag` (newest first), for evidence and hypotheses."""
        seen = sorted((obs for obs in observations if obs.flag == flag), key=lambda o: o.observed_at)
        lines = tuple(describe_observation(obs) for obs in reversed(seen))
        entry = self._entries.get(flag)
        if entry is None:
            return Citation(flag, ("not in the knowledge base",), (), lines)
        return Citation(flag, tuple(_facts(flag, entry)), tuple(entry.sources), lines)


def _applies(rule: ImpliedRule, flag: str, ctx: FlagContext) -> bool:
    known_version = rule.versions is not None and ctx.sglang_version is not None
    if known_version and version_in(str(ctx.sglang_version), str(rule.versions)) is False:
        return False
    if any(name in ctx.flags for name in rule.unless_flags):
        return False
    if any(name not in ctx.flags for name in rule.only_with):
        return False
    if rule.if_values and flag in ctx.flags and ctx.flags[flag] not in rule.if_values:
        return False
    if any(name in ctx.env for name in rule.unless_env):
        return False
    return not (
        rule.compute_capability is not None
        and ctx.compute_capability is not None
        and rule.compute_capability.allows(ctx.compute_capability) is False
    )


def _facts(flag: str, entry: FlagEntry) -> list[str]:
    facts = [entry.summary.strip()]
    if entry.versions:
        facts.append(
            f"exists in SGLang {entry.versions}" + (f"; {entry.deprecated}" if entry.deprecated else "")
        )
    if entry.auto_set:
        facts.append(f"SGLang sets it itself: {entry.auto_set.strip()}")
    rule = entry.requires.compute_capability
    if rule is not None:
        facts.append(
            f"needs compute capability {rule.describe()}"
            + (f" ({rule.checked_in})" if rule.checked_in else "")
        )
    facts += [f"needs: {condition}" for condition in entry.requires.conditions]
    implied = [ImpliedFlag(flag, r.field, r.value, r.flag, r.when, ()).describe() for r in entry.implied]
    facts += implied or ["implies no other flag (per its sources)"]
    facts.append(f"memory: {entry.memory.capacity} capacity: {entry.memory.text.strip()}")
    facts.append(f"speed: {entry.speed.direction}: {entry.speed.text.strip()}")
    return facts
