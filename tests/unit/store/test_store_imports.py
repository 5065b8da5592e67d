"""The store is the bottom layer: it imports nothing from the packages built on it.

Why a test: `bot.store.bench_repo` once imported `bot.bench.verdict` while `bot.bench.run`
imported the repository, a cycle that made the store load numpy and scipy and tied its tables to
the verdict's types. Every import in bot/store is read here (inside functions and `TYPE_CHECKING`
blocks too), so the next one is refused before it lands.
"""

from __future__ import annotations

import ast
from pathlib import Path

STORE = Path(__file__).parents[3] / "bot" / "store"
ALLOWED = ("bot.store", "bot.config", "bot.redaction", "bot.sglang")


def imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names.append(node.module)
    return names


def test_the_store_imports_only_the_store_config_redaction_and_sglang() -> None:
    files = sorted(STORE.rglob("*.py"))
    assert files, STORE
    wrong = [
        f"{path.relative_to(STORE.parent.parent)}: {name}"
        for path in files
        for name in imported_modules(path)
        if (name == "bot" or name.startswith("bot."))
        and not any(name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED)
    ]
    assert wrong == []


def test_the_scan_sees_a_domain_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from bot.bench.verdict import compare\n    import bot.loop.engine\n")
    assert imported_modules(probe) == ["bot.bench.verdict", "bot.loop.engine"]
