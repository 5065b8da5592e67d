"""`[slack.rbac]` ids (never display names) and the per-target restart policy keys."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.config import ConfigError, load_settings
from bot.config.schema import TargetPolicy
from bot.config.slack_settings import SlackRBAC

ROOT = Path(__file__).parents[3]
TARGET = """
[targets.q]
unit = "sglang-qwen.service"
nodes = [{ host = "10.200.0.2" }]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "flagbot.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_everyone_views_nobody_else_and_no_extra_clicks() -> None:
    rbac = SlackRBAC()
    assert (rbac.viewers, rbac.operators, rbac.approvers, rbac.admins) == (["*"], [], [], [])
    policy = TargetPolicy()
    assert policy.require_approval is False
    assert policy.confirm_restart is False
    assert policy.approval_expiry == timedelta(hours=1)


def test_the_example_holds_the_new_keys_with_their_defaults() -> None:
    settings = load_settings(ROOT / "flagbot.example.toml")
    assert settings.slack.rbac.approvers == []
    assert settings.slack.rbac.viewers == ["*"]
    policy = settings.targets["sglang-qwen"].policy
    assert (policy.confirm_restart, policy.approval_expiry) == (False, timedelta(hours=1))
    example = (ROOT / "flagbot.example.toml").read_text()
    assert "approvers = []" in example
    assert "confirm_restart = false" in example
    assert 'approval_expiry = "1h"' in example


def test_every_new_key_is_documented() -> None:
    doc = (ROOT / "docs" / "config.md").read_text()
    for key in (
        "`approvers`",
        "`admins`",
        "`operators`",
        "`viewers`",
        "`confirm_restart`",
        "`approval_expiry`",
    ):
        assert key in doc, key
    assert "display names are refused" in doc.lower()


def test_ids_groups_and_everyone_are_read(tmp_path: Path) -> None:
    text = (
        TARGET
        + """
[targets.q.policy]
require_approval = true
confirm_restart = true
approval_expiry = "15m"

[slack.rbac]
admins = ["U012ABCDEF"]
operators = ["W0123ENTERPRISE", "S0614TZR7"]
approvers = ["S0APPROVE1", "U99"]
viewers = ["*"]
"""
    )
    settings = load_settings(write(tmp_path, text))
    rbac = settings.slack.rbac
    assert rbac.admins == ["U012ABCDEF"]
    assert rbac.operators == ["W0123ENTERPRISE", "S0614TZR7"]
    assert rbac.approvers == ["S0APPROVE1", "U99"]
    assert rbac.group_ids() == {"S0614TZR7", "S0APPROVE1"}
    policy = settings.targets["q"].policy
    assert policy.require_approval and policy.confirm_restart
    assert policy.approval_expiry == timedelta(minutes=15)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            '[slack.rbac]\napprovers = ["alice"]\n',
            "slack.rbac.approvers.0: not a Slack user or user-group id: use the user id, e.g. U012ABCDEF",
        ),
        ('[slack.rbac]\noperators = ["U012ABCDEF", "@bob"]\n', "slack.rbac.operators.1: not a Slack user"),
        ('[slack.rbac]\nadmins = ["Alice Smith"]\n', "slack.rbac.admins.0: not a Slack user"),
        ('[slack.rbac]\nviewers = ["everyone"]\n', "slack.rbac.viewers.0: not a Slack user"),
        ('[slack.rbac]\nadmins = ["u012abcdef"]\n', "slack.rbac.admins.0: not a Slack user"),
        ('[slack.rbac]\nadmins = ["<@U012ABCDEF>"]\n', "write the bare id 'U012ABCDEF'"),
        ('[slack.rbac]\napprovers = ["<!subteam^S0614TZR7|@sre>"]\n', "write the bare id 'S0614TZR7'"),
        ('[slack.rbac]\noperators = ["C0123CHAN"]\n', "slack.rbac.operators.0: that is a channel id"),
        ('[slack.rbac]\napprover = ["U1"]\n', "slack.rbac.approver: unknown key"),
        (TARGET + "[targets.q.policy]\napproval_expiry = 'soon'\n", "targets.q.policy.approval_expiry"),
        (TARGET + "[targets.q.policy]\napproval_expiry = '0s'\n", "must stay valid for some time"),
        (TARGET + "[targets.q.policy]\nconfirm_restart = 'maybe'\n", "targets.q.policy.confirm_restart"),
    ],
)
def test_malformed_rbac_and_policy_are_refused_with_file_and_key(
    tmp_path: Path, text: str, says: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert says in message


def test_a_display_name_is_refused_even_next_to_valid_ids() -> None:
    with pytest.raises(ValueError, match="display names are never accepted"):
        SlackRBAC(operators=["U012ABCDEF", "alice"])
