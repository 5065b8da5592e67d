"""Playbooks loaded per file by the application layer: a broken one is told once per process
(where the front end asked: stderr for the CLI and `flagbot serve`), kept out of the runnable
set, and running it by name answers with its load error (issue 22 item 4)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app import playbooks as app_playbooks
from bot.app.playbooks import load_set, resolve_playbook, set_broken_announcer
from bot.commands import CommandError, parse_command
from bot.config import Settings, load_settings

BROKEN = "name: tpyo\nsteps:\n  - action: snapshott\n"


@pytest.fixture
def told() -> Iterator[list[str]]:
    seen: list[str] = []
    before = app_playbooks._announce
    set_broken_announcer(seen.append)
    try:
        yield seen
    finally:
        set_broken_announcer(before)


def settings_with(tmp_path: Path) -> Settings:
    books = tmp_path / "books"
    books.mkdir()
    (books / "tpyo.yaml").write_text(BROKEN, encoding="utf-8")
    config = tmp_path / "flagbot.toml"
    config.write_text(
        f'default_target = "dev"\nplaybook_dirs = ["{books}"]\n[targets.dev]\nunit = "sglang.service"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n',
        encoding="utf-8",
    )
    return load_settings(config, required=True)


def test_a_broken_file_is_told_once_and_the_built_ins_load(tmp_path: Path, told: list[str]) -> None:
    settings = settings_with(tmp_path)
    first = load_set(settings)
    load_set(settings)
    assert {"try", "revert", "verify", "isolate", "baseline"} <= set(first.books)
    path = tmp_path / "books" / "tpyo.yaml"
    assert len(told) == 1
    assert told[0].startswith(
        f"warning: playbook not loaded (the others are): {path}: step 1 (snapshott): unknown action"
    )
    # changed on disk: a new error is a new announcement; the listing's own load tells nothing
    path.write_text("name: tpyo\nsteps: [{action: heal}]\n", encoding="utf-8")
    assert "mutating" in load_set(settings, announce=False).broken[0].error and len(told) == 1
    load_set(settings)
    assert len(told) == 2 and "needs `mutating: true`" in told[1]


def test_running_the_broken_one_answers_with_its_error_and_try_resolves(
    tmp_path: Path, told: list[str]
) -> None:
    settings = settings_with(tmp_path)
    with pytest.raises(CommandError) as info:
        resolve_playbook(settings, parse_command("run tpyo"))
    assert info.value.message.startswith("playbook 'tpyo' did not load: ")
    assert "unknown action" in info.value.message
    call = resolve_playbook(settings, parse_command("try env set NCCL_DEBUG=INFO"))
    assert call.book.name == "try" and call.target == "dev"


def test_run_revert_reads_flags_as_revert_does(tmp_path: Path, told: list[str]) -> None:
    settings = settings_with(tmp_path)
    with pytest.raises(CommandError) as info:
        resolve_playbook(settings, parse_command("run revert flags=enable-metrics"))
    assert info.value.message == (
        "flags=enable-metrics: an SGLang flag is written with its dashes; did you mean `--enable-metrics`?"
    )
    call = resolve_playbook(settings, parse_command("run revert flags=--tp,--enable-metrics"))
    assert call.params["flags"] == "--tp-size,--enable-metrics"  # canonical, as `revert flags=` reads them


def test_the_packaged_playbooks_are_not_listed_again_and_a_user_edit_still_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each command's check loads the set: the package's own directory is listed once (its files
    change only with flagbot), the user's directories every time, so an edit is seen at once."""

    settings = settings_with(tmp_path)
    load_set(settings, announce=False)
    listed: list[Path] = []
    real_iterdir = Path.iterdir

    def counted(self: Path) -> Iterator[Path]:
        listed.append(self)
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", counted)
    again = load_set(settings, announce=False)
    assert listed == [tmp_path / "books"] and "tpyo" not in again.books  # nothing changed: no parse
    (tmp_path / "books" / "tpyo.yaml").write_text(
        "name: tpyo\nsteps:\n  - action: snapshot_before\n", encoding="utf-8"
    )
    mended = load_set(settings, announce=False)
    assert "tpyo" in mended.books and not mended.broken
