"""Reading `sudo -l -n` (bot/target/sudoers.py `missing_grants`): which of the generated sudoers
lines a login lacks, for `flagbot config check --connect`."""

from __future__ import annotations

from bot.target.sudoers import granted_commands, missing_grants, needed_commands, sudoers_text

UNIT = "sglang-qwen.service"
HEAD = "Matching Defaults entries for ops on gpu1:\n    env_reset, secure_path=/usr/sbin\\:/usr/bin\n\n"


def listing(*entries: str) -> str:
    return (
        HEAD + "User ops may run the following commands on gpu1:\n" + "".join(f"    {e}\n" for e in entries)
    )


def test_the_generated_file_listed_back_grants_everything_needed() -> None:
    rules = [
        line.split("NOPASSWD: ", 1)[1]
        for line in sudoers_text("ops", UNIT).splitlines()
        if "NOPASSWD" in line
    ]
    assert missing_grants(listing(*(f"(root) NOPASSWD: {rule}" for rule in rules)), UNIT) == []
    assert len(needed_commands(UNIT)) == len(rules)


def test_a_missing_line_is_named_and_one_for_another_unit_does_not_count() -> None:
    needed = needed_commands(UNIT)
    entries = [f"(root) NOPASSWD: {cmd}" for cmd in needed if " stop " not in cmd]
    entries.append("(root) NOPASSWD: /usr/bin/systemctl stop other.service")
    assert missing_grants(listing(*entries), UNIT) == [f"/usr/bin/systemctl stop {UNIT}"]


def test_password_rules_other_users_and_defaults_grant_nothing() -> None:
    needed = needed_commands(UNIT)
    text = listing(
        f"(root) PASSWD: {needed[0]}",
        f"(postgres) NOPASSWD: {needed[1]}",
    )
    assert missing_grants(text, UNIT) == needed
    assert granted_commands(HEAD) == (set(), False)  # the Defaults lines are not rules
    assert missing_grants("Sorry, user ops may not run sudo on gpu1.\n", UNIT) == needed


def test_all_comma_lists_and_wildcards() -> None:
    assert missing_grants(listing("(ALL : ALL) NOPASSWD: ALL"), UNIT) == []
    assert missing_grants(listing("(ALL) ALL"), UNIT) == needed_commands(UNIT)  # would prompt
    joined = ", ".join(needed_commands(UNIT))
    assert missing_grants(listing(f"(root) NOPASSWD: {joined}"), UNIT) == []
    wild = listing("(root) NOPASSWD: /usr/bin/systemctl *, /usr/bin/mkdir *, /usr/bin/tee *")
    assert missing_grants(wild, UNIT) == []
