"""Which playbook a command runs, with which parameters, on which target; playbooks loaded once.

Why here: `try`, `revert`, `verify`, `isolate`, `baseline pin` and `run NAME key=value` are
playbook runs whether typed in a terminal, in Slack or clicked as a button, and they must be
read the same way everywhere (the same defaults, the same target rule, the same errors).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.app.flag_list import target_flag_list
from bot.app.targets import resolve_target, target_of
from bot.commands import CommandError, Invocation, get_command, parse_command
from bot.commands.registry import WAIT, WAIT_MAX_S
from bot.commands.values import check_duration
from bot.config import Settings
from bot.loop.params import ParamError, complete_params, parse_params
from bot.loop.playbook import (
    PACKAGED_DIR,
    BrokenPlaybook,
    Playbook,
    PlaybookSet,
    StepSpec,
    load_playbook_set,
    playbook_dirs,
)
from bot.sglang.catalog import FlagCatalog

BUILTIN_COMMANDS = frozenset({"try", "revert", "verify", "isolate", "restart"})
"""Chat commands that are their built-in playbook of the same name (and `baseline pin|set`)."""

_LOADED: dict[tuple[tuple[str, int, int], ...], PlaybookSet] = {}
_ANNOUNCED: set[tuple[str, str]] = set()
_log = logging.getLogger(__name__)


def _log_warning(message: str) -> None:
    _log.warning("%s", message)


_announce: Callable[[str], None] = _log_warning
"""Where a broken playbook's load error is told, once per process: the log by default; the CLI
installs stderr (`set_broken_announcer`), which is also what `flagbot serve` writes to."""


def set_broken_announcer(announce: Callable[[str], None]) -> None:
    """The front end's way to tell a broken playbook file (each error once per process)."""
    global _announce
    _announce = announce


def load_set(settings: Settings, *, announce: bool = True) -> PlaybookSet:
    """Every playbook (built-in and the user's) and every file that did not load, parsed again
    only when a file changed: parsing the YAML costs ~30 ms of the event loop, paid by every other
    command's acknowledgement. The package's own files are not stat'ed (they change only with
    flagbot): listing and stat'ing them was a third of a refused `try`'s acknowledgement. A
    broken file breaks only itself; its error is announced once per process (unless `announce`
    is false: `playbooks` shows it in its listing instead)."""
    dirs = playbook_dirs(settings.playbook_dirs)
    files = [
        (str(path), stat.st_mtime_ns, stat.st_size)
        for directory in dirs
        if directory != PACKAGED_DIR and directory.is_dir()
        for path in sorted(directory.iterdir())
        if path.suffix in (".yaml", ".yml") and (stat := path.stat())
    ]
    key = (*((str(directory), 0, 0) for directory in dirs), *files)
    found = _LOADED.get(key)
    if found is None:
        found = load_playbook_set(dirs)
        _LOADED.clear()
        _LOADED[key] = found
    if announce:
        for broken in found.broken:
            if (str(broken.path), broken.error) not in _ANNOUNCED:
                _ANNOUNCED.add((str(broken.path), broken.error))
                _announce(f"warning: playbook not loaded (the others are): {broken.error}")
    return found


def load_all(settings: Settings) -> dict[str, Playbook]:
    """Every playbook that loads, by name (`load_set` for the broken files too)."""
    return load_set(settings).books


def runs_playbook(invocation: Invocation) -> bool:
    """Is the command a playbook run (a thread with a status card in Slack)?"""
    return (
        invocation.name in BUILTIN_COMMANDS
        or invocation.name == "run"
        or (invocation.name == "baseline" and invocation.sub in ("pin", "set"))
    )


