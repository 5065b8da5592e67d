"""SGLang's command line, per release, rebuilt with argparse from the release's flag catalog.

Why: the twin must accept and refuse exactly what `sglang serve` / `python -m
sglang.launch_server` of the scenario's release accept and refuse, with argparse's own messages
and exit status 2, before anything "loads" (reference §3.1, §6). Rather than imitate argparse,
this module builds the same `ArgumentParser(prog="sglang serve")` (allow_abbrev on, so `--tp 2`
means `--tp-size 2`) from the release's catalog, which `tools/gen_flag_catalog.py` extracts
from the released wheel (option strings, action, type, nargs, const, choices, default, help).

Each release's catalog is found next to this file as `flags-<version>.json` on a node
(`install.py` copies every packaged list there; `flags.json` is the scenario's own, kept for
older installs) and at `bot/sglang/data/sglang-<version>-flags.json` on the host.

Every argument is added with `default=SUPPRESS`, so the namespace holds only what the command
line gave; defaults are filled afterwards from the catalog. That is how `parse` knows which
fields were requested (the recipe of reference §3.3 diffs post-init values against them).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

from .field_order import FIELD_DEFAULTS, FIELDS
from .releases import DEFAULT_RELEASE, release

PROG = "sglang serve"
DEPRECATED_WARNING = "\033[1;33mThe command line argument '{option}' is deprecated and will be removed in future versions.\033[0m"
DEPRECATED_STORE_WARNING = (
    "\033[1;33m'{option}' is deprecated and will be removed in a future release.{replacement}\033[0m"
)
"""0.5.23 `arg_groups/argparse_actions.py` `DeprecatedStoreTrueAction` / `DeprecatedStoreConstAction`
(via `print_deprecated_warning`, a `logger.warning` before logging is configured: bare on stderr)."""

_HERE = Path(__file__).resolve().parent


def _product_data() -> Path | None:
    """The product's packaged catalogs, when the engine runs on the host (the lab's unit tests).

    Found by module spec, not by import: on a node there is no `bot` package, and the engine
    imports nothing beyond the standard library."""
    try:
        spec = importlib.util.find_spec("bot.sglang.data")
    except ModuleNotFoundError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _candidates(version: str) -> list[Path]:
    paths = [_HERE / f"flags-{version}.json", _HERE / "flags.json"]
    data = _product_data()
    if data is not None:
        paths.append(data / f"sglang-{version}-flags.json")
    return paths


# -- the catalog ------------------------------------------------------------------------------


@cache
def catalog(version: str = DEFAULT_RELEASE) -> dict[str, Any]:
    """The flag catalog document of `version` (see module docstring for where it is looked up)."""
    release(version)  # an unknown release is refused by name
    for path in _candidates(version):
        if path.is_file():
            document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            if str(document.get("sglang_version")) == version:
                return document
    raise FileNotFoundError(
        f"SGLang {version} flag catalog not found; looked in "
        + ", ".join(str(p) for p in _candidates(version))
    )


def flags(version: str = DEFAULT_RELEASE) -> list[dict[str, Any]]:
    flag_list: list[dict[str, Any]] = catalog(version)["flags"]
    return flag_list


@cache
def field_names(version: str = DEFAULT_RELEASE) -> tuple[str, ...]:
    """Every ServerArgs field of `version`, in its repr / resolved-dict order."""
    ordered = list(FIELDS[version])
    seen = set(ordered)
    ordered += [
        name for name in dict.fromkeys(f["field"] for f in flags(version) if f["field"]) if name not in seen
    ]
    return tuple(ordered)


@cache
def _field_flags(version: str) -> dict[str, dict[str, Any]]:
    """field -> the catalog entry of the flag that primarily sets it (first declared)."""
    found: dict[str, dict[str, Any]] = {}
    for flag in flags(version):
        if flag["field"] and flag["field"] not in found:
            found[flag["field"]] = flag
    return found


def field_defaults(version: str = DEFAULT_RELEASE) -> dict[str, Any]:
    """Every field's default, in field order (fresh copies of lists and dicts): the flag's
    argparse default, else the literal default the sources declare, else None."""
    entries = _field_flags(version)
    declared = FIELD_DEFAULTS.get(version, {})
    return {
        name: _default(entries[name]) if name in entries else copy.deepcopy(declared.get(name))
        for name in field_names(version)
    }


def flag_for_field(name: str, version: str = DEFAULT_RELEASE) -> str | None:
    """The canonical flag of a field (`tp_size` -> `--tp-size`)."""
    entry = _field_flags(version).get(name)
    return None if entry is None else str(entry["name"])


def _default(entry: dict[str, Any]) -> Any:
    value = copy.deepcopy(entry["default"])
    if isinstance(value, str) and entry["type"] not in (None, "str"):
        value = _CONVERTERS.get(entry["type"], str)(value)  # argparse converts string defaults
    return value


# -- SGLang's argparse types ------------------------------------------------------------------
# Duplicated from bot/sglang/flag_types.py on purpose: this package runs on a node where `bot`
# does not exist. Keep the two in step; argparse's messages name each by `__name__`.


def _json_loads(value: str) -> Any:
    return json.loads(value)


def _json_list_type(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list."
        ) from None


def _nullable_str(value: str) -> str | None:
    return None if not value or value == "None" else value


_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")


def _human_readable_int(value: str) -> int:
    text = value.strip()
    match = _HUMAN_INT.fullmatch(text)
    if match:
        number, suffix = match.groups()
        if suffix in _IEC:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'; use an integer "
                    f"such as '{int(Decimal(number))}{suffix}' or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * _IEC[suffix]
        return int(Decimal(number) * _SI[suffix])
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. Use a plain integer, SI suffixes (1k, 1M), "
            "or IEC suffixes (1Ki, 1Mi)."
        ) from None


_CUDA_GRAPH_KEYS = {
    "decode": ("backend", "max_bs", "bs"),
    "prefill": (
        "backend",
        "max_bs",
        "bs",
        "max_context_size",
        "full_prefill_max_req",
        "full_prefill_prefix_chunk_tokens",
        "max_seq_len",
    ),
}
"""0.5.23 `model_executor/cuda_graph_config.py` `ALLOWED_KEYS_PER_PHASE`."""


def _parse_cuda_graph_backend_arg(raw: str) -> str:
    """0.5.23 `cuda_graph_config.py` `parse_cuda_graph_backend_arg`."""
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


def _parse_cuda_graph_config_arg(raw: str) -> dict[str, dict[str, Any]]:
    """0.5.23 `cuda_graph_config.py` `parse_cuda_graph_config_arg`: phase -> settings, checked."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(
            f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}"
        )
    result: dict[str, dict[str, Any]] = {}
    for phase, settings in parsed.items():
        phase = str(phase)
        if phase not in _CUDA_GRAPH_KEYS:
            raise argparse.ArgumentTypeError(
                f"--cuda-graph-config: unknown phase '{phase}', expected one of ('decode', 'prefill')"
            )
        if not isinstance(settings, dict):
            raise argparse.ArgumentTypeError(
                f"--cuda-graph-config['{phase}'] must be a JSON object, got {type(settings).__name__}"
            )
        if "backend" in settings:
            _parse_cuda_graph_backend_arg(settings["backend"])
        result[phase] = {}
        for key, value in settings.items():
            if key not in _CUDA_GRAPH_KEYS[phase]:
                raise argparse.ArgumentTypeError(
                    f"--cuda-graph-config['{phase}']: unknown key '{key}', expected one of {_CUDA_GRAPH_KEYS[phase]}"
                )
            result[phase][key] = value
    return result


