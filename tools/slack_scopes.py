#!/usr/bin/env python3
"""What the Slack app needs, read from the code, and a check of `slack-manifest.yaml` against it.

Why: a hand-written manifest drifts from the code in both directions. A scope the code needs but
the manifest lacks fails only in a real workspace (`missing_scope`, which no local test sees); a
scope the manifest grants but nothing uses is privilege an attacker with the bot token gets for
free. So the scopes are derived, not remembered:

1. every Web API call in `bot/` (not the stand-in, which is Slack's side): `x.chat_postMessage(`
   and the other `slack_sdk` client methods (each mapped to the Web API method(s) it calls by
   reading `slack_sdk`'s own source: `files_upload_v2` is `files.getUploadURLExternal` +
   `files.completeUploadExternal`), `x.api_call("method")`, and Bolt's `say(` in `bot/slack/`;
2. every Bolt listener registered in `bot/slack/`: `app.command("/x")`, `app.event("e")`,
   `app.action(...)`, `app.view(...)`, `app.shortcut(...)`, `app.options(...)`;
3. `METHOD_SCOPES` and `EVENT_SCOPES`: the scopes Slack documents for each method and event.

Usage: `python tools/slack_scopes.py [MANIFEST]` prints what the code needs, why, and every
problem with the manifest (exit 1 when there is one). `tests/unit/test_slack_manifest.py` runs it.
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "slack-manifest.yaml"

METHOD_SCOPES: Mapping[str, frozenset[str]] = {
    # Bot-token scopes per Web API method (Slack's method reference, "Required scopes").
    "chat.postMessage": frozenset({"chat:write"}),
    "chat.postEphemeral": frozenset({"chat:write"}),
    "chat.update": frozenset({"chat:write"}),
    "chat.delete": frozenset({"chat:write"}),
    "chat.scheduleMessage": frozenset({"chat:write"}),
    "chat.getPermalink": frozenset(),
    "files.getUploadURLExternal": frozenset({"files:write"}),
    "files.completeUploadExternal": frozenset({"files:write"}),
    "files.upload": frozenset({"files:write"}),
    "files.info": frozenset({"files:read"}),
    "usergroups.users.list": frozenset({"usergroups:read"}),
    "usergroups.list": frozenset({"usergroups:read"}),
    "users.info": frozenset({"users:read"}),
    "users.list": frozenset({"users:read"}),
    # conversations.*: one scope per conversation type; flagbot works in public and private channels.
    "conversations.info": frozenset({"channels:read", "groups:read"}),
    "conversations.members": frozenset({"channels:read", "groups:read"}),
    "conversations.history": frozenset({"channels:history", "groups:history"}),
    "conversations.replies": frozenset({"channels:history", "groups:history"}),
    "conversations.join": frozenset({"channels:join"}),
    "reactions.add": frozenset({"reactions:write"}),
    "reactions.remove": frozenset({"reactions:write"}),
    "pins.add": frozenset({"pins:write"}),
    "auth.test": frozenset(),
    "views.open": frozenset(),
    "views.update": frozenset(),
    "views.publish": frozenset(),
}

EVENT_SCOPES: Mapping[str, frozenset[str]] = {
    "app_mention": frozenset({"app_mentions:read"}),
    "message.channels": frozenset({"channels:history"}),
    "message.groups": frozenset({"groups:history"}),
    "message.im": frozenset({"im:history"}),
    "message.mpim": frozenset({"mpim:history"}),
    "reaction_added": frozenset({"reactions:read"}),
    "member_joined_channel": frozenset({"channels:read", "groups:read"}),
    "app_home_opened": frozenset(),
}

INTERACTIVE_LISTENERS = frozenset({"action", "view", "shortcut", "options"})
LISTENER_KINDS = frozenset({"command", "event", *INTERACTIVE_LISTENERS})


@dataclass(frozen=True)
class Site:
    """Where the code does something: `bot/slack/reporter.py:96`."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class CodeUse:
    """What the code asks of Slack: Web API methods, listeners, and what could not be read."""

    methods: dict[str, list[tuple[str, Site]]] = field(default_factory=dict)
    """Web API method -> (what the code wrote, e.g. `files_upload_v2`, where)."""
    commands: dict[str, list[Site]] = field(default_factory=dict)
    events: dict[str, list[Site]] = field(default_factory=dict)
    interactive: list[tuple[str, Site]] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    """Calls or listeners the scan cannot resolve to a name (a non-literal argument)."""


