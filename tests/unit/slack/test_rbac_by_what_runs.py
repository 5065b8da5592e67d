"""RBAC by what runs: a playbook run needs what its steps do (restart, dry run, baseline pin,
forced write), not what the word typed suggests; `hypothesis add|close` need an operator."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app.playbooks import effects_of, load_all, playbook_effects
from bot.commands import parse_command
from bot.config import Settings, load_settings
from bot.slack.dispatch import parse
from bot.slack.rbac import Decision, Role, decide

ME = "U123"
OPERATOR: frozenset[Role] = frozenset({"operator", "viewer"})
ADMIN: frozenset[Role] = frozenset({"admin", "approver", "operator", "viewer"})
VIEWER: frozenset[Role] = frozenset({"viewer"})

CONFIG = """default_target = "dev"
playbook_dirs = ["{books}"]
[targets.dev]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
[targets.prod]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
[targets.prod.policy]
require_approval = true
[targets.careful]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
[targets.careful.policy]
confirm_restart = true
"""
BOUNCE = """name: bounce
description: back to the baseline's flags, restarted (a site's own playbook)
mutating: true
steps:
  - action: plan_revert
    with: {what: baseline}
  - action: apply
"""
FORCED = """name: forced
description: the same, over a hand edit
mutating: true
steps:
  - action: plan_revert
    with: {what: baseline}
  - action: apply
    with: {force: true}
"""
LOOK = """name: look
description: re-read the running start
mutating: false
steps:
  - action: observe_now
"""


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    books = tmp_path / "books"
    books.mkdir()
    for name, text in (("bounce", BOUNCE), ("forced", FORCED), ("look", LOOK)):
        (books / f"{name}.yaml").write_text(text)
    config = tmp_path / "flagbot.toml"
    config.write_text(CONFIG.format(books=books))
    return load_settings(config, required=True)


def decided(settings: Settings, text: str, roles: frozenset[Role]) -> Decision:
    """What Slack's `_decide` asks: the invocation with its target's policy and its playbook's effects."""
    invocation = parse(settings, text)
    target = invocation.options.get("target", settings.default_target or "")
    return decide(
        invocation,
        roles,
        actor=ME,
        target_policy=settings.targets[target].policy,
        effects=playbook_effects(settings, invocation),
    )


def test_run_baseline_needs_an_admin_as_baseline_pin_does(settings: Settings) -> None:
    refused = decided(settings, "run baseline", OPERATOR)
    assert not refused.allowed and refused.role == "admin"
    assert "replaces the target's baseline (as `baseline pin` does)" in refused.reason
    assert "slack.rbac.admins" in refused.reason
    assert not decided(settings, "baseline pin", OPERATOR).allowed
    allowed = decided(settings, "run baseline target=prod", ADMIN)
    assert allowed.allowed and allowed.needs == "none"  # a pin restarts nothing


def test_run_revert_needs_what_revert_needs(settings: Settings) -> None:
    for text in ("revert 3 target=prod", "run revert what=3 target=prod"):
        decision = decided(settings, text, OPERATOR)
        assert decision.allowed and decision.needs == "approval", text
        assert "restarts a production target" in decision.reason
        assert decided(settings, text.replace("prod", "dev"), OPERATOR).needs == "none"
        assert decided(settings, text.replace("prod", "careful"), OPERATOR).needs == "confirmation"


@pytest.mark.parametrize(
    "text", ["revert 3 target=prod force=yes", "run revert what=3 force=yes target=prod"]
)
def test_a_forced_revert_on_production_is_an_admins(settings: Settings, text: str) -> None:
    refused = decided(settings, text, OPERATOR)
    assert not refused.allowed and refused.role == "admin", refused.reason
    assert "production target" in refused.reason
    admin = decided(settings, text, ADMIN)
    assert admin.allowed and admin.needs == "approval"  # and still a second person
    assert decided(settings, text.replace("prod", "dev"), OPERATOR).allowed


def test_an_unforced_revert_no_longer_forces_its_write(settings: Settings) -> None:
    books = load_all(settings)
    plain = parse_command("revert 3")
    assert not playbook_effects(settings, plain).forces  # type: ignore[union-attr]
    assert effects_of(books["revert"], {"what": "3", "force": True}).forces


def test_a_custom_playbook_that_restarts_needs_an_operator_and_an_approval_on_production(
    settings: Settings,
) -> None:
    assert not decided(settings, "run bounce target=prod", VIEWER).allowed
    decision = decided(settings, "run bounce target=prod", OPERATOR)
    assert decision.allowed and decision.needs == "approval"
    assert decided(settings, "run bounce", OPERATOR).needs == "none"
    assert decided(settings, "run bounce target=careful", OPERATOR).needs == "confirmation"
    forced = decided(settings, "run forced target=prod", OPERATOR)
    assert not forced.allowed and "writes over a hand edit (force) on a production target" in forced.reason
    assert decided(settings, "run forced", OPERATOR).allowed  # force= is an admin's on production only
    looked = decided(settings, "run look target=prod", OPERATOR)
    assert looked.allowed and looked.needs == "none"  # restarts nothing, runs nothing on a node


def test_a_dry_run_needs_the_approval_of_the_restart_it_precedes(settings: Settings) -> None:
    dry = "try add --enable-metrics dry-run=yes target=prod"
    decision = decided(settings, dry, OPERATOR)
    assert decision.allowed and decision.needs == "approval"
    assert "runs SGLang's argument code on node 0 of a production target (the dry run)" in decision.reason
    assert decided(settings, dry.replace("prod", "careful"), OPERATOR).needs == "none"  # no restart
    effects = playbook_effects(settings, parse(settings, dry))
    assert effects is not None and effects.executes and not effects.restarts
    full = playbook_effects(settings, parse(settings, "try add --enable-metrics target=prod"))
    assert full is not None and full.executes and full.restarts  # one request: one approval for both


@pytest.mark.parametrize(
    "text", ['hypothesis add "the fusion is a no-op"', "hypothesis close 3 refuted because=measured"]
)
def test_adding_or_closing_a_hypothesis_needs_an_operator(settings: Settings, text: str) -> None:
    refused = decided(settings, text, VIEWER)
    assert not refused.allowed and refused.role == "operator", refused.reason
    allowed = decided(settings, text, OPERATOR)
    assert allowed.allowed and allowed.needs == "none"
    for reading in ("hypothesis list", "hypothesis show 3", "hypothesis"):
        assert decided(settings, reading, VIEWER).allowed, reading


def test_restart_needs_what_try_needs_and_its_dry_run_needs_no_approval(settings: Settings) -> None:
    assert not decided(settings, "restart", VIEWER).allowed
    assert decided(settings, "restart", OPERATOR).needs == "none"
    production = decided(settings, "restart target=prod", OPERATOR)
    assert production.allowed and production.needs == "approval"
    assert "restarts a production target" in production.reason
    assert decided(settings, "restart target=careful", OPERATOR).needs == "confirmation"
    dry = decided(settings, "restart dry-run=yes target=prod", OPERATOR)
    assert dry.allowed and dry.needs == "none"  # reads the units, restarts nothing, runs no SGLang code
