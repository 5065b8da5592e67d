"""Run SGLang's own `python -m sglang.bench_serving` on node 0, for teams that trust only it.

Same parameters as flagbot's generator (random-ids dataset with fixed lengths, the level's
concurrency and rate, the seed and warmup), run over SSH through the command table entry
`bench-serving` (`bot/target/privileged.py`: every value typed and validated; the interpreter
and module configurable per target, `[targets.NAME.bench_serving]`). Without a configured
module, the one the host's release has runs (`sglang.benchmark.serving` from 0.5.15,
`bot.sglang.bench_module`): `resolve_command` asks the host's `sglang.__version__` once per
benchmark, and falls back to the target's configured `sglang_version`. Its `--output-file` is a
fresh `/tmp/flagbot-bench-<hex>.jsonl`, read back with `read-bench-output` and removed.

The result is the same `LevelResult` the built-in generator returns: the JSON line's keys
(bench_serving's own names) are the metrics, rows only the printed block has (`Max ITL`) are
added from it via the foundation's parser, `failed` is `num_prompts - completed`, and the errors
of `--output-details` are grouped like the built-in's. Client health is not measured on the
node; the result says so instead of claiming the client was fine.
"""

from __future__ import annotations

import contextlib
import json
import math
import uuid
from collections import Counter
from typing import Any, Protocol, TypeVar

from bot.bench.client_health import ClientHealth
from bot.bench.loadgen import LevelResult, LoadError, LoadSpec
from bot.bench.metrics import group_error
from bot.config.schema import BenchServingCommand
from bot.sglang.bench_module import bench_module_for, release_tuple
from bot.sglang.bench_result import parse_bench_text

__all__ = ["NodeRunner", "bench_serving_params", "parse_remote", "resolve_command", "run_remote"]

DETAIL_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")
ALL_FAILED = "All requests failed"


class RunResult(Protocol):
    @property
    def exit_status(self) -> int: ...
    @property
    def stdout(self) -> bytes: ...
    @property
    def stderr(self) -> bytes: ...


class NodeRunner(Protocol):
    """What `bot.target.ssh.NodeSession` offers: one table command, typed parameters."""

    async def run(
        self,
        command: str,
        /,
        *,
        input: bytes | str | None = None,
        timeout: float | None = None,
        check: bool = True,
        **params: object,
    ) -> RunResult: ...


def bench_serving_params(
    spec: LoadSpec, command: BenchServingCommand, *, base_url: str, output_file: str
) -> dict[str, Any]:
    """The `bench-serving` table parameters for one level (`spec` as the built-in would run it)."""
    if spec.num_requests is None:
        raise LoadError("bench_serving runs a number of prompts, not a duration; set num_requests")
    backend = command.backend or ("sglang-oai-chat" if spec.endpoint == "chat" else "sglang-oai")
    return {
        "python": command.python,
        "bench_module": command.module or bench_module_for(None),
        "bench_backend": backend,
        "base_url": base_url.rstrip("/"),
        "input_len": spec.input_len,
        "output_len": spec.output_len,
        "num_prompts": spec.num_requests,
        "request_rate": "inf" if spec.request_rate is None else spec.request_rate,
        "max_concurrency": spec.concurrency,
        "bench_model": spec.model,
        "bench_tokenizer": command.tokenizer,
        "seed": spec.seed,
        "warmup_requests": spec.warmup_requests,
        "bench_output": output_file,
    }


async def resolve_command(
    node: NodeRunner, command: BenchServingCommand, *, fallback_version: str | None = None
) -> BenchServingCommand:
    """`command` with its module decided: as configured, else the one the host's SGLang has
    (its `sglang.__version__`, asked with the `sglang-version` table entry), else the one
    `fallback_version` (the target's configured `sglang_version`) has."""
    if command.module is not None:
        return command
    version: str | None = None
    try:
        ran = await node.run("sglang-version", check=False, timeout=120, python=command.python)
        lines = ran.stdout.decode("utf-8", "replace").strip().splitlines()
        if ran.exit_status == 0 and lines and release_tuple(lines[-1].strip()) is not None:
            version = lines[-1].strip()
    except Exception:
        version = None
    return command.model_copy(update={"module": bench_module_for(version or fallback_version)})


