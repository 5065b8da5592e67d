"""Observe: journal decoding, implied flags, parsed vs effective capacity, the snapshot it stores."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from bot.config.schema import Node, Target
from bot.sglang.catalog import FlagCatalog, FlagSpec
from bot.sglang.launch import parse_flags
from bot.sglang.log import parse_log_lines
from bot.store import AsyncStore, Store
from bot.target import observe as observe_module
from bot.target.flaglist import forget_cache, host_catalog, merge_with_bundled, parse_help
from bot.target.journal_read import LineSplitter, decode_entry, decode_message
from bot.target.known_good import known_good
from bot.target.readiness_result import Readiness
from bot.target.snapshot_facts import (
    args_mismatch,
    capacity,
    implied_flags,
    parse_gpus,
    requested_values,
    startup_durations,
)
from tests.unit.target.scripted_node import ScriptedNode, journal_json, show_text

CATALOG = FlagCatalog.load("0.5.10")
INV = "f" * 32
SERVER_ARGS = (
    "[2026-11-29 20:14:39] server_args=ServerArgs(model_path='/m', tokenizer_path='/m', tp_size=2, "
    "max_running_requests=48, enable_fused_moe_sum_all_reduce=True, mem_fraction_static=0.856, "
    "random_seed=12345, node_rank={rank}, chunked_prefill_size=8192)"
)
CAPACITY = (
    "[2026-11-29 20:14:47 TP0] max_total_num_tokens=1833679, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=26, context_len=262144, available_gpu_mem=13.26 GB"
)
READY = "[2026-11-29 20:14:48] The server is fired up and ready to roll!"
FLAGS = parse_flags(
    ["--model-path", "/m", "--tp", "2", "--enable-fused-moe-sum-all-reduce", "--node-rank", "0"]
)


# --- journal JSON ---------------------------------------------------------------------------


def test_byte_array_and_null_messages_decode() -> None:
    assert decode_message("plain") == "plain"
    assert decode_message(list(b"bar\r 50%\x1b[0m")) == "bar\r 50%\x1b[0m"
    assert decode_message(None) == ""
    entry = decode_entry(journal_json(list(b"x\ry"), invocation=INV, at=10.5))
    assert (
        entry is not None and entry.message == "x\ry" and entry.realtime == 10.5 and entry.invocation == INV
    )
    systemd = decode_entry(journal_json("Started x", invocation=INV, systemd=True))
    assert systemd is not None and systemd.systemd
    assert decode_entry(b"-- No entries --") is None


def test_line_splitter_keeps_partial_lines_and_drops_huge_ones() -> None:
    splitter = LineSplitter(max_line=10)
    assert splitter.feed(b"ab\ncd") == [b"ab"]
    assert splitter.feed(b"e\n") == [b"cde"]
    assert splitter.feed(b"x" * 20) == []
    assert splitter.feed(b"tail\nok\n") == [b"ok"]
    assert splitter.rest() == b""


# --- implied flags ---------------------------------------------------------------------------


def test_requested_values_resolve_prefixes_switches_and_lists() -> None:
    flags = parse_flags(["--tp", "2", "--enable-metrics", "--cuda-graph-bs", "4", "8", "--bogus-flag"])
    values, unknown = requested_values(flags, CATALOG)
    assert values == {"tp_size": 2, "enable_metrics": True, "cuda_graph_bs": [4, 8]}
    assert unknown == ["--bogus-flag"]


def test_implied_flags_compare_with_request_then_default_and_keep_noise_apart() -> None:
    printed = {
        "tp_size": 2,
        "mem_fraction_static": 0.856,
        "enable_metrics": False,
        "max_running_requests": 48,
        "random_seed": 99,
        "tokenizer_path": "/m",
        "disable_overlap_schedule": True,
        "not_a_flag_field": 1,
    }
    requested = {"tp_size": 2, "enable_metrics": True}
    implied, derived = implied_flags(printed, requested, CATALOG)
    assert set(implied) == {
        "mem_fraction_static",
        "enable_metrics",
        "max_running_requests",
        "disable_overlap_schedule",
    }
    assert implied["enable_metrics"] == {"value": False, "was": True, "source": "requested"}
    assert implied["disable_overlap_schedule"]["source"] == "default"
    assert set(derived) == {"random_seed", "tokenizer_path"}


def _nested_args(prefill_backend: str) -> dict[str, object]:
    """What 0.5.14+ print: the graph settings inside `cuda_graph_config` (a 0.5.23-shaped dict)."""
    phase = {"tc_compiler": "eager", "max_context_size": None, "full_prefill_max_req": None}
    return {
        "tp_size": 2,
        "cuda_graph_max_bs_decode": None,
        "cuda_graph_config": {
            "decode": {"backend": "full", "max_bs": 48, "bs": [1, 2, 4, 8, 16, 32, 48], **phase},
            "prefill": {"backend": prefill_backend, "max_bs": 8192, "bs": [4, 8, 8192], **phase},
        },
    }


def test_implied_flags_read_the_nested_graph_settings_under_their_flat_names() -> None:
    implied, derived = implied_flags(_nested_args("disabled"), {"tp_size": 2}, CATALOG)
    assert implied["disable_piecewise_cuda_graph"] == {
        "value": True,
        "was": False,
        "source": "default",
        "default_from": "SGLang 0.5.10 list",
        "same_release": True,
        "printed_as": "cuda_graph_config.prefill.backend",
    }
    assert implied["cuda_graph_max_bs"]["value"] == 48
    assert implied["cuda_graph_max_bs"]["printed_as"] == "cuda_graph_config.decode.max_bs"
    assert "cuda_graph_config" not in implied and "cuda_graph_config" not in derived
    assert derived["cuda_graph_bs"]["printed_as"] == "cuda_graph_config.decode.bs"
    enabled, _ = implied_flags(_nested_args("breakable"), {"tp_size": 2}, CATALOG)
    assert "disable_piecewise_cuda_graph" not in enabled


def test_implied_flags_take_the_new_flag_as_baseline_when_the_old_one_is_gone() -> None:
    catalog = FlagCatalog.from_specs(
        "0.5.23",
        [
            FlagSpec("--tp-size", type_name="int", default=1, field="tp_size"),
            FlagSpec("--cuda-graph-max-bs-decode", type_name="int", field="cuda_graph_max_bs_decode"),
            FlagSpec(
                "--disable-prefill-cuda-graph",
                takes_value=False,
                action="store_true",
                default=False,
                field="disable_prefill_cuda_graph",
            ),
        ],
    )
    asked = {"tp_size": 2, "cuda_graph_max_bs_decode": 48, "disable_prefill_cuda_graph": True}
    printed = {**_nested_args("disabled"), "cuda_graph_max_bs_decode": 48, "disable_prefill_cuda_graph": True}
    implied, _ = implied_flags(printed, asked, catalog)
    assert implied == {}  # decode max_bs 48 and a disabled prefill graph are what was asked
    implied, _ = implied_flags(_nested_args("disabled"), {"tp_size": 2}, catalog)
    assert implied["disable_piecewise_cuda_graph"]["was"] is False
    assert implied["disable_piecewise_cuda_graph"]["source"] == "default"
    assert implied["cuda_graph_max_bs"]["was"] is None


# --- capacity --------------------------------------------------------------------------------


def test_the_seeds_case_parsed_48_effective_26_is_a_note_never_hidden() -> None:
    report = parse_log_lines([SERVER_ARGS.format(rank=0), CAPACITY, READY])
    info = {
        "max_running_requests": 48,
        "max_total_num_tokens": 1833679,
        "internal_states": [{"effective_max_running_requests_per_dp": 26}],
    }
    cap = capacity(report, info)
    assert (
        cap["parsed_max_running_requests"],
        cap["log_max_running_requests"],
        cap["server_info_effective_per_dp"],
    ) == (48, 26, [26])
    assert cap["agree"] is True
    assert any("differs from the parsed 48" in note for note in cap["notes"])


def test_capacity_line_and_server_info_disagreeing_is_evidence() -> None:
    report = parse_log_lines([SERVER_ARGS.format(rank=0), CAPACITY])
    cap = capacity(
        report,
        {"max_total_num_tokens": 5, "internal_states": [{"effective_max_running_requests_per_dp": 30}]},
    )
    assert cap["agree"] is False
    assert any("/server_info says 30" in note for note in cap["notes"])
    assert any("max_total_num_tokens" in note for note in cap["notes"])
    assert capacity(report, None)["server_info_effective_per_dp"] is None


def test_gpus_startup_and_node_mismatch() -> None:
    gpus = parse_gpus("0, NVIDIA GB10, GPU-1, 12.1, 580.95.05, 122573, 3891\nbad line\n")
    assert gpus == [
        {
            "index": 0,
            "name": "NVIDIA GB10",
            "uuid": "GPU-1",
            "compute_cap": "12.1",
            "driver_version": "580.95.05",
            "memory.total": 122573,
            "memory.used": 3891,
        }
    ]
    report = parse_log_lines(["warming", SERVER_ARGS.format(rank=0), CAPACITY, READY])
    assert startup_durations(report, dict(enumerate([100.0, 101.0, 108.0, 109.5], start=1))) == {
        "server_args_s": 1.0,
        "capacity_s": 8.0,
        "ready_s": 9.5,
    }
    ranks = parse_log_lines(
        [
            "[2026-11-30 10:00:16 TP1] Load weight end. elapsed=7.02 s, type=Q, avail mem=70.96 GB, mem usage=7.72 GB.",
            "[2026-11-30 10:00:16 TP0] Load weight end. elapsed=7.10 s, type=Q, avail mem=70.96 GB, mem usage=7.72 GB.",
            "[2026-11-30 10:00:25 TP1] Capture cuda graph end. Time elapsed: 7.31 s. mem usage=0.62 GB. avail mem=9.66 GB.",
            "[2026-11-30 10:00:25 TP0] Capture cuda graph end. Time elapsed: 7.38 s. mem usage=0.62 GB. avail mem=9.66 GB.",
        ]
    )
    one_rank = startup_durations(ranks, {1: 100.0})
    assert (one_rank["weight_load_s"], one_rank["graph_capture_s"]) == (7.1, 7.38)  # TP0's, not summed
    assert (
        args_mismatch(
            {"node_rank": 0, "tp_size": 2, "random_seed": 1}, {"node_rank": 1, "tp_size": 2, "random_seed": 2}
        )
        == {}
    )
    assert args_mismatch({"tp_size": 2}, {"tp_size": 1}) == {"tp_size": (2, 1)}


# --- flag list from --help -------------------------------------------------------------------

HELP = """usage: sglang serve [-h] --model-path MODEL_PATH [--tp-size TP]

