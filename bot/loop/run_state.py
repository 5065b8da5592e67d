"""What the steps of one run pass each other: typed records, stored as JSON with a schema version.

Why records and not a dict of string keys: a step that reads `after.set_id` which an earlier step
never wrote, or writes `after_setid`, is a type error caught by mypy, not a None found fifteen
minutes into an experiment; and the readers outside the loop (the digest, Slack's buttons, the
log) see the same fields the steps wrote.

Why a schema version: the state is checkpointed with every step (`finish_step`), and a run
interrupted by a crash is resumed by whatever flagbot runs next, possibly a newer one. The stored
JSON says which shape it is in, and `RunState.load` converts an older shape: version 1 is the flat
dict of string keys (`intended_flags`, `before_snapshot_id`, `verdict`, ...) stored before these
records existed, without a `schema_version` field. A state newer than this code is refused rather
than half read.

Actions outside `bot.loop.steps` (a site's plugins, the tests' own) keep what they pass each other
in `custom`, the one open-ended mapping; the built-in steps use the typed fields only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    PlainSerializer,
    PlainValidator,
    ValidationError,
)
from pydantic_core import PydanticSerializationError, to_jsonable_python

from bot.loop.isolate import Status
from bot.sglang.flagset import FlagItem, FlagSet

T = TypeVar("T")

RUN_STATE_SCHEMA_VERSION: Final = 2
"""The shape `RunState.dump` writes. 1: the flat dict of string keys (no `schema_version` field)."""


class RunStateError(ValueError):
    """A stored state that cannot be read: written by a newer flagbot, or not of any known shape."""


def flags_from_json(items: Sequence[Mapping[str, Any]]) -> FlagSet:
    """The inverse of `FlagSet.to_json()` (a list value is a multi-value flag)."""
    out = []
    for item in items:
        value = item.get("value")
        out.append(
            FlagItem(str(item["flag"]), tuple(str(v) for v in value) if isinstance(value, list) else value)
        )
    return FlagSet(tuple(out))


def _flags_in(value: object) -> FlagSet:
    if isinstance(value, FlagSet):
        return value
    if isinstance(value, list) and all(isinstance(item, Mapping) and "flag" in item for item in value):
        return flags_from_json(value)
    raise ValueError("a flag set is stored as a list of {flag, value}")


def _as_stored(value: object) -> object:
    """The value as storing it as JSON makes it (tuples become lists), so a step reads the same
    value before and after a checkpoint; a value JSON cannot hold is refused."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not JSON: {exc}") from None


StoredJson = Annotated[
    JsonValue, BeforeValidator(_as_stored), PlainSerializer(to_jsonable_python, when_used="json")
]
"""A JSON value of an open shape (a report, a benchmark summary) as it is stored. Dumped by
pydantic-core's one call: its own `JsonValue` serializer asks its union's discriminator of every
nested value in Python, about a thousand calls per checkpoint of a testbed run (issue 16 item 9);
a tuple put in after validation is dumped as a list as before, and a value that is not JSON still
fails the dump."""

StoredFlags = Annotated[FlagSet, PlainValidator(_flags_in), PlainSerializer(FlagSet.to_json)]
"""A FlagSet in the run's state; stored as `FlagSet.to_json()`'s list, read back as a FlagSet."""


