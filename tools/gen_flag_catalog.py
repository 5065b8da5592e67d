#!/usr/bin/env python3
"""Regenerate `bot/sglang/data/sglang-<version>-flags.json`, the flag catalogs flagbot ships.

Why this exists: the bot must reject a misspelt or invalid flag in chat, before it restarts a
server, and it must do so without torch (importing `sglang.srt.server_args` needs torch). The
shipped lists (0.5.9, 0.5.10, 0.5.23) are read from the released wheels by one of two methods.

Both start the same way: `pip download --no-deps sglang==<version>` into a temporary directory
(needs network; `--wheel PATH` uses a wheel you already have).

Method `ast` (SGLang <= 0.5.13, where every CLI flag is a literal `parser.add_argument(...)` call
in `sglang/srt/server_args.py`, inside `ServerArgs.add_cli_args`):

1. Opens `sglang/srt/server_args.py` straight from the wheel with `zipfile` (nothing is
   installed or imported) and walks every `parser.add_argument(...)` call in source order.
2. Records option strings, action, type, nargs, const, choices, default, dest, help. Names
   that refer to literals elsewhere (`LOAD_FORMAT_CHOICES`, `ServerArgs.tp_size`, a dict's
   `.keys()` in another sglang module) are resolved by reading those modules' ASTs from the
   same wheel; what cannot be resolved to a literal is kept as source text (`*_repr`).

Method `import` (any release; needed from the one whose arguments come from field groups in
`sglang/srt/arg_groups/`, e.g. 0.5.23, where `ServerArgs.add_cli_args` calls
`arg_utils.add_cli_args_from_dataclass` and no literal call names most flags):

1. Unpacks `sglang/` from the wheel into a temporary directory.
2. Runs a fresh interpreter (`python -I`, empty environment but PATH, PYTHONHASHSEED=0, so no
   `SGLANG_*` variable changes a default) that puts that directory first on `sys.path` and a
   meta-path finder first on `sys.meta_path`: every top-level package that is neither stdlib
   nor in `REAL_PACKAGES` (sglang, msgspec, typing_extensions) is replaced by a permissive stub
   module (`_Stub`: any attribute, call or operator gives another stub). Where SGLang asks the
   machine something at import time the stubs answer as a CUDA host (`STUB_FACTS`,
   `STUB_ABSENT`). msgspec is real because 0.5.23's field groups are msgspec Structs; it is
   pip-downloaded the same way when this Python lacks it.
3. Imports `sglang.srt.server_args`, builds `argparse.ArgumentParser(prog="sglang serve")`,
   calls `ServerArgs.add_cli_args(parser)` as `prepare_server_args` does, and records each
   action's option strings, class, dest, type, nargs, const, choices, default, required and
   help: the defaults are the parser's own, i.e. what `sglang serve` uses when the flag is not
   given (the field defaults of 0.5.23's `arg_groups/fields/*.py`). Where the parser's default
   is None and the field declares an `Arg(fallback=...)` (applied by
   `arg_groups/overrides.py:resolution_result` when neither input nor resolution sets the
   field), the fallback is the default, and the flag's `default_source` says so; otherwise
   `default_source` is `parser`. (AST-method files have no `default_source`: every default
   there is the `add_argument(default=...)` value.)
4. Refuses to write when any recorded value came from a stub (`stub_tainted`).

`--method auto` (the default) uses `import` when the wheel has `sglang/srt/arg_groups/`, else
`ast`. The two methods agree on 0.5.9 and 0.5.10 (same flags, names, aliases, defaults, types,
nargs and help; only a set's choice order differs), which is how the import method was checked.

Each document's `source` says which method read which wheel (name and sha256): that is the
source of every default in it. `primary_flag_count` is compared with `EXPECTED_PRIMARY_FLAGS`
(a mismatch is reported loudly). The data files are shipped; this script is only how to
regenerate them (`--check` regenerates and exits 1 if the file on disk differs), so it is not
part of the package.

The canonical flag name is chosen as flagbot shows and diffs flags: the option string that
spells the `ServerArgs` field the flag ends up in (what the `server_args=ServerArgs(...)`
startup line prints), else the first option string, which is what `--help` lists first.
Example: `--tensor-parallel-size, --tp-size` has argparse dest `tensor_parallel_size`, which
`ServerArgs.from_cli_args` copies into field `tp_size`, so the canonical name is `--tp-size`.

Usage: `python tools/gen_flag_catalog.py [--version 0.5.10] [--wheel PATH] [--method auto|ast|import]
[--check]`.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import subprocess
import sys
import tempfile
import types
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT / "bot" / "sglang" / "data"
SERVER_ARGS = "sglang/srt/server_args.py"

# Primary flag counts measured against `--help` (reference §6) and the wheel's own parser (the
# import method); a mismatch means a method missed or invented flags, so it is reported loudly
# rather than silently shipped.
EXPECTED_PRIMARY_FLAGS = {
    "0.5.9": 331,
    "0.5.10": 354,
    "0.5.11": 374,
    "0.5.12": 387,
    "0.5.13": 406,
    "0.5.23": 531,  # the import method's own parser; the AST method agrees for 0.5.9 and 0.5.10
}

# argparse's built-in actions that take no value, and SGLang's own.
NO_VALUE_ACTIONS = {
    "store_true",
    "store_false",
    "store_const",
    "append_const",
    "count",
    "help",
    "version",
    "BooleanOptionalAction",
    "DeprecatedAction",
    "DeprecatedStoreTrueAction",
}
DEPRECATED_ACTIONS = {"DeprecatedAction", "DeprecatedStoreTrueAction"}
IMPLICIT_DEFAULTS: dict[str, Any] = {
    "store_true": False,
    "store_false": True,
    "DeprecatedStoreTrueAction": False,
}


# f-string `!s`/`!r`/`!a` conversions by their `ast.FormattedValue.conversion` code (-1: none).
CONVERSIONS: dict[int, Callable[[object], str]] = {-1: str, 115: str, 114: repr, 97: ascii}


class UnresolvedError(Exception):
    """A node that is not a literal we can compute from source alone."""


@dataclass
class Opaque:
    """Stands in for a value we cannot compute, so a dict's literal keys stay usable."""

    source: str


