"""Loading playbooks: every mistake is refused at load with the file, the step and the problem."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bot.loop.playbook import PlaybookError, load_playbook, load_playbook_set, load_playbooks
from tests.support.loop_actions import Probe

GOOD = """
name: demo
description: note, change, note
mutating: true
params:
  changes: {kind: changes, required: true, help: the flags to try}
  label: {kind: text, default: first}
  repeats: {kind: int, default: 3}
steps:
  - action: t_note
    with: {label: $label, value: $repeats}
  - action: t_change
    name: apply
    with: {changes: $changes}
  - action: t_note
    with: {label: "$$literal"}
on_failure:
  - action: t_undo
on_cancel:
  - action: t_undo
on_interrupt: t_check
"""


def write(directory: Path, text: str, name: str = "demo.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def refused(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(PlaybookError) as info:
        load_playbook(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    return message.removeprefix(f"{path}: ")


def test_a_good_playbook_loads_with_params_steps_and_handlers(tmp_path: Path, probe: Probe) -> None:
    playbook = load_playbook(write(tmp_path, GOOD))
    assert playbook.name == "demo" and playbook.mutating
    assert [p.name for p in playbook.params] == ["changes", "label", "repeats"]
    assert [s.name for s in playbook.steps] == ["t_note", "apply", "t_note"]
    assert [s.action for s in playbook.on_failure] == ["t_undo"]
    assert playbook.on_interrupt == "t_check"
    assert playbook.source == tmp_path / "demo.yaml"
    args = playbook.steps[0].resolve({"label": "x", "repeats": 5})
    assert args == {"label": "x", "value": 5}
    assert playbook.steps[2].resolve({}) == {"label": "$literal"}


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("    with: {label: $label, value: $repeats}", "    with: {labl: $label}"),
            "step 1 (t_note): t_note takes no argument 'labl' (it takes label, value)",
        ),
        (("  - action: t_change", "  - action: t_chnage"), "step 2 (t_chnage): unknown action; actions: "),
        (
            ("    with: {changes: $changes}", "    with: {changes: $chagnes}"),
            "step 2 (t_change): with.changes: $chagnes is not a parameter (parameters: changes, label, repeats)",
        ),
        (("    name: apply", "    nmae: apply"), "step 2 (t_change): unknown key 'nmae'"),
        (("  repeats: {kind: int, default: 3}", "  repeats: {kind: integer}"), "params.repeats: kind: "),
        (
            ("  repeats: {kind: int, default: 3}", "  repeats: {kind: int, default: many}"),
            "params.repeats: default: 'many' is not a whole number",
        ),
        (
            ("  repeats: {kind: int, default: 3}", "  repeats: {kind: choice}"),
            "params.repeats: kind choice needs choices",
        ),
        (("on_interrupt: t_check", "on_interrupt: t_nope"), "on_interrupt: unknown action 't_nope'"),
        (
            ("on_cancel:\n  - action: t_undo", "on_cancel:\n  - action: t_undo\n    with: {x: 1}"),
            "on_cancel step 1 (t_undo): t_undo takes no argument 'x' (it takes rolled_back)",
        ),
        (("description: note, change, note", "descripton: x"), "unknown key 'descripton'"),
        (
            ("mutating: true", "mutating: false"),
            "step 2 (t_change): changes the target; the playbook needs `mutating: true`",
        ),
        (("name: demo", "name: Demo Book"), "name: String should match pattern"),
    ],
)
def test_mistakes_name_the_file_the_step_and_the_problem(
    tmp_path: Path, probe: Probe, edit: tuple[str, str], expected: str
) -> None:
    old, new = edit
    assert old in GOOD
    assert refused(tmp_path, GOOD.replace(old, new)).startswith(expected)


def test_a_missing_required_argument_is_refused(tmp_path: Path, probe: Probe) -> None:
    text = "name: x\nsteps:\n  - action: t_stop\n"
    assert refused(tmp_path, text) == "step 1 (t_stop): missing argument reason"


def test_steps_are_required(tmp_path: Path, probe: Probe) -> None:
    assert refused(tmp_path, "name: x\nsteps: []\n").startswith("steps: List should have at least 1 item")
    assert refused(tmp_path, "name: x\n") == "steps is required"


def test_yaml_that_is_not_a_playbook_is_refused(tmp_path: Path, probe: Probe) -> None:
    assert refused(tmp_path, "- just\n- a list\n") == "a playbook is a mapping with name, params and steps"
    assert refused(tmp_path, "name: [unclosed\n").startswith("not valid YAML (line ")


def test_an_open_ended_action_takes_any_argument(tmp_path: Path, probe: Probe) -> None:
    playbook = load_playbook(
        write(tmp_path, "name: x\nsteps:\n  - action: t_any\n    with: {whatever: [1, 2]}\n")
    )
    assert playbook.steps[0].resolve({}) == {"whatever": [1, 2]}


def test_a_later_directory_shadows_an_earlier_one_and_says_so(tmp_path: Path, probe: Probe) -> None:
    first = write(tmp_path / "a", "name: x\ndescription: one\nsteps: [{action: t_note}]\n", "x.yaml")
    write(tmp_path / "a", "name: y\nsteps: [{action: t_note}]\n", "y.yml")
    write(tmp_path / "a", "not a playbook", "README.md")
    second = write(tmp_path / "b", "name: x\ndescription: two\nsteps: [{action: t_note}]\n", "mine.yaml")
    books = load_playbooks([tmp_path / "a", tmp_path / "b"])
    assert list(books) == ["x", "y"]
    assert books["x"].description == "two"
    assert books["x"].source == second and books["x"].shadows == (first,)


def test_two_files_of_one_name_in_one_directory_are_refused(tmp_path: Path, probe: Probe) -> None:
    write(tmp_path, "name: x\nsteps: [{action: t_note}]\n", "1.yaml")
    write(tmp_path, "name: x\nsteps: [{action: t_note}]\n", "2.yaml")
    with pytest.raises(PlaybookError, match=r"2\.yaml: playbook 'x' is also defined in .*1\.yaml"):
        load_playbooks([tmp_path])


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PlaybookError, match="playbook directory does not exist"):
        load_playbooks([tmp_path / "nope"])


def test_a_broken_file_breaks_only_itself_and_keeps_its_error(tmp_path: Path, probe: Probe) -> None:
    write(tmp_path / "a", "name: x\nsteps: [{action: t_note}]\n", "x.yaml")
    write(tmp_path / "b", "name: good\nsteps: [{action: t_note}]\n", "good.yaml")
    typo = write(tmp_path / "b", "name: typo\nsteps: [{action: t_nope}]\n", "typo.yaml")
    unreadable = write(tmp_path / "b", "name: [unclosed\n", "half.yaml")
    loaded = load_playbook_set([tmp_path / "a", tmp_path / "b", tmp_path / "gone"])
    assert list(loaded.books) == ["good", "x"]
    assert [(b.path, b.name) for b in loaded.broken] == [
        (unreadable, "half"),  # no readable name: the file's stem
        (typo, "typo"),
        (tmp_path / "gone", None),
    ]
    assert loaded.broken[1].error.startswith(f"{typo}: step 1 (t_nope): unknown action")
    assert loaded.broken[2].error == f"{tmp_path / 'gone'}: playbook directory does not exist"
    assert loaded.broken_named("typo") is loaded.broken[1] and loaded.broken_named("x") is None


def test_a_broken_file_hides_the_earlier_playbook_it_meant_to_replace(tmp_path: Path, probe: Probe) -> None:
    write(tmp_path / "a", "name: x\nsteps: [{action: t_note}]\n", "x.yaml")
    write(tmp_path / "a", "name: y\nsteps: [{action: t_note}]\n", "y.yaml")
    write(tmp_path / "b", "name: x\nsteps: [{action: t_note, with: {nope: 1}}]\n", "mine.yaml")
    loaded = load_playbook_set([tmp_path / "a", tmp_path / "b"])
    assert list(loaded.books) == ["y"]  # not the built-in x the operator meant to replace
    broken = loaded.broken_named("x")
    assert broken is not None and "t_note takes no argument 'nope'" in broken.error
    with pytest.raises(PlaybookError, match="t_note takes no argument 'nope'"):
        load_playbooks([tmp_path / "a", tmp_path / "b"])  # the strict loader still refuses
