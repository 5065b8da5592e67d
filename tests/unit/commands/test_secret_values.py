"""A secret flag takes its value only as a `${NAME}` reference; a secret name cannot be set at all.

A value typed into chat is posted back, audited and stored: flagbot would have to either keep a
secret there or write the mask into the unit. So the grammar refuses it, for the CLI and Slack
alike, and names the rule and the way that keeps the value on the node.
"""

from __future__ import annotations

import pytest

from bot.commands import CommandError, parse_command
from bot.redaction import MASK, redact


@pytest.mark.parametrize(
    "text",
    [
        "try --api-key sk-typed123",
        "try --api-key=sk-typed123",
        "try set --admin-api-key sk-typed123",
        "try --api-key=${SGLANG_API_KEY}x",
    ],
)
def test_a_literal_secret_flag_value_is_refused_naming_the_rule(text: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse_command(text)
    message = caught.value.render()
    assert "is a secret flag ([redaction] secret_flags)" in message
    assert "EnvironmentFile=" in message and "${SGLANG_API_KEY}" in message
    assert "sk-typed123" not in redact(message)
    assert "is a secret flag" in redact(message)  # the rule survives the masking of what is shown


@pytest.mark.parametrize("text", ["try --api-key=${SGLANG_API_KEY}", "try --admin-api-key ${ADMIN_KEY}"])
def test_a_reference_is_taken_as_written(text: str) -> None:
    [change] = parse_command(text).changes
    assert change.value in ("${SGLANG_API_KEY}", "${ADMIN_KEY}")


def test_a_secret_environment_name_is_refused() -> None:
    with pytest.raises(CommandError, match=r"HF_TOKEN is a secret name \(\[redaction\] secret_names\)"):
        parse_command("try env set HF_TOKEN=hf_typed")
    [change] = parse_command("try env set NCCL_DEBUG=INFO").changes
    assert change.env_value == "INFO"
    assert parse_command("try env unset HF_TOKEN").changes[0].env_name == "HF_TOKEN"
    assert MASK not in "try env set NCCL_DEBUG=INFO"
