"""Which playbook a command runs, with which parameters, on which target; playbooks loaded once.

Why here: `try`, `revert`, `verify`, `isolate`, `baseline pin` and `run NAME key=value` are
playbook runs whether typed in a terminal, in Slack or clicked as a button, and they must be
read the same way everywhere (the same defaults, the same target rule, the same errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.app.targets import resolve_target, target_of
from bot.commands import CommandError, Invocation
from bot.commands.target_catalog import catalog_for
from bot.config import Settings
from bot.loop.params import ParamError, parse_params
from bot.loop.playbook import Playbook, PlaybookError, load_playbooks, playbook_dirs

BUILTIN_COMMANDS = frozenset({"try", "revert", "verify", "isolate"})
"""Chat commands that are their built-in playbook of the same name (and `baseline pin|set`)."""

_LOADED: dict[tuple[tuple[str, int, int], ...], dict[str, Playbook]] = {}


def load_all(settings: Settings) -> dict[str, Playbook]:
    """Every playbook (built-in and the user's), parsed again only when a file changed: parsing
    the YAML costs ~30 ms of the event loop, paid by every other command's acknowledgement.
    PlaybookError for a broken file (nothing is cached then)."""
    dirs = playbook_dirs(settings.playbook_dirs)
    files = [
        (str(path), stat.st_mtime_ns, stat.st_size)
        for directory in dirs
        if directory.is_dir()
        for path in sorted(directory.iterdir())
        if path.suffix in (".yaml", ".yml") and (stat := path.stat())
    ]
    key = (*((str(directory), 0, 0) for directory in dirs), *files)
    found = _LOADED.get(key)
    if found is None:
        found = load_playbooks(dirs)
        _LOADED.clear()
        _LOADED[key] = found
    return found


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


def resolve_playbook(settings: Settings, invocation: Invocation) -> PlaybookCall:
    """The run a command asks for; CommandError naming what is wrong (a broken playbook file,
    no such playbook, a bad parameter, an unknown target)."""
    try:
        books = load_all(settings)
    except PlaybookError as exc:
        raise CommandError(str(exc)) from None
    if invocation.name != "run":
        name, params = builtin_params(invocation)
        book = books.get(name)
        if book is None:
            raise CommandError(f"no playbook {name!r}; playbooks: {', '.join(books) or 'none'}")
        return PlaybookCall(book, params, target_of(settings, invocation), books)
    name = str(invocation.positionals["playbook"])
    book = books.get(name)
    if book is None:
        raise CommandError(
            f"no playbook {name!r}; playbooks: {', '.join(books) or 'none'}",
            usage="run PLAYBOOK [key=value ...]",
        )
    raw = dict(invocation.options)
    if book.param("target") is None:  # then `target=` names the run's target, not a parameter
        raw.pop("target", None)
    target = resolve_target(settings, invocation.options.get("target"))
    try:
        params = parse_params(book, raw, catalog=catalog_for(settings, [f"target={target}"]).catalog)
    except ParamError as exc:
        raise CommandError(
            str(exc), usage=f"run {name} " + " ".join(f"{p.name}=..." for p in book.params)
        ) from None
    return PlaybookCall(book, params, target, books)


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
