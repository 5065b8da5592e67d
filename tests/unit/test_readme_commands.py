"""Every command the README shows is run by a test, or marked here with why it cannot run here.

The README's shell blocks are read line by line; each command must be in COVERED with the test
that runs it (and a string proving that test does), or in NOT_HERE with the reason. A command
added to the README without either fails this test, and so does a mapping whose test no longer
runs it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()

COVERED: dict[str, tuple[str, str]] = {
    "make demo": ("tests/integration/demo/test_demo_headless.py", '"demo"'),
    "make test": (".ci/run", "make test"),
    "flagbot sudoers --user flagbot --unit sglang-qwen.service > flagbot.sudoers": (
        "tests/component/test_operator_commands.py",
        "flagbot sudoers --user",
    ),
    "visudo -cf flagbot.sudoers && install -m 0440 flagbot.sudoers /etc/sudoers.d/flagbot": (
        "tests/component/test_operator_commands.py",
        '"-cf"',
    ),
    "flagbot --config flagbot.toml config check": (
        "tests/component/test_operator_commands.py",
        '"config", "check"',
    ),
    "flagbot --config flagbot.toml db upgrade": ("tests/component/test_cli.py", '"db", "upgrade"'),
    "flagbot --config flagbot.toml status": ("tests/integration/target/test_cli_target.py", '"status"'),
    "flagbot --config flagbot.toml serve": ("tests/component/slack/test_socket_mode.py", '"serve"'),
    "flagbot twin up --scenario seed-gb10 --nodes 2": (
        "tests/integration/testbed/test_twin_cli.py",
        '"twin", "up"',
    ),
    "flagbot --config state/twin.toml status": ("tests/integration/testbed/test_twin_cli.py", '"status"'),
    "flagbot --config state/twin.toml try --enable-fused-moe-sum-all-reduce --dry-run": (
        "tests/integration/testbed/test_twin_cli.py",
        '"--dry-run"',
    ),
    "flagbot twin down": ("tests/integration/testbed/test_twin_cli.py", '"twin", "down"'),
}
NOT_HERE: dict[str, str] = {
    # the parts of COVERED commands that need what this machine does not have
    "make demo": "the interactive demo waits for a person; its headless run is the test mapped above",
    "visudo -cf flagbot.sudoers && install -m 0440 flagbot.sudoers /etc/sudoers.d/flagbot": (
        "installing into a real GPU host's /etc/sudoers.d; the testbed installs the same generated file"
    ),
    "flagbot --config flagbot.toml serve": "a real Slack workspace; the test runs serve against the stand-in",
}


def readme_commands() -> list[str]:
    """Each command line of the README's sh blocks, without comments and prompts."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", README, re.DOTALL):
        for line in block.splitlines():
            text = line.split("#", 1)[0].strip()
            if text:
                commands.append(text)
    return commands


def test_every_readme_command_is_run_by_a_test() -> None:
    shown = readme_commands()
    assert len(shown) >= 10, shown
    assert sorted(set(shown)) == sorted(COVERED), "README commands and COVERED differ"
    for command, (test_file, proof) in COVERED.items():
        path = ROOT / test_file
        assert path.is_file(), f"{command}: {test_file} does not exist"
        assert proof in path.read_text(), f"{command}: {test_file} no longer contains {proof!r}"


def test_what_cannot_run_here_says_why() -> None:
    assert set(NOT_HERE) <= set(COVERED)
    assert all(len(reason) > 20 for reason in NOT_HERE.values())


def test_the_readme_screenshot_and_links_exist() -> None:
    for target in re.findall(r"\]\(((?:docs|slack|flagbot|Dockerfile)[^)#]*)", README):
        assert (ROOT / target).exists(), target


def test_the_readme_playbook_loads_and_its_run_command_parses(tmp_path: Path) -> None:
    from bot.commands import parse_command
    from bot.loop.playbook import load_playbooks, playbook_dirs

    (text,) = re.findall(r"```yaml\n(.*?)```", README, re.DOTALL)
    (tmp_path / "recheck.yaml").write_text(text)
    books = load_playbooks(playbook_dirs([tmp_path]))
    book = books["recheck"]
    assert [step.action for step in book.steps] == ["heal", "observe_now", "measure", "check_expectations"]
    (run,) = re.findall(r"`(flagbot run recheck [^`]*)`", README)
    invocation = parse_command(run.removeprefix("flagbot "))
    assert invocation.name == "run"
