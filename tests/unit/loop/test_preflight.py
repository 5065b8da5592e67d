"""Preflight against fake nodes over real SSH: refusals, gating, implied flags, dry run, downtime, diff."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio

from bot.loop.knowledge import KnowledgeBase
from bot.loop.preflight import preflight
from bot.sglang.change import Change
from bot.store import AsyncStore, Store
from bot.store.models import Snapshot
from bot.target.flaglist import forget_cache, remembered_version
from bot.target.session import TargetSession
from bot.target.table_match import identify
from tests.support.fake_node import VENDOR_TEXT, FakeNode, FakeSystemd, Keys
from tests.support.host_flags import host_help
from tests.unit.loop.kb_support import Obs
from tests.unit.target.conftest import make_target

AR = "--enable-flashinfer-allreduce-fusion"
MOE = "--enable-fused-moe-sum-all-reduce"
SPEC = "--speculative-algorithm"


def resolve(argv: list[str]) -> tuple[int, bytes, bytes]:
    """A stand-in for SGLang's prepare_server_args: a few fields and the speculative adjustments."""
    if "--enable-dp-attention" in argv:
        return (
            2,
            b"",
            b"usage: sglang serve ...\nsglang serve: error: argument --dp-size: expected one argument\n",
        )
    args: dict[str, object] = {
        "model_path": argv[argv.index("--model-path") + 1],
        "tp_size": int(argv[argv.index("--tp") + 1]),
        "max_running_requests": None,
        "mem_fraction_static": 0.85,
        "random_seed": len(argv),
        "disable_piecewise_cuda_graph": False,
        "enable_flashinfer_allreduce_fusion": AR in argv,
        "enable_fused_moe_sum_all_reduce": MOE in argv,
    }
    warnings = b""
    if SPEC in argv:
        args |= {
            "max_running_requests": 48,
            "disable_piecewise_cuda_graph": True,
            "speculative_algorithm": "EAGLE",
        }
        warnings = b"Max running requests is reset to 48 for speculative decoding.\n"
    line = "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")\n"
    return 0, line.encode(), warnings


@dataclass
class GpuNode(FakeNode):
    """A fake node that also answers nvidia-smi, SGLang's version and the dry run."""

    capability: str = "12.1"
    dry_runs: list[list[str]] = field(default_factory=list)

    def run(self, name: str, params: dict[str, object], stdin: bytes) -> tuple[int, bytes, bytes]:
        if name == "gpu-query":
            gpu = f"0, NVIDIA GB10, GPU-{self.systemd.rank}, {self.capability}, 580.95.05, 122573, 3891\n"
            return 0, gpu.encode(), b""
        if name in ("sglang-version", "container-sglang-version"):
            return 0, b"0.5.10\n", b""
        if name in ("sglang-help", "container-sglang-help"):
            return 1, b"", b"no --help on this fake\n"
        if name in ("sglang-dry-run", "container-sglang-dry-run"):
            argv = [str(word) for word in params["argv"]]  # type: ignore[attr-defined]
            self.dry_runs.append(argv)
            return resolve(argv)
        return super().run(name, params, stdin)


@dataclass
class Bed:
    nodes: list[GpuNode]
    ts: TargetSession
    store: AsyncStore

    @property
    def received(self) -> list[str]:
        return [text for node in self.nodes for text in node.received]


@pytest_asyncio.fixture
async def bed(tmp_path: Path) -> AsyncIterator[Bed]:
    forget_cache()
    keys = Keys.make(tmp_path, 2)
    nodes = [GpuNode(FakeSystemd(rank=k)) for k in range(2)]
    for node, key in zip(nodes, keys.host_keys, strict=True):
        await node.start(key, keys.client_public)
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    store = AsyncStore(sync)
    ts = TargetSession.build("fake", make_target(keys, [n.port for n in nodes]), store=store)
    try:
        yield Bed(nodes, ts, store)
    finally:
        await ts.close()
        await store.aclose()
        for node in nodes:
            await node.stop()
        forget_cache()


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return KnowledgeBase.load()


