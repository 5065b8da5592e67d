"""The SGLang flag catalog: the packaged 0.5.10 list, argparse-faithful names and values."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.sglang import data
from bot.sglang.catalog import (
    AmbiguousFlagError,
    FlagCatalog,
    FlagSpec,
    FlagValueError,
    UnknownFlagError,
    typographic_dash_hint,
)
from bot.sglang.flagset import FlagValue


@pytest.fixture(scope="module")
def catalog() -> FlagCatalog:
    return FlagCatalog.load()


# -- the packaged data ------------------------------------------------------------------------


def test_packaged_catalog_has_354_primary_flags(catalog: FlagCatalog) -> None:
    primary = [spec for spec in catalog if spec.negates is None]
    assert len(primary) == 354
    # The only extra entry is the generated `--no-X` of SGLang's one BooleanOptionalAction.
    assert [spec.name for spec in catalog if spec.negates] == ["--no-experts-shared-outer-loras"]
    assert len(catalog) == 355
    assert catalog.version == "0.5.10"


def test_json_document_says_how_it_was_made() -> None:
    text = resources.files(data).joinpath("sglang-0.5.10-flags.json").read_text(encoding="utf-8")
    document = json.loads(text)
    assert document["sglang_version"] == "0.5.10"
    assert "tools/gen_flag_catalog.py" in document["source"]
    assert "sha256" in document["source"]
    assert document["primary_flag_count"] == len(document["flags"]) == 354
    # Source order is kept, so the catalog reads like `--help`.
    lines = [flag["lineno"] for flag in document["flags"]]
    assert lines == sorted(lines)


def test_load_is_cached(catalog: FlagCatalog) -> None:
    assert FlagCatalog.load("0.5.10") is catalog


def test_unknown_version_is_a_lookup_error() -> None:
    with pytest.raises(LookupError, match=r"0\.0\.1.*0\.5\.10"):
        FlagCatalog.load("0.0.1")


# -- canonical names ----------------------------------------------------------------------------


@pytest.mark.parametrize("written", ["--tp", "--tp-size", "--tensor-parallel-size", "--tp-s"])
def test_tensor_parallel_names_resolve_to_tp_size(catalog: FlagCatalog, written: str) -> None:
    # SGLang declares ("--tensor-parallel-size", "--tp-size") and `--help` lists the long one
    # first, but the ServerArgs field (and the server_args= line) is `tp_size`.
    assert catalog.canonical(written) == "--tp-size"
    spec = catalog.resolve(written)
    assert spec.aliases == ("--tensor-parallel-size",)
    assert spec.field == "tp_size"
    assert spec.type_name == "int"
    assert spec.default == 1


def test_nccl_init_addr_is_an_alias_of_dist_init_addr(catalog: FlagCatalog) -> None:
    assert catalog.canonical("--nccl-init-addr") == "--dist-init-addr"
    assert catalog.canonical("--dist-init-addr") == "--dist-init-addr"
    assert catalog.resolve("--dist-init-addr").aliases == ("--nccl-init-addr",)


def test_other_parallel_sizes_use_their_field_names(catalog: FlagCatalog) -> None:
    assert catalog.canonical("--data-parallel-size") == "--dp-size"
    assert catalog.canonical("--pipeline-parallel-size") == "--pp-size"
    # `--ep` is an exact alias, so it wins over being a prefix of `--ep-size` and others.
    assert catalog.canonical("--ep") == "--ep-size"
    assert catalog.canonical("--model") == "--model-path"


def test_seed_flags_exist_with_their_shapes(catalog: FlagCatalog) -> None:
    for switch in (
        "--enable-flashinfer-allreduce-fusion",
        "--enable-fused-moe-sum-all-reduce",
        "--disable-piecewise-cuda-graph",
    ):
        spec = catalog.resolve(switch)
        assert spec.name == switch
        assert spec.takes_value is False
        assert spec.nargs == 0
        assert spec.default is False

    algorithm = catalog.resolve("--speculative-algorithm")
    assert algorithm.choices == ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")

    running = catalog.resolve("--max-running-requests")
    assert (running.type_name, running.nargs, running.takes_value) == ("int", None, True)

    batch_sizes = catalog.resolve("--cuda-graph-bs")
    assert (batch_sizes.type_name, batch_sizes.nargs) == ("int", "+")


def test_deprecated_flags_are_marked(catalog: FlagCatalog) -> None:
    piecewise = catalog.resolve("--enable-piecewise-cuda-graph")
    assert piecewise.deprecated
    assert piecewise.action == "DeprecatedAction"
    assert not catalog.resolve("--disable-piecewise-cuda-graph").deprecated


def test_boolean_optional_negation_keeps_its_meaning(catalog: FlagCatalog) -> None:
    negative = catalog.resolve("--no-experts-shared-outer-loras")
    assert negative.name == "--no-experts-shared-outer-loras"
    assert negative.negates == "--experts-shared-outer-loras"
    assert not negative.takes_value


# -- prefixes, ambiguity, unknown names -----------------------------------------------------------


def test_unique_prefix_resolves_like_argparse(catalog: FlagCatalog) -> None:
    assert catalog.canonical("--max-running") == "--max-running-requests"
    assert "--chunked" in catalog


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("--nccl", {"--nccl-port", "--nccl-init-addr"}),
        ("--dist", {"--dist-timeout", "--dist-init-addr"}),
        ("--cuda-graph", {"--cuda-graph-max-bs", "--cuda-graph-bs"}),
    ],
)
def test_ambiguous_prefix_lists_candidates(catalog: FlagCatalog, prefix: str, expected: set[str]) -> None:
    with pytest.raises(AmbiguousFlagError) as info:
        catalog.resolve(prefix)
    assert set(info.value.candidates) == expected
    assert info.value.flag == prefix
    assert "could match" in str(info.value)
    assert prefix not in catalog


def test_unknown_flag_suggests_close_names(catalog: FlagCatalog) -> None:
    with pytest.raises(UnknownFlagError) as info:
        catalog.resolve("--enable-flashinfer-allreduce-fuson")
    assert info.value.suggestions[0] == "--enable-flashinfer-allreduce-fusion"
    assert str(info.value).startswith(
        "unknown flag --enable-flashinfer-allreduce-fuson for SGLang 0.5.10; "
        "did you mean --enable-flashinfer-allreduce-fusion"
    )


def test_unknown_flag_without_close_names(catalog: FlagCatalog) -> None:
    with pytest.raises(UnknownFlagError) as info:
        catalog.resolve("--zzzzzzzzzzzz")
    assert info.value.suggestions == ()
    assert str(info.value) == "unknown flag --zzzzzzzzzzzz for SGLang 0.5.10"


@pytest.mark.parametrize("written", ["--tp_size", "tp-size", "-tp-size", "--tp=8"])
def test_repairable_spellings_are_refused_with_the_repair_first(catalog: FlagCatalog, written: str) -> None:
    with pytest.raises(UnknownFlagError) as info:
        catalog.resolve(written)
    assert info.value.suggestions[0] == "--tp-size"


def test_typographic_dash_flag_is_refused_with_a_hint(catalog: FlagCatalog) -> None:
    with pytest.raises(UnknownFlagError) as info:
        catalog.resolve("—enable-metrics")
    assert info.value.hint is not None
    assert info.value.suggestions[0] == "--enable-metrics"
    assert "typographic dash" in str(info.value)


def test_contains_rejects_non_strings(catalog: FlagCatalog) -> None:
    assert 5 not in catalog
    assert "--tp-size" in catalog


@given(st.one_of(st.text(), st.text().map(lambda s: "--" + s), st.text().map(lambda s: "-" + s)))
def test_resolve_never_raises_anything_else(name: str) -> None:
    catalog = FlagCatalog.load()
    try:
        spec = catalog.resolve(name)
    except (UnknownFlagError, AmbiguousFlagError, FlagValueError):
        return
    assert isinstance(spec, FlagSpec)


@given(st.sampled_from(sorted(o for s in FlagCatalog.load() for o in s.option_strings)), st.data())
def test_every_prefix_of_a_real_flag_resolves_or_is_ambiguous(option: str, drawn: st.DataObject) -> None:
    catalog = FlagCatalog.load()
    cut = drawn.draw(st.integers(min_value=3, max_value=len(option)))
    prefix = option[:cut]
    candidates: tuple[str, ...] = ()
    spec: FlagSpec | None = None
    try:
        spec = catalog.resolve(prefix)
    except AmbiguousFlagError as exc:
        candidates = exc.candidates
    if spec is None:
        assert option in candidates
    else:
        # A unique prefix means the flag it was cut from, unless it is itself another exact name.
        assert spec is catalog.resolve(option) or catalog.get(prefix) is spec


# -- values ---------------------------------------------------------------------------------------


def _error(catalog: FlagCatalog, flag: str, value: FlagValue) -> str:
    with pytest.raises(FlagValueError) as info:
        catalog.check_value(catalog.resolve(flag), value)
    assert info.value.flag == catalog.canonical(flag)
    return str(info.value)


def test_bad_int_reads_like_argparse(catalog: FlagCatalog) -> None:
    message = _error(catalog, "--max-running-requests", "abc")
    assert message == "argument --max-running-requests: invalid int value: 'abc'"


def test_bad_choice_reads_like_argparse(catalog: FlagCatalog) -> None:
    message = _error(catalog, "--speculative-algorithm", "MEDUSA")
    assert message.startswith("argument --speculative-algorithm: invalid choice: 'MEDUSA' (choose from")
    assert "EAGLE3" in message


def test_int_choices_are_compared_as_ints(catalog: FlagCatalog) -> None:
    spec = catalog.resolve("--max-lora-chunk-size")
    catalog.check_value(spec, "64")
    assert "invalid choice: 17" in _error(catalog, "--max-lora-chunk-size", "17")


def test_missing_value(catalog: FlagCatalog) -> None:
    assert _error(catalog, "--max-running-requests", None) == (
        "argument --max-running-requests: expected one argument"
    )
    assert "expected at least one argument" in _error(catalog, "--cuda-graph-bs", ())


def test_too_many_values(catalog: FlagCatalog) -> None:
    message = _error(catalog, "--max-running-requests", ("1", "2"))
    assert message == "argument --max-running-requests: expected one argument, got 2"


def test_value_given_to_a_switch(catalog: FlagCatalog) -> None:
    message = _error(catalog, "--enable-metrics", "yes")
    assert message.startswith("argument --enable-metrics: takes no value")
    catalog.check_value(catalog.resolve("--enable-metrics"), None)


def test_negative_numbers_are_values(catalog: FlagCatalog) -> None:
    catalog.check_value(catalog.resolve("--chunked-prefill-size"), "-1")
    catalog.check_value(catalog.resolve("--cuda-graph-bs"), ("1", "-2", "8"))


def test_dash_words_are_not_values(catalog: FlagCatalog) -> None:
    # What SGLang's argparse would do with `--dist-init-addr -x`: exit 2 before loading.
    assert "expected one argument" in _error(catalog, "--dist-init-addr", "-x")
    assert "'-x' would be read as a flag" in _error(catalog, "--cuda-graph-bs", ("1", "-x"))


def test_nargs_lists_check_every_item(catalog: FlagCatalog) -> None:
    catalog.check_value(catalog.resolve("--cuda-graph-bs"), ("1", "2", "4"))
    catalog.check_value(catalog.resolve("--cuda-graph-bs"), "8")
    assert "invalid int value: 'x'" in _error(catalog, "--cuda-graph-bs", ("1", "x"))


def test_optional_and_star_values(catalog: FlagCatalog) -> None:
    catalog.check_value(catalog.resolve("--model-checksum"), None)
    catalog.check_value(catalog.resolve("--model-checksum"), "sums.json")
    catalog.check_value(catalog.resolve("--lora-paths"), ())


def test_sglang_custom_types(catalog: FlagCatalog) -> None:
    catalog.check_value(catalog.resolve("--context-length"), "32k")
    catalog.check_value(catalog.resolve("--context-length"), "1Ki")
    assert "Decimals are not allowed" in _error(catalog, "--context-length", "1.5Ki")
    assert "Invalid integer value" in _error(catalog, "--context-length", "lots")
    catalog.check_value(catalog.resolve("--mem-fraction-static"), "0.85")
    assert "invalid float value" in _error(catalog, "--mem-fraction-static", "most")


# -- typographic dashes -------------------------------------------------------------------------


@pytest.mark.parametrize("token", ["—enable-x", "–enable-x", "−enable-x", "-—enable-x", "——enable-x"])
def test_typographic_dash_hint(token: str) -> None:
    hint = typographic_dash_hint(token)
    assert hint == (
        f"`{token}` starts with a typographic dash (Slack turns `--` into `—`); did you mean `--enable-x`?"
    )


@pytest.mark.parametrize("token", ["--enable-x", "-1", "enable-x", "—", "— ", "", "a—b"])
def test_no_typographic_dash_hint(token: str) -> None:
    assert typographic_dash_hint(token) is None


# -- catalogs from explicit specs -----------------------------------------------------------------


def test_from_specs_and_validation() -> None:
    specs = [
        FlagSpec("--alpha-one", type_name="int"),
        FlagSpec("--alpha-two", aliases=("--a2",)),
        FlagSpec("--beta", takes_value=False),
    ]
    catalog = FlagCatalog.from_specs("test", specs)
    assert [spec.name for spec in catalog] == ["--alpha-one", "--alpha-two", "--beta"]
    assert catalog.canonical("--a2") == "--alpha-two"
    assert catalog.canonical("--b") == "--beta"
    assert catalog.get("--b") is None
    with pytest.raises(AmbiguousFlagError):
        catalog.resolve("--alpha")
    with pytest.raises(UnknownFlagError, match="for SGLang test"):
        catalog.resolve("--gamma")
    with pytest.raises(ValueError, match="declared by both"):
        FlagCatalog.from_specs("test", [FlagSpec("--x"), FlagSpec("--y", aliases=("--x",))])
    with pytest.raises(ValueError, match="must start with '-'"):
        FlagSpec("alpha")
    with pytest.raises(ValueError, match="switch"):
        FlagSpec("--beta", takes_value=False, nargs="+")