_json_loads.__name__ = "loads"
_parse_cuda_graph_backend_arg.__name__ = "parse_cuda_graph_backend_arg"
_parse_cuda_graph_config_arg.__name__ = "parse_cuda_graph_config_arg"
_json_list_type.__name__ = "json_list_type"
_nullable_str.__name__ = "nullable_str"
_human_readable_int.__name__ = "human_readable_int"

_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "json.loads": _json_loads,
    "json_list_type": _json_list_type,
    "nullable_str": _nullable_str,
    "human_readable_int": _human_readable_int,
    "parse_cuda_graph_backend_arg": _parse_cuda_graph_backend_arg,
    "parse_cuda_graph_config_arg": _parse_cuda_graph_config_arg,
}


# -- SGLang's custom actions ------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that collects the deprecation warnings its actions raise."""

    twin_warnings: list[str]


def _warn(parser: argparse.ArgumentParser, text: str) -> None:
    collected: list[str] | None = getattr(parser, "twin_warnings", None)
    if collected is not None:
        collected.append(text)


class _DeprecatedAction(argparse.Action):
    """A deprecated no-op switch: warns, stores nothing (0.5.10 `DeprecatedAction`)."""

    def __init__(self, option_strings: Sequence[str], dest: str, nargs: int = 0, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        _warn(parser, DEPRECATED_WARNING.format(option=option_string))


class _DeprecatedStoreTrueAction(_DeprecatedAction):
    """A deprecated alias switch: warns, then sets its field like store_true."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        super().__call__(parser, namespace, values, option_string)
        setattr(namespace, self.dest, True)


class _LoRAPathAction(argparse.Action):
    """`--lora-paths`: the adapters as given, stripped (0.5.10 prints them as strings)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, [str(v).strip() for v in values or []])


