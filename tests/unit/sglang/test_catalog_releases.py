"""The packaged lists of several SGLang releases, their version order, and the nearest list."""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib import resources
from pathlib import Path
from types import ModuleType

import pytest

from bot.sglang import catalog as catalog_module
from bot.sglang import data
from bot.sglang.catalog import (
    FlagCatalog,
    UnknownFlagError,
    nearest_packaged,
    packaged_versions,
    version_key,
)

ROOT = Path(__file__).parents[3]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_flag_catalog", ROOT / "tools" / "gen_flag_catalog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_flag_catalog"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _document(version: str) -> dict[str, object]:
    text = resources.files(data).joinpath(f"sglang-{version}-flags.json").read_text(encoding="utf-8")
    loaded: dict[str, object] = json.loads(text)
    return loaded


# -- versions ---------------------------------------------------------------------------------


def test_versions_sort_as_releases_not_as_text() -> None:
    ordered = ["0.4.6", "0.5.9", "0.5.10.dev1", "0.5.10rc1", "0.5.10", "0.5.10.post1", "0.5.12", "0.5.23"]
    assert sorted(reversed(ordered), key=version_key) == ordered
    assert version_key("0.5.9") < version_key("0.5.10") < version_key("0.5.23")
    assert version_key("v0.5.10") == version_key("0.5.10") == version_key("0.5.10+cu128")
    assert version_key("0.5.10.0") == version_key("0.5.10")
    assert version_key("0.5.23rc2") > version_key("0.5.23rc1")


@pytest.mark.parametrize("text", ["latest", "", "0.5.x", "0.5.10 beta", "main"])
def test_a_version_that_is_no_release_number_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a release number"):
        version_key(text)


def test_the_packaged_lists_are_0_5_9_0_5_10_and_0_5_23_in_version_order() -> None:
    assert packaged_versions() == ("0.5.9", "0.5.10", "0.5.23")
    for version in packaged_versions():
        assert FlagCatalog.load(version).version == version


# -- the nearest list ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "chosen"),
    [
        ("0.5.12", "0.5.10"),  # 2 patch releases from 0.5.10, 11 from 0.5.23
        ("0.5.16", "0.5.10"),
        ("0.5.17", "0.5.23"),
        ("0.5.10.post1", "0.5.10"),  # its own release's list
        ("0.5.23rc1", "0.5.23"),
        ("0.5.2", "0.5.9"),
        ("0.4.0", "0.5.9"),  # older than every list: the oldest
        ("0.6.0", "0.5.23"),  # newer than every list: the newest
        ("0.5.30", "0.5.23"),
    ],
)
def test_another_version_gets_the_nearest_packaged_list_named_in_the_note(version: str, chosen: str) -> None:
    found, note = FlagCatalog.nearest(version)
    assert found.version == chosen
    assert note == (
        f"no flag list for SGLang {version} is packaged; "
        f"checking against the nearest packaged list, SGLang {chosen}"
    )


@pytest.mark.parametrize("version", ["0.5.9", "0.5.10", "0.5.23"])
def test_a_packaged_version_gets_its_own_list_and_no_note(version: str) -> None:
    found, note = FlagCatalog.nearest(version)
    assert found is FlagCatalog.load(version) and note is None


def test_no_version_gets_the_documented_default_list() -> None:
    found, note = FlagCatalog.nearest(None)
    assert found.version == "0.5.10" and note is None


def test_a_version_that_is_no_release_number_says_which_list_stands_in() -> None:
    found, note = FlagCatalog.nearest("latest")
    assert found.version == "0.5.10"
    assert (
        note
        == "SGLang version 'latest' is not a release number (like 0.5.10); checking against the packaged SGLang 0.5.10 list"
    )


def test_a_tie_goes_to_the_older_list_and_the_note_names_both(monkeypatch: pytest.MonkeyPatch) -> None:
    assert nearest_packaged("0.5.16", ["0.5.9", "0.5.23"]) == ("0.5.9", "0.5.23")
    assert nearest_packaged("0.5.17", ["0.5.9", "0.5.23"]) == ("0.5.23", None)
    monkeypatch.setattr(catalog_module, "packaged_versions", lambda: ("0.5.9", "0.5.23"))
    found, note = FlagCatalog.nearest("0.5.16")
    assert found.version == "0.5.9"
    assert note is not None and note.endswith(
        "SGLang 0.5.9 (0.5.9 and 0.5.23 are equally near; the older is used, "
        "as releases add flags more often than they drop them)"
    )