# --- slack_sdk: client method -> Web API methods --------------------------------------------------


@cache
def client_methods() -> Mapping[str, frozenset[str]]:
    """Every public `AsyncWebClient` method and the Web API methods it calls, from slack_sdk's source."""
    from slack_sdk.web import async_client

    tree = ast.parse(inspect.getsource(async_client))
    klass = next(
        node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "AsyncWebClient"
    )
    direct: dict[str, set[str]] = {}
    calls: dict[str, set[str]] = {}
    for node in klass.body:
        if not isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef) or node.name.startswith("_"):
            continue
        direct[node.name], calls[node.name] = set(), set()
        for call in ast.walk(node):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            if call.func.attr == "api_call" and call.args and isinstance(call.args[0], ast.Constant):
                direct[node.name].add(str(call.args[0].value))
            elif isinstance(call.func.value, ast.Name) and call.func.value.id == "self":
                calls[node.name].add(call.func.attr)

    def resolve(name: str, seen: frozenset[str]) -> set[str]:
        found = set(direct.get(name, ()))
        for other in calls.get(name, ()):
            if other in direct and other not in seen:
                found |= resolve(other, seen | {other})
        return found

    return {name: frozenset(resolve(name, frozenset({name}))) for name in direct if name != "api_call"}


# --- scanning the code ------------------------------------------------------------------------------


def _literal(node: ast.expr | None) -> str | None:
    return str(node.value) if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _py_files(root: Path, exclude: Iterable[Path]) -> list[Path]:
    skip = [path.resolve() for path in exclude]
    return sorted(
        path
        for path in root.rglob("*.py")
        if not any(path.resolve().is_relative_to(excluded) for excluded in skip)
    )


def scan(
    code_root: Path = ROOT / "bot",
    *,
    listeners_root: Path | None = None,
    exclude: Iterable[Path] | None = None,
    base: Path = ROOT,
) -> CodeUse:
    """Web API calls under `code_root` and Bolt listeners under `listeners_root` (default
    `code_root/slack`), skipping `exclude` (default nothing: the stand-in, which plays Slack, lives
    in the lab package, outside the product's code root)."""
    listeners_root = listeners_root if listeners_root is not None else code_root / "slack"
    excluded = list(exclude) if exclude is not None else []
    methods = client_methods()
    use = CodeUse()
    for path in _py_files(code_root, excluded):
        shown = str(path.relative_to(base)) if path.is_relative_to(base) else str(path)
        in_listeners = path.resolve().is_relative_to(listeners_root.resolve())
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call):
                _read_call(node, Site(shown, node.lineno), methods, use, listeners=in_listeners)
    return use


def _read_call(
    node: ast.Call, site: Site, methods: Mapping[str, frozenset[str]], use: CodeUse, *, listeners: bool
) -> None:
    func = node.func
    if isinstance(func, ast.Name) and func.id == "say" and listeners:
        use.methods.setdefault("chat.postMessage", []).append(("say", site))
        return
    if not isinstance(func, ast.Attribute):
        return
    if func.attr == "api_call":
        name = _literal(node.args[0] if node.args else None)
        if name is None:
            use.unreadable.append(f"{site}: api_call with a method name that is not a literal")
        else:
            use.methods.setdefault(name, []).append((f'api_call("{name}")', site))
        return
    if func.attr in methods:
        for name in methods[func.attr]:
            use.methods.setdefault(name, []).append((func.attr, site))
        return
    if listeners and func.attr in LISTENER_KINDS and isinstance(func.value, ast.Name):
        _read_listener(func.attr, node, site, use)