@dataclass
class Module:
    """One module of the wheel, indexed for name lookups."""

    name: str
    source: str
    tree: ast.Module
    assigns: dict[str, ast.expr] = field(default_factory=dict)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.source, node) or ast.unparse(node)


class Resolver:
    """Computes literal values from the ASTs of the wheel's modules (never imports them)."""

    def __init__(self, wheel: zipfile.ZipFile) -> None:
        self.wheel = wheel
        self.names = set(wheel.namelist())
        self.modules: dict[str, Module | None] = {}

    def module(self, dotted: str) -> Module | None:
        if dotted in self.modules:
            return self.modules[dotted]
        base = dotted.replace(".", "/")
        found: Module | None = None
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if path in self.names:
                source = self.wheel.read(path).decode("utf-8")
                found = index_module(dotted, source)
                break
        self.modules[dotted] = found
        return found

    def lookup(
        self, name: str, mod: Module, depth: int = 0
    ) -> tuple[ast.expr | ast.ClassDef | ast.FunctionDef, Module]:
        if depth > 5:
            raise UnresolvedError(name)
        if name in mod.assigns:
            return mod.assigns[name], mod
        if name in mod.classes:
            return mod.classes[name], mod
        if name in mod.functions:
            return mod.functions[name], mod
        if name in mod.imports:
            target_mod, target_name = mod.imports[name]
            other = self.module(target_mod)
            if other is not None:
                return self.lookup(target_name, other, depth + 1)
        raise UnresolvedError(name)

    def ev(self, node: ast.expr, mod: Module, local: dict[str, ast.expr]) -> Any:
        """Evaluate `node` to a Python literal, or raise UnresolvedError."""
        match node:
            case ast.Constant(value=value):
                return value
            case ast.UnaryOp(op=ast.USub(), operand=operand):
                return -self.ev(operand, mod, local)
            case ast.List(elts=elts) | ast.Tuple(elts=elts) | ast.Set(elts=elts):
                out: list[Any] = []
                for elt in elts:
                    if isinstance(elt, ast.Starred):
                        out.extend(self.ev(elt.value, mod, local))
                    else:
                        out.append(self.ev(elt, mod, local))
                return tuple(out) if isinstance(node, ast.Tuple) else out
            case ast.Dict(keys=keys, values=values):
                result: dict[Any, Any] = {}
                for key, value in zip(keys, values, strict=True):
                    if key is None:
                        raise UnresolvedError(mod.segment(node))
                    try:
                        result[self.ev(key, mod, local)] = self.ev(value, mod, local)
                    except UnresolvedError:
                        result[self.ev(key, mod, local)] = Opaque(mod.segment(value))
                return result
            case ast.BinOp(left=left, op=ast.Add(), right=right):
                return self.ev(left, mod, local) + self.ev(right, mod, local)
            case ast.BinOp(left=left, op=ast.Mult(), right=right):
                return self.ev(left, mod, local) * self.ev(right, mod, local)
            case ast.Subscript(value=value, slice=ast.Constant(value=int() as index)):
                return self.ev(value, mod, local)[index]
            case ast.Name(id=name):
                if name in local:
                    return self.ev(local[name], mod, {})
                target, where = self.lookup(name, mod)
                if isinstance(target, ast.ClassDef | ast.FunctionDef):
                    raise UnresolvedError(name)
                return self.ev(target, where, {})
            case ast.Attribute(value=ast.Name(id=owner), attr="__doc__"):
                target, _ = self.lookup(owner, mod)
                if isinstance(target, ast.expr):
                    raise UnresolvedError(mod.segment(node))
                return ast.get_docstring(target, clean=False)
            case ast.Attribute(value=ast.Name(id=owner), attr=attr):
                return self.class_attr(owner, attr, mod)
            case ast.Call(func=ast.Attribute(value=inner, attr="keys"), args=[], keywords=[]):
                value = self.ev(inner, mod, local)
                if not isinstance(value, dict):
                    raise UnresolvedError(mod.segment(node))
                return list(value)
            case ast.Call(func=ast.Name(id="list" | "tuple" | "sorted" as fn), args=[arg], keywords=[]):
                value = self.ev(arg, mod, local)
                items = list(value)
                return sorted(items) if fn == "sorted" else items
            case ast.Call(func=func, keywords=keywords) if _dotted(func) in {"field", "dataclasses.field"}:
                for kw in keywords:
                    if kw.arg == "default":
                        return self.ev(kw.value, mod, local)
                    if kw.arg == "default_factory" and _dotted(kw.value) in {"list", "dict"}:
                        return [] if _dotted(kw.value) == "list" else {}
                raise UnresolvedError(mod.segment(node))
            case _:
                raise UnresolvedError(mod.segment(node))

    def class_attr(self, owner: str, attr: str, mod: Module) -> Any:
        target, where = self.lookup(owner, mod)
        if not isinstance(target, ast.ClassDef):
            raise UnresolvedError(f"{owner}.{attr}")
        for stmt in target.body:
            if isinstance(stmt, ast.AnnAssign) and _target_name(stmt.target) == attr:
                if stmt.value is None:
                    raise UnresolvedError(f"{owner}.{attr} (no default)")
                return self.ev(stmt.value, where, {})
            if isinstance(stmt, ast.Assign) and any(_target_name(t) == attr for t in stmt.targets):
                return self.ev(stmt.value, where, {})
        raise UnresolvedError(f"{owner}.{attr}")

    def text(self, node: ast.expr, mod: Module, local: dict[str, ast.expr]) -> tuple[str, bool]:
        """Help text as `--help` would print it; unresolvable pieces stay as `{source}`.

        Returns (text, fully_resolved).
        """
        match node:
            case ast.JoinedStr(values=values):
                parts: list[str] = []
                ok = True
                for value in values:
                    if isinstance(value, ast.Constant):
                        parts.append(str(value.value))
                        continue
                    assert isinstance(value, ast.FormattedValue)
                    try:
                        if value.format_spec is not None:
                            raise UnresolvedError("format spec")
                        obj = self.ev(value.value, mod, local)
                        if _has_opaque(obj):
                            raise UnresolvedError("opaque")
                        parts.append(CONVERSIONS[value.conversion](obj))
                    except UnresolvedError:
                        ok = False
                        parts.append("{" + mod.segment(value.value) + "}")
                return "".join(parts), ok
            case ast.BinOp(left=left, op=ast.Add(), right=right):
                ltext, lok = self.text(left, mod, local)
                rtext, rok = self.text(right, mod, local)
                return ltext + rtext, lok and rok
            case _:
                try:
                    value = self.ev(node, mod, local)
                except UnresolvedError:
                    return mod.segment(node), False
                return str(value), True


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _target_name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _has_opaque(value: Any) -> bool:
    if isinstance(value, Opaque):
        return True
    if isinstance(value, dict):
        return any(_has_opaque(k) or _has_opaque(v) for k, v in value.items())
    if isinstance(value, list | tuple | set):
        return any(_has_opaque(v) for v in value)
    return False


