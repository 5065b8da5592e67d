"""Every key docs/config.md documents is a field of the settings model AND is read somewhere in
bot/ outside the schema: a documented setting that nothing reads fails here (issue 22 item 1).

Keys are taken from the doc's key tables (the first column's backticked snake_case names) and
from its `[section]`: paragraphs (a backticked name followed by its default in parentheses), and
from a paragraph that opens with a key (`` `channels`: ... ``). Reads of the schema's own
methods count (`self.rounds`); declarations do not."""

from __future__ import annotations

import ast
import re
import types
import typing
from pathlib import Path

from pydantic import BaseModel

from bot.config import Settings

ROOT = Path(__file__).parents[3]
DOC = ROOT / "docs" / "config.md"
KEY = r"`([a-z][a-z0-9_]*)`"


def documented_keys(text: str) -> set[str]:
    keys: set[str] = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            keys.update(re.findall(KEY, first))
    for paragraph in re.split(r"\n\s*\n", text):
        flat = " ".join(paragraph.split())
        if re.match(r"^`\[[a-z.A-Z_]+\]`", flat):
            keys.update(re.findall(KEY + r" \(", flat))
        opening = re.match(KEY + r":", flat)
        if opening:
            keys.add(opening.group(1))
    return keys


def model_fields(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> set[str]:
    """Every field name of the model and of the models its fields hold (in lists and dicts too)."""
    seen = seen if seen is not None else set()
    if model in seen:
        return set()
    seen.add(model)
    names: set[str] = set()
    for name, info in model.model_fields.items():
        names.add(name)
        stack: list[object] = [info.annotation]
        while stack:
            kind = stack.pop()
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                names |= model_fields(kind, seen)
            elif isinstance(kind, types.UnionType) or typing.get_origin(kind) is not None:
                stack.extend(typing.get_args(kind))
    return names


SCHEMA = ROOT / "bot" / "config" / "schema.py"


def names_read(path: Path, *, own_only: bool) -> set[str]:
    """Attribute names the module's code reads (`x.key`) and exact string constants (`"key"`,
    as `getattr`/`model_dump` readers use); text in docstrings and comments does not count.
    `own_only`: only `self.key` (the schema's methods, not its field declarations)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute):
            if not own_only or (isinstance(node.value, ast.Name) and node.value.id == "self"):
                found.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and not own_only:
            found.add(node.value)
    return found


def product_reads() -> set[str]:
    """What bot/ reads outside the schema, plus what the schema's own methods read (e.g.
    `BenchProfile.requests_at` reads `self.rounds`)."""
    found = names_read(SCHEMA, own_only=True)
    for path in (ROOT / "bot").rglob("*.py"):
        if path != SCHEMA:
            found |= names_read(path, own_only=False)
    return found


def test_the_doc_documents_keys_at_all() -> None:
    keys = documented_keys(DOC.read_text(encoding="utf-8"))
    assert {"max_restarts_per_hour", "on_regression", "channels", "benchmark", "channel"} <= keys
    assert len(keys) > 50


def test_every_documented_key_is_a_setting() -> None:
    fields = model_fields(Settings)
    missing = sorted(documented_keys(DOC.read_text(encoding="utf-8")) - fields)
    assert missing == [], f"docs/config.md documents keys the settings model does not have: {missing}"


def test_every_documented_key_is_read_by_the_product() -> None:
    unread = sorted(documented_keys(DOC.read_text(encoding="utf-8")) - product_reads())
    assert unread == [], f"docs/config.md documents keys no code in bot/ reads: {unread}"