async def test_the_seeds_change_gates_allreduce_fusion_and_shows_the_drop_in(
    bed: Bed, kb: KnowledgeBase
) -> None:
    changes = [Change("add", AR), Change("add", MOE)]
    seen = [Obs(MOE, "effect", "max_running_requests fell 48 -> 26"), Obs(AR, "note", "other flag")]
    report = await preflight(
        bed.ts, changes=changes[1:], kb=kb, observations=seen, cache_dir=None, dry_run=False
    )
    assert [(w.text, w.source) for w in report.warnings] == [
        (f"{MOE}: max_running_requests fell 48 -> 26", "observed on twin [effect]")
    ]
    report = await preflight(bed.ts, changes=changes, kb=kb, observations=[], cache_dir=None)
    assert report.ok, report.refused
    assert report.compute_capability == "12.1" and report.sglang_version == "0.5.10"
    assert [gate.flag for gate in report.gates] == [AR]
    gate_warning = next(
        w for w in report.warnings if w.text.startswith(f"{AR} needs compute capability 9.x or 10.x")
    )
    assert "probably a no-op here" in gate_warning.text and "communicator.py" in gate_warning.source
    assert report.new_flags is not None and report.new_flags.argv()[-2:] == [AR, MOE]
    assert (
        "+ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /models/qwen" in report.dropin_diff
    )
    assert f"--node-rank 0 --port 30000 {AR} {MOE}" in report.dropin_diff
    assert report.dry_run is not None and report.dry_run.ok
    assert report.implied_changes == {}  # the fake's post-init changes nothing else for these flags
    assert [run[-2:] == [AR, MOE] for run in bed.nodes[0].dry_runs].count(True) == 1
    assert len(bed.nodes[0].dry_runs) == 2 and bed.nodes[1].dry_runs == []  # the new and the current flags
    assert report.downtime_s is None
    titles = [block.title for block in report.evidence()]
    assert titles == [
        "Preflight warnings",
        "Downtime",
        "Drop-in change on 127.0.0.1:" + str(bed.nodes[0].port),
    ]
    assert report.to_json()["gates"][0]["flag"] == AR
    # flagbot ran only table commands, none of them privileged
    assert all(identify(text, unit="sglang-qwen.service") for text in bed.received)
    assert not any(text.startswith("sudo") for text in bed.received)


async def test_an_unknown_flag_is_refused_with_the_closest_names_before_any_dry_run(
    bed: Bed, kb: KnowledgeBase
) -> None:
    report = await preflight(
        bed.ts,
        changes=[Change("add", "--enable-fused-moe-sum-allreduce")],
        kb=kb,
        observations=[],
        cache_dir=None,
    )
    assert report.refused is not None
    assert "unknown flag --enable-fused-moe-sum-allreduce for SGLang 0.5.10; did you mean" in report.refused
    assert MOE in report.refused
    assert bed.nodes[0].dry_runs == [] and report.new_flags is None
    assert report.evidence()[0].title == "Preflight: refused"


async def test_a_conflicting_change_is_refused(bed: Bed, kb: KnowledgeBase) -> None:
    report = await preflight(
        bed.ts, changes=[Change("add", "--port", "1")], kb=kb, observations=[], cache_dir=None
    )
    assert report.refused is not None and "already present" in report.refused


async def test_what_sglang_argparse_refuses_is_refused(bed: Bed, kb: KnowledgeBase) -> None:
    report = await preflight(
        bed.ts, changes=[Change("add", "--enable-dp-attention")], kb=kb, observations=[], cache_dir=None
    )
    assert report.refused is not None
    assert report.refused.endswith("sglang serve: error: argument --dp-size: expected one argument")
    assert "it would exit 2" in report.refused


async def test_implied_flags_from_the_knowledge_base_and_the_dry_run(bed: Bed, kb: KnowledgeBase) -> None:
    report = await preflight(
        bed.ts, changes=[Change("add", SPEC, "EAGLE")], kb=kb, observations=[], cache_dir=None
    )
    assert report.ok
    predicted = {item.field: item.value for item in report.predicted}
    assert predicted["max_running_requests"] == 48 and predicted["disable_piecewise_cuda_graph"] is True
    assert report.implied_changes == {
        "disable_piecewise_cuda_graph": {"before": False, "after": True},
        "max_running_requests": {"before": None, "after": 48},
    }
    assert "random_seed" not in report.implied_changes
    assert any(w.source.startswith("SGLang's post-init") and "reset to 48" in w.text for w in report.warnings)
    table = next(block for block in report.evidence() if block.title == "Predicted implied flags")
    sources = {row[3] for row in table.rows}  # type: ignore[union-attr]
    assert "dry run on the host" in sources and any(
        s.startswith("knowledge base: python/sglang/srt/server_args.py") for s in sources
    )


async def test_downtime_is_the_median_of_stored_starts_and_dry_run_can_be_skipped(
    bed: Bed, kb: KnowledgeBase
) -> None:
    for seconds in (80.0, 100.0, None, 90.0):
        await bed.store.run(bed.store.store.add, Snapshot(target="fake", startup_seconds=seconds))
    await bed.store.run(bed.store.store.add, Snapshot(target="other", startup_seconds=5.0))
    report = await preflight(
        bed.ts, changes=[Change("add", MOE)], kb=kb, observations=[], cache_dir=None, dry_run=False
    )
    assert (report.downtime_s, report.downtime_starts) == (90.0, 3)
    assert report.dry_run is None and bed.nodes[0].dry_runs == []
    assert "about 90 s (median of the last 3 starts)" in report.evidence()[-2].text  # type: ignore[union-attr]


@dataclass
class DroppedFlagNode(GpuNode):
    """A node whose SGLang (the twin's help: 0.5.10's list) lacks a flag its unit still carries."""

    def run(self, name: str, params: dict[str, object], stdin: bytes) -> tuple[int, bytes, bytes]:
        if name == "sglang-help":
            return 0, host_help(aliases={}).encode(), b""
        return super().run(name, params, stdin)