def index_module(dotted: str, source: str) -> Module:
    tree = ast.parse(source)
    mod = Module(dotted, source, tree)
    package = dotted.rsplit(".", 1)[0]
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            name = _target_name(stmt.targets[0])
            if name is not None:
                mod.assigns.setdefault(name, stmt.value)  # the definition, not later rebinds
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            name = _target_name(stmt.target)
            if name is not None:
                mod.assigns.setdefault(name, stmt.value)
        elif isinstance(stmt, ast.ClassDef):
            mod.classes[stmt.name] = stmt
        elif isinstance(stmt, ast.FunctionDef):
            mod.functions[stmt.name] = stmt
        elif isinstance(stmt, ast.ImportFrom) and stmt.module is not None:
            base = stmt.module
            if stmt.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - stmt.level + 1], stmt.module])
            for alias in stmt.names:
                mod.imports[alias.asname or alias.name] = (base, alias.name)
    return mod


def extensible_lists(mod: Module) -> set[str]:
    """Module-level lists that SGLang lets plugins extend (`add_*_choices` helpers)."""
    names: set[str] = set()
    for node in ast.walk(mod.tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"extend", "append"}
            and isinstance(node.func.value, ast.Name)
        ):
            names.add(node.func.value.id)
    return names


def cli_remap(mod: Module) -> dict[str, str]:
    """argparse dest -> ServerArgs field, from `args.tp_size = args.tensor_parallel_size` lines."""
    remap: dict[str, str] = {}
    cls = mod.classes["ServerArgs"]
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "from_cli_args":
            for inner in ast.walk(stmt):
                if (
                    isinstance(inner, ast.Assign)
                    and len(inner.targets) == 1
                    and isinstance(inner.targets[0], ast.Attribute)
                    and isinstance(inner.value, ast.Attribute)
                ):
                    remap[inner.value.attr] = inner.targets[0].attr
    return remap


