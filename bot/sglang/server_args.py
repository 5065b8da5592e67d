"""Read the `server_args=` startup line into a plain dict.

SGLang logs the post-init arguments once per start, in one of two shapes:

* 0.5.9-0.5.18: `server_args=ServerArgs(model_path='...', tp_size=8, ...)`, the dataclass repr
  (about 300-450 keywords, up to ~14 KB);
* 0.5.19+: `server_args={'model_path': '...', 'tp_size': 8, ...}`, a dict repr.

Both are Python source, so `ast` parses them exactly and matches whole keys (the repr holds
decoys such as `speculative_draft_model_path=` next to `model_path=`). Each value goes through
`ast.literal_eval`; a value that is not a literal (`CudaGraphConfig(...)`, `torch.bfloat16`,
`<LoadFormat.AUTO: 'auto'>`) is kept as `{"raw": "<source text>"}` rather than guessed at.

A line cut short (a paste, a 4 MB line cap, a dying process) does not parse as a whole; then a
small bracket-and-quote aware splitter salvages every complete `key=value` item before the cut.
Every value returned is JSON-serialisable.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from typing import Any

from bot.sglang.json_value import JsonValue

_MARKER = "server_args="
_CALL_HEAD_RE = re.compile(r"[A-Za-z_][\w.]*\(")
_KW_ITEM_RE = re.compile(r"\s*([A-Za-z_]\w*)\s*=(?!=)(.*)\Z", re.S)
_DICT_ITEM_RE = re.compile(r"""\s*(['"])([^'"\\]*)\1\s*:(.*)\Z""", re.S)
_PARSE_ERRORS = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, OverflowError)


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


def _value(node: ast.expr, source: _Source) -> JsonValue:
    try:
        return jsonable(ast.literal_eval(node))
    except _PARSE_ERRORS:
        return {"raw": source.segment(node)}


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
            return jsonable(ast.literal_eval(text))
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
