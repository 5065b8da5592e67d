"""The chat words of a loop command become the built-in playbook's parameters (bot.app.playbooks)."""

from __future__ import annotations

from bot.app.playbooks import builtin_params as playbook_params
from bot.commands import parse_command


def test_force_and_dry_run_reach_the_try_playbook() -> None:
    name, params = playbook_params(parse_command("try add --enable-metrics force=yes"))
    assert name == "try" and params["force"] is True and params["dry_run"] is False
    _, params = playbook_params(parse_command("try add --enable-metrics dry-run=yes"))
    assert params["force"] is False and params["dry_run"] is True
    _, params = playbook_params(parse_command("try add --enable-metrics"))
    assert params["force"] is False


def test_try_parameters_carry_changes_expectations_and_options() -> None:
    name, params = playbook_params(
        parse_command(
            'try set --mem-fraction-static=0.8 max_running_requests>=48 keep=never because="more KV"'
        )
    )
    assert name == "try"
    (change,) = params["changes"]
    assert (change["op"], change["flag"]) == ("set", "--mem-fraction-static")
    assert params["expect"] == ["max_running_requests>=48"]
    assert params["keep"] == "never" and params["because"] == "more KV"