def server_args_fields(mod: Module) -> list[str]:
    cls = mod.classes["ServerArgs"]
    return [
        stmt.target.id
        for stmt in cls.body
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
    ]


def add_argument_calls(tree: ast.Module) -> Iterator[tuple[ast.Call, ast.FunctionDef | None]]:
    """Every `parser.add_argument(...)` call with its enclosing function, in source order."""
    found: list[tuple[ast.Call, ast.FunctionDef | None]] = []

    def visit(node: ast.AST, func: ast.FunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef) else func
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr == "add_argument"
                and isinstance(child.func.value, ast.Name)
                and child.func.value.id == "parser"
            ):
                found.append((child, func))
            visit(child, inner)

    visit(tree, None)
    found.sort(key=lambda pair: (pair[0].lineno, pair[0].col_offset))
    yield from found


def local_assigns(func: ast.FunctionDef | None, before: int) -> dict[str, ast.expr]:
    """Simple `name = value` bindings in `func` above line `before` (the last one wins)."""
    result: dict[str, ast.expr] = {}
    if func is None:
        return result
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and node.lineno < before:
            name = _target_name(node.targets[0])
            if name is not None:
                result[name] = node.value
    return result


def argparse_dest(option_strings: list[str]) -> str:
    """argparse's rule: the first long option string, else the first one, without prefix."""
    long_ones = [s for s in option_strings if s.startswith("--")]
    chosen = long_ones[0] if long_ones else option_strings[0]
    return chosen.lstrip("-").replace("-", "_")


def action_name(node: ast.expr | None, mod: Module) -> str:
    if node is None:
        return "store"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    dotted = _dotted(node)
    return dotted.rsplit(".", 1)[-1] if dotted else mod.segment(node)


def type_name(node: ast.expr | None, mod: Module) -> str | None:
    if node is None:
        return None
    return _dotted(node) or mod.segment(node)


def literal_or_none(resolver: Resolver, node: ast.expr, mod: Module, local: dict[str, ast.expr]) -> Any:
    value = resolver.ev(node, mod, local)
    if _has_opaque(value):
        raise UnresolvedError(mod.segment(node))
    if isinstance(value, tuple):
        value = list(value)
    json.dumps(value)  # must be representable; raises TypeError otherwise
    return value


def extract(resolver: Resolver, mod: Module) -> list[dict[str, Any]]:
    remap = cli_remap(mod)
    fields = set(server_args_fields(mod))
    extensible = extensible_lists(mod)
    flags: list[dict[str, Any]] = []
    for call, func in add_argument_calls(mod.tree):
        local = local_assigns(func, call.lineno)
        option_strings = [resolver.ev(arg, mod, local) for arg in call.args]
        kw = {k.arg: k.value for k in call.keywords if k.arg is not None}
        action = action_name(kw.get("action"), mod)
        dest = resolver.ev(kw["dest"], mod, local) if "dest" in kw else argparse_dest(option_strings)
        server_field = remap.get(dest, dest)
        field_flag = "--" + server_field.replace("_", "-")
        name = field_flag if field_flag in option_strings else option_strings[0]

        nargs = resolver.ev(kw["nargs"], mod, local) if "nargs" in kw else None
        if action in NO_VALUE_ACTIONS and "nargs" not in kw:
            nargs = 0

        entry: dict[str, Any] = {
            "name": name,
            "option_strings": option_strings,
            "aliases": [s for s in option_strings if s != name],
            "dest": dest,
            "field": server_field if server_field in fields else None,
            "action": action,
            "type": type_name(kw.get("type"), mod),
            "nargs": nargs,
        }
        if action == "BooleanOptionalAction":
            entry["negative_option_strings"] = ["--no-" + s[2:] for s in option_strings if s.startswith("--")]
        if "const" in kw:
            entry["const"] = resolver.ev(kw["const"], mod, local)

        entry["choices"] = None
        entry["choices_repr"] = None
        entry["choices_extensible"] = False
        if "choices" in kw:
            try:
                entry["choices"] = literal_or_none(resolver, kw["choices"], mod, local)
            except (UnresolvedError, TypeError):
                entry["choices_repr"] = mod.segment(kw["choices"])
            names_used = {n.id for n in ast.walk(kw["choices"]) if isinstance(n, ast.Name)}
            entry["choices_extensible"] = bool(names_used & extensible)

        entry["default_repr"] = None
        if "default" in kw:
            try:
                entry["default"] = literal_or_none(resolver, kw["default"], mod, local)
            except (UnresolvedError, TypeError):
                entry["default"] = None
                entry["default_repr"] = mod.segment(kw["default"])
        else:
            entry["default"] = IMPLICIT_DEFAULTS.get(action)

        entry["required"] = bool("required" in kw and resolver.ev(kw["required"], mod, local))
        help_text, help_ok = ("", True)
        if "help" in kw:
            help_text, help_ok = resolver.text(kw["help"], mod, local)
        entry["help"] = help_text
        entry["help_resolved"] = help_ok
        lowered = help_text.lower()
        entry["deprecated"] = action in DEPRECATED_ACTIONS or lowered.startswith(
            ("[deprecated]", "deprecated", "(deprecated")
        )
        entry["lineno"] = call.lineno
        flags.append(entry)
    return flags


