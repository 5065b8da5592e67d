"""The flag list of the SGLang a host really runs: its own `--help`, cached per version.

Why ask the host: SGLang adds and drops flags every minor release (0.5.9 has 331, 0.5.10 354,
0.5.13 406), and a flag judged against the wrong list is either refused wrongly or accepted and
then kills the restart with argparse's exit 2. The host's interpreter (the one its unit's
ExecStart names, or for `docker run`/`podman run` the unit's runtime and image, as the login:
`bot.target.launcher`) prints the list with `-m sglang.launch_server --help`; on a real host that
imports torch and takes ~10 s, so the parsed list is cached per version (in memory and as JSON
under the cache directory). A bundled list is used only when the host cannot answer (an image
the login's runtime cannot run, a broken venv): the one of the host's version, else the nearest packaged one
(`FlagCatalog.nearest`), and the result says which list was used.

Which version a target runs is remembered too (`remember_target`, `remembered_version`: in
memory and as JSON beside the lists), each time flagbot reads it from the host (preflight,
observe, and the application layer's flag-list read before a command is judged); so a command
can be judged against the host's own list without asking the host (Slack's ack has 3 s), and a
host upgraded to another version is judged by the new version's list from the next read on.

argparse's help shows names, aliases, metavars (hence nargs) and choices, not types or
defaults; those come from the bundled catalog for the same option where it knows it.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.config.schema import Target
from bot.sglang.catalog import FlagCatalog, FlagSpec
from bot.target.launcher import SglangInvoker, host_invoker
from bot.target.lines import split_lines

if TYPE_CHECKING:  # the SSH stack is loaded by whoever hands a node in, not by the cache readers
    from bot.target.nodestate import NodeLike

_OPTION_LINE = re.compile(r"^  (-\S.*?)(?:\s{2,}(.*))?$")
_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+-]{0,40}$")
_memory: dict[tuple[str, str], tuple[FlagCatalog, str]] = {}
"""(cache directory, version) -> the list and where it came from."""
_targets: dict[tuple[str, str, str], str] = {}
"""(cache directory, target name, `target_key`) -> the version its host reported."""


def _nargs(metavar: list[str]) -> tuple[bool, str | int | None, tuple[str, ...] | None]:
    """(takes_value, nargs, choices) from the words argparse prints after an option string."""
    if not metavar:
        return False, 0, None
    text = " ".join(metavar)
    choice = re.search(r"\{([^{}]*)\}", text)
    choices = tuple(choice.group(1).split(",")) if choice else None
    if text.startswith("[") and text.endswith("...]"):
        return True, "*", choices
    if text.endswith("...]"):
        return True, "+", choices
    if text.startswith("[") and text.endswith("]"):
        return True, "?", choices
    return True, (None if len(metavar) == 1 else len(metavar)), choices


def parse_help(text: str) -> list[FlagSpec]:
    """Flag specs from argparse's `--help` output (the `options:` part; usage lines ignored).

    `--x, --no-x` (BooleanOptionalAction) becomes two specs, the second negating the first.
    """
    specs: list[FlagSpec] = []
    in_options = False
    for line in split_lines(text):
        if line and not line.startswith(" ") and line.rstrip().endswith(":"):
            in_options = not line.startswith("usage")
            continue
        match = _OPTION_LINE.match(line) if in_options else None
        if match is None:
            continue
        parts = [part.split() for part in match.group(1).split(", ")]
        options = [words[0] for words in parts if words and words[0].startswith("-")]
        if not options or "--help" in options or "-h" in options:
            continue
        takes_value, nargs, choices = _nargs(parts[0][1:])
        positive = [opt for opt in options if not (opt.startswith("--no-") and "--" + opt[5:] in options)]
        negative = [opt for opt in options if opt not in positive]
        name = next((opt for opt in positive if opt.startswith("--")), positive[0])
        aliases = tuple(opt for opt in positive if opt != name)
        specs.append(
            FlagSpec(name=name, aliases=aliases, takes_value=takes_value, nargs=nargs, choices=choices)
        )
        specs.extend(FlagSpec(name=opt, takes_value=False, negates=name) for opt in negative)
    return specs


def merge_with_bundled(specs: list[FlagSpec], bundled: FlagCatalog) -> list[FlagSpec]:
    """Host flags, with type, default and `ServerArgs` field taken from the bundled catalog.

    A flag the bundled list lacks keeps argparse's dest as its field (`--x-y` -> `x_y`) and
    no known default.
    """
    out: list[FlagSpec] = []
    seen: set[str] = set()
    for spec in specs:
        known = next((bundled.get(opt) for opt in spec.option_strings if bundled.get(opt)), None)
        field = known.field if known is not None else spec.name.lstrip("-").replace("-", "_")
        extra: dict[str, Any] = {"field": field}
        if known is not None and (known.negates is None) == (spec.negates is None):
            extra |= {"type_name": known.type_name, "default": known.default, "help": known.help}
            extra |= {"action": known.action, "deprecated": known.deprecated}
            if known.name in spec.option_strings:  # keep the catalog's canonical spelling
                aliases = tuple(opt for opt in spec.option_strings if opt != known.name)
                extra |= {"name": known.name, "aliases": aliases}
        candidate = FlagSpec(**{**asdict(spec), **extra})
        if not seen.intersection(candidate.option_strings):
            seen.update(candidate.option_strings)
            out.append(candidate)
    return out


def _to_json(specs: list[FlagSpec]) -> list[dict[str, Any]]:
    return [{**asdict(spec), "aliases": list(spec.aliases)} for spec in specs]


def _from_json(items: list[dict[str, Any]]) -> list[FlagSpec]:
    specs = []
    for item in items:
        item = dict(item)
        item["aliases"] = tuple(item.get("aliases", ()))
        choices = item.get("choices")
        item["choices"] = tuple(choices) if choices is not None else None
        specs.append(FlagSpec(**item))
    return specs


def bundled_catalog(version: str | None) -> FlagCatalog:
    """The packaged list for `version`, else the nearest packaged one (`FlagCatalog.nearest`)."""
    return FlagCatalog.nearest(version)[0]


def python_of(prefix: list[str]) -> str | None:
    """The interpreter of a launch prefix (`/usr/bin/python3 -m sglang.launch_server`), if any."""
    invoker = host_invoker(prefix)
    return invoker.python if invoker is not None else None


def _invoker(python: str | SglangInvoker | None) -> SglangInvoker | None:
    """A bare interpreter path is the host's own (the form callers used before containers)."""
    return SglangInvoker(python) if isinstance(python, str) else python


