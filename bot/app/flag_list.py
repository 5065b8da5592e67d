"""Which SGLang flag list judges a command's flags: the target host's own, for every front end.

Why: SGLang adds and drops flags every release, so a command is judged by the `--help` of the
SGLang its target really runs (`bot.target.flaglist`), not by a list flagbot ships. That list is
cached per version (in memory and as JSON under the cache directory) and the version each
target's host reported is remembered, so:

- `cached_flag_list` answers without SSH (what Slack's acknowledgement may use: it has 3 s), or
  says it cannot (None: the target's host was never read, or its version's list never fetched);
- `read_flag_list` asks the host (its unit's interpreter, or its container runtime and image:
  `bot.target.launcher`; the version, then the list, cached per version), and records the
  version it reported, so a host upgraded to another version is judged by that version's list
  from then on; when the host cannot answer (unreachable, neither a python nor an image in the
  unit's launch line, `--help` fails) the packaged list stands in
  (`bot.commands.target_catalog.catalog_for`), and its note says so and why.

`FlagList.note` names the list used (the host's list for SGLang X, or the packaged list and why);
the front ends show it. A command whose words name no SGLang flag needs no list (`needs_flag_list`):
it is judged by the packaged one, which then decides nothing.

The CLI reads the host before it answers (`flag_list`: the cache, else the host); Slack answers
from the cache before its ack and, on a miss, acknowledges that it is checking against the host's
SGLang and gives its answer after `read_flag_list` (`bot.slack.handlers`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bot.app.context import cache_dir as default_cache_dir
from bot.commands.registry import get_command
from bot.commands.target_catalog import UnknownTargetError, catalog_for
from bot.config import Settings
from bot.config.schema import ALL_TARGETS
from bot.sglang.catalog import FlagCatalog
from bot.sglang.launch_shell import LaunchParseError
from bot.target.errors import HostKeyError, LocalFileError, TargetError, UnreachableError
from bot.target.flaglist import (
    cached_catalog,
    host_answered,
    host_catalog,
    host_version,
    remember_target,
    remembered_version,
    target_key,
)
from bot.target.launcher import sglang_invoker

__all__ = [
    "FlagList",
    "cached_flag_list",
    "flag_list",
    "needs_flag_list",
    "packaged_flag_list",
    "read_flag_list",
    "target_flag_list",
]

_NEGATIVE = re.compile(r"^-\.?[0-9]")
FlagOrigin = Literal["node --help", "cache", "packaged"]
"""Where a list came from: node 0's `--help` read just now, the cache of an earlier read of the
same SGLang version, or the list packaged with flagbot (`config check --connect` says which)."""


@dataclass(frozen=True)
class FlagList:
    """The list a command's flags are judged by, and what to tell the user about it."""

    catalog: FlagCatalog
    target: str | None
    host: bool
    """True: the host's own `--help` list (read now or cached); False: a packaged list."""
    note: str
    """`host's list for SGLang 0.5.23`, or `packaged list for SGLang 0.5.10 (...why...)`."""
    needed: bool = True
    """False when the words name no flag (`needs_flag_list`): then the list decides nothing."""
    origin: FlagOrigin = "packaged"


def needs_flag_list(words: Sequence[str]) -> bool:
    """Whether the command (its name first) names an SGLang flag the list must judge: a change
    (`try add --x`), a `flags=` option (`isolate flags=--x`), a playbook's `changes=`."""
    spec = get_command(words[0]) if words else None
    if spec is None:
        return False
    takes_flags = spec.changes or spec.name == "run" or any(opt.kind == "flags" for opt in spec.options)
    return takes_flags and any(
        (word.startswith("-") and not _NEGATIVE.match(word)) or "=-" in word or ",-" in word
        for word in words[1:]
    )


def _target_name(settings: Settings, words: Sequence[str]) -> str | None:
    """`target=` of the words, else the default target (UnknownTargetError for an unknown name;
    `target=all`, the fleet's `status`, names none: None)."""
    named = next((word.split("=", 1)[1] for word in words if word.startswith("target=")), None)
    if named is not None and settings.targets and named not in (*settings.targets, ALL_TARGETS):
        raise UnknownTargetError(f"unknown target {named!r}; targets: {', '.join(sorted(settings.targets))}")
    name = named or settings.default_target
    return name if name in settings.targets else None


def packaged_flag_list(
    settings: Settings, words: Sequence[str], why: str | None = None, *, needed: bool = True
) -> FlagList:
    """The packaged list for the target's configured version (`catalog_for`), with why it stands in."""
    found = catalog_for(settings, words)
    note = f"packaged list for SGLang {found.catalog.version}"
    details = [text for text in (why, found.note) if text]
    return FlagList(
        found.catalog,
        _target_name(settings, words),
        False,
        note + (f" ({'; '.join(details)})" if details else ""),
        needed,
    )


