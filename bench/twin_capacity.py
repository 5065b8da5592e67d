"""How many concurrent streams (and SSE events/s) the SGLang twin serves while keeping time.

Starts the twin as a node would (`/usr/bin/python3 -m sglang.launch_server`, from a temp
install), on CPU 0, with a scenario whose decode speed is flat per stream (`--rate` tok/s at
every batch size, so events/s = streams x rate) and with per-token truth traces on
(`SGLANG_TWIN_TRUTH_TRACE=1`). A lean aiohttp client runs in a separate process on CPU 1 and
drives increasing concurrency, each stream a chat completion of `--tokens` tokens with
`ignore_eos`, back to back. Stream starts are staggered over one request's duration, so the
load is a steady state (all streams started in the same instant would keep every token due at
the same instant forever, with zero noise); counting covers `--seconds` after that ramp. Per level it prints: streams, tokens/s
and events/s delivered to the client, the twin's CPU%, the client's CPU%, and the pacing error
from the truth file:

* per decode token: |actual - scheduled emission time| / scheduled gap to the previous token
  (p50 and p99 over every token but the first of each request; the first token's lateness is
  reported in milliseconds, since its "gap" is the TTFT);
* per request: |actual - scheduled decode duration| / scheduled decode duration, i.e. the
  error a benchmark client would see in TPOT (p50 and p99 over requests).

It stops at the first level whose p99 TPOT error or p50 per-token error exceeds `--threshold`
(2%), or whose delivered tokens/s falls 5% short of what was scheduled, and prints the last
good level. Prints figures; not a test.

    .venv/bin/python bench/twin_capacity.py [--rate 50] [--tokens 100] [--seconds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"
TICKS = os.sysconf("SC_CLK_TCK")


def scenario(rate: float) -> dict[str, Any]:
    """Flat per-stream speed: the aggregate grows linearly with the batch, up to 8192 streams."""
    return {
        "name": "bench-capacity",
        "gpu": {"name": "NVIDIA Bench", "compute_capability": "9.0", "memory_gib": 80, "gpus_per_node": 1,
                "cuda_version": "12.8"},
        "nodes": 1,
        "model": {"path": "/models/bench", "architecture": "LlamaForCausalLM", "model_type": "llama",
                  "weight_gib": 2.0, "num_layers": 2, "num_kv_heads": 1, "head_dim": 64, "context_length": 4096},
        "launch": ["--model-path", "/models/bench"],
        "timings": {"startup_scale": 0.01, "decode_scale": 100.0 / rate, "warmup_s": 10.0},
        "throughput": {"single_stream_tok_s": 100.0, "aggregate_curve": [[8192, 100.0 * 8192]],
                       "prefill_tok_s": 1_000_000.0},
        "noise": {"seed": 1},
    }  # fmt: skip


def install(root: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "lab/flagbot_lab/twin/engine", root / "sglang_twin", ignore=ignore)
    shutil.copytree(ROOT / "lab/flagbot_lab/twin/shim/sglang", root / "sglang", ignore=ignore)
    shutil.copy(ROOT / "bot/sglang/data/sglang-0.5.10-flags.json", root / "sglang_twin/flags.json")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"twin exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise SystemExit("twin not ready in time")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pacing(records: list[dict[str, Any]]) -> dict[str, float]:
    """Per-token and per-request (TPOT) pacing errors from the truth traces."""
    token_err: list[float] = []
    tpot_err: list[float] = []
    late_ms: list[float] = []
    first_late_ms: list[float] = []
    for rec in records:
        trace = rec.get("trace")
        if not trace or not trace["sched_us"]:
            continue
        sched, late = trace["sched_us"], trace["late_us"]
        first_late_ms.append(late[0] / 1000)
        for i in range(1, len(sched)):
            gap = max(1, sched[i] - sched[i - 1])
            token_err.append(abs(late[i]) / gap)
            late_ms.append(late[i] / 1000)
        if len(sched) > 1:
            span = sched[-1] - sched[0]
            actual = (sched[-1] + late[-1]) - (sched[0] + late[0])
            tpot_err.append(abs(actual - span) / span)
    return {
        "tok_p50": percentile(token_err, 0.5),
        "tok_p99": percentile(token_err, 0.99),
        "tpot_p50": percentile(tpot_err, 0.5),
        "tpot_p99": percentile(tpot_err, 0.99),
        "late_p50_ms": percentile(late_ms, 0.5),
        "late_p99_ms": percentile(late_ms, 0.99),
        "first_late_p99_ms": percentile(first_late_ms, 0.99),
        "tokens": float(len(token_err)),
    }


# -- the client (a separate process) ---------------------------------------------------------


async def client(url: str, streams: int, seconds: float, tokens: int, rate: float) -> dict[str, Any]:
    """Stream starts are staggered over one request's duration (a steady state, not one
    synchronised burst per token); counting covers `seconds` after that ramp."""
    import aiohttp

    body = {"model": "bench", "messages": [{"role": "user", "content": "Count."}], "max_tokens": tokens,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    totals: dict[str, float] = {"events": 0, "tokens": 0, "requests": 0, "errors": 0}
    loop = asyncio.get_running_loop()
    ramp = tokens / rate
    start = loop.time()
    w0, w1 = start + ramp, start + ramp + seconds

    async def worker(session: aiohttp.ClientSession, index: int) -> None:
        await asyncio.sleep(ramp * index / streams)
        while loop.time() < w1:
            try:
                async with session.post(url, data=payload, headers=headers) as r:
                    async for chunk in r.content.iter_any():
                        if w0 <= loop.time() < w1:
                            totals["events"] += chunk.count(b"\n\n")
                            totals["tokens"] += chunk.count(b'"content":"') - chunk.count(b'"content":""')
                    totals["requests"] += 1
                    if r.status != 200:
                        totals["errors"] += 1
            except aiohttp.ClientError:
                totals["errors"] += 1

    connector = aiohttp.TCPConnector(limit=0)
    cpu0 = time.process_time()
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None)
    ) as session:
        await asyncio.gather(*(worker(session, i) for i in range(streams)))
    totals["wall"] = seconds
    totals["cpu"] = (time.process_time() - cpu0) / (loop.time() - start)
    return totals


def run_client(url: str, streams: int, seconds: float, tokens: int, rate: float, cpu: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--client", url, str(streams), str(seconds), str(tokens), str(rate)]
    out = subprocess.run(
        ["taskset", "-c", str(cpu), *cmd] if shutil.which("taskset") else cmd,
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 2 * tokens / rate + 120,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# -- the driver ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="tok/s of every stream")
    parser.add_argument("--tokens", type=int, default=100, help="output tokens per request")
    parser.add_argument("--seconds", type=float, default=6.0, help="duration of each level")
    parser.add_argument("--levels", default="16,32,64,128,256,384,512,768,1024,1536,2048")
    parser.add_argument("--threshold", type=float, default=0.02)
    parser.add_argument("--port", type=int, default=31977)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="twin-capacity-"))
    install(tmp / "root")
    (tmp / "scenario.json").write_text(json.dumps(scenario(args.rate)))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(tmp / "root"),
        "SGLANG_TWIN_SCENARIO": str(tmp / "scenario.json"),
        "SGLANG_TWIN_TRUTH_DIR": str(tmp / "truth"),
        "SGLANG_TWIN_RUN_DIR": str(tmp / "run"),
        "SGLANG_TWIN_TRUTH_TRACE": "1",
    }
    flags = ["--model-path", "/models/bench", "--port", str(args.port), "--max-running-requests", "8192"]
    cmd = [PYTHON, "-m", "sglang.launch_server", *flags]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]
    log = open(tmp / "twin.log", "wb")  # noqa: SIM115 - closed in finally
    twin = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{args.port}"
    truth = tmp / "truth" / "truth.jsonl"
    load = os.getloadavg()[0]
    print(
        f"load average before the run: {load:.2f}"
        + ("  (other processes share these 2 cores: figures are pessimistic)" if load > 0.5 else "")
    )
    print(f"twin pid {twin.pid} on CPU 0, client on CPU 1; {args.rate:g} tok/s per stream, "
          f"{args.tokens} tokens per request, {args.seconds:g} s per level; temp {tmp}")  # fmt: skip
    header = (f"{'streams':>7} {'tok/s':>8} {'events/s':>8} {'twin CPU':>8} {'client CPU':>10} "
              f"{'tok err p50':>11} {'tok err p99':>11} {'TPOT err p50':>12} {'TPOT err p99':>12} {'late p99':>9} "
              f"{'TTFT late p99':>13}")  # fmt: skip
    last_good: tuple[int, float, float] | None = None
    try:
        wait_ready(url, twin)
        print(header)
        offset = truth.stat().st_size if truth.exists() else 0
        for streams in (int(x) for x in args.levels.split(",")):
            cpu0, t0 = cpu_seconds(twin.pid), time.monotonic()
            res = run_client(
                url + "/v1/chat/completions", streams, args.seconds, args.tokens, args.rate, cpu=1
            )
            twin_cpu = (cpu_seconds(twin.pid) - cpu0) / (time.monotonic() - t0)
            time.sleep(1.3)  # the truth file is flushed once a second
            with open(truth, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
            offset += len(data)
            records = [json.loads(line) for line in data.splitlines() if line]
            pace = pacing(
                [r for r in records if r.get("kind") == "request" and r.get("outcome") != "aborted"]
            )
            tok_s = res["tokens"] / res["wall"]
            ev_s = res["events"] / res["wall"]
            expected = streams * args.rate  # every stream busy back to back at its rate
            print(f"{streams:>7} {tok_s:>8.0f} {ev_s:>8.0f} {twin_cpu:>7.0%} {res['cpu']:>10.0%} "
                  f"{pace['tok_p50']:>11.2%} {pace['tok_p99']:>11.2%} {pace['tpot_p50']:>12.2%} "
                  f"{pace['tpot_p99']:>12.2%} {pace['late_p99_ms']:>7.2f}ms {pace['first_late_p99_ms']:>11.2f}ms",
                  flush=True)  # fmt: skip
            bad = (
                pace["tpot_p99"] > args.threshold
                or pace["tok_p50"] > args.threshold
                or tok_s < 0.95 * expected
                or res["errors"] > 0
            )
            if bad:
                why = "errors" if res["errors"] else "pacing error or delivered rate beyond the threshold"
                print(
                    f"stopped at {streams} streams ({why}; delivered {tok_s / expected:.1%} of the scheduled rate)"
                )
                break
            last_good = (streams, tok_s, ev_s)
    finally:
        os.killpg(twin.pid, signal.SIGTERM)
        try:
            twin.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(twin.pid, signal.SIGKILL)
            twin.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if last_good is None:
        print("no level kept its pacing error under the threshold")
    else:
        streams, tok_s, ev_s = last_good
        print(f"last good level: {streams} concurrent streams, {tok_s:.0f} tok/s, {ev_s:.0f} events/s "
              f"(pacing error under {args.threshold:.0%})")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        _, _, url, streams, seconds, tokens, rate = sys.argv
        print(json.dumps(asyncio.run(client(url, int(streams), float(seconds), int(tokens), float(rate)))))
    else:
        main()
