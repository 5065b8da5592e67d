"""An import inside a function in bot/ is there only to defer a heavy import, and says so.

Why a test: an import hidden in a function was once the way to dodge an import cycle or just a
habit, and it hides a dependency from the reader (and from a test that patches the name where it
is used). The ones that stay defer something `flagbot --help`, a Slack ack or the load worker's
fork server must not pay for (matplotlib, the Slack stack, the HTTP clients), with a
`# deferred:` comment on the import's line or the line above saying why.
"""

from __future__ import annotations

import ast
from pathlib import Path

PRODUCT = Path(__file__).parents[2] / "bot"
MARK = "# deferred:"


def undocumented_imports(source: str) -> list[int]:
    """The lines of every import inside a function (at any depth) without a `# deferred:` comment
    on its first line or the line above it."""
    lines = source.splitlines()
    found: set[int] = set()
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            own = lines[node.lineno - 1]
            above = lines[node.lineno - 2] if node.lineno >= 2 else ""
            if MARK not in own and not above.strip().startswith(MARK):
                found.add(node.lineno)
    return sorted(found)


def test_every_import_inside_a_function_in_the_product_says_why_it_is_deferred() -> None:
    files = sorted(PRODUCT.rglob("*.py"))
    assert files, PRODUCT
    undocumented = [
        f"{path.relative_to(PRODUCT.parent)}:{line}"
        for path in files
        for line in undocumented_imports(path.read_text(encoding="utf-8"))
    ]
    assert undocumented == [], (
        "imports inside functions without a `# deferred:` comment (move them to the top of the "
        "module, or say on the line or the line above what they defer and why):\n" + "\n".join(undocumented)
    )


def test_the_walker_finds_an_undocumented_import_and_accepts_a_documented_one() -> None:
    source = "\n".join(
        [
            "import os",  # 1: top level, never counted
            "",
            "def plain():",
            "    import json",  # 4: undocumented
            "    return json",
            "",
            "async def nested():",
            "    def inner():",
            "        from collections import OrderedDict",  # 9: undocumented, two functions deep
            "        return OrderedDict",
            "    # deferred: matplotlib costs ~0.4 s",
            "    import matplotlib",  # 12: documented on the line above
            "    import numpy  # deferred: numpy costs ~0.1 s",  # 13: documented on its line
            "    import scipy",  # 14: the line above is an import, not a comment
            "    return inner, matplotlib, numpy, scipy",
            "",
            "class C:",
            "    def method(self):",
            "        # the sqlalchemy stack is heavy",
            "        import sqlalchemy",  # 20: a comment, but not a `# deferred:` one
            "        return sqlalchemy",
        ]
    )
    assert undocumented_imports(source) == [4, 9, 14, 20]