options:
  -h, --help            show this help message and exit
  --model-path MODEL_PATH, --model MODEL_PATH
                        The path of the model weights.
  --tensor-parallel-size TENSOR_PARALLEL_SIZE, --tp-size TENSOR_PARALLEL_SIZE
                        The tensor parallelism size.
  --cuda-graph-bs CUDA_GRAPH_BS [CUDA_GRAPH_BS ...]
  --lora-paths [LORA_PATHS ...]
  --dtype {auto,half}   Data type.
  --enable-metrics      Enable metrics.
  --experts-shared-outer-loras, --no-experts-shared-outer-loras
  --brand-new-flag [BRAND_NEW_FLAG]
"""


def test_help_output_becomes_specs_with_bundled_types() -> None:
    specs = merge_with_bundled(parse_help(HELP), CATALOG)
    by_name = {spec.name: spec for spec in specs}
    assert (
        by_name["--tp-size"].aliases == ("--tensor-parallel-size",)
        and by_name["--tp-size"].field == "tp_size"
    )
    assert by_name["--cuda-graph-bs"].nargs == "+" and by_name["--cuda-graph-bs"].type_name == "int"
    assert by_name["--lora-paths"].nargs == "*"
    assert by_name["--dtype"].choices == ("auto", "half")
    assert not by_name["--enable-metrics"].takes_value
    assert by_name["--no-experts-shared-outer-loras"].negates == "--experts-shared-outer-loras"
    assert by_name["--brand-new-flag"].nargs == "?" and by_name["--brand-new-flag"].field == "brand_new_flag"
    assert "--help" not in by_name


async def test_host_flag_list_is_asked_once_per_version_then_cached(tmp_path: Path) -> None:
    forget_cache()
    node = ScriptedNode("n0", outputs={"sglang-help": HELP.encode()})
    catalog, source = await host_catalog(node, python="/usr/bin/python3", version="9.9.9", cache_dir=tmp_path)
    assert source == "host --help" and "--brand-new-flag" in catalog
    assert (tmp_path / "sglang-9.9.9-help.json").is_file()
    forget_cache()
    again, source = await host_catalog(node, python="/usr/bin/python3", version="9.9.9", cache_dir=tmp_path)
    assert source == "cache" and len(again) == len(catalog)
    assert [name for name, _ in node.calls] == ["sglang-help"]
    fallback, source = await host_catalog(node, python=None, version="0.4.0", cache_dir=None)
    assert fallback.version == "0.5.9"  # the nearest packaged list, named, never a silent 0.5.10
    assert source == "bundled 0.5.9 list, the nearest packaged to SGLang 0.4.0 (fallback)"
    exact, source = await host_catalog(node, python=None, version="0.5.23", cache_dir=None)
    assert exact.version == "0.5.23" and source == "bundled 0.5.23 list (fallback)"


# --- observe end to end, scripted ------------------------------------------------------------


def _journal(rank: int) -> bytes:
    lines = [SERVER_ARGS.format(rank=rank)] + ([CAPACITY, READY] if rank == 0 else [])
    return b"".join(journal_json(line, invocation=INV, at=100.0 + i) for i, line in enumerate(lines))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.upgrade()
    return store


def _two_nodes(monkeypatch: pytest.MonkeyPatch, store: Store) -> tuple[Any, list[ScriptedNode], Any]:
    """Two scripted nodes running INV, node 0's unit and /server_info: (session, nodes, handler)."""
    forget_cache()
    gpu = b"0, NVIDIA GB10, GPU-1, 12.1, 580.95.05, 122573, 100000\n"
    nodes = [
        ScriptedNode(
            f"n{k}",
            k,
            states=[(0, show_text(invocation=INV))],
            outputs={"gpu-query": gpu},
            streams={"journal-invocation": _journal(k)},
        )
        for k in range(2)
    ]
    view = SimpleNamespace(
        state=SimpleNamespace(invocation_id=INV, active_state="active", sub_state="running", n_restarts=0),
        prefix=["/usr/bin/python3", "-m", "sglang.launch_server"],
        flags=FLAGS,
        env={"PYTHONUNBUFFERED": "1"},
        launch=SimpleNamespace(kind="unit"),
        expanded_flags=lambda flags: flags,  # no EnvironmentFile= references
    )

    async def fake_read_unit(node: object) -> SimpleNamespace:
        return view

    monkeypatch.setattr(observe_module, "read_unit", fake_read_unit)
    info = {
        "version": "0.5.10",
        "max_running_requests": 48,
        "max_total_num_tokens": 1833679,
        "internal_states": [{"effective_max_running_requests_per_dp": 26}],
    }

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=info) if request.url.path == "/server_info" else httpx.Response(200)

    target = Target(
        unit="sglang-qwen.service", nodes=[Node(host="n0"), Node(host="n1")], base_url="http://n0:30000"
    )
    astore = AsyncStore(store)

    async def http_base() -> str:  # the configured URL: reached directly
        return target.http_base()

    ts = SimpleNamespace(
        name="twin",
        target=target,
        nodes=nodes,
        node0=nodes[0],
        store=astore,
        unit=target.unit,
        http_base=http_base,
    )
    return ts, nodes, handler