# -- the import method: build SGLang's own ArgumentParser with the heavy imports stubbed ----------

ARG_GROUPS = "sglang/srt/arg_groups/__init__.py"
PARSER_MODULE = "sglang.srt.server_args"

# Third-party packages the argument definitions need for real (msgspec builds 0.5.23's field
# groups); every other non-stdlib import outside `sglang` is stubbed.
REAL_PACKAGES = frozenset({"sglang", "msgspec", "typing_extensions"})
# What the stubs answer where SGLang asks about the machine at import time: a CUDA host, the
# platform flagbot tunes. Without these, `sglang.srt.platforms` cannot pick a platform.
STUB_FACTS: dict[str, Any] = {
    "torch.cuda.is_available": lambda *a, **k: True,
    "torch.cuda.device_count": lambda *a, **k: 1,
    "torch.cuda.get_device_name": lambda *a, **k: "NVIDIA H100 80GB HBM3",
    "torch.cuda.get_device_capability": lambda *a, **k: (9, 0),
    "torch.version.cuda": "12.8",
    "torch.version.hip": None,
    "torch.version.musa": None,
    "dill.dumps": lambda *a, **k: b"",  # 0.5.10 serialises a logit processor at import time
    "triton.runtime.driver.active.get_current_target": lambda *a, **k: types.SimpleNamespace(
        backend="cuda", arch=90, warp_size=32
    ),
}
STUB_ABSENT = frozenset({"torch.npu", "torch.hpu", "torch.xpu", "torch.musa", "torch.mlu", "torch.mps"})
# Attributes Python itself probes (typing, inspect, copy, import): a stub must not have them.
STUB_PROTOCOL = frozenset(
    [
        "__wrapped__",
        "__signature__",
        "__origin__",
        "__args__",
        "__parameters__",
        "__typing_subst__",
        "__typing_is_unpacked_typevarlike__",
        "__typing_unpacked_tuple_args__",
        "__deepcopy__",
        "__copy__",
        "__getstate__",
        "__setstate__",
        "__length_hint__",
        "__fspath__",
        "__set_name__",
        "__await__",
        "__aiter__",
        "__anext__",
        "__buffer__",
        "__dataclass_fields__",
        "__attrs_attrs__",
        "__struct_fields__",
        "__isabstractmethod__",
        "__objclass__",
        "__self__",
        "__func__",
        "__code__",
        "__defaults__",
        "__kwdefaults__",
        "__annotations__",
        "__text_signature__",
        "__module__",
        "__qualname__",
        "__name__",
        "__doc__",
        "__file__",
        "__path__",
        "__spec__",
        "__loader__",
        "__all__",
        "__get__",
        "__set__",
        "__delete__",
        "__instancecheck__",
        "__subclasscheck__",
        "__iter__",
        "__next__",
        "__len__",
        "__index__",
        "__int__",
    ]
)
_ABSENT_FACT = object()


def _stub_fact(name: str) -> Any:
    if name in STUB_ABSENT:
        raise AttributeError(name)
    return STUB_FACTS.get(name, _ABSENT_FACT)


