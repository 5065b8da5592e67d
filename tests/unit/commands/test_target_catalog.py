"""Which packaged flag list judges a target's flags: its version's own, else the nearest, named."""

from __future__ import annotations

import pytest

from bot.commands.grammar import parse_command
from bot.commands.target_catalog import UnknownTargetError, catalog_for
from bot.commands.tokens import CommandError
from bot.config import Settings


def _settings(**versions: str | None) -> Settings:
    return Settings.model_validate(
        {
            "default_target": next(iter(versions)),
            "targets": {
                name: {
                    "unit": "sglang.service",
                    "nodes": [{"host": "127.0.0.1", "port": 9}],
                    **({"sglang_version": version} if version is not None else {}),
                }
                for name, version in versions.items()
            },
        }
    )


SETTINGS = _settings(new="0.5.23", old="0.5.9", mid="0.5.12", odd="0.5.2", unset=None)


@pytest.mark.parametrize(
    ("target", "version", "note"),
    [
        ("new", "0.5.23", None),
        ("old", "0.5.9", None),
        ("unset", "0.5.10", None),  # no version configured: the documented default list
        (
            "mid",
            "0.5.10",
            "no flag list for SGLang 0.5.12 is packaged; checking against the nearest packaged list, SGLang 0.5.10",
        ),
        (
            "odd",
            "0.5.9",
            "no flag list for SGLang 0.5.2 is packaged; checking against the nearest packaged list, SGLang 0.5.9",
        ),
    ],
)
def test_each_target_gets_its_versions_list_or_the_nearest_named(
    target: str, version: str, note: str | None
) -> None:
    found = catalog_for(SETTINGS, [f"target={target}"])
    assert found.catalog.version == version and found.note == note


def test_enable_hicache_is_taken_on_0_5_23_and_refused_on_0_5_10() -> None:
    newest = catalog_for(SETTINGS, ["target=new"]).catalog
    invocation = parse_command(["try", "add", "--enable-hicache", "target=new"], catalog=newest)
    assert [change.flag for change in invocation.changes] == ["--enable-hierarchical-cache"]
    with pytest.raises(CommandError, match=r"unknown flag --enable-hicache for SGLang 0\.5\.10"):
        parse_command(
            ["try", "add", "--enable-hicache", "target=unset"],
            catalog=catalog_for(SETTINGS, ["target=unset"]).catalog,
        )


def test_0_5_9_refuses_a_flag_it_lacks_and_takes_one_it_alone_has() -> None:
    old = catalog_for(SETTINGS, ["target=old"]).catalog
    with pytest.raises(
        CommandError, match=r"unknown flag --enable-fused-moe-sum-all-reduce for SGLang 0\.5\.9"
    ):
        parse_command(["try", "add", "--enable-fused-moe-sum-all-reduce", "target=old"], catalog=old)
    invocation = parse_command(["try", "remove", "--disable-hicache-numa-detect", "target=old"], catalog=old)
    assert [change.flag for change in invocation.changes] == ["--disable-hicache-numa-detect"]


def test_an_unknown_target_is_refused_before_any_list_is_chosen() -> None:
    with pytest.raises(UnknownTargetError, match="unknown target 'nope'"):
        catalog_for(SETTINGS, ["target=nope"])
