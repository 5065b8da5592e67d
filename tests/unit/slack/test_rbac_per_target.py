"""Per-target roles: `[targets.NAME.rbac]` lists replace `[slack.rbac]`'s on that target only,
and a refusal names the target, the role and the list that grants it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.commands.grammar import parse_command
from bot.config import ConfigError, Settings, load_settings
from bot.config.schema import TargetPolicy
from bot.slack.rbac import decide, decide_click, may_approve, role_table, roles_of

TEAM_A, TEAM_B, GLOBAL_OPERATOR, ADMIN = "U0TEAMA", "U0TEAMB", "U0GLOBAL", "U0ADMIN"
CONFIG = """
[slack.rbac]
admins = ["U0ADMIN"]
operators = ["U0GLOBAL"]
approvers = ["U0ADMIN"]
[targets.a]
unit = "sglang.service"
nodes = [{ host = "10.0.0.1" }]
[targets.a.rbac]
operators = ["U0TEAMA", "S0TEAMA"]
approvers = ["U0TEAMA2"]
[targets.b]
unit = "sglang.service"
nodes = [{ host = "10.0.0.2" }]
[targets.b.rbac]
operators = ["U0TEAMB"]
viewers = ["U0TEAMB"]
[targets.shared]
unit = "sglang.service"
nodes = [{ host = "10.0.0.3" }]
"""


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    path = tmp_path / "flagbot.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return load_settings(path, required=True)


def test_a_target_list_replaces_the_global_one_and_the_others_stay_global(settings: Settings) -> None:
    table = role_table(settings, "a")
    assert table.rbac.operators == ["U0TEAMA", "S0TEAMA"]  # replaced, not added to: no U0GLOBAL
    assert table.rbac.admins == ["U0ADMIN"] and table.rbac.viewers == ["*"]  # not named: global
    assert table.own == {"operator", "approver"}
    assert table.config_key("operator") == "targets.a.rbac.operators"
    assert table.config_key("admin") == "slack.rbac.admins"
    assert table.rbac.group_ids() == {"S0TEAMA"}


def test_each_team_operates_its_own_targets_only(settings: Settings) -> None:
    def operates(user: str, target: str) -> bool:
        return "operator" in roles_of(user, (), role_table(settings, target).rbac)

    assert operates(TEAM_A, "a") and not operates(TEAM_A, "b") and not operates(TEAM_A, "shared")
    assert operates(TEAM_B, "b") and not operates(TEAM_B, "a")
    assert operates(GLOBAL_OPERATOR, "shared")  # a target without its own list: the global one
    assert not operates(GLOBAL_OPERATOR, "a")  # replaced there
    assert all(operates(ADMIN, target) for target in ("a", "b", "shared"))  # admins are global here


def test_a_target_without_a_table_or_no_target_gets_the_global_lists(settings: Settings) -> None:
    for target in (None, "", "nonexistent"):
        table = role_table(settings, target)
        assert table.rbac == settings.slack.rbac and table.own == frozenset()
        assert table.config_key("operator") == "slack.rbac.operators"


def test_the_refusal_names_the_target_the_role_and_the_list(settings: Settings) -> None:
    invocation = parse_command(["rollback", "target=b"])
    table = role_table(settings, "b")
    roles = roles_of(TEAM_A, (), table.rbac)
    decision = decide(invocation, roles, actor=TEAM_A, target_policy=TargetPolicy(), table=table)
    assert not decision.allowed
    assert "needs the operator role on target b" in decision.reason
    assert "no role on target b" in decision.reason  # b's viewers are team B only
    assert decision.reason.endswith("add you to targets.b.rbac.operators")

    click = decide_click("revert", roles, actor=TEAM_A, table=table)
    assert not click.allowed and "on target b" in click.reason
    assert click.reason.endswith("targets.b.rbac.operators")


def test_an_approver_of_one_target_cannot_approve_on_another(settings: Settings) -> None:
    table = role_table(settings, "b")
    roles = roles_of("U0TEAMA2", (), table.rbac)
    refused = may_approve("U0TEAMA2", roles, TEAM_B, table=table)
    assert not refused.allowed
    assert "approver role on target b" in refused.reason and refused.reason.endswith("slack.rbac.approvers")
    own = role_table(settings, "a")
    assert may_approve("U0TEAMA2", roles_of("U0TEAMA2", (), own.rbac), TEAM_A, table=own).allowed


def test_an_empty_list_means_nobody_in_that_role_on_the_target(tmp_path: Path) -> None:
    path = tmp_path / "flagbot.toml"
    path.write_text(CONFIG.replace('operators = ["U0TEAMB"]', "operators = []"), encoding="utf-8")
    table = role_table(load_settings(path, required=True), "b")
    assert table.rbac.operators == [] and "operator" not in roles_of(GLOBAL_OPERATOR, (), table.rbac)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('[targets.a.rbac]\noperators = ["@alice"]\n', "targets.a.rbac.operators.0: not a Slack user"),
        ("[targets.a.rbac]\nowners = []\n", "targets.a.rbac.owners"),
    ],
)
def test_a_target_list_is_checked_like_the_global_one(tmp_path: Path, extra: str, message: str) -> None:
    path = tmp_path / "flagbot.toml"
    path.write_text(
        '[targets.a]\nunit = "sglang.service"\nnodes = [{ host = "10.0.0.1" }]\n' + extra, encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_settings(path, required=True)


def test_no_target_may_be_named_all(tmp_path: Path) -> None:
    path = tmp_path / "flagbot.toml"
    path.write_text(
        '[targets.all]\nunit = "sglang.service"\nnodes = [{ host = "10.0.0.1" }]\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match="reserved"):
        load_settings(path, required=True)
