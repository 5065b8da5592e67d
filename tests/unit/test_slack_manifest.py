"""slack-manifest.yaml grants exactly what the code uses (tools/slack_scopes.py reads the code).

The checker itself is tested against deliberately wrong manifests and small made-up sources, so
a checker that stopped seeing calls (and would then pass anything, or flag everything) fails here.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.slack_scopes import (
    EVENT_SCOPES,
    MANIFEST,
    METHOD_SCOPES,
    CodeUse,
    check,
    client_methods,
    needed_scopes,
    scan,
)


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    data = yaml.safe_load(MANIFEST.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def code() -> CodeUse:
    return scan()


def _problems_with(manifest: dict[str, Any], code: CodeUse, *path: str, value: Any) -> list[str]:
    changed = copy.deepcopy(manifest)
    node = changed
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return check(changed, code)


def test_the_manifest_grants_what_the_code_uses_and_nothing_more(
    manifest: dict[str, Any], code: CodeUse
) -> None:
    assert check(manifest, code) == []


def test_the_scan_sees_the_slack_layer(code: CodeUse) -> None:
    """The calls this app is known to make; a scan that finds fewer is broken, not the manifest."""
    assert {
        "chat.postMessage",
        "chat.postEphemeral",
        "chat.update",
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
        "usergroups.users.list",
    } <= set(code.methods)
    assert set(code.commands) == {"/flagbot"}
    assert "app_mention" in code.events
    assert code.interactive, "the thread's buttons are registered with app.action"
    assert any(site.path == "bot/slack/reporter.py" for _, site in code.methods["chat.update"])
    assert code.unreadable == []


def test_the_manifest_is_what_the_operator_guide_promises(manifest: dict[str, Any]) -> None:
    (command,) = manifest["features"]["slash_commands"]
    assert command["command"] == "/flagbot"
    assert command["usage_hint"]
    assert command["should_escape"] is False
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["settings"]["socket_mode_enabled"] is True
    assert manifest["settings"]["org_deploy_enabled"] is False
    assert manifest["settings"]["event_subscriptions"]["bot_events"] == ["app_mention"]
    assert len(manifest["display_information"]["description"]) <= 140


def test_every_granted_scope_is_explained_in_a_comment() -> None:
    lines = MANIFEST.read_text().splitlines()
    start = lines.index("    bot:")
    for index, line in enumerate(lines[start + 1 :], start + 1):
        if not line.startswith("      - "):
            if not line.strip().startswith("#"):
                break
            continue
        assert lines[index - 1].strip().startswith("#"), f"scope without a reason: {line.strip()}"


def test_a_missing_scope_names_the_call_that_needs_it(manifest: dict[str, Any], code: CodeUse) -> None:
    scopes = [s for s in manifest["oauth_config"]["scopes"]["bot"] if s != "files:write"]
    problems = _problems_with(manifest, code, "oauth_config", "scopes", "bot", value=scopes)
    assert len(problems) == 1
    assert "files:write is missing" in problems[0]
    assert re.search(r"files\.getUploadURLExternal via files_upload_v2 at bot/[\w/]+\.py:\d+", problems[0])


def test_an_unused_scope_is_refused(manifest: dict[str, Any], code: CodeUse) -> None:
    scopes = [*manifest["oauth_config"]["scopes"]["bot"], "users:read", "channels:history"]
    problems = _problems_with(manifest, code, "oauth_config", "scopes", "bot", value=scopes)
    assert problems == [
        "scope channels:history is granted but nothing in the code needs it: remove it",
        "scope users:read is granted but nothing in the code needs it: remove it",
    ]


def test_user_scopes_are_refused(manifest: dict[str, Any], code: CodeUse) -> None:
    problems = _problems_with(manifest, code, "oauth_config", "scopes", "user", value=["chat:write"])
    assert problems == ["user scopes are granted: flagbot acts only as its bot user"]


def test_an_unsubscribed_event_and_a_stray_one_are_problems(manifest: dict[str, Any], code: CodeUse) -> None:
    problems = _problems_with(
        manifest, code, "settings", "event_subscriptions", "bot_events", value=["message.channels"]
    )
    assert any(p.startswith("event app_mention is listened to (bot/slack/app.py:") for p in problems)
    assert "event message.channels is subscribed but nothing listens to it" in problems


def test_the_slash_command_must_be_declared(manifest: dict[str, Any], code: CodeUse) -> None:
    renamed = [{**manifest["features"]["slash_commands"][0], "command": "/flagbot-old"}]
    problems = _problems_with(manifest, code, "features", "slash_commands", value=renamed)
    assert any(p.startswith("slash command /flagbot is handled (bot/slack/app.py:") for p in problems)
    assert "slash command /flagbot-old is declared but nothing handles it" in problems


def test_buttons_need_interactivity(manifest: dict[str, Any], code: CodeUse) -> None:
    problems = _problems_with(manifest, code, "settings", "interactivity", value={"is_enabled": False})
    assert len(problems) == 1
    assert problems[0].startswith("interactivity is off but app.action listens at bot/slack/app.py:")


def test_socket_mode_and_single_workspace(manifest: dict[str, Any], code: CodeUse) -> None:
    assert _problems_with(manifest, code, "settings", "socket_mode_enabled", value=False) == [
        "socket_mode_enabled must be true: `flagbot serve` uses Socket Mode by default"
    ]
    assert _problems_with(manifest, code, "settings", "org_deploy_enabled", value=True) == [
        "org_deploy_enabled must be false: flagbot is installed in one workspace"
    ]


def test_the_scan_reads_every_form_of_call(tmp_path: Path) -> None:
    """A made-up Slack layer: sdk methods on any receiver, api_call, say, every listener kind."""
    slack = tmp_path / "bot" / "slack"
    (slack / "fake_slack").mkdir(parents=True)
    (slack / "app.py").write_text(
        "import re\n"
        "def register(app, name):\n"
        "    app.command('/other')(f)\n"
        "    app.event('reaction_added')(f)\n"
        "    app.view('modal')(f)\n"
        "    app.event(name)(f)\n"
        "async def handler(self, client, say):\n"
        "    await self.client.conversations_info(channel='C1')\n"
        "    await client.api_call('reactions.add', json={})\n"
        "    await client.api_call(name)\n"
        "    await say('hello')\n"
        "    await client.admin_apps_approve()\n"
    )
    (slack / "fake_slack" / "server.py").write_text("async def f(c):\n    await c.users_list()\n")
    (tmp_path / "bot" / "digest.py").write_text("async def post(c):\n    await c.chat_update()\n")
    use = scan(tmp_path / "bot", base=tmp_path, exclude=[slack / "fake_slack"])
    assert set(use.methods) == {
        "conversations.info",
        "reactions.add",
        "chat.postMessage",
        "chat.update",
        "admin.apps.approve",
    }
    assert use.methods["chat.update"][0][1].path == "bot/digest.py"
    assert set(use.commands) == {"/other"}
    assert set(use.events) == {"reaction_added"}
    assert [kind for kind, _ in use.interactive] == ["view"]
    assert len(use.unreadable) == 2
    why, unknown = needed_scopes(use)
    assert {"channels:read", "groups:read", "reactions:write", "chat:write", "reactions:read"} <= set(why)
    assert unknown == ["admin.apps.approve (called at bot/slack/app.py:12): add its scopes to METHOD_SCOPES"]


def test_the_tables_name_real_web_api_methods() -> None:
    """A typo in METHOD_SCOPES would never match a call: every key is a method slack_sdk calls."""
    known = set().union(*client_methods().values())
    assert set(METHOD_SCOPES) <= known
    assert client_methods()["files_upload_v2"] == {
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    }
    assert all(":" in scope for scopes in EVENT_SCOPES.values() for scope in scopes)
