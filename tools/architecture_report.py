"""How well the product package keeps its shape: the layer contracts, module import cycles, and
bare `Any` in annotations.

    .venv/bin/python tools/architecture_report.py            # all three, exit 1 if a check fails
    .venv/bin/python tools/architecture_report.py --any-limit 60

- **Contracts**: `lint-imports` with the contracts of pyproject.toml (`[tool.importlinter]`),
  its report printed as it is (a broken contract names the import and its line).
- **Cycles**: the module import graph of `bot` as grimp builds it (every import: inside functions
  and under `if TYPE_CHECKING:` too), its strongly connected components with more than one module.
- **Bare Any**: parameters (positional, keyword-only, `*args`, `**kwargs`) and returns annotated
  exactly `Any` (`typing.Any`, `Any`, or the string "Any") in `bot/`; `dict[str, Any]` is not
  bare. The lab (`lab/flagbot_lab`) is not the product and is not counted.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ROOT / "bot"
DEFAULT_ANY_LIMIT = 60


def _bare_any(node: ast.expr | None) -> bool:
    if node is None:
        return False
    if isinstance(node, ast.Name):
        return node.id == "Any"
    if isinstance(node, ast.Attribute):
        return node.attr == "Any" and isinstance(node.value, ast.Name) and node.value.id == "typing"
    return isinstance(node, ast.Constant) and node.value == "Any"


def _annotations(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.expr | None]:
    arguments = function.args
    for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
        yield argument.annotation
    for star in (arguments.vararg, arguments.kwarg):
        yield star.annotation if star is not None else None
    yield function.returns


def bare_any(source: str) -> list[int]:
    """The lines of every bare `Any` parameter or return annotation in one module's source."""
    found: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found += [node.lineno for annotation in _annotations(node) if _bare_any(annotation)]
    return found


def count_bare_any(package: Path = PRODUCT) -> Counter[str]:
    """Bare `Any` annotations per file of `package`."""
    counts: Counter[str] = Counter()
    for path in sorted(package.rglob("*.py")):
        lines = bare_any(path.read_text(encoding="utf-8"))
        if lines:
            counts[str(path.relative_to(package.parent))] = len(lines)
    return counts


def import_cycles(adjacency: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(adjacency):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(adjacency.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for target in edges:
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(adjacency.get(target, ()))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in adjacency.get(node, ()):
                    found.append(sorted(component))
    return sorted(found)


def module_graph(package: str = "bot") -> dict[str, list[str]]:
    """Every module of `package` and the modules of `package` it imports, as grimp sees them."""
    import grimp  # a dev tool's import: only this report and the tests need it

    graph = grimp.build_graph(package)
    return {
        module: sorted(graph.find_modules_directly_imported_by(module)) for module in sorted(graph.modules)
    }


def package_of(module: str) -> str:
    """`bot.app.runs` -> `bot.app`; a top-level module (`bot.main`) is its own part."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
    """The module graph folded into the product's parts: an arrow where any module of one part
    imports any module of the other (the root package `bot` and `bot.__main__` are left out)."""
    folded: dict[str, set[str]] = {}
    for module, imported in graph.items():
        source = package_of(module)
        if source in ("bot", "bot.__main__"):  # the root package, and `python -m bot` (bot.main again)
            continue
        folded.setdefault(source, set())
        for target in imported:
            destination = package_of(target)
            if destination not in ("bot", source):
                folded[source].add(destination)
    return folded


def transitive_reduction(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The arrows no longer path implies (the graph has no cycle); every one kept is a real import."""

    def reachable(start: str, skip: str) -> set[str]:
        seen: set[str] = set()
        todo = [node for node in graph.get(start, set()) if node != skip]
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, set()))
        return seen

    return {
        source: {target for target in targets if target not in reachable(source, target)}
        for source, targets in graph.items()
    }


def mermaid(graph: Mapping[str, set[str]]) -> str:
    """The parts and their imports as a Mermaid flowchart (top: the entry point)."""
    lines = ["flowchart TD"]
    for source in sorted(graph):
        for target in sorted(graph[source]):
            lines.append(f"  {_node(source)} --> {_node(target)}")
    return "\n".join(lines)


def _node(module: str) -> str:
    name = module.removeprefix("bot.")
    return f'{name.replace(".", "_")}["{name}"]'


def contracts() -> tuple[int, str]:
    """`lint-imports`' exit status and report."""
    done = subprocess.run(  # noqa: S603 - a fixed argv of this venv, no shell
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--any-limit", type=int, default=DEFAULT_ANY_LIMIT, help="most bare Any allowed")
    parser.add_argument("--top", type=int, default=15, help="files with the most bare Any to list")
    parser.add_argument("--mermaid", action="store_true", help="print the parts' import picture and exit")
    args = parser.parse_args(argv)
    if args.mermaid:
        print(mermaid(transitive_reduction(package_graph(module_graph()))))
        return 0
    failed = False

    status, report = contracts()
    print("== import contracts (lint-imports)")
    print(report.split("Contracts\n---------", 1)[-1].strip())
    failed |= status != 0

    cycles = import_cycles(module_graph())
    print(f"\n== module import cycles in bot: {len(cycles)}")
    for cycle in cycles:
        print("  " + " <-> ".join(cycle))
    failed |= bool(cycles)

    counts = count_bare_any()
    total = sum(counts.values())
    print(f"\n== bare Any in parameter and return annotations of bot/: {total} (limit {args.any_limit})")
    for path, count in counts.most_common(args.top):
        print(f"  {count:4d}  {path}")
    failed |= total > args.any_limit
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