def builtin_params(invocation: Invocation) -> tuple[str, dict[str, Any]]:
    """The built-in playbook a chat command runs, and its parameters in JSON form."""
    options = invocation.options
    expect = [str(e) for e in invocation.expectations]
    name = invocation.name
    if name == "try":
        params: dict[str, Any] = {
            "changes": [change.to_json() for change in invocation.changes],
            "expect": expect,
            "keep": options.get("keep", "auto"),
            "dry_run": options.get("dry-run") == "yes",
            "force": options.get("force") == "yes",
        }
        for key in ("profile", "because"):
            if key in options:
                params[key] = options[key]
        if "hypothesis" in options:
            params["hypothesis"] = int(options["hypothesis"])
        return "try", params
    if name == "revert":
        what = invocation.positionals.get("what")
        return "revert", {
            "what": None if what is None else str(what),
            "flags": options.get("flags"),
            "force": options.get("force") == "yes",
            "expect": expect,
            **({"profile": options["profile"]} if "profile" in options else {}),
        }
    if name == "verify":
        return "verify", {
            "expect": expect,
            **({"profile": options["profile"]} if "profile" in options else {}),
        }
    if name == "isolate":
        params = {
            "expect": expect,
            "since": options.get("since", "baseline"),
            "end": options.get("end", "good"),
        }
        if "profile" in options:
            params["profile"] = options["profile"]
        return "isolate", params
    if name == "restart":
        return "restart", {"dry_run": options.get("dry-run") == "yes"}
    if name == "baseline":
        return "baseline", {
            **({"profile": options["profile"]} if "profile" in options else {}),
            "note": options.get("because", ""),
        }
    raise ValueError(f"{name} runs no playbook")


@dataclass(frozen=True)
class PlaybookCall:
    """A playbook run as a command asked for it: the playbook, its checked parameters, the
    target, and every playbook (the engine settles any unfinished run with its own)."""

    book: Playbook
    params: dict[str, Any]
    target: str
    books: Mapping[str, Playbook]
    wait_s: float = 0.0
    """`wait=DURATION`: how long to wait for the target's lease when another run holds it."""


def wait_seconds(options: Mapping[str, str]) -> float:
    """`wait=` in seconds (0 without it); CommandError naming the rule for a bad one (`run`
    takes free options, so the grammar has not checked it there)."""
    given = options.get(WAIT.name)
    if given is None:
        return 0.0
    try:
        return check_duration(given, WAIT_MAX_S)
    except ValueError as exc:
        raise CommandError(f"wait={given}: {exc}", usage="... wait=DURATION (e.g. 30m, at most 4h)") from None


def resolve_playbook(settings: Settings, invocation: Invocation) -> PlaybookCall:
    """The run a command asks for; CommandError naming what is wrong (a broken playbook file,
    no such playbook, a bad parameter, an unknown target)."""
    loaded = load_set(settings)
    books = loaded.books
    builtin = builtin_params(invocation) if invocation.name != "run" else None
    name = builtin[0] if builtin is not None else str(invocation.positionals["playbook"])
    book = books.get(name)
    if book is None:
        broken = loaded.broken_named(name)
        if broken is not None:
            raise CommandError(f"playbook {name!r} did not load: {broken.error}")
        raise CommandError(
            f"no playbook {name!r}; playbooks: {', '.join(books) or 'none'}",
            usage="run PLAYBOOK [key=value ...]" if invocation.name == "run" else None,
        )
    wait_s = wait_seconds(invocation.options)
    if builtin is not None:
        return PlaybookCall(book, builtin[1], target_of(settings, invocation), books, wait_s)
    raw = dict(invocation.options)
    if book.param(WAIT.name) is None:  # then `wait=` is the command's, not a parameter
        raw.pop(WAIT.name, None)
    if book.param("target") is None:  # then `target=` names the run's target, not a parameter
        raw.pop("target", None)
    target = resolve_target(settings, invocation.options.get("target"))
    catalog = target_flag_list(settings, target)
    _check_flag_options(name, raw, catalog)
    try:
        params = parse_params(book, raw, catalog=catalog)
    except ParamError as exc:
        raise CommandError(
            str(exc),
            usage=f"run {name} " + " ".join(f"{p.name}=..." for p in book.params),
            flag_list=exc.flag_list,
        ) from None
    return PlaybookCall(book, params, target, books, wait_s)


def _check_flag_options(name: str, raw: dict[str, str], catalog: FlagCatalog) -> None:
    """`run revert flags=...` is read as `revert flags=...` is: flag names with their dashes (a
    dashless `enable-x` is refused naming `--enable-x`), canonical as the target's list spells them."""
    spec = get_command(name) if name in BUILTIN_COMMANDS else None
    for option in spec.options if spec is not None else ():
        if option.kind == "flags" and option.name in raw:
            try:
                checked = parse_command([name, f"{option.name}={raw[option.name]}"], catalog=catalog)
            except CommandError as exc:
                raise CommandError(exc.message, usage=f"run {name} {option.name}=--X,--Y") from None
            raw[option.name] = checked.options[option.name]