def cached_flag_list(
    settings: Settings, words: Sequence[str], *, cache_dir: Path | None = None
) -> FlagList | None:
    """The list without SSH: the packaged one when the words name no flag, the host's cached list
    when the target's host was read before, else None (ask the host: `read_flag_list`)."""
    name = _target_name(settings, words)
    if not needs_flag_list(words) or name is None:
        return packaged_flag_list(settings, words, needed=needs_flag_list(words))
    directory = cache_dir if cache_dir is not None else default_cache_dir(settings)
    version = remembered_version(directory, name, settings.targets[name])
    catalog = cached_catalog(version, directory)
    if catalog is None:
        return None
    return FlagList(catalog, name, True, f"host's list for SGLang {catalog.version}", origin="cache")


def target_flag_list(settings: Settings, target: str, *, cache_dir: Path | None = None) -> FlagCatalog:
    """The best list known without SSH for `target`: its host's cached list, else the packaged one
    (what a playbook's parameters are read with; the command's words were judged before)."""
    directory = cache_dir if cache_dir is not None else default_cache_dir(settings)
    config = settings.targets.get(target)
    if config is not None:
        catalog = cached_catalog(remembered_version(directory, target, config), directory)
        if catalog is not None:
            return catalog
    return catalog_for(settings, [f"target={target}"]).catalog


_asking: dict[tuple[asyncio.AbstractEventLoop, str, str, str], asyncio.Future[FlagList]] = {}
"""The host reads in flight, per event loop, cache directory, target and its node 0's unit."""


async def read_flag_list(
    settings: Settings, words: Sequence[str], *, cache_dir: Path | None = None
) -> FlagList:
    """Ask the target's host (SSH): its SGLang's version, then that version's list (cached per
    version); the packaged list, with the reason, when the host cannot answer.

    Commands that miss the cache at once share one read of the host: a burst of Slack `try`s
    on a cold cache opens one SSH session, not one each. A caller that gives up (cancelled)
    leaves the read to the others."""
    name = _target_name(settings, words)
    if not needs_flag_list(words) or name is None:
        return packaged_flag_list(settings, words, needed=needs_flag_list(words))
    directory = cache_dir if cache_dir is not None else default_cache_dir(settings)
    key = (asyncio.get_running_loop(), str(directory), name, target_key(settings.targets[name]))
    asking = _asking.get(key)
    if asking is None:
        asking = asyncio.ensure_future(_ask_host(settings, words, name, directory))
        _asking[key] = asking
        asking.add_done_callback(lambda _done: _asking.pop(key, None))
    return await asyncio.shield(asking)


async def _ask_host(settings: Settings, words: Sequence[str], name: str, directory: Path) -> FlagList:
    # the SSH stack (asyncssh, cryptography) is needed only when a host is asked, and `log`,
    # `explain` of a command naming no flag and every cache hit never ask one
    # deferred: ~0.3 s of CPU at import
    from bot.target.session import TargetSession
    from bot.target.unit import UnitReadError, read_unit  # deferred: with the session, above

    config = settings.targets[name]
    try:
        async with TargetSession.open(name, config) as ts:
            view = await read_unit(ts.node0)
            python = sglang_invoker(view.prefix, view.launch.kind)
            if python is None:
                return packaged_flag_list(
                    settings,
                    words,
                    "the unit does not start SGLang with a python interpreter or a container image",
                )
            reported = await host_version(ts.node0, python)
            version = reported or config.sglang_version
            catalog, source = await host_catalog(
                ts.node0, python=python, version=version, cache_dir=directory
            )
    except LocalFileError as exc:  # a path in flagbot.toml, not the node
        return packaged_flag_list(settings, words, f"{name}'s {exc.what} {exc.problem}")
    except UnreachableError:
        return packaged_flag_list(settings, words, f"{name}'s node 0 cannot be reached")
    except HostKeyError:
        return packaged_flag_list(
            settings, words, f"{name}'s node 0 host key could not be verified against ssh.known_hosts"
        )
    except (LaunchParseError, UnitReadError):
        return packaged_flag_list(
            settings, words, f"{name}'s unit has no SGLang launch line flagbot can read"
        )
    except (TargetError, OSError, TimeoutError, ValueError):  # what reading a unit can meet on a host
        return packaged_flag_list(settings, words, f"{name}'s unit could not be read")
    if version is None:
        return packaged_flag_list(settings, words, "the host's SGLang did not say its version")
    if not host_answered(source):
        return packaged_flag_list(settings, words, f"SGLang {version}'s --help gave no flag list on node 0")
    if reported is not None:
        remember_target(directory, name, config, reported)
    origin: FlagOrigin = "node --help" if source == "host --help" else "cache"
    return FlagList(catalog, name, True, f"host's list for SGLang {catalog.version}", origin=origin)


async def flag_list(settings: Settings, words: Sequence[str], *, cache_dir: Path | None = None) -> FlagList:
    """The cached host list, else the host's answer (`read_flag_list`): what the CLI, a mention and
    a button use (none of them answers within Slack's 3 s ack)."""
    cached = cached_flag_list(settings, words, cache_dir=cache_dir)
    return cached if cached is not None else await read_flag_list(settings, words, cache_dir=cache_dir)


async def target_list_now(settings: Settings, name: str, *, cache_dir: Path | None = None) -> FlagList:
    """The list a command naming flags on target `name` would be judged by now (the host asked,
    as `read_flag_list` does): what `flagbot config check --connect` reports."""
    return await read_flag_list(settings, ["try", "add", "--flag", f"target={name}"], cache_dir=cache_dir)
