"""Evidence cites what a user can open: SGLang source paths, SGLang's docs, flagbot's own docs.

Why a test: a preflight warning once cited "reference §3.5" and "seeds/002 (msg 6450)",
documents only flagbot's authors had (issue 22). This walks every text a user can meet (the
knowledge base and playbook files, every string in the package: warnings, help, docstrings,
and every knowledge source as a report shows it) and fails on an internal citation.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from bot.loop.kb_schema import KnowledgeFile
from bot.loop.knowledge import PACKAGED

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "bot"
PLAYBOOKS = ROOT / "playbooks"
INTERNAL_CITATION = re.compile(
    r"§|\bseeds/\d|\bmsg \d|shared/reference|\breference (?:Appendix|Addendum)|\bAppendix [A-Z]\b|\bAddendum \d"
)


def _strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


@pytest.mark.parametrize("text", ["reference §3.5", "seeds/002 (msg 6450)", "reference Appendix C"])
def test_the_pattern_catches_the_citations_of_the_issue(text: str) -> None:
    assert INTERNAL_CITATION.search(text)


def test_the_pattern_lets_openable_sources_through() -> None:
    for text in (
        "python/sglang/srt/server_args.py _handle_gpu_memory_settings",
        "docs/knowledge.md",
        "a reference word",
    ):
        assert not INTERNAL_CITATION.search(text)


@pytest.mark.parametrize("path", sorted(PLAYBOOKS.rglob("*.y*ml")), ids=lambda path: path.name)
def test_no_playbook_or_knowledge_file_cites_an_internal_document(path: Path) -> None:
    found = [line for line in path.read_text(encoding="utf-8").splitlines() if INTERNAL_CITATION.search(line)]
    assert not found, f"{path}: {found}"


def test_no_string_in_the_package_cites_an_internal_document() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {text[:120]!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for text in _strings(path)
        if INTERNAL_CITATION.search(text)
    ]
    assert not found, "\n".join(found)


def test_every_knowledge_source_as_a_report_shows_it_names_something_a_user_can_open() -> None:
    kb = KnowledgeFile.model_validate(yaml.safe_load(PACKAGED.read_text(encoding="utf-8")))
    lines = [(flag, source.line()) for flag, entry in kb.flags.items() for source in entry.sources]
    assert lines
    assert not [line for _, line in lines if INTERNAL_CITATION.search(line)]
    for flag, line in lines:
        opened = re.search(
            r"python/sglang/|sglang\.launch_server --help|docs/[\w/-]+\.md|`server_args=`|\bobserved\b|experiment #",
            line,
        )
        assert opened, f"{flag}: {line}"