async def test_a_flag_the_hosts_list_dropped_is_removed_from_the_unit(
    tmp_path: Path, kb: KnowledgeBase
) -> None:
    """`--disable-hicache-numa-detect` is 0.5.9's; a unit written for 0.5.9 on a 0.5.10 host keeps it
    until it is removed, and removing it must work although neither list knows it."""
    forget_cache()
    unit = (
        VENDOR_TEXT.format(rank=0)
        .replace("    --nnodes 2 \\\n    --node-rank 0 \\\n", "")
        .replace("--port 30000", "--port 30000 \\\n    --disable-hicache-numa-detect")
    )
    keys = Keys.make(tmp_path, 1)
    node = DroppedFlagNode(FakeSystemd(files={"/etc/systemd/system/sglang-qwen.service": unit}))
    await node.start(keys.host_keys[0], keys.client_public)
    ts = TargetSession.build("fake", make_target(keys, [node.port]))
    try:
        gone = Change("remove", "--disable-hicache-numa-detect", written="--disable-hicache-numa-detect")
        report = await preflight(ts, changes=[gone], kb=kb, observations=[], cache_dir=tmp_path)
        absent = await preflight(
            ts, changes=[Change("remove", "--no-such-flag")], kb=kb, observations=[], cache_dir=tmp_path
        )
    finally:
        await ts.close()
        await node.stop()
        forget_cache()
    assert report.refused is None, report.refused
    assert report.flag_list["source"] == "host --help"
    assert report.new_flags is not None
    assert "--disable-hicache-numa-detect" not in report.new_flags.argv()
    assert node.dry_runs and "--disable-hicache-numa-detect" not in node.dry_runs[0]
    assert absent.refused == "remove --no-such-flag: not in the current flags"
    # the preflight read the host's version and list: the next command is judged by them
    assert remembered_version(tmp_path, "fake", ts.target) == "0.5.10"


DOCKER_UNIT = (
    "[Service]\nExecStart=/usr/bin/docker run --rm --gpus all --network host -e NCCL_DEBUG=WARN "
    "lmsysorg/sglang:v0.5.10 python3 -m sglang.launch_server --model-path /models/qwen --tp 2 "
    "--nnodes 2 --node-rank {rank} --port 30000\n"
)


async def test_a_docker_unit_is_asked_through_its_image_and_env_set_edits_the_e_options(
    bed: Bed, kb: KnowledgeBase
) -> None:
    for node in bed.nodes:
        node.systemd.files[node.systemd.vendor] = DOCKER_UNIT.format(rank=node.systemd.rank)
        node.systemd.reload()
    changes = [Change("add", MOE), Change("env-set", env_name="NCCL_DEBUG", env_value="INFO")]
    report = await preflight(bed.ts, changes=changes, kb=kb, observations=[], cache_dir=None)
    assert report.ok, report.refused
    assert report.sglang_version == "0.5.10" and report.env == {"NCCL_DEBUG": "INFO"}
    assert report.dry_run is not None and report.dry_run.ok and bed.nodes[0].dry_runs[0][-1] == MOE
    asked = [text for text in bed.received if " run --rm --pull never --network none " in text]
    assert {text.split(" --entrypoint ")[0] for text in asked} == {
        "env /usr/bin/docker run --rm --pull never --network none",
        "env /usr/bin/docker run --rm --pull never --network none --gpus all",  # the dry run
    }
    assert all("lmsysorg/sglang:v0.5.10" in text for text in asked)
    assert not any(text.startswith("sudo") and "docker" in text for text in bed.received)
    assert (
        "+ExecStart=/usr/bin/docker run -e NCCL_DEBUG=INFO --rm --gpus all --network host "
        "lmsysorg/sglang:v0.5.10 python3 -m sglang.launch_server" in report.dropin_diff
    )
    assert "Environment=" not in report.dropin_diff


async def test_a_node_rank_from_an_environment_file_is_expanded_for_the_dry_run_only(
    bed: Bed, kb: KnowledgeBase
) -> None:
    for node in bed.nodes:
        node.systemd.files[node.systemd.vendor] = VENDOR_TEXT.format(rank="${NODE_RANK}").replace(
            "[Service]\n", "[Service]\nEnvironmentFile=/etc/sglang/node.env\n"
        )
        node.systemd.environment_files = {"/etc/sglang/node.env": f"NODE_RANK={node.systemd.rank}\n"}
        node.systemd.reload()
    report = await preflight(bed.ts, changes=[Change("add", MOE)], kb=kb, observations=[], cache_dir=None)
    assert report.ok, report.refused
    assert all(run[run.index("--node-rank") + 1] == "0" for run in bed.nodes[0].dry_runs)
    assert "--node-rank ${NODE_RANK} --port 30000 " + MOE in report.dropin_diff