GIVEN_GPUS = [{"index": 0, "name": "GB10 as the preflight read it"}]


@pytest.mark.parametrize(
    ("given", "queried"),
    [
        (None, True),
        ({"n0": GIVEN_GPUS, "n1": GIVEN_GPUS}, False),  # read moments ago: not asked again
        ({"n0": GIVEN_GPUS}, True),  # not every node: asked
        ({"n0": GIVEN_GPUS, "n1": []}, True),  # a node whose query had failed: asked
    ],
)
async def test_observe_stores_a_snapshot_with_parsed_and_effective_side_by_side(
    monkeypatch: pytest.MonkeyPatch,
    store: Store,
    tmp_path: Path,
    given: dict[str, list[dict[str, object]]] | None,
    queried: bool,
) -> None:
    ts, nodes, handler = _two_nodes(monkeypatch, store)
    astore = ts.store
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        obs = await observe_module.observe(ts, client=client, cache_dir=tmp_path, gpus=given)  # type: ignore[arg-type]
    await astore.aclose()
    asked = [any(name == "gpu-query" for name, _ in node.calls) for node in nodes]
    assert asked == [queried, queried]
    assert obs.gpus["n1"][0]["name"] == ("NVIDIA GB10" if queried else GIVEN_GPUS[0]["name"])
    assert obs.healthy and obs.known_good and obs.snapshot_id is not None
    assert obs.effective["max_running_requests"] == 26
    assert obs.capacity["parsed_max_running_requests"] == 48
    assert obs.node_mismatch == {"n1": {}}
    assert "mem_fraction_static" in obs.implied and "random_seed" in obs.derived
    assert obs.startup["ready_s"] == 2.0
    assert obs.flag_list["source"].startswith("bundled 0.5.10")  # the host printed no --help
    assert obs.journal["command"] == f"journalctl _SYSTEMD_INVOCATION_ID={INV} --no-pager -o json --all"
    capacity_table = obs.evidence[0].to_json()
    assert capacity_table["rows"][0] == ["max_running_requests", "48", "26", "26"]
    assert "differs from the parsed 48" in capacity_table["note"]
    snapshot = known_good(store, "twin")
    assert snapshot is not None and snapshot.id == obs.snapshot_id
    assert (
        snapshot.effective["parsed_max_running_requests"] == 48
        and snapshot.effective["max_running_requests"] == 26
    )
    assert snapshot.invocation_id == INV and snapshot.sglang_version == "0.5.10"
    assert json.loads(json.dumps(obs.to_json(), default=str))["healthy"] is True


async def test_observe_records_the_ready_line_the_wait_did_not_stay_for(
    monkeypatch: pytest.MonkeyPatch, store: Store, tmp_path: Path
) -> None:
    """ensure_ready returns at the first ready signal (/health 200) without staying for the
    journal's ready line: observe's own read of the journal records the line's moments."""
    ts, _, handler = _two_nodes(monkeypatch, store)
    readiness = Readiness("ready", "ready", INV, {"n0": INV, "n1": INV}, 1.0, health_ready_at=2.5)
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        obs = await observe_module.observe(ts, client=client, cache_dir=tmp_path, readiness=readiness)  # type: ignore[arg-type]
    await ts.store.aclose()
    written_at = 102.0  # READY is node 0's third journal line (see `_journal`)
    assert readiness.ready_line_at == written_at
    assert readiness.ready_line_seen_at is not None and readiness.ready_line_seen_at > written_at
    assert obs.readiness is not None and obs.readiness["ready_line_at"] == written_at