def _read_listener(kind: str, node: ast.Call, site: Site, use: CodeUse) -> None:
    if kind in INTERACTIVE_LISTENERS:
        use.interactive.append((kind, site))
        return
    name = _literal(node.args[0] if node.args else None)
    if name is None:
        use.unreadable.append(f"{site}: app.{kind}(...) with a name that is not a literal")
    elif kind == "command":
        use.commands.setdefault(name, []).append(site)
    else:
        use.events.setdefault(name, []).append(site)


# --- what the code needs, and the manifest's problems -----------------------------------------------


def needed_scopes(use: CodeUse) -> tuple[dict[str, list[str]], list[str]]:
    """Scope -> why (method or listener, and where); and what the tables do not know."""
    why: dict[str, list[str]] = {}
    unknown: list[str] = []
    for method, sites in sorted(use.methods.items()):
        if method not in METHOD_SCOPES:
            unknown.append(f"{method} (called at {sites[0][1]}): add its scopes to METHOD_SCOPES")
            continue
        for scope in METHOD_SCOPES[method]:
            why.setdefault(scope, []).append(f"{method} via {sites[0][0]} at {sites[0][1]}")
    for event, event_sites in sorted(use.events.items()):
        if event not in EVENT_SCOPES:
            unknown.append(f"event {event} (at {event_sites[0]}): add its scopes to EVENT_SCOPES")
            continue
        for scope in EVENT_SCOPES[event]:
            why.setdefault(scope, []).append(f"event {event} at {event_sites[0]}")
    for command, command_sites in sorted(use.commands.items()):
        why.setdefault("commands", []).append(f"slash command {command} at {command_sites[0]}")
    return why, unknown


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, Mapping) else None
    return data


def check(manifest: Mapping[str, Any], use: CodeUse) -> list[str]:
    """Every way `manifest` differs from what the code needs; empty when they agree."""
    why, problems = needed_scopes(use)
    problems = [*problems, *use.unreadable]
    granted = set(_get(manifest, "oauth_config", "scopes", "bot") or [])
    for scope in sorted(set(why) - granted):
        problems.append(f"scope {scope} is missing: needed by {'; '.join(why[scope])}")
    for scope in sorted(granted - set(why)):
        problems.append(f"scope {scope} is granted but nothing in the code needs it: remove it")
    if _get(manifest, "oauth_config", "scopes", "user"):
        problems.append("user scopes are granted: flagbot acts only as its bot user")
    declared = {entry.get("command") for entry in _get(manifest, "features", "slash_commands") or []}
    for command in sorted(set(use.commands) - declared):
        problems.append(f"slash command {command} is handled ({use.commands[command][0]}) but not declared")
    for command in sorted(str(c) for c in declared - set(use.commands)):
        problems.append(f"slash command {command} is declared but nothing handles it")
    events = set(_get(manifest, "settings", "event_subscriptions", "bot_events") or [])
    for event in sorted(set(use.events) - events):
        problems.append(f"event {event} is listened to ({use.events[event][0]}) but not subscribed")
    for event in sorted(events - set(use.events)):
        problems.append(f"event {event} is subscribed but nothing listens to it")
    interactive = bool(_get(manifest, "settings", "interactivity", "is_enabled"))
    if use.interactive and not interactive:
        kind, site = use.interactive[0]
        problems.append(f"interactivity is off but app.{kind} listens at {site} (buttons would do nothing)")
    if interactive and not use.interactive:
        problems.append("interactivity is on but nothing listens to actions, views or shortcuts")
    if _get(manifest, "settings", "socket_mode_enabled") is not True:
        problems.append("socket_mode_enabled must be true: `flagbot serve` uses Socket Mode by default")
    if _get(manifest, "settings", "org_deploy_enabled") is not False:
        problems.append("org_deploy_enabled must be false: flagbot is installed in one workspace")
    if (use.events or use.methods) and not _get(manifest, "features", "bot_user", "display_name"):
        problems.append("features.bot_user.display_name is missing: mentions and messages need a bot user")
    return problems


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else MANIFEST
    use = scan()
    why, _ = needed_scopes(use)
    for scope in sorted(why):
        print(f"{scope}: {'; '.join(why[scope])}")
    problems = check(yaml.safe_load(path.read_text()), use)
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
