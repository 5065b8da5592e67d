"""Applying and diffing changes: the defined behaviour of docs/commands.md on real flag sets."""

from __future__ import annotations

import pytest

from bot.sglang.catalog import FlagCatalog
from bot.sglang.change import Change, ChangeConflictError, apply_changes, diff_flagsets
from bot.sglang.flagset import FlagItem, FlagSet

CATALOG = FlagCatalog.load()
BASE = FlagSet(
    (
        FlagItem("--model-path", "/models/q"),
        FlagItem("--tp", "2"),
        FlagItem("--device", "npu"),
        FlagItem("--trust-remote-code"),
        FlagItem("--device", "npu"),
    )
)


def apply(*changes: Change, env: dict[str, str] | None = None) -> tuple[FlagSet, dict[str, str]]:
    return apply_changes(BASE, env or {}, changes, canonical=CATALOG.canonical)


def test_add_appends_at_the_end() -> None:
    flags, _ = apply(Change("add", "--enable-metrics"))
    assert flags.items[-1] == FlagItem("--enable-metrics")
    assert flags.items[:-1] == BASE.items


def test_add_of_a_present_flag_is_refused_even_under_another_spelling() -> None:
    with pytest.raises(ChangeConflictError, match="already present as `--tp 2`; use `set --tp-size=VALUE`"):
        apply(Change("add", "--tp-size", "4"))
    with pytest.raises(ChangeConflictError, match="nothing would change"):
        apply(Change("add", "--trust-remote-code"))


def test_set_replaces_in_place_and_drops_repeats() -> None:
    flags, _ = apply(Change("set", "--device", "cuda"))
    assert [item.flag for item in flags.items] == ["--model-path", "--tp", "--device", "--trust-remote-code"]
    assert flags.items[2] == FlagItem("--device", "cuda")


def test_set_finds_an_alias_and_writes_the_canonical_name() -> None:
    flags, _ = apply(Change("set", "--tp-size", "4"))
    assert flags.items[1] == FlagItem("--tp-size", "4")


def test_set_of_an_absent_flag_and_to_the_same_value_are_refused() -> None:
    with pytest.raises(ChangeConflictError, match="not in the current flags; use `add"):
        apply(Change("set", "--mem-fraction-static", "0.8"))
    with pytest.raises(ChangeConflictError, match="already `--model-path /models/q`"):
        apply(Change("set", "--model-path", "/models/q"))


def test_remove_takes_every_occurrence_and_refuses_an_absent_flag() -> None:
    flags, _ = apply(Change("remove", "--device"))
    assert "--device" not in [item.flag for item in flags.items]
    with pytest.raises(ChangeConflictError, match="not in the current flags"):
        apply(Change("remove", "--enable-metrics"))


def test_env_set_and_unset() -> None:
    _, env = apply(
        Change("env-set", env_name="A", env_value="1"), Change("env-unset", env_name="B"), env={"B": "x"}
    )
    assert env == {"A": "1"}
    with pytest.raises(ChangeConflictError, match="does not set C"):
        apply(Change("env-unset", env_name="C"))


def test_a_conflict_changes_nothing() -> None:
    before = FlagSet(BASE.items)
    with pytest.raises(ChangeConflictError):
        apply(Change("add", "--enable-metrics"), Change("remove", "--nope"))
    assert before == BASE


def test_unknown_flags_in_the_unit_are_compared_by_their_own_spelling() -> None:
    flags = FlagSet((FlagItem("--disable-flashinfer"),))
    new, _ = apply_changes(flags, {}, [Change("remove", "--disable-flashinfer")], canonical=CATALOG.canonical)
    assert new.items == ()


def test_diff_round_trips_through_apply() -> None:
    after, _ = apply(
        Change("set", "--tp-size", "4"), Change("add", "--enable-metrics"), Change("remove", "--device")
    )
    diff = diff_flagsets(BASE, after, canonical=CATALOG.canonical)
    assert {(c.op, c.flag, c.value) for c in diff} == {
        ("set", "--tp-size", "4"),
        ("add", "--enable-metrics", None),
        ("remove", "--device", None),
    }
    assert diff_flagsets(BASE, BASE, canonical=CATALOG.canonical) == []


def test_describe_reads_back_in_the_grammar() -> None:
    assert Change("add", "--cuda-graph-bs", ("4", "8")).describe() == "add --cuda-graph-bs 4 8"
    assert Change("env-set", env_name="A", env_value="1").describe() == "env set A=1"
    assert Change("remove", "--x").describe() == "remove --x"


@pytest.mark.parametrize(
    "change",
    [
        Change("add", "--enable-metrics"),
        Change("set", "--tp-size", "4"),
        Change("add", "--cuda-graph-bs", ("1", "2", "4")),
        Change("remove", "--device"),
        Change("env-set", env_name="NCCL_DEBUG", env_value="INFO"),
        Change("env-unset", env_name="NCCL_DEBUG"),
    ],
)
def test_a_change_reads_back_from_its_json(change: Change) -> None:
    assert Change.from_json(change.to_json()) == change


def test_from_json_refuses_an_unknown_op() -> None:
    with pytest.raises(ValueError, match="unknown change op 'replace'"):
        Change.from_json({"op": "replace", "flag": "--x"})
