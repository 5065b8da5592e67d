#!/usr/bin/env python3
"""Regenerate `bot/sglang/data/sglang-<version>-flags.json`, the flag catalog flagbot ships.

Why this exists: the bot must reject a misspelt or invalid flag in chat, before it restarts a
server, and it must do so without torch (importing `sglang.srt.server_args` needs torch). For
SGLang <= 0.5.13 every CLI flag is a literal `parser.add_argument(...)` call in
`sglang/srt/server_args.py`, so reading that file's AST gives the exact flag list cheaply
(for 0.5.10 this is the same 354 flags as `sglang serve --help`).

What it does:

1. `pip download --no-deps sglang==<version>` into a temporary directory (needs network;
   `--wheel PATH` uses a wheel you already have). 0.5.9 and 0.5.10 are pure-Python wheels.
2. Opens `sglang/srt/server_args.py` straight from the wheel with `zipfile` (nothing is
   installed or imported) and walks every `parser.add_argument(...)` call in source order.
3. Records option strings, action, type, nargs, const, choices, default, dest, help. Names
   that refer to literals elsewhere (`LOAD_FORMAT_CHOICES`, `ServerArgs.tp_size`, a dict's
   `.keys()` in another sglang module) are resolved by reading those modules' ASTs from the
   same wheel; what cannot be resolved to a literal is kept as source text (`*_repr`).
4. Writes the JSON the package ships. The data file is shipped; this script is only how to
   regenerate it, so it is not part of the package.

The canonical flag name is chosen as flagbot shows and diffs flags: the option string that
spells the `ServerArgs` field the flag ends up in (what the `server_args=ServerArgs(...)`
startup line prints), else the first option string, which is what `--help` lists first.
Example: `--tensor-parallel-size, --tp-size` has argparse dest `tensor_parallel_size`, which
`ServerArgs.from_cli_args` copies into field `tp_size`, so the canonical name is `--tp-size`.

Usage: `python tools/gen_flag_catalog.py [--version 0.5.10] [--wheel PATH] [--check]`.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT / "bot" / "sglang" / "data"
SERVER_ARGS = "sglang/srt/server_args.py"

# Primary flag counts measured against `--help` (reference §6); a mismatch means the AST walk
# missed or invented calls, so it is reported loudly rather than silently shipped.
EXPECTED_PRIMARY_FLAGS = {"0.5.9": 331, "0.5.10": 354, "0.5.11": 374, "0.5.12": 387, "0.5.13": 406}

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


def build(version: str, wheel_path: Path) -> dict[str, Any]:
    digest = hashlib.sha256(wheel_path.read_bytes()).hexdigest()
    with zipfile.ZipFile(wheel_path) as wheel:
        resolver = Resolver(wheel)
        mod = resolver.module(SERVER_ARGS[: -len(".py")].replace("/", "."))
        if mod is None:
            raise SystemExit(f"{SERVER_ARGS} is not in {wheel_path.name}")
        flags = extract(resolver, mod)
    return {
        "sglang_version": version,
        "source": (
            "Generated by tools/gen_flag_catalog.py (regenerate with "
            f"`python tools/gen_flag_catalog.py --version {version}`; do not edit by hand): "
            f"AST walk of every parser.add_argument(...) call in {SERVER_ARGS} "
            f"of {wheel_path.name} (sha256 {digest}), nothing imported."
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
    args = parser.parse_args(argv)
    output: Path = args.output or DATA_DIR / f"sglang-{args.version}-flags.json"

    with tempfile.TemporaryDirectory(prefix="sglang-wheel-") as tmp:
        wheel = args.wheel or download_wheel(args.version, Path(tmp))
        catalog = build(args.version, wheel)

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
