"""Read the `server_args=` startup line into a plain dict.

SGLang logs the post-init arguments once per start, in one of two shapes:

* 0.5.9-0.5.18: `server_args=ServerArgs(model_path='...', tp_size=8, ...)`, the dataclass repr
  (about 300-450 keywords, up to ~14 KB);
* 0.5.19+: `server_args={'model_path': '...', 'tp_size': 8, ...}`, a dict repr.

Both are Python source, so `ast` parses them exactly and matches whole keys (the repr holds
decoys such as `speculative_draft_model_path=` next to `model_path=`). Each value goes through
`ast.literal_eval`. A nested record printed as its dataclass repr (0.5.14-0.5.18:
`cuda_graph_config=CudaGraphConfig(decode=PhaseConfig(backend='full', max_bs=8, ...), ...)`)
becomes the same plain dict 0.5.19+ prints for it (`'cuda_graph_config': {'decode': {...}}`), so
both forms read alike; any other value that is not a literal (`torch.bfloat16`,
`<LoadFormat.AUTO: 'auto'>`, `float('inf')`) is kept as `{"raw": "<source text>"}` rather than
guessed at.

`read_server_args` also maps the nested graph settings back to the flat names 0.5.9-0.5.13
print and the rest of flagbot uses (`NESTED_FIELDS`), says which form was read, and names every
value it could not read (`unparsed`: name -> reason) instead of leaving a null that reads as unset.

A line cut short (a paste, a 4 MB line cap, a dying process) does not parse as a whole; then a
small bracket-and-quote aware splitter salvages every complete `key=value` item before the cut.
Every value returned is JSON-serialisable.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from bot.sglang.json_value import JsonValue

_MARKER = "server_args="
_CALL_HEAD_RE = re.compile(r"[A-Za-z_][\w.]*\(")
_KW_ITEM_RE = re.compile(r"\s*([A-Za-z_]\w*)\s*=(?!=)(.*)\Z", re.S)
_DICT_ITEM_RE = re.compile(r"""\s*(['"])([^'"\\]*)\1\s*:(.*)\Z""", re.S)
_PARSE_ERRORS = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, OverflowError)
_MAX_DEPTH = 16
"""Nesting read into records and containers; deeper text stays raw (real lines nest 3 deep)."""

GRAPH_CONFIG = "cuda_graph_config"
NESTED_FIELDS: tuple[tuple[str, str, str, str], ...] = (
    ("cuda_graph_max_bs", "decode", "max_bs", "cuda_graph_max_bs_decode"),
    ("cuda_graph_bs", "decode", "bs", "cuda_graph_bs_decode"),
    ("piecewise_cuda_graph_max_tokens", "prefill", "max_bs", "cuda_graph_max_bs_prefill"),
    ("piecewise_cuda_graph_tokens", "prefill", "bs", "cuda_graph_bs_prefill"),
    ("piecewise_cuda_graph_compiler", "prefill", "tc_compiler", "cuda_graph_tc_compiler"),
)
"""Flat field (0.5.9-0.5.13) -> (phase, key) of `cuda_graph_config` where 0.5.14+ keeps it, and
the 0.5.14+ input field the old flag now sets.

From 0.5.14's `ServerArgs.add_cli_args`, whose deprecated aliases fold each old flag into the
new per-phase setting: `--cuda-graph-max-bs` -> `--cuda-graph-max-bs-decode`, `--cuda-graph-bs`
-> `--cuda-graph-bs-decode`, `--piecewise-cuda-graph-max-tokens` -> `--cuda-graph-max-bs-prefill`,
`--piecewise-cuda-graph-tokens` -> `--cuda-graph-bs-prefill`, `--piecewise-cuda-graph-compiler`
-> `--cuda-graph-tc-compiler`; `ServerArgs._parse_cuda_graph_config` then resolves them into
`cuda_graph_config.<phase>.<key>`, the value printed. `--disable-piecewise-cuda-graph` became
`--cuda-graph-backend-prefill=disabled`: `disable_piecewise_cuda_graph` is read as
`cuda_graph_config.prefill.backend == 'disabled'` (see `flatten_nested`).
"""
PIECEWISE_DISABLED = "disable_piecewise_cuda_graph"


def parse_server_args(text: str) -> dict[str, Any] | None:
    """Parse the `server_args=` part of a line (any prefix before it is ignored).

    Returns None when the text holds no recognisable `server_args=` value at all.
    """
    return parse_server_args_status(text)[0]


