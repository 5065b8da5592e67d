"""docs/commands.md is a contract: every example in it parses, every error row fails as it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.commands import COMMANDS, CommandError, parse_command

DOC = Path(__file__).parents[3] / "docs" / "commands.md"
TEXT = DOC.read_text()
EXAMPLES = [line.removeprefix("/flagbot ") for line in TEXT.splitlines() if line.startswith("/flagbot ")]
ERROR_ROWS = re.findall(r"^\| `([^`]+)` \| (.+?) \|$", TEXT.split("## Errors", 1)[1], re.MULTILINE)


def test_the_doc_has_examples_and_error_rows() -> None:
    assert len(EXAMPLES) >= 40
    assert len(ERROR_ROWS) >= 10


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_documented_example_parses(example: str) -> None:
    invocation = parse_command(example)
    assert invocation.name == example.split()[0]


@pytest.mark.parametrize("spec", COMMANDS, ids=lambda spec: spec.name)
def test_every_registry_example_is_in_the_doc(spec: object) -> None:
    for example in spec.examples:  # type: ignore[attr-defined]
        assert example in EXAMPLES, f"{example!r} missing from docs/commands.md"


@pytest.mark.parametrize("spec", COMMANDS, ids=lambda spec: spec.name)
def test_every_command_is_in_the_doc_table_with_its_tier(spec: object) -> None:
    row = re.search(rf"^\| {spec.name} \| ([^|]+) \|", TEXT, re.MULTILINE)  # type: ignore[attr-defined]
    assert row, f"{spec.name} missing from the command table"  # type: ignore[attr-defined]
    assert spec.tier in row.group(1) or ":" in row.group(1)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("text", "says"), ERROR_ROWS)
def test_every_documented_error_is_raised(text: str, says: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse_command(text)
    message = caught.value.message
    key_words = [word for word in re.findall(r"[A-Za-z]{4,}", says.replace("`", "")) if word.islower()][:2]
    for word in key_words:
        assert word in message, f"{text!r}: expected {word!r} in {message!r}"
