"""YAML playbooks: named parameters and a list of steps, each step a registered action.

Why load-time validation is this strict (unknown keys, unknown actions, arguments an action
does not take, `$name` that is not a parameter): a playbook mistake found mid-run costs a
server restart and leaves a target half-changed; found at load, it costs one line naming the
file, the step and the problem. Format reference: docs/playbooks.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.loop.actions import all_actions, ensure_builtin_actions, get_action
from bot.loop.params import ParamKind, ParamSpec, convert

SECTIONS = ("steps", "on_failure", "on_cancel")
PLAYBOOK_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
REFERENCE = re.compile(r"^\$(?P<name>[a-z_][a-z0-9_]*)$")
BUILTIN_DIR = (Path(__file__).parents[1] / "playbooks").resolve()
"""The built-in playbooks: `bot/playbooks` links to the top-level `playbooks/` in a checkout and
is package data in a wheel."""
PACKAGED_DIR = BUILTIN_DIR
"""Where the installed package's own playbooks are (tests may point `BUILTIN_DIR` elsewhere; this
stays): files that change only with flagbot itself, so a running process need not stat them."""


class PlaybookError(ValueError):
    """A playbook that cannot be used: `FILE: step N (action): problem`, `FILE: params.NAME: problem`."""


@dataclass(frozen=True)
class StepSpec:
    """One step; `args` are the `with:` values, `$name` strings still unresolved."""

    action: str
    name: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def resolve(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The action's keyword arguments for these parameter values (JSON form)."""
        return {key: _substitute(value, params) for key, value in self.args.items()}


@dataclass(frozen=True)
class Playbook:
    name: str
    description: str
    mutating: bool
    params: tuple[ParamSpec, ...]
    steps: tuple[StepSpec, ...]
    on_failure: tuple[StepSpec, ...] = ()
    on_cancel: tuple[StepSpec, ...] = ()
    on_interrupt: str | None = None
    source: Path | None = None
    shadows: tuple[Path, ...] = ()
    """Files of the same name in earlier directories that this one hides."""

    def param(self, name: str) -> ParamSpec | None:
        return next((spec for spec in self.params if spec.name == name), None)


def _substitute(value: object, params: Mapping[str, object]) -> object:
    """A `with:` value (YAML) with its `$name` strings replaced by the parameters' values."""
    if isinstance(value, str):
        match = REFERENCE.match(value)
        if match:
            return params.get(match["name"])
        return value[1:] if value.startswith("$$") else value
    if isinstance(value, list):
        return [_substitute(item, params) for item in value]
    if isinstance(value, dict):
        return {key: _substitute(item, params) for key, item in value.items()}
    return value


def _references(value: object) -> list[str]:
    if isinstance(value, str):
        match = REFERENCE.match(value)
        return [match["name"]] if match else []
    if isinstance(value, list):
        return [name for item in value for name in _references(item)]
    if isinstance(value, dict):
        return [name for item in value.values() for name in _references(item)]
    return []


# --- the file format (pydantic: unknown keys are errors) -----------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class _ParamModel(_Strict):
    kind: ParamKind
    required: bool = False
    default: Any = None
    help: str = ""
    choices: list[str] | None = None


class _StepModel(_Strict):
    action: str
    name: str | None = None
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")


class _PlaybookModel(_Strict):
    name: str = Field(pattern=PLAYBOOK_NAME.pattern)
    description: str = ""
    mutating: bool = False
    params: dict[str, _ParamModel] = Field(default_factory=dict)
    steps: list[_StepModel] = Field(min_length=1)
    on_failure: list[_StepModel] = Field(default_factory=list)
    on_cancel: list[_StepModel] = Field(default_factory=list)
    on_interrupt: str | None = None


def _where(raw: object, loc: tuple[int | str, ...]) -> tuple[str, tuple[int | str, ...]]:
    """`step 2 (observe)` or `params.x` for an error location, and the rest of the location."""
    if len(loc) >= 2 and loc[0] in SECTIONS and isinstance(loc[1], int):
        section, index = str(loc[0]), loc[1]
        steps = raw.get(section) if isinstance(raw, dict) else None
        item = steps[index] if isinstance(steps, list) and index < len(steps) else None
        name = item.get("action") if isinstance(item, dict) else None
        prefix = "" if section == "steps" else f"{section} "
        return f"{prefix}step {index + 1} ({name or '?'})", loc[2:]
    if len(loc) >= 2 and loc[0] == "params":
        return f"params.{loc[1]}", loc[2:]
    return "", loc