def _last_json(text: str) -> dict[str, Any] | None:
    """The last JSON line of an appended-to JSONL file (Python's json reads its bare `Infinity`)."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


T = TypeVar("T")


def _scalar(value: T) -> T | str:
    """A JSON-safe value: an infinite float becomes "inf" or "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else str(value)
    return value


def _flat(key: str, value: dict[str, Any]) -> dict[str, Any]:
    """A nested object of the JSON line as flat metrics.

    0.5.23's `sglang.benchmark.serving` nests `cache_report` (its keys are the printed block's,
    kept as they are) and, with `--goodput`, `goodput_slos_ms` and `slo_attainment_by_metric`
    (kept as `<key>_<name>`).
    """
    prefix = "" if key == "cache_report" else f"{key}_"
    return {
        f"{prefix}{sub}": _scalar(item) for sub, item in value.items() if not isinstance(item, dict | list)
    }


def parse_remote(stdout: str, jsonl: str, *, num_prompts: int) -> dict[str, Any]:
    """bench_serving's JSON line and printed block as one metrics dict (JSON line first)."""
    line = _last_json(jsonl)
    blocks = parse_bench_text(stdout)
    printed = blocks[-1].values if blocks else {}
    if line is None and not printed:
        raise LoadError("bench_serving wrote no JSON line and printed no result block")
    metrics: dict[str, Any] = {}
    for key, value in (line or {}).items():
        if key in DETAIL_KEYS or key == "server_info":
            continue
        if isinstance(value, dict):
            metrics.update(_flat(key, value))
        else:
            metrics[key] = _scalar(value)
    for key, value in printed.items():
        metrics.setdefault(key, _scalar(value))
    completed = int(metrics.get("completed") or 0)
    metrics["failed"] = max(0, num_prompts - completed)
    errors = [e for e in (line or {}).get("errors") or [] if isinstance(e, str) and e]
    metrics["errors"] = dict(Counter(group_error(e) for e in errors).most_common())
    if metrics["failed"] and not errors:
        metrics["errors"] = {
            "failed (bench_serving lists errors only with --output-details)": metrics["failed"]
        }
    metrics["output_tokens_source"] = "usage"
    return metrics


def _all_failed(spec: LoadSpec, stderr: str) -> dict[str, Any]:
    """bench_serving crashes after warning when nothing succeeded: report that as a result."""
    count = spec.num_requests or 0
    return {
        "backend": "bench_serving",
        "max_concurrency": spec.concurrency,
        "request_rate": "inf" if spec.request_rate is None else spec.request_rate,
        "completed": 0,
        "failed": count,
        "errors": {group_error(stderr): count},
    }


async def run_remote(
    node: NodeRunner,
    spec: LoadSpec,
    *,
    command: BenchServingCommand,
    base_url: str,
    timeout_s: float | None = None,
) -> LevelResult:
    """One level through bench_serving on `node` (node 0 of the target)."""
    output = f"/tmp/flagbot-bench-{uuid.uuid4().hex}.jsonl"  # noqa: S108 - fixed, validated place
    params = bench_serving_params(spec, command, base_url=base_url, output_file=output)
    limit = timeout_s if timeout_s is not None else spec.level_timeout_s
    try:
        ran = await node.run("bench-serving", timeout=limit, check=False, **params)
        stdout = ran.stdout.decode("utf-8", "replace")
        stderr = ran.stderr.decode("utf-8", "replace")
        if ran.exit_status != 0:
            if ALL_FAILED in stderr + stdout:
                return _level(spec, _all_failed(spec, stderr))
            tail = "\n".join(stderr.strip().splitlines()[-5:]) or stdout.strip()[-500:]
            raise LoadError(f"bench_serving exited {ran.exit_status}: {tail}")
        read = await node.run("read-bench-output", check=False, bench_output=output)
        jsonl = read.stdout.decode("utf-8", "replace") if read.exit_status == 0 else ""
    finally:
        with contextlib.suppress(Exception):  # cleanup must not hide the run's own error
            await node.run("remove-bench-output", check=False, bench_output=output)
    return _level(spec, parse_remote(stdout, jsonl, num_prompts=spec.num_requests or 0))


def _level(spec: LoadSpec, metrics: dict[str, Any]) -> LevelResult:
    health = ClientHealth(
        False,
        warnings=["client health not measured: bench_serving ran on node 0"],
        figures={"client": "bench_serving"},
    )
    return LevelResult(spec, metrics, health, [], spec.input_len, source="bench_serving")