def test_a_minor_release_apart_is_farther_than_any_patch() -> None:
    assert nearest_packaged("0.5.40", ["0.4.99", "0.5.1", "0.6.0"]) == ("0.5.1", None)
    assert nearest_packaged("0.6.1", ["0.5.23", "0.7.0"]) == ("0.5.23", "0.7.0")


# -- what differs between releases (checked against the wheels' own parsers) ------------------


def test_0_5_9_lacks_fused_moe_sum_all_reduce_which_0_5_10_has() -> None:
    old, new = FlagCatalog.load("0.5.9"), FlagCatalog.load("0.5.10")
    with pytest.raises(UnknownFlagError, match=r"for SGLang 0\.5\.9"):
        old.resolve("--enable-fused-moe-sum-all-reduce")
    assert new.canonical("--enable-fused-moe-sum-all-reduce") == "--enable-fused-moe-sum-all-reduce"
    assert FlagCatalog.load("0.5.23").get("--enable-fused-moe-sum-all-reduce") is not None


def test_0_5_9_has_disable_hicache_numa_detect_which_0_5_10_dropped() -> None:
    assert (
        FlagCatalog.load("0.5.9").canonical("--disable-hicache-numa-detect")
        == "--disable-hicache-numa-detect"
    )
    for version in ("0.5.10", "0.5.23"):
        assert "--disable-hicache-numa-detect" not in FlagCatalog.load(version)


def test_enable_hicache_is_an_alias_in_0_5_23_only() -> None:
    newest = FlagCatalog.load("0.5.23")
    assert newest.canonical("--enable-hicache") == "--enable-hierarchical-cache"
    assert newest.get("--enable-hicache") is newest.get("--enable-hierarchical-cache")
    for version in ("0.5.9", "0.5.10"):
        older = FlagCatalog.load(version)
        assert older.get("--enable-hicache") is None and "--enable-hicache" not in older


def test_0_5_23_dropped_the_graph_flags_0_5_10_has() -> None:
    newest, middle = FlagCatalog.load("0.5.23"), FlagCatalog.load("0.5.10")
    for flag in ("--cuda-graph-max-bs", "--disable-piecewise-cuda-graph"):
        assert middle.get(flag) is not None and flag not in newest


@pytest.mark.parametrize(("version", "count"), [("0.5.9", 331), ("0.5.10", 354), ("0.5.23", 531)])
def test_flag_counts_match_the_wheels_own_parser(version: str, count: int) -> None:
    document = _document(version)
    flags = document["flags"]
    assert isinstance(flags, list)
    assert document["primary_flag_count"] == len(flags) == count
    assert _generator().EXPECTED_PRIMARY_FLAGS[version] == count
    catalog = FlagCatalog.load(version)
    assert len([spec for spec in catalog if spec.negates is None]) == count


def test_each_document_says_which_method_read_which_wheel() -> None:
    for version, method in (("0.5.9", "AST walk"), ("0.5.10", "AST walk"), ("0.5.23", "ArgumentParser")):
        source = str(_document(version)["source"])
        assert method in source and f"sglang-{version}-" in source and "sha256" in source


def test_defaults_are_each_releases_own() -> None:
    def default(version: str, flag: str) -> object:
        spec = FlagCatalog.load(version).get(flag)
        assert spec is not None
        return spec.default

    assert default("0.5.9", "--fp4-gemm-backend") == "flashinfer_cutlass"
    assert default("0.5.10", "--fp4-gemm-backend") == "auto"
    assert default("0.5.10", "--hicache-mem-layout") == "layer_first"
    assert default("0.5.23", "--hicache-mem-layout") == "page_first"
    # 0.5.23 declares a fallback where the parser's default is None: that is the default
    assert default("0.5.23", "--swa-full-tokens-ratio") == 0.8
    flags = _document("0.5.23")["flags"]
    assert isinstance(flags, list)
    sources = {flag["name"]: flag["default_source"] for flag in flags}
    assert sources["--swa-full-tokens-ratio"].startswith("Arg.fallback")
    assert sources["--tp-size"] == "parser"
