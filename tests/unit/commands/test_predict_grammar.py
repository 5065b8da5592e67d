"""`predict CHANGE... [EXPECTATION...]` in the shared grammar: read-only, changes and expectations
read as `try` reads them, a bad expectation refused before anything runs."""

from __future__ import annotations

import pytest

from bot.commands import CommandError, parse_command


def test_predict_reads_changes_expectations_and_the_target() -> None:
    invocation = parse_command(
        "predict add --max-running-requests 64 max_running_requests>=48 target=sglang-qwen"
    )
    assert invocation.tier == "read-only"
    assert [c.describe() for c in invocation.changes] == ["add --max-running-requests 64"]
    assert [str(e) for e in invocation.expectations] == ["max_running_requests>=48"]
    assert invocation.options == {"target": "sglang-qwen"}


def test_a_relative_expectation_is_kept_relative() -> None:
    invocation = parse_command("predict set --mem-fraction-static=0.85 max_total_num_tokens>=+5%")
    [expectation] = invocation.expectations
    assert expectation.relative and expectation.value == 5.0


@pytest.mark.parametrize(
    ("words", "says"),
    [
        ("predict add --max-running-requests 64 max_runing_requests>=48", "unknown metric"),
        ("predict add --max-running-requests 64 keep=never", "keep"),
    ],
)
def test_bad_words_are_refused_by_the_grammar(words: str, says: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse_command(words)
    assert says in caught.value.message