class _StubBase:
    """What a class deriving from a stub (`class X(torch.nn.Module)`) derives from instead."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    def __class_getitem__(cls, item: Any) -> Any:
        return cls


class _Stub:
    """A permissive stand-in for anything a stubbed module exports: every attribute, call,
    subscript and operator gives another stub; it is falsy, empty and usable as a base class
    or a function decorator (`@triton.jit` returns the function unchanged)."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_stub_name", name)

    def __getattr__(self, attr: str) -> Any:
        if attr in STUB_PROTOCOL:
            raise AttributeError(attr)
        name = f"{self._stub_name}.{attr}"
        fact = _stub_fact(name)
        return _Stub(name) if fact is _ABSENT_FACT else fact

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], types.FunctionType):
            return args[0]  # used as a decorator
        return _Stub(f"{self._stub_name}()")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (_StubBase,)

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False

    def __getitem__(self, item: Any) -> Any:
        return _Stub(f"{self._stub_name}[]")

    def __setitem__(self, item: Any, value: Any) -> None:
        pass

    def __setattr__(self, attr: str, value: Any) -> None:
        pass

    def __int__(self) -> int:
        return 0

    def __index__(self) -> int:
        return 0

    def __float__(self) -> float:
        return 0.0

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> bool:
        return False

    def __contains__(self, item: object) -> bool:
        return False

    def __lt__(self, other: object) -> bool:
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __repr__(self) -> str:
        return f"<stub {self._stub_name}>"

    def _same(self, *args: Any) -> Any:
        return self

    __neg__ = __pos__ = __abs__ = __invert__ = _same
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _same
    __pow__ = __rpow__ = __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _same
    __matmul__ = __rmatmul__ = __lshift__ = __rshift__ = _same


class _StubModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr in STUB_PROTOCOL:
            raise AttributeError(attr)
        name = f"{self.__name__}.{attr}"
        fact = _stub_fact(name)
        return _Stub(name) if fact is _ABSENT_FACT else fact


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0"  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _StubFinder(importlib.abc.MetaPathFinder):
    """First on `sys.meta_path`: stubs every top-level package not in stdlib or REAL_PACKAGES."""

    def __init__(self) -> None:
        self.stubbed: set[str] = set()

    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top in sys.stdlib_module_names or top in REAL_PACKAGES:
            return None
        self.stubbed.add(top)
        return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)


def _type_label(converter: Any) -> str | None:
    """The name the AST method would give `type=` (`int`, `json.loads`, `human_readable_int`)."""
    if converter is None:
        return None
    name = getattr(converter, "__name__", None) or repr(converter)
    module = getattr(converter, "__module__", "")
    if module in {"json", "ast"}:
        return f"{module}.{name}"
    return str(name)


def _plain(value: Any) -> tuple[Any, str | None]:
    """`value` as JSON, or (None, repr) when it is not representable."""
    if isinstance(value, set | frozenset):
        value = sorted(value, key=str)
    if isinstance(value, tuple):
        value = list(value)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return None, repr(value)
    return value, None


def dump_parser(root: Path, deps: list[Path], out: Path) -> None:
    """Run in a fresh interpreter (`--dump-parser`): import SGLang from `root` with the heavy
    imports stubbed, build `sglang serve`'s parser and write its actions to `out` as JSON."""
    sys.path[:0] = [str(root), *(str(d) for d in deps)]
    finder = _StubFinder()
    sys.meta_path.insert(0, finder)
    module = importlib.import_module(PARSER_MODULE)
    server_args = module.ServerArgs
    parser = argparse.ArgumentParser(prog="sglang serve")
    server_args.add_cli_args(parser)
    if dataclasses.is_dataclass(server_args):
        fields = [f.name for f in dataclasses.fields(server_args)]
    else:
        structs = importlib.import_module("msgspec.structs")
        fields = [f.name for f in structs.fields(server_args)]
    fallbacks: dict[str, Any] = {}
    if importlib.util.find_spec("sglang.srt.arg_groups.arg_utils") is not None:
        arg_utils = importlib.import_module("sglang.srt.arg_groups.arg_utils")
        fallbacks = dict(arg_utils.fallbacks_of(server_args))
    actions: list[dict[str, Any]] = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        default_source = "argparse"
        default_value = action.default
        if default_value is None and action.dest in fallbacks:
            default_source, default_value = "fallback", fallbacks[action.dest]
        default, default_repr = _plain(default_value)
        choices, choices_repr = _plain(action.choices)
        const, _ = _plain(action.const)
        nargs, nargs_repr = _plain(action.nargs)
        entry = {
            "option_strings": list(action.option_strings),
            "class": type(action).__name__,
            "dest": action.dest,
            "type": _type_label(action.type),
            "nargs": nargs,
            "const": const,
            "choices": choices,
            "choices_repr": choices_repr,
            "default": default,
            "default_repr": default_repr,
            "default_source": default_source,
            "required": bool(action.required),
            "help": action.help
            if isinstance(action.help, str)
            else ""
            if action.help is None
            else repr(action.help),
        }
        # A value computed from a stub is not SGLang's: the generator refuses to ship it.
        tainted = [
            key for key in ("type", "nargs", "choices", "default", "help") if "<stub " in repr(entry[key])
        ]
        tainted += [
            key
            for key, text in (("nargs", nargs_repr), ("choices", choices_repr), ("default", default_repr))
            if text and "<stub " in text
        ]
        entry["stub_tainted"] = sorted(set(tainted))
        actions.append(entry)
    document = {"fields": fields, "actions": actions, "stubbed": sorted(finder.stubbed)}
    out.write_text(json.dumps(document), encoding="utf-8")