def _describe(raw: object, error: Mapping[str, Any]) -> str:
    where, rest = _where(raw, tuple(error["loc"]))
    field_name = ".".join(str(part) for part in rest)
    if error["type"] == "extra_forbidden":
        problem = f"unknown key {field_name!r}"
    elif error["type"] == "missing":
        problem = f"{field_name} is required" if field_name else "required"
    else:
        message = str(error["msg"])
        problem = f"{field_name}: {message}" if field_name else message
    return f"{where}: {problem}" if where else problem


def load_playbook(path: Path) -> Playbook:
    """Read and validate one playbook file; raise PlaybookError naming the file and the problem."""
    ensure_builtin_actions()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlaybookError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        raise PlaybookError(f"{path}: not valid YAML{line}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(raw, dict):
        raise PlaybookError(f"{path}: a playbook is a mapping with name, params and steps")
    try:
        model = _PlaybookModel.model_validate(raw)
    except ValidationError as exc:
        raise PlaybookError(f"{path}: {_describe(raw, exc.errors()[0])}") from None
    params = tuple(_param(path, name, spec) for name, spec in model.params.items())
    declared = {spec.name for spec in params}
    sections = {
        section: tuple(
            _step(path, section, index, step, declared, mutating=model.mutating)
            for index, step in enumerate(getattr(model, section))
        )
        for section in SECTIONS
    }
    if model.on_interrupt is not None and get_action(model.on_interrupt) is None:
        raise PlaybookError(f"{path}: on_interrupt: unknown action {model.on_interrupt!r}{_known_actions()}")
    return Playbook(
        name=model.name,
        description=model.description,
        mutating=model.mutating,
        params=params,
        steps=sections["steps"],
        on_failure=sections["on_failure"],
        on_cancel=sections["on_cancel"],
        on_interrupt=model.on_interrupt,
        source=path,
    )


def _known_actions() -> str:
    names = [item.name for item in all_actions()]
    return f"; actions: {', '.join(names)}" if names else "; no actions are registered"


def _param(path: Path, name: str, model: _ParamModel) -> ParamSpec:
    where = f"{path}: params.{name}"
    if not REFERENCE.match(f"${name}"):
        raise PlaybookError(f"{where}: a parameter name is lower-case letters, digits and _")
    choices = tuple(model.choices or ())
    if model.kind == "choice" and not choices:
        raise PlaybookError(f"{where}: kind choice needs choices")
    if model.kind != "choice" and choices:
        raise PlaybookError(f"{where}: choices are only for kind choice")
    if model.required and model.default is not None:
        raise PlaybookError(f"{where}: a required parameter has no default")
    spec = ParamSpec(name, model.kind, model.required, model.default, model.help, choices)
    if model.default is not None:
        try:
            _check_default(spec)
        except ValueError as exc:
            raise PlaybookError(f"{where}: default: {exc}") from None
    return spec


def _check_default(spec: ParamSpec) -> None:
    """Defaults are checked at load; `changes` defaults need a flag catalog and are read at run."""
    if spec.kind != "changes":
        convert(spec, spec.default, catalog=None)


def _step(
    path: Path, section: str, index: int, model: _StepModel, declared: set[str], *, mutating: bool
) -> StepSpec:
    prefix = "" if section == "steps" else f"{section} "
    where = f"{path}: {prefix}step {index + 1} ({model.action})"
    found = get_action(model.action)
    if found is None:
        raise PlaybookError(f"{where}: unknown action{_known_actions()}")
    for key, value in model.with_.items():
        if not found.accepts(key):
            takes = ", ".join(found.arguments) or "no arguments"
            raise PlaybookError(f"{where}: {model.action} takes no argument {key!r} (it takes {takes})")
        for name in _references(value):
            if name not in declared:
                known = ", ".join(sorted(declared)) or "none"
                raise PlaybookError(f"{where}: with.{key}: ${name} is not a parameter (parameters: {known})")
    missing = sorted(found.required - set(model.with_))
    if missing:
        raise PlaybookError(f"{where}: missing argument {', '.join(missing)}")
    if found.mutating and not mutating:
        raise PlaybookError(f"{where}: changes the target; the playbook needs `mutating: true`")
    return StepSpec(model.action, model.name or model.action, dict(model.with_))


def playbook_dirs(extra: Sequence[Path] = ()) -> list[Path]:
    """The built-in directory (when present) followed by `playbook_dirs` from flagbot.toml."""
    return [*([BUILTIN_DIR] if BUILTIN_DIR.is_dir() else []), *extra]


@dataclass(frozen=True)
class BrokenPlaybook:
    """A playbook file that could not be loaded: its path, the name it meant to define (when the
    file says it), and the load error naming the file and the problem."""

    path: Path
    name: str | None
    error: str


@dataclass(frozen=True)
class PlaybookSet:
    """Every playbook that loaded, by name, and every file that did not (a broken file breaks only
    itself: the others load). A broken file's name, when it can be read, is not runnable: running
    it gives the load error rather than an earlier directory's playbook of that name."""

    books: dict[str, Playbook]
    broken: tuple[BrokenPlaybook, ...] = ()

    def broken_named(self, name: str) -> BrokenPlaybook | None:
        """The broken file that defines `name` (the last one, as a later directory wins)."""
        found = [b for b in self.broken if b.name == name]
        return found[-1] if found else None


def _declared_name(path: Path) -> str | None:
    """The `name:` a broken file declares, when it can be read (else the file's stem, when that is
    a playbook name): so `run NAME` of a broken playbook answers with its load error."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        raw = None
    name = raw.get("name") if isinstance(raw, dict) else None
    if isinstance(name, str) and PLAYBOOK_NAME.match(name):
        return name
    return path.stem if PLAYBOOK_NAME.match(path.stem) else None


def load_playbook_set(dirs: Sequence[Path]) -> PlaybookSet:
    """Every `*.yaml`/`*.yml` in `dirs`, by name; a later directory's playbook hides an earlier one.
    A file that fails to load (or a directory that does not exist) is kept with its error and
    the rest load; a broken file hides the earlier playbook of its name."""
    found: dict[str, Playbook] = {}
    broken: list[BrokenPlaybook] = []
    for directory in dirs:
        if not directory.is_dir():
            broken.append(BrokenPlaybook(directory, None, f"{directory}: playbook directory does not exist"))
            continue
        here: dict[str, Path] = {}
        files = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        for path in files:
            try:
                playbook = load_playbook(path)
            except PlaybookError as exc:
                name = _declared_name(path)
                broken.append(BrokenPlaybook(path, name, str(exc)))
                if name is not None:
                    found.pop(name, None)
                continue
            if playbook.name in here:
                broken.append(
                    BrokenPlaybook(
                        path,
                        playbook.name,
                        f"{path}: playbook {playbook.name!r} is also defined in {here[playbook.name]}",
                    )
                )
                continue
            here[playbook.name] = path
            earlier = found.get(playbook.name)
            if earlier is not None and earlier.source is not None:
                playbook = replace(playbook, shadows=(*earlier.shadows, earlier.source))
            found[playbook.name] = playbook
    return PlaybookSet(dict(sorted(found.items())), tuple(broken))


def load_playbooks(dirs: Sequence[Path]) -> dict[str, Playbook]:
    """Every playbook in `dirs`, by name, strictly: PlaybookError for the first file (or directory)
    that fails to load. `load_playbook_set` loads the rest and keeps the errors."""
    loaded = load_playbook_set(dirs)
    if loaded.broken:
        raise PlaybookError(loaded.broken[0].error)
    return loaded.books


__all__ = [
    "BrokenPlaybook",
    "ParamKind",
    "ParamSpec",
    "Playbook",
    "PlaybookError",
    "PlaybookSet",
    "StepSpec",
    "load_playbook",
    "load_playbook_set",
    "load_playbooks",
    "playbook_dirs",
]