RESTARTING_ACTIONS = frozenset({"apply", "isolate", "restore", "decide", "restart"})
"""Steps that write a drop-in and restart the ranks (`decide` reverts a change it does not keep,
`restore` puts back the flags a run started from; `restart` restarts them without a write). `heal` restarts only a diverged target; it
asks for its own approval when it has to (`bot.target.heal.heal_if_diverged`)."""
DRY_RUN_ACTIONS = frozenset({"preflight", "plan_restart"})
"""Steps that end the run when their `dry_run` is true (nothing after them runs)."""
EXECUTING_ACTIONS = frozenset({"preflight"})
"""Steps that run code on a node beyond reading it: the preflight's dry run runs SGLang's own
argument resolution (`prepare_server_args`) on node 0 with the requested flags."""
PINNING_ACTIONS = frozenset({"pin"})
"""Steps that replace the target's baseline (what `baseline pin` needs an admin for)."""
_TRUE = frozenset({"yes", "true", "1", "on"})


@dataclass(frozen=True)
class PlaybookEffects:
    """What a playbook run does to its target, read from its steps and parameters (not from the
    word typed): Slack's RBAC asks for the role and the approval these call for."""

    playbook: str
    restarts: bool = False
    executes: bool = False
    """Runs SGLang's argument code on a node (the preflight's dry run), with or without a restart."""
    pins_baseline: bool = False
    forces: bool = False
    """Writes the drop-in over a hand edit (`apply` with `force` true)."""
    mutating: bool = False

    def why(self) -> str:
        """What the run does, in words for a refusal or an approval card."""
        parts = [
            what
            for what, present in (
                ("restarts the target", self.restarts),
                ("runs SGLang's argument code on node 0 (the dry run)", self.executes),
                ("pins the target's baseline", self.pins_baseline),
                ("writes over a hand edit (force)", self.forces),
            )
            if present
        ]
        return ", ".join(parts) if parts else "changes nothing on the target's configuration"


def effects_of(book: Playbook, params: Mapping[str, Any]) -> PlaybookEffects:
    """What running `book` with `params` does, step by step. A `preflight` whose `dry_run` is
    true ends the run (it stops after the preflight), so the steps after it do not count; so does
    a `plan_restart` whose `dry_run` is true."""
    try:
        values = complete_params(book, params)
    except ParamError:
        values = dict(params)
    restarts = executes = pins = forces = False
    handlers: list[StepSpec] = [*book.on_failure, *book.on_cancel]
    for step in book.steps:
        args = step.resolve(values)
        executes = executes or step.action in EXECUTING_ACTIONS
        pins = pins or step.action in PINNING_ACTIONS
        if step.action in RESTARTING_ACTIONS:
            restarts = True
            forces = forces or (step.action == "apply" and _true(args.get("force")))
        if step.action in DRY_RUN_ACTIONS and _true(args.get("dry_run")):
            handlers = []  # nothing was changed: no failure handler has anything to undo
            break
    for step in handlers:
        restarts = restarts or step.action in RESTARTING_ACTIONS
    return PlaybookEffects(
        book.name,
        restarts=restarts,
        executes=executes,
        pins_baseline=pins,
        forces=forces,
        mutating=book.mutating or restarts or executes or pins,
    )


def _true(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in _TRUE)


def playbook_effects(settings: Settings, invocation: Invocation) -> PlaybookEffects | None:
    """What the command's playbook run does; None for a command that runs no playbook.
    CommandError as `resolve_playbook` raises it (no such playbook, a bad parameter)."""
    if not runs_playbook(invocation):
        return None
    call = resolve_playbook(settings, invocation)
    return effects_of(call.book, call.params)


def describe_broken(broken: BrokenPlaybook) -> dict[str, Any]:
    """A file that did not load, in JSON form (`flagbot playbooks --json` lists it as broken)."""
    return {"name": broken.name, "broken": True, "error": broken.error, "source": str(broken.path)}


def describe(book: Playbook) -> dict[str, Any]:
    """A playbook in JSON form: what `flagbot playbooks --json` prints."""
    return {
        "name": book.name,
        "description": book.description,
        "mutating": book.mutating,
        "params": [
            {
                "name": p.name,
                "kind": p.kind,
                "required": p.required,
                "default": p.default,
                "help": p.help,
                "choices": list(p.choices),
            }
            for p in book.params
        ],
        "steps": [step.name for step in book.steps],
        "source": str(book.source),
        "shadows": [str(path) for path in book.shadows],
    }
