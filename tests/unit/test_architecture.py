"""The product's shape holds (issue 16): the layer contracts are kept and see every import, no
module import cycle, and bare `Any` stays under its limit (tools/architecture_report.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from tools.architecture_report import (
    DEFAULT_ANY_LIMIT,
    bare_any,
    count_bare_any,
    import_cycles,
    mermaid,
    module_graph,
    package_graph,
    transitive_reduction,
)

ROOT = Path(__file__).parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(cwd: Path, *, pythonpath: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": pythonpath} if pythonpath else {})}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=120,
    )


def test_the_product_keeps_every_contract() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 4 kept, 0 broken." in done.stdout


def test_the_contracts_are_the_layers_the_architecture_names() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    by_id = {contract["id"]: contract for contract in config["contracts"]}
    assert by_id["layers"]["layers"][:4] == [
        "bot.main",
        "bot.serve",
        "bot.cli | bot.slack | bot.schedule",
        "bot.app",
    ]
    assert by_id["layers"]["layers"][-1] == "bot.sglang"
    assert by_id["front-ends"]["modules"] == ["bot.cli", "bot.slack", "bot.schedule"]
    assert by_id["no-lab"]["forbidden_modules"] == ["flagbot_lab"]
    assert set(config["root_packages"]) == {"bot", "flagbot_lab"}


def test_a_broken_contract_names_the_import_even_inside_a_function_or_type_checking(tmp_path: Path) -> None:
    """The same tool and contract kinds on a made-up package: the hidden imports are found."""
    package = tmp_path / "made"
    for layer in ("front", "domain"):
        (package / layer).mkdir(parents=True)
        (package / layer / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "domain" / "steps.py").write_text(
        textwrap.dedent(
            """\
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from made.front.render import Card


            def run() -> None:
                from made.front.handlers import on_command

                on_command()
            """
        )
    )
    (package / "front" / "render.py").write_text("class Card: ...\n")
    (package / "front" / "handlers.py").write_text("def on_command() -> None: ...\n")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = made\n\n"
        "[importlinter:contract:layers]\nname = front over domain\ntype = layers\nlayers =\n    made.front\n    made.domain\n"
    )
    done = _lint_imports(tmp_path, pythonpath=str(tmp_path))
    assert done.returncode == 1
    assert "made.domain.steps -> made.front.handlers (l.8)" in done.stdout
    assert "made.domain.steps -> made.front.render (l.4)" in done.stdout


def test_no_module_import_cycle_in_the_product() -> None:
    graph = module_graph("bot")
    assert "bot.app.runs" in graph and "bot.loop.engine" in graph["bot.app.runs"]
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_what_it_must() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["d"], "e": ["a"], "f": []}
    assert import_cycles(graph) == [["a", "b", "c"], ["d"]]
    assert import_cycles({"a": ["b"], "b": []}) == []


def test_bare_any_counts_parameters_and_returns_only() -> None:
    source = textwrap.dedent(
        """\
        import typing
        from typing import Any

        def a(x: Any, *args: Any, y: "Any" = 1, **kw: Any) -> Any: ...
        async def b(x: dict[str, Any], y: typing.Any) -> list[Any]: ...
        value: Any = 1
        """
    )
    assert bare_any(source) == [4, 4, 4, 4, 4, 5]


@pytest.mark.parametrize("limit", [DEFAULT_ANY_LIMIT])
def test_bare_any_in_the_product_stays_under_the_limit(limit: int) -> None:
    counts = count_bare_any(ROOT / "bot")
    assert sum(counts.values()) < limit, counts.most_common(10)


def test_the_picture_in_the_architecture_doc_is_the_import_graph() -> None:
    """docs/architecture.md's Mermaid picture is what the code imports today (regenerate it with
    `tools/architecture_report.py --mermaid` when a part's imports change)."""
    drawn = mermaid(transitive_reduction(package_graph(module_graph("bot"))))
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert f"```mermaid\n{drawn}\n```" in doc


def test_the_picture_draws_only_real_imports_and_drops_implied_ones() -> None:
    graph = {"a.x": ["b.y", "c.z"], "b.y": ["c.z"], "c.z": []}
    folded = package_graph({f"bot.{k}": [f"bot.{v}" for v in vs] for k, vs in graph.items()})
    assert folded == {"bot.a": {"bot.b", "bot.c"}, "bot.b": {"bot.c"}, "bot.c": set()}
    assert transitive_reduction(folded) == {"bot.a": {"bot.b"}, "bot.b": {"bot.c"}, "bot.c": set()}
    assert mermaid({"bot.a": {"bot.b"}}) == 'flowchart TD\n  a["a"] --> b["b"]'