class _Record(BaseModel):
    """Mutable (steps fill them in as they go), checked on assignment, no unknown fields."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Plan(_Record):
    """The configuration the run means to put on the target, from `preflight` or `plan_revert`:
    what `apply` writes, and what `check_interrupted` expects to find after a crash."""

    flags: StoredFlags | None = None
    env: dict[str, str] | None = None
    reverting_experiment: int | None = None
    """`plan_revert`: the try whose change this revert undoes (a later `revert` and the digest read it)."""


class PreflightFacts(_Record):
    """What `preflight` read moments before the change."""

    gpus: dict[str, list[dict[str, StoredJson]]] | None = None
    """Per node, as nvidia-smi answered: the snapshot before the change reuses them when fresh."""
    gpus_read_at: float | None = None
    """When `gpus` was read (Unix seconds)."""
    report: dict[str, StoredJson] = Field(default_factory=dict)
    """The whole `PreflightReport.to_json()`, kept as the record of what was checked."""


class PredictionRecord(_Record):
    """The try's preflight prediction (`bot.loop.capacity`), kept next to what the start after the
    change measured, so `log` and the digest can show how far off it was and a miss is a finding."""

    snapshot_id: int | None = None
    """The stored start the prediction was made from."""
    prediction: dict[str, StoredJson] = Field(default_factory=dict)
    """`Prediction.to_json()`: every figure with its band, the steps and their sources, the calls."""
    not_made: str | None = None
    """Why no prediction was made (no start with its memory lines recorded, a change it cannot read)."""
    stopped: str | None = None
    """Why the preflight stopped the try before its restart (an expectation predicted to fail)."""
    forced: bool = False
    """`force=yes` took the try past a predicted failure."""
    predicted_capacity: int | None = None
    predicted_low: int | None = None
    predicted_high: int | None = None
    """Effective max_running_requests predicted (the band's centre and ends), None when unknown."""
    measured_capacity: int | None = None
    """Effective max_running_requests of the start after the change (`score_prediction`)."""
    missed: bool | None = None
    """The measured start fell outside the predicted band (None: not scored)."""
    misses: list[str] = Field(default_factory=list)
    """Each figure outside its band: name, band, measured."""

    def describe(self) -> str:
        """The prediction against the start in words (what `log` shows for a try)."""
        if self.stopped is not None:
            return f"stopped before the restart: predicted max_running_requests {band_text(self.predicted_capacity, self.predicted_low, self.predicted_high)}"
        if self.not_made is not None:
            return f"no prediction ({self.not_made})"
        return prediction_error_text(
            self.predicted_capacity,
            self.predicted_low,
            self.predicted_high,
            self.measured_capacity,
            self.missed,
        )


def band_text(value: int | None, low: int | None, high: int | None) -> str:
    """A predicted count with its band: `26`, `26 (25..27)`, or `unknown`."""
    if value is None:
        return "unknown"
    return str(value) if low is None or high is None or low == high else f"{value} ({low}..{high})"


def prediction_error_text(
    predicted: int | None, low: int | None, high: int | None, measured: int | None, missed: bool | None
) -> str:
    """Predicted effective max_running_requests next to the measured one, with the error and
    whether the start fell outside the band (`log` and the digest say it the same way)."""
    if predicted is None:
        return (
            f"max_running_requests not predicted (unknown), measured {'-' if measured is None else measured}"
        )
    if measured is None:
        return f"predicted max_running_requests {band_text(predicted, low, high)}, not measured"
    verdict = "missed: outside the band" if missed else "within the band"
    return (
        f"predicted max_running_requests {band_text(predicted, low, high)}, measured {measured} "
        f"(error {measured - predicted:+d}, {verdict})"
    )


class Start(_Record):
    """One start of the target the run looked at: its snapshot and the measurement set taken of it."""

    snapshot_id: int | None = None
    set_id: int | None = None


class BeforeStart(Start):
    """The start the run began from: what `restore`, `decide`'s revert and a later `revert` go back to."""

    flags: StoredFlags | None = None
    env: dict[str, str] | None = None


class AfterStart(Start):
    """The start the run left the target on (or observed): what `compare`, `pin` and the checks judge."""

    invocation: str | None = None


class ReferenceStart(Start):
    """The start verify, revert and isolate compare with: the pinned baseline's, else the known-good one."""

    summary: dict[str, StoredJson] | None = None
    """Its measurement set's summary (isolate's probes compare benchmark metrics with it)."""


class RestartRecord(_Record):
    """What the run did to the target and how that went: what `restore`, `check_interrupted`, the
    checks and the digest need to know to undo it, or to tell it."""

    applied: bool = False
    """The change (or an isolate probe) was written and the ranks restarted."""
    previous_invocations: dict[str, str | None] = Field(default_factory=dict)
    """Per node, the systemd invocation before `apply`'s restart: the new start is the one after it."""
    start_failed: bool = False
    fatal_line: str | None = None
    failure_reason: str | None = None
    rolled_back: bool = False
    """A failed start was rolled back to known-good (by `await_start`'s policy or `restore`)."""
    restored: bool = False
    """The target is back where the run left it on purpose: nothing is left for `restore` to undo."""


class RankedProposal(_Record):
    """One ranked hypothesis of `propose` (`bot.loop.rank.ProposedHypothesis.to_json()`)."""

    variable: str
    kind: str
    statement: str
    why: list[str] = Field(default_factory=list)
    score: float = 0.0
    experiment: dict[str, StoredJson] = Field(default_factory=dict)


class Conclusion(_Record):
    """What the run concluded. `verdict` and `summary` are copied to the experiment row at its end."""

    verdict: str | None = None
    summary: str | None = None
    comparison_id: int | None = None
    failed_metrics: list[str] = Field(default_factory=list)
    """`check_expectations`: the metrics whose expectation failed (`propose` explains those)."""
    kept: bool | None = None
    """`decide`: the change was kept (True), reverted (False), or never decided (None)."""
    ask_deadline: str | None = None
    """`policy.on_regression = "ask"`: when (ISO 8601, UTC) the default action runs if nobody
    answered Keep or Revert (`bot.app.ask`); None when nothing was asked."""
    ask_default: str | None = None
    """`policy.ask_default` at the time of asking: `revert` or `keep`."""
    ask_channel: str | None = None
    ask_thread: str | None = None
    """The Slack thread the question was asked in (None: asked outside Slack), told the answer."""
    answer: str | None = None
    """The answer to the question (`keep` or `revert`; `bot.app.ask`): a Revert answer leaves
    `kept` unset until its revert run succeeded (then False)."""
    decided_by: str | None = None
    """Who answered the question (`slack:U1`, `cli:alice`, `flagbot (timeout)`)."""
    not_started: str | None = None
    """Why the run never reached a node: a connection (key, known_hosts, host key, login) failed
    before any change (`bot.target.errors.never_reached`). The digest lists it apart, not as a
    failed experiment."""
    proposals: list[RankedProposal] = Field(default_factory=list)
    expectations: list[dict[str, StoredJson]] = Field(default_factory=list)
    """Each expectation the verdict checked (`ExpectationResult.to_json()`): outcome, the values, and
    the reference it was evaluated against."""
    snapshot_ids: list[int] = Field(default_factory=list)
    """The stored snapshots the verdict rests on (the start judged, and its reference)."""
    set_ids: list[int] = Field(default_factory=list)
    """The stored measurement sets the verdict rests on."""

    def cite(self, *, snapshots: Sequence[int | None] = (), sets: Sequence[int | None] = ()) -> None:
        """Record the measurements the verdict rests on (None ids are skipped, duplicates kept once)."""
        for found, into in ((snapshots, self.snapshot_ids), (sets, self.set_ids)):
            for item in found:
                if item is not None and item not in into:
                    into.append(item)


class ProbeOutcome(_Record):
    """One isolate probe: a restart on the reference plus `applied`, and whether it passed."""

    index: int
    applied: list[str] = Field(default_factory=list)
    passed: bool
    note: str = ""
    snapshot_id: int | None = None
    """The probe start's snapshot (None: not measured, e.g. the start failed)."""
    set_id: int | None = None
    """The probe's measurement set, when an expectation needed a benchmark."""


class IsolateOutcome(_Record):
    """What `isolate` found (`bot.loop.isolate.IsolateResult.to_json()`)."""

    status: Status = "not-found"
    culprits: list[str] = Field(default_factory=list)
    suspects: list[str] = Field(default_factory=list)
    final: list[str] = Field(default_factory=list)
    final_verified: bool = False
    message: str = ""
    probe_count: int = 0
    probes: list[ProbeOutcome] = Field(default_factory=list)
    changes: list[str] = Field(default_factory=list)
    """Every change isolated (the failing side is the base plus all of them)."""
    failing_evidence: str = ""
    """How the failing side was established before the first probe (issue 18: measured, never given)."""
    failing_snapshot_id: int | None = None
    failing_set_id: int | None = None
    """The stored start and set that showed the failing side fail, when they were free (no probe)."""


class RunState(_Record):
    """Everything the steps of one run pass each other, checkpointed with every step."""

    schema_version: Literal[2] = RUN_STATE_SCHEMA_VERSION
    plan: Plan = Field(default_factory=Plan)
    preflight: PreflightFacts | None = None
    before: BeforeStart = Field(default_factory=BeforeStart)
    after: AfterStart = Field(default_factory=AfterStart)
    reference: ReferenceStart = Field(default_factory=ReferenceStart)
    baseline_id: int | None = None
    """The target's pinned baseline when the run looked (whether or not its start was reused)."""
    other_set_ids: dict[str, int] = Field(default_factory=dict)
    """Measurement sets of a `measure` whose label is not before, after or reference, by label."""
    restart: RestartRecord = Field(default_factory=RestartRecord)
    hypothesis_id: int | None = None
    conclusion: Conclusion = Field(default_factory=Conclusion)
    isolate: IsolateOutcome | None = None
    prediction: PredictionRecord | None = None
    """The capacity the try's preflight predicted, and later how it compares with the start."""
    restart_approved: bool = False
    """Whoever started the run may restart the target (the CLI; in Slack, an approved request):
    `heal` restarts a diverged `require_approval` target only then. Kept with the state, so a
    resumed run keeps its approval."""
    custom: dict[str, StoredJson] = Field(default_factory=dict)
    """What actions outside `bot.loop.steps` pass each other (a site's plugins, the tests' actions)."""

    def start(self, label: str) -> Start | None:
        """The start a `measure label=...` measures: before, after or reference; None for other labels."""
        return {"before": self.before, "after": self.after, "reference": self.reference}.get(label)

    def dump(self) -> dict[str, JsonValue]:
        """The JSON stored with each step (`experiment.state`), with its `schema_version`.

        RunStateError when an action put something that is not JSON in `custom`: the step fails
        with that message instead of the checkpoint failing in the store."""
        try:
            return self.model_dump(mode="json")
        except PydanticSerializationError as exc:
            raise RunStateError(f"the run's state is not JSON: {exc}") from None

    @classmethod
    def load(cls, stored: Mapping[str, object] | None) -> RunState:
        """The state from its stored JSON, of this schema version or an older one (converted)."""
        raw = dict(stored or {})
        version = raw.get("schema_version", 1)
        try:
            if version == 1:
                return cls.model_validate(_from_v1(raw))
            if version == RUN_STATE_SCHEMA_VERSION:
                return cls.model_validate(raw)
        except ValidationError as exc:
            raise RunStateError(
                f"a stored run state of schema {version} that cannot be read: {exc}"
            ) from None
        raise RunStateError(
            f"a run state of schema {version!r}, written by a newer flagbot "
            f"(this one reads schemas 1 to {RUN_STATE_SCHEMA_VERSION})"
        )


# --- the few facts summaries of many runs read ---------------------------------------------------


@dataclass(frozen=True)
class RunFacts:
    """What a summary of many runs (the weekly digest) needs of each run's state.

    Why not `RunState.load`: validating a whole stored state (its preflight report, proposals and
    summaries, each open JSON value round-tripped) costs about a millisecond, and a week can hold
    100,000 runs. `run_facts` reads only these fields from the stored JSON, with the meaning
    `RunState` gives them (schema 1 converted the same way). States are written by `RunState.dump`;
    a field of another type (a hand-edited row) reads as absent instead of failing the summary."""

    before_snapshot_id: int | None = None
    after_snapshot_id: int | None = None
    reverting_experiment: int | None = None
    kept: bool | None = None
    not_started: str | None = None
    start_failed: bool = False
    fatal_line: str | None = None
    rolled_back: bool = False
    culprits: tuple[str, ...] = ()
    predicted_capacity: int | None = None
    predicted_low: int | None = None
    predicted_high: int | None = None
    measured_capacity: int | None = None
    prediction_missed: bool | None = None

    @classmethod
    def of(cls, state: RunState) -> RunFacts:
        """The same facts from a state already read whole."""
        return cls(
            before_snapshot_id=state.before.snapshot_id,
            after_snapshot_id=state.after.snapshot_id,
            reverting_experiment=state.plan.reverting_experiment,
            kept=state.conclusion.kept,
            not_started=state.conclusion.not_started,
            start_failed=state.restart.start_failed,
            fatal_line=state.restart.fatal_line,
            rolled_back=state.restart.rolled_back,
            culprits=tuple(state.isolate.culprits) if state.isolate is not None else (),
            predicted_capacity=state.prediction.predicted_capacity if state.prediction else None,
            predicted_low=state.prediction.predicted_low if state.prediction else None,
            predicted_high=state.prediction.predicted_high if state.prediction else None,
            measured_capacity=state.prediction.measured_capacity if state.prediction else None,
            prediction_missed=state.prediction.missed if state.prediction else None,
        )


FACT_PATHS: Final[Mapping[str, tuple[tuple[str, str], type]]] = {
    "before_snapshot_id": (("before", "snapshot_id"), int),
    "after_snapshot_id": (("after", "snapshot_id"), int),
    "reverting_experiment": (("plan", "reverting_experiment"), int),
    "kept": (("conclusion", "kept"), bool),
    "not_started": (("conclusion", "not_started"), str),
    "start_failed": (("restart", "start_failed"), bool),
    "fatal_line": (("restart", "fatal_line"), str),
    "rolled_back": (("restart", "rolled_back"), bool),
    "culprits": (("isolate", "culprits"), list),
    "predicted_capacity": (("prediction", "predicted_capacity"), int),
    "predicted_low": (("prediction", "predicted_low"), int),
    "predicted_high": (("prediction", "predicted_high"), int),
    "measured_capacity": (("prediction", "measured_capacity"), int),
    "prediction_missed": (("prediction", "missed"), bool),
}
"""`RunFacts` field -> (its path in a schema-2 state, the JSON type stored there): what a reader
of many states extracts in the database instead of decoding each whole state
(`bot.store.digest_reads.experiments_between`), then hands to `run_facts_of`."""


def run_facts(stored: Mapping[str, object] | None) -> RunFacts:
    """`RunFacts` of a whole stored state (`Experiment.state`), without validating the rest of it.

    RunStateError for a state of a newer schema, as `RunState.load` refuses it."""
    raw: Mapping[str, object] = stored or {}
    version = raw.get("schema_version", 1)
    if version == 1:
        raw = _from_v1(raw)
    elif version != RUN_STATE_SCHEMA_VERSION:
        raise RunStateError(
            f"a run state of schema {version!r}, written by a newer flagbot "
            f"(this one reads schemas 1 to {RUN_STATE_SCHEMA_VERSION})"
        )
    values: dict[str, object] = {}
    for name, ((record, field), _) in FACT_PATHS.items():
        found = raw.get(record)
        values[name] = found.get(field) if isinstance(found, Mapping) else None
    return run_facts_of(values)


def run_facts_of(values: Mapping[str, object]) -> RunFacts:
    """`RunFacts` from the values at `FACT_PATHS` of a schema-2 state (absent: None)."""
    culprits = values.get("culprits")
    return RunFacts(
        before_snapshot_id=_typed(values.get("before_snapshot_id"), int),
        after_snapshot_id=_typed(values.get("after_snapshot_id"), int),
        reverting_experiment=_typed(values.get("reverting_experiment"), int),
        kept=_typed(values.get("kept"), bool),
        not_started=_typed(values.get("not_started"), str),
        start_failed=_typed(values.get("start_failed"), bool) or False,
        fatal_line=_typed(values.get("fatal_line"), str),
        rolled_back=_typed(values.get("rolled_back"), bool) or False,
        culprits=tuple(c for c in culprits if isinstance(c, str)) if isinstance(culprits, list) else (),
        predicted_capacity=_typed(values.get("predicted_capacity"), int),
        predicted_low=_typed(values.get("predicted_low"), int),
        predicted_high=_typed(values.get("predicted_high"), int),
        measured_capacity=_typed(values.get("measured_capacity"), int),
        prediction_missed=_typed(values.get("prediction_missed"), bool),
    )


def _typed(value: object, kind: type[T]) -> T | None:
    """`value` when it is a `kind` (a bool is not an int here, as pydantic's strict reading of ids)."""
    if value is None or type(value) is kind:  # nearly every value: one check
        return value
    if isinstance(value, bool) and kind is not bool:
        return None
    return value if isinstance(value, kind) else None


# --- schema 1: the flat dict of string keys ------------------------------------------------------

_V1_FIELDS: dict[str, tuple[str, str]] = {
    "intended_flags": ("plan", "flags"),
    "intended_env": ("plan", "env"),
    "reverting_experiment": ("plan", "reverting_experiment"),
    "before_flags": ("before", "flags"),
    "before_env": ("before", "env"),
    "before_snapshot_id": ("before", "snapshot_id"),
    "before_set_id": ("before", "set_id"),
    "after_snapshot_id": ("after", "snapshot_id"),
    "after_set_id": ("after", "set_id"),
    "after_invocation": ("after", "invocation"),
    "reference_snapshot_id": ("reference", "snapshot_id"),
    "reference_set_id": ("reference", "set_id"),
    "reference_summary": ("reference", "summary"),
    "applied": ("restart", "applied"),
    "previous_invocations": ("restart", "previous_invocations"),
    "start_failed": ("restart", "start_failed"),
    "fatal_line": ("restart", "fatal_line"),
    "failure_reason": ("restart", "failure_reason"),
    "rolled_back": ("restart", "rolled_back"),
    "restored": ("restart", "restored"),
    "verdict": ("conclusion", "verdict"),
    "summary": ("conclusion", "summary"),
    "comparison_id": ("conclusion", "comparison_id"),
    "failed_metrics": ("conclusion", "failed_metrics"),
    "kept": ("conclusion", "kept"),
    "proposals": ("conclusion", "proposals"),
}
"""Schema 1's keys of the built-in steps -> (record, field) in schema 2."""
_V1_TOP_LEVEL = ("baseline_id", "hypothesis_id")
_V1_TRUTHY = frozenset({"applied", "start_failed", "rolled_back", "restored"})
"""Keys schema 1's readers only tested for truth: stored as bools now."""
_V1_OR_EMPTY = frozenset({"previous_invocations", "failed_metrics", "proposals"})
"""Keys schema 1's readers read as `state.get(key) or <empty>`."""


def _from_v1(flat: Mapping[str, object]) -> dict[str, object]:
    """Schema 1's flat dict as schema 2's nested one (validated by the caller).

    Every key the built-in steps wrote goes to its field; `preflight` keeps the whole report and
    its GPU facts; `isolate` and `culprits` (a copy of isolate's) become the isolate record; a
    `LABEL_set_id` of another `measure` label goes to `other_set_ids`; anything else was written by
    an action outside `bot.loop.steps` and goes to `custom` as it was.
    """
    records: dict[str, dict[str, object]] = {}
    out: dict[str, object] = {"schema_version": RUN_STATE_SCHEMA_VERSION}
    other_sets: dict[str, object] = {}
    custom: dict[str, object] = {}
    for key, value in flat.items():
        if key in _V1_FIELDS:
            record, name = _V1_FIELDS[key]
            if key in _V1_TRUTHY:
                value = bool(value)
            elif key in _V1_OR_EMPTY:
                value = value or ([] if key != "previous_invocations" else {})
            records.setdefault(record, {})[name] = value
        elif key in _V1_TOP_LEVEL:
            out[key] = value
        elif key == "preflight":
            out["preflight"] = _preflight_from_v1(value)
        elif key in ("isolate", "culprits"):
            continue  # below: one record from both
        elif key.endswith("_set_id") and (value is None or isinstance(value, int)):
            if value is not None:
                other_sets[key.removesuffix("_set_id")] = value
        else:
            custom[key] = value
    isolate = flat.get("isolate")
    if isinstance(isolate, Mapping) or flat.get("culprits"):
        found = dict(isolate) if isinstance(isolate, Mapping) else {}
        if flat.get("culprits") is not None:
            found["culprits"] = flat["culprits"]
        out["isolate"] = found
    out.update(records)
    out["other_set_ids"] = other_sets
    out["custom"] = custom
    return out


def _preflight_from_v1(report: object) -> dict[str, object] | None:
    """Schema 1 kept the whole report; its GPU facts are read only when they have the right types
    (as schema 1's reader did: anything else meant "no fresh GPU facts")."""
    if not isinstance(report, Mapping):
        return None
    gpus, read_at = report.get("gpus"), report.get("gpus_read_at")
    return {
        "gpus": gpus if isinstance(gpus, dict) else None,
        "gpus_read_at": read_at if isinstance(read_at, int | float) else None,
        "report": dict(report),
    }