_NEW_FLAGS: dict[str, tuple[str, Any]] = {
    "--disable-cuda-graph": ("--cuda-graph-backend-{decode,prefill}=disabled", True),
    "--enable-dp-attention": ("--attn-dp-size <dp-size>", True),
    "--monokernel-backend": ("--enable-amd-monokernel", True),
}
"""0.5.23 `srt/server_args.py` `ServerArgs.add_cli_args`: each deprecated flag's `new_flag` (what
the warning names) and the value it stores (`const_value=True` for `--monokernel-backend`)."""


class _DeprecatedStore(argparse.Action):
    """0.5.23 `DeprecatedStoreTrueAction` / `DeprecatedStoreConstAction`: warn naming the new
    flag, then store (True, or the const value)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        new_flag, value = _NEW_FLAGS.get(self.option_strings[0], (None, True))
        replacement = f" Use '{new_flag}' instead." if new_flag else ""
        _warn(parser, DEPRECATED_STORE_WARNING.format(option=option_string, replacement=replacement))
        setattr(namespace, self.dest, value)


_ACTIONS: dict[str, Any] = {
    "DeprecatedAction": _DeprecatedAction,
    "DeprecatedStoreTrueAction": _DeprecatedStoreTrueAction,
    "LoRAPathAction": _LoRAPathAction,
    "BooleanOptionalAction": argparse.BooleanOptionalAction,
}


def build_parser(version: str = DEFAULT_RELEASE) -> _Parser:
    """SGLang's parser: every catalog flag of `version`, in catalog order, defaults suppressed."""
    parser = _Parser(prog=PROG, allow_abbrev=True)
    parser.twin_warnings = []
    store_deprecations = release(version).deferred_resolution  # 0.5.23's deprecation actions
    for entry in flags(version):
        kwargs: dict[str, Any] = {"dest": entry["dest"], "help": entry["help"], "default": argparse.SUPPRESS}
        action = entry["action"]
        kwargs["action"] = _ACTIONS.get(action, action)
        if store_deprecations and action in ("DeprecatedStoreTrueAction", "DeprecatedStoreConstAction"):
            kwargs["action"] = _DeprecatedStore
            kwargs["nargs"] = entry["nargs"] if entry["nargs"] is not None else None
            if entry["nargs"] is None:
                kwargs.pop("nargs")
        elif action == "store":
            if entry["type"] is not None:
                kwargs["type"] = _CONVERTERS.get(entry["type"], str)
            if entry["nargs"] is not None:
                kwargs["nargs"] = entry["nargs"]
            if "const" in entry:
                kwargs["const"] = entry["const"]
        elif action == "LoRAPathAction":
            kwargs["nargs"] = entry["nargs"]
            kwargs["type"] = str
        if entry["choices"] is not None:
            kwargs["choices"] = entry["choices"]
        if entry["required"]:
            kwargs["required"] = True
        parser.add_argument(*entry["option_strings"], **kwargs)
    return parser


# -- parsing ----------------------------------------------------------------------------------


@dataclass
class ParsedArgs:
    """The command line as ServerArgs fields before post-init (`ServerArgs.from_cli_args`).

    `values` has every field in dataclass order, defaults filled; `requested` names the fields
    the command line set; `warnings` are the deprecation warnings argparse actions printed.
    """

    values: dict[str, Any]
    requested: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)


def parse(argv: Sequence[str], version: str = DEFAULT_RELEASE) -> ParsedArgs:
    """Parse like `prepare_server_args` of `version`: a bad command line exits 2 with argparse's
    message (SystemExit from `parser.error`), and `--help` prints the help and exits 0."""
    parser = build_parser(version)
    namespace = parser.parse_args(list(argv))
    given = vars(namespace)
    dest_to_field = {entry["dest"]: entry["field"] for entry in flags(version) if entry["field"]}
    values = field_defaults(version)
    requested: set[str] = set()
    for dest, value in given.items():
        name = dest_to_field.get(dest)
        if name is not None:
            values[name] = value
            requested.add(name)
    return ParsedArgs(values=values, requested=requested, warnings=list(parser.twin_warnings))


def format_help(version: str = DEFAULT_RELEASE) -> str:
    """What `sglang serve --help` of `version` prints."""
    return build_parser(version).format_help()