def parse_server_args_status(text: str) -> tuple[dict[str, Any] | None, bool]:
    """Like `parse_server_args`, also saying whether the value was complete (not salvaged)."""
    pos = text.find(_MARKER)
    if pos < 0:
        return None, False
    expr = text[pos + len(_MARKER) :].strip()
    if expr.startswith("{"):
        kind = "dict"
    elif _CALL_HEAD_RE.match(expr):
        kind = "call"
    else:
        return None, False
    try:
        with warnings.catch_warnings():  # odd text (`1e`, `0x`) makes the compiler warn, not fail
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(expr, mode="eval")
    except _PARSE_ERRORS:
        return _salvage(expr, kind)
    body = tree.body
    source = _Source(expr)
    if isinstance(body, ast.Call) and kind == "call":
        values: dict[str, Any] = {}
        for kw in body.keywords:
            if kw.arg is not None:
                values[kw.arg] = _value(kw.value, source)
        return values, True
    if isinstance(body, ast.Dict) and kind == "dict":
        values = {}
        for key, val in zip(body.keys, body.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                values[key.value] = _value(val, source)
        return values, True
    return None, False


@dataclass(frozen=True)
class ServerArgsRead:
    """One `server_args=` line read: the values, and how they were read.

    `values` holds every printed key, plus the flat names of `NESTED_FIELDS` (and
    `disable_piecewise_cuda_graph`) where only the nested form was printed; `nested` says
    which flat name came from which nested path. `form` is "repr" (`ServerArgs(...)`,
    0.5.9-0.5.18) or "dict" (`{...}`, 0.5.19+). `unparsed` names what could not be read and
    why; it is empty when everything was read.
    """

    values: dict[str, Any] | None
    complete: bool
    form: str | None
    nested: dict[str, str] = field(default_factory=dict)
    unparsed: dict[str, str] = field(default_factory=dict)


def read_server_args(text: str) -> ServerArgsRead:
    """Parse a `server_args=` line and map its nested settings to the flat names (see module doc)."""
    pos = text.find(_MARKER)
    if pos < 0:
        return ServerArgsRead(None, False, None, unparsed={"server_args": "no `server_args=` in the line"})
    head = text[pos + len(_MARKER) : pos + len(_MARKER) + 64].lstrip()
    form = "dict" if head.startswith("{") else "repr" if _CALL_HEAD_RE.match(head) else None
    if form is None:
        reason = f"`server_args=` followed by neither `ServerArgs(...)` nor `{{...}}`: {head[:40]!r}"
        return ServerArgsRead(None, False, None, unparsed={"server_args": reason})
    values, complete = parse_server_args_status(text)
    if values is None:
        reason = "the line holds no complete `key=value` item (cut short or garbled)"
        return ServerArgsRead(None, False, form, unparsed={"server_args": reason})
    added, nested, unparsed = flatten_nested(values)
    if not complete:
        unparsed["server_args"] = (
            f"the line was cut short: {len(values)} items read, the rest are missing (not unset)"
        )
    return ServerArgsRead({**values, **added}, complete, form, nested, unparsed)


def flatten_nested(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """(flat values to add, flat name -> nested path, name -> why it was not read).

    Only names the line does not print itself are added (0.5.9-0.5.13 print the flat fields
    and have no `cuda_graph_config`, so nothing changes for them); `nested` names every flat
    field read from the nested config, so it is the same for a dict that already holds them.
    """
    added: dict[str, Any] = {}
    nested: dict[str, str] = {}
    unparsed: dict[str, str] = {}
    if GRAPH_CONFIG not in values:
        return added, nested, unparsed
    config = values[GRAPH_CONFIG]
    wanted = [(flat, phase, key) for flat, phase, key, _new in NESTED_FIELDS]
    wanted.append((PIECEWISE_DISABLED, "prefill", "backend"))
    for flat, phase, key in wanted:
        path = f"{GRAPH_CONFIG}.{phase}.{key}"
        if config is None:
            unparsed[flat] = f"{GRAPH_CONFIG} is printed as None"
            continue
        if not isinstance(config, dict) or _is_raw(config):
            unparsed[flat] = f"{GRAPH_CONFIG} is printed in a form flagbot cannot read"
            continue
        settings = config.get(phase)
        if not isinstance(settings, dict) or _is_raw(settings):
            unparsed[flat] = f"{GRAPH_CONFIG} has no readable {phase!r} phase"
            continue
        if key not in settings:
            unparsed[flat] = f"{GRAPH_CONFIG}.{phase} has no {key!r}"
            continue
        value = settings[key]
        if flat == PIECEWISE_DISABLED:
            if not isinstance(value, str):
                unparsed[flat] = f"{path} is not a backend name: {value!r}"
                continue
            value = value == "disabled"
        nested[flat] = path
        if flat not in values:
            added[flat] = value
    return added, nested, unparsed


def _is_raw(value: dict[str, Any]) -> bool:
    return set(value) == {"raw"}


class _Source:
    """Source text of an AST node; col offsets are UTF-8 byte offsets, so slice the bytes."""

    def __init__(self, expr: str) -> None:
        self._expr = expr
        self._encoded = expr.encode("utf-8", "surrogatepass")
        self._single_line = "\n" not in expr and "\r" not in expr and "\f" not in expr

    def segment(self, node: ast.expr) -> str:
        if self._single_line and node.end_col_offset is not None:
            raw = self._encoded[node.col_offset : node.end_col_offset]
            return raw.decode("utf-8", "replace")
        return ast.get_source_segment(self._expr, node) or ""


def _value(node: ast.expr, source: _Source, depth: int = 0) -> JsonValue:
    try:
        return jsonable(ast.literal_eval(node))
    except _PARSE_ERRORS:
        pass
    if depth < _MAX_DEPTH:
        if isinstance(node, ast.Call) and _is_record(node):
            return {kw.arg: _value(kw.value, source, depth + 1) for kw in node.keywords if kw.arg}
        if isinstance(node, ast.Dict) and all(
            isinstance(key, ast.Constant) and isinstance(key.value, str) for key in node.keys
        ):
            return {
                key.value: _value(val, source, depth + 1)
                for key, val in zip(node.keys, node.values, strict=True)
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            }
        if isinstance(node, ast.List | ast.Tuple):
            return [_value(item, source, depth + 1) for item in node.elts]
    return {"raw": source.segment(node)}


def _is_record(node: ast.Call) -> bool:
    """A dataclass repr: `Name(field=value, ...)`, a capitalised name and keywords only."""
    func = node.func
    return (
        isinstance(func, ast.Name)
        and func.id[:1].isupper()
        and not node.args
        and bool(node.keywords)
        and all(kw.arg is not None for kw in node.keywords)
    )


def jsonable(value: object) -> JsonValue:
    """Turn a literal into plain JSON types; what JSON cannot hold becomes {"raw": repr}."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"raw": repr(value)}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, set | frozenset):
        return [jsonable(item) for item in sorted(value, key=repr)]
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else repr(k)): jsonable(v) for k, v in value.items()}
    return {"raw": repr(value)}


def _salvage(expr: str, kind: str) -> tuple[dict[str, Any] | None, bool]:
    """Recover the complete items of a truncated or garbled repr (None if there are none).

    The flag is True when the container was closed, i.e. nothing was cut off.
    """
    start = expr.find("{") + 1 if kind == "dict" else expr.find("(") + 1
    items, closed = split_top_level(expr, start)
    if not closed:
        items.pop()  # the item the cut went through is unreliable (`128` cut to `12`)
    values: dict[str, Any] = {}
    for item in items:
        if kind == "call":
            match = _KW_ITEM_RE.match(item)
            if match:
                values[match.group(1)] = _literal_or_raw(match.group(2))
        else:
            match = _DICT_ITEM_RE.match(item)
            if match:
                values[match.group(2)] = _literal_or_raw(match.group(3))
    return (values or None), closed and bool(values)


def _literal_or_raw(text: str) -> JsonValue:
    text = text.strip()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text, mode="eval")
        return _value(tree.body, _Source(text))
    except _PARSE_ERRORS:
        return {"raw": text}


_OPEN = "([{"
_CLOSE = ")]}"


def split_top_level(text: str, start: int) -> tuple[list[str], bool]:
    """Split `text[start:]` at commas outside brackets and quotes.

    Stops at the bracket that closes the container opened just before `start`; the flag says
    whether that bracket was found. When it was not (the text was cut short), the last item
    is the unterminated tail, possibly blank.
    """
    items: list[str] = []
    depth = 0
    quote = ""
    item_start = start
    i = start
    n = len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            if depth == 0:
                last = text[item_start:i]
                if last.strip():
                    items.append(last)
                return items, True
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[item_start:i])
            item_start = i + 1
        i += 1
    items.append(text[item_start:])  # the unterminated tail, possibly blank
    return items, False