# argparse's action classes by the name the AST method records (`store_true`, not
# `_StoreTrueAction`); SGLang's own actions keep their class names.
ACTION_NAMES = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_AppendAction": "append",
    "_AppendConstAction": "append_const",
    "_CountAction": "count",
    "_VersionAction": "version",
}
# Where an import-method default comes from (the AST method's are all `add_argument(default=)`).
DEFAULT_SOURCES = {
    "argparse": "parser",
    "fallback": "Arg.fallback (the field's declared fallback: its parser default is None)",
}
DEPRECATED_ACTIONS_IMPORTED = {*DEPRECATED_ACTIONS, "DeprecatedStoreConstAction"}


def run_parser(wheel: zipfile.ZipFile, work: Path) -> dict[str, Any]:
    """Unpack `sglang/` from the wheel into `work` and dump its parser in a clean interpreter."""
    root = work / "wheel"
    for name in wheel.namelist():
        if name.startswith("sglang/") and not name.endswith("/"):
            wheel.extract(name, root)
    deps = [work / "deps"]
    needs_msgspec = any(
        name.endswith(".py") and b"import msgspec" in wheel.read(name)
        for name in wheel.namelist()
        if name.startswith("sglang/srt/")
    )
    if needs_msgspec and importlib.util.find_spec("msgspec") is None:
        download_package("msgspec", deps[0])
    out = work / "parser.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "PYTHONHASHSEED": "0", "LC_ALL": "C.UTF-8"}
    cmd = [sys.executable, "-I", str(Path(__file__).resolve()), "--dump-parser", str(root), "--out", str(out)]
    for extra in deps:
        cmd += ["--deps", str(extra)]
    subprocess.run(cmd, check=True, env=env, cwd=work)  # noqa: S603 - fixed argv of our own paths
    loaded: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return loaded


def download_package(name: str, into: Path) -> None:
    """`pip download` a pure dependency the parser needs and unpack it into `into`."""
    into.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", name, "-d", str(into)]
    subprocess.run(cmd, check=True)  # noqa: S603 - fixed argv
    for wheel in into.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(into)


def extract_imported(dump: dict[str, Any], remap: dict[str, str]) -> list[dict[str, Any]]:
    """The catalog's flag entries from the wheel's own parser (same keys as `extract`)."""
    fields = set(dump["fields"])
    flags: list[dict[str, Any]] = []
    tainted: list[str] = []
    for action in dump["actions"]:
        option_strings: list[str] = action["option_strings"]
        cls = action["class"]
        name_of_action = ACTION_NAMES.get(cls, cls)
        dest = action["dest"]
        server_field = remap.get(dest, dest)
        field_flag = "--" + server_field.replace("_", "-")
        primary = (
            [s for s in option_strings if not s.startswith("--no-")]
            if cls == "BooleanOptionalAction"
            else option_strings
        )
        name = field_flag if field_flag in primary else primary[0]
        nargs = action["nargs"]
        entry: dict[str, Any] = {
            "name": name,
            "option_strings": primary,
            "aliases": [s for s in primary if s != name],
            "dest": dest,
            "field": server_field if server_field in fields else None,
            "action": name_of_action,
            "type": action["type"],
            "nargs": nargs,
        }
        if cls == "BooleanOptionalAction":
            entry["negative_option_strings"] = [s for s in option_strings if s.startswith("--no-")]
        if action["stub_tainted"]:
            tainted.append(f"{name} ({', '.join(action['stub_tainted'])})")
        if action["const"] is not None and name_of_action not in {
            "store_true",
            "store_false",
            "BooleanOptionalAction",
        }:
            entry["const"] = action["const"]
        entry["choices"] = action["choices"]
        entry["choices_repr"] = action["choices_repr"]
        entry["choices_extensible"] = False
        entry["default_repr"] = action["default_repr"]
        entry["default"] = action["default"]
        entry["default_source"] = DEFAULT_SOURCES[action["default_source"]]
        entry["required"] = action["required"]
        entry["help"] = action["help"]
        entry["help_resolved"] = True
        lowered = entry["help"].lower()
        entry["deprecated"] = cls in DEPRECATED_ACTIONS_IMPORTED or lowered.startswith(
            ("[deprecated]", "deprecated", "(deprecated")
        )
        entry["lineno"] = None
        flags.append(entry)
    if tainted:
        raise SystemExit(
            "values computed from stubbed modules, not SGLang's; teach STUB_FACTS the answer: "
            + "; ".join(tainted)
        )
    return flags


def download_wheel(version: str, into: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        f"sglang=={version}",
        "-d",
        str(into),
    ]
    subprocess.run(cmd, check=True)  # noqa: S603 - fixed argv, version comes from our own CLI
    wheels = sorted(into.glob(f"sglang-{version}-*.whl"))
    if not wheels:
        raise SystemExit(f"pip did not produce a wheel for sglang=={version} in {into}")
    return wheels[0]