async def host_version(node: NodeLike, python: str | SglangInvoker | None) -> str | None:
    """`sglang.__version__` from the host's interpreter or the unit's image (None when it cannot tell)."""
    invoker = _invoker(python)
    if invoker is None:
        return None
    name, params = invoker.command("sglang-version")
    try:
        result = await node.run(name, check=False, timeout=120, **params)
    except Exception:
        return None
    lines = split_lines(result.stdout.decode("utf-8", "replace").strip())
    text = lines[-1].strip() if lines else ""
    return text if result.exit_status == 0 and _VERSION.match(text) else None


def _list_path(cache_dir: Path | None, version: str) -> Path | None:
    return cache_dir / f"sglang-{version}-help.json" if cache_dir is not None else None


def cached_catalog(version: str | None, cache_dir: Path | None) -> FlagCatalog | None:
    """The host list of `version` read before (memory, else its JSON file); None when never read.
    No SSH: what answers a command before Slack's ack."""
    if version is None or not _VERSION.match(version):
        return None
    if (str(cache_dir), version) in _memory:
        return _memory[(str(cache_dir), version)][0]
    path = _list_path(cache_dir, version)
    if path is None or not path.is_file():
        return None
    try:
        catalog = FlagCatalog.from_specs(version, _from_json(json.loads(path.read_text())["flags"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    _memory[(str(cache_dir), version)] = (catalog, "cache")
    return catalog


async def host_catalog(
    node: NodeLike, *, python: str | SglangInvoker | None, version: str | None, cache_dir: Path | None
) -> tuple[FlagCatalog, str]:
    """(catalog, source) for the SGLang on `node`; source is `host --help`, `cache` or `bundled ...`.

    Cached per version: a version seen once is never asked again (its list cannot change).
    """
    bundled = bundled_catalog(version)
    if version is not None and _VERSION.match(version):
        cached = cached_catalog(version, cache_dir)
        if cached is not None:
            return cached, "cache"
        invoker = _invoker(python)
        if invoker is not None:
            name, params = invoker.command("sglang-help")
            try:
                result = await node.run(name, check=False, timeout=300, **params)
            except Exception:
                result = None
            parsed = (
                parse_help(result.stdout.decode("utf-8", "replace"))
                if result and result.exit_status == 0
                else []
            )
            if parsed:
                specs = merge_with_bundled(parsed, bundled)
                catalog = FlagCatalog.from_specs(version, specs)
                _memory[(str(cache_dir), version)] = (catalog, "host --help")
                save_catalog(cache_dir, version, specs)
                return catalog, "host --help"
    if version is not None and bundled.version != version:
        return bundled, f"bundled {bundled.version} list, the nearest packaged to SGLang {version} (fallback)"
    return bundled, f"bundled {bundled.version} list (fallback)"


def save_catalog(cache_dir: Path | None, version: str, specs: list[FlagSpec]) -> None:
    """Keep a host's list of `version` as JSON under the cache directory (best effort)."""
    path = _list_path(cache_dir, version)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"sglang_version": version, "flags": _to_json(specs)}))
    except OSError:
        pass


def host_answered(source: str) -> bool:
    """Whether a `host_catalog` source is the host's own list (read now or cached), not a packaged one."""
    return not source.startswith("bundled")


def target_key(target: Target) -> str:
    """What a remembered version belongs to: the unit on node 0 (another host or unit is another
    SGLang, so a changed config never reuses the old answer)."""
    node = target.nodes[0]
    return f"{target.unit_of(0)}@{node.user}@{node.host}:{node.port}"


def _target_path(cache_dir: Path | None, name: str) -> Path | None:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    return cache_dir / f"target-{safe}-sglang.json" if cache_dir is not None else None


def remember_target(cache_dir: Path | None, name: str, target: Target, version: str) -> None:
    """Record that `name`'s host runs SGLang `version` (read from the host just now)."""
    if not _VERSION.match(version):
        return
    key = target_key(target)
    _targets[(str(cache_dir), name, key)] = version
    path = _target_path(cache_dir, name)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"target": name, "key": key, "sglang_version": version}))
    except OSError:
        pass


def remembered_version(cache_dir: Path | None, name: str, target: Target) -> str | None:
    """The SGLang version `name`'s host reported last (None when never read, or read for another
    host or unit than the config names now)."""
    key = target_key(target)
    if (str(cache_dir), name, key) in _targets:
        return _targets[(str(cache_dir), name, key)]
    path = _target_path(cache_dir, name)
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        version = data["sglang_version"] if data.get("key") == key else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not isinstance(version, str) or not _VERSION.match(version):
        return None
    _targets[(str(cache_dir), name, key)] = version
    return version


def forget_cache() -> None:
    """Drop the in-memory cache (tests)."""
    _memory.clear()
    _targets.clear()
