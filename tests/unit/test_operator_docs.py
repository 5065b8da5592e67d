"""The operator docs (architecture, security, operations) show only commands that exist and links
that resolve. What the commands do when run is checked in tests/component/test_operator_commands.py;
what cannot run here (a Slack workspace, Docker, systemd on a real host) is named there."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command

from bot.main import app

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "docs" / name for name in ("architecture.md", "security.md", "operations.md")]
FLAGBOT_BINARIES = ("flagbot", "/opt/flagbot/venv/bin/flagbot", "/opt/venv/bin/flagbot")
DOCKER_NO_VALUE = frozenset({"-d", "--rm", "-i", "-t", "-it", "--init"})


def shell_lines(text: str) -> list[str]:
    """Lines of ```sh blocks (comments dropped), and inline code spans that start with flagbot."""
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        for line in block.splitlines():
            code = line.split(" #", 1)[0].strip()
            if code and not code.startswith("#"):
                lines.append(code)
    lines += [span for span in re.findall(r"`([^`\n]+)`", text) if span.startswith("flagbot ")]
    return lines


def flagbot_invocations(line: str) -> list[list[str]]:
    """The argument lists given to flagbot on a shell line: directly, or as a docker image's command."""
    found = []
    for part in re.split(r"&&|\|\||;|\|", line):
        try:
            words = shlex.split(part)
        except ValueError:
            continue
        while words and re.match(r"^[A-Z_]+=", words[0]):
            words = words[1:]
        if words and words[0] in FLAGBOT_BINARIES:
            found.append(words[1:])
        elif words[:2] == ["docker", "run"]:
            args = _docker_run_command(words[2:])
            if args is not None:
                found.append(args)
    return found


def _docker_run_command(words: list[str]) -> list[str] | None:
    index = 0
    while index < len(words) and words[index].startswith("-"):
        option = words[index]
        if option == "--entrypoint":
            return None
        index += 1 if option in DOCKER_NO_VALUE or "=" in option else 2
    return words[index + 1 :] if index < len(words) and words[index] == "flagbot" else None


def resolve(args: list[str]) -> tuple[Any, list[str]]:
    """The (click) command the words name, and the words left for it; fails when a word is not a command."""
    command: Any = get_command(app)
    words = list(args)
    if "…" in words:  # `flagbot …`: a placeholder for any command
        words = words[: words.index("…")]
        if not words:
            return command, []
    if words[:1] in (["--config"], ["-c"]):
        words = words[2:]
    if words == ["--version"]:
        return command, []
    while hasattr(command, "commands") and words:
        sub = command.commands.get(words[0])
        assert sub is not None, f"`flagbot {' '.join(args)}`: no command {words[0]!r}"
        command, words = sub, words[1:]
    assert not hasattr(command, "commands"), f"`flagbot {' '.join(args)}` names a group, not a command"
    return command, words


def github_anchor(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_flagbot_command_shown_exists(doc: Path) -> None:
    invocations = [args for line in shell_lines(doc.read_text()) for args in flagbot_invocations(line)]
    for args in invocations:
        if not args:
            continue
        command, rest = resolve(args)
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        if not (command.context_settings or {}).get("ignore_unknown_options"):
            for word in rest:
                if word.startswith("--"):
                    assert word.split("=")[0] in options, f"`flagbot {' '.join(args)}`: no option {word}"
    if doc.name == "operations.md":
        shown = {resolve(args)[0].name for args in invocations if args}
        assert {"check", "status", "observe", "upgrade", "current", "serve"} <= shown


def test_the_reader_finds_direct_and_docker_invocations() -> None:
    assert flagbot_invocations("FLAGBOT_CONFIG=/x flagbot status && flagbot db current") == [
        ["status"],
        ["db", "current"],
    ]
    assert flagbot_invocations("docker run --rm --env-file f -v a:b flagbot db upgrade") == [
        ["db", "upgrade"]
    ]
    assert flagbot_invocations("docker run --rm --entrypoint /opt/venv/bin/python flagbot -c x") == []
    with pytest.raises(AssertionError, match="no command 'frobnicate'"):
        resolve(["db", "frobnicate"])
    with pytest.raises(AssertionError, match="names a group"):
        resolve(["db"])


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        assert file.exists(), f"{doc.name}: {target}: no such file"
        if anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", file.read_text(), re.MULTILINE)
            assert anchor in {github_anchor(h) for h in headings}, f"{doc.name}: {target}: no such heading"


def test_the_readme_links_the_operator_docs() -> None:
    readme = (ROOT / "README.md").read_text()
    for doc in DOCS:
        assert f"(docs/{doc.name})" in readme, doc.name


def test_the_install_steps_name_every_scope_of_the_manifest() -> None:
    import yaml

    scopes = yaml.safe_load((ROOT / "slack-manifest.yaml").read_text())["oauth_config"]["scopes"]["bot"]
    step = (
        (ROOT / "docs" / "operations.md").read_text().split("## 1. The Slack app", 1)[1].split("\n2. ", 1)[0]
    )
    named = re.search(r"\(((?:`[a-z_.:]+`,? ?)+);", step)
    assert named, "step 1 lists the scopes in parentheses"
    assert sorted(re.findall(r"`([a-z_.:]+)`", named.group(1))) == sorted(scopes)