def choose_method(wheel: zipfile.ZipFile) -> str:
    """`ast` while every flag is a literal `add_argument` call in server_args.py (<= 0.5.13),
    `import` once the arguments come from field groups (`sglang/srt/arg_groups/`)."""
    return "import" if ARG_GROUPS in wheel.namelist() else "ast"


def build(version: str, wheel_path: Path, method: str = "auto") -> dict[str, Any]:
    digest = hashlib.sha256(wheel_path.read_bytes()).hexdigest()
    with zipfile.ZipFile(wheel_path) as wheel:
        if method == "auto":
            method = choose_method(wheel)
        resolver = Resolver(wheel)
        mod = resolver.module(SERVER_ARGS[: -len(".py")].replace("/", "."))
        if mod is None:
            raise SystemExit(f"{SERVER_ARGS} is not in {wheel_path.name}")
        if method == "ast":
            flags = extract(resolver, mod)
            how = f"AST walk of every parser.add_argument(...) call in {SERVER_ARGS}"
            tail = "nothing imported"
        else:
            with tempfile.TemporaryDirectory(prefix="sglang-parser-") as work:
                dump = run_parser(wheel, Path(work))
            flags = extract_imported(dump, cli_remap(mod))
            how = (
                f"the actions of the ArgumentParser that {PARSER_MODULE}.ServerArgs.add_cli_args builds "
                "(as prepare_server_args does), defaults and choices as that parser holds them"
            )
            tail = (
                "imported in a clean interpreter with every third-party package but "
                f"{', '.join(sorted(REAL_PACKAGES - {'sglang'}))} stubbed (a CUDA host as the stubs answer)"
            )
    return {
        "sglang_version": version,
        "source": (
            "Generated by tools/gen_flag_catalog.py (regenerate with "
            f"`python tools/gen_flag_catalog.py --version {version}`; do not edit by hand): "
            f"{how} of {wheel_path.name} (sha256 {digest}), {tail}."
        ),
        "primary_flag_count": len(flags),
        "flags": flags,
    }


def check_sanity(catalog: dict[str, Any]) -> list[str]:
    """Problems worth a warning: a wrong count or a name argparse would refuse twice."""
    problems: list[str] = []
    version = catalog["sglang_version"]
    count = len(catalog["flags"])
    expected = EXPECTED_PRIMARY_FLAGS.get(version)
    if expected is None:
        problems.append(f"no known primary flag count for {version} (got {count}); check against --help")
    elif count != expected:
        problems.append(f"found {count} primary flags, expected {expected} for SGLang {version}")
    seen: dict[str, str] = {}
    for flag in catalog["flags"]:
        for option in flag["option_strings"] + flag.get("negative_option_strings", []):
            if option in seen:
                problems.append(f"{option} is declared by both {seen[option]} and {flag['name']}")
            seen[option] = flag["name"]
    return problems


def render(catalog: dict[str, Any]) -> str:
    return json.dumps(catalog, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", default="0.5.10", help="SGLang version to read (default 0.5.10)")
    parser.add_argument("--wheel", type=Path, help="use this wheel instead of downloading one")
    parser.add_argument("--output", type=Path, help="default: bot/sglang/data/sglang-<version>-flags.json")
    parser.add_argument(
        "--check", action="store_true", help="do not write; exit 1 if the file on disk differs"
    )
    parser.add_argument(
        "--method",
        choices=["auto", "ast", "import"],
        default="auto",
        help="how to read the wheel (default auto: import when it has sglang/srt/arg_groups/, else ast)",
    )
    parser.add_argument("--dump-parser", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--deps", type=Path, action="append", default=[], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.dump_parser is not None:  # the import method's child interpreter
        dump_parser(args.dump_parser, args.deps, args.out)
        return 0
    output: Path = args.output or DATA_DIR / f"sglang-{args.version}-flags.json"

    with tempfile.TemporaryDirectory(prefix="sglang-wheel-") as tmp:
        wheel = args.wheel or download_wheel(args.version, Path(tmp))
        catalog = build(args.version, wheel, args.method)

    flags = catalog["flags"]
    print(f"SGLang {args.version}: {len(flags)} primary flags", file=sys.stderr)
    renamed = [
        f"{f['option_strings'][0]} -> {f['name']}" for f in flags if f["name"] != f["option_strings"][0]
    ]
    if renamed:
        print("canonical name is not the first option string for: " + ", ".join(renamed), file=sys.stderr)
    unresolved = [f["name"] for f in flags if f["choices_repr"] is not None]
    if unresolved:
        print("choices kept as source text for: " + ", ".join(unresolved), file=sys.stderr)
    for problem in check_sanity(catalog):
        print(f"WARNING: {problem}", file=sys.stderr)

    text = render(catalog)
    if args.check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != text:
            print(f"{output} is out of date; rerun without --check", file=sys.stderr)
            return 1
        print(f"{output} is up to date", file=sys.stderr)
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
