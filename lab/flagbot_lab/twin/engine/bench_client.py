"""The twin's benchmark client: what `python -m sglang.bench_serving` (and, from 0.5.15,
`python -m sglang.benchmark.serving`) runs on a twin node, a stand-in for SGLang's client.

On a node this is `sglang_twin.bench_client`; the `sglang` shim's `bench_serving` and
`benchmark/serving` modules (those the scenario's release has, `install.py`) call `main()`.

A test node has only Debian's python3, so this is standard library only. It is not a model of
bench_serving but a small real client: it sends its requests to the server named by
`--base-url` (the twin), streams them, measures them with bench_serving's definitions
(`calculate_metrics`: TTFT to the first non-empty text, ITL per chunk, TPOT =
(latency - TTFT) / (output_len - 1), output tokens from the server's `usage`), and prints the
result block and appends the `--output-file` JSON line in 0.5.10's exact formats and key order
(flagbot reference §5.2-5.3), so flagbot's remote runner meets what it meets on a GPU host.

Differences from the real client: prompts are words instead of decoded random token ids (the
twin counts one token per word), the "retokenized" count is a word count, and Poisson gaps come
from Python's `random` rather than numpy's. Only the OpenAI backends and `sglang` (`/generate`)
are served, and only the `random-ids` and `random` datasets (both generated locally).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import time
import traceback
import urllib.parse
import warnings
from dataclasses import dataclass, field
from typing import Any

WORDS = "the and for are but not you all any can had her was one our out day get has him his how".split()  # noqa: SIM905
OAI = {"sglang-oai": "/v1/completions", "vllm": "/v1/completions"}
CHAT = {"sglang-oai-chat": "/v1/chat/completions", "vllm-chat": "/v1/chat/completions"}


@dataclass
class Output:
    success: bool = False
    latency: float = 0.0
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    output_len: int = 0
    prompt_len: int = 0
    generated_text: str = ""
    error: str = ""
    times: list[float] = field(default_factory=list)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Benchmark the online serving throughput.")
    p.add_argument("--backend", default="sglang", choices=["sglang", *OAI, *CHAT])
    p.add_argument("--base-url", default=None)
    p.add_argument("--host", default="0.0.0.0")  # noqa: S104 - the real default
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--dataset-name", default="sharegpt", choices=["sharegpt", "random", "random-ids"])
    p.add_argument("--dataset-path", default="")
    p.add_argument("--model", default=None)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--sharegpt-output-len", type=int, default=None)
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=1024)
    p.add_argument("--random-range-ratio", type=float, default=0.0)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--output-file", default=None)
    p.add_argument("--output-details", action="store_true")
    p.add_argument("--disable-tqdm", action="store_true")
    p.add_argument("--disable-stream", action="store_true")
    p.add_argument("--disable-ignore-eos", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tag", default=None)
    p.add_argument("--warmup-requests", type=int, default=1)
    p.add_argument("--ready-check-timeout-sec", type=int, default=60)
    p.add_argument("--extra-request-body", default=None)
    return p.parse_args(argv)


# --- a minimal streaming HTTP/1.1 client -------------------------------------------------------


async def http(method: str, url: str, body: bytes | None = None) -> tuple[int, asyncio.StreamReader, bool]:
    """Send one request on a new connection (bench_serving opens a session per request)."""
    parts = urllib.parse.urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
    head = f"{method} {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    writer.write(head.encode() + b"\r\n" + (body or b""))
    status = int((await reader.readline()).split()[1])
    chunked = False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        chunked |= name.strip().lower() == "transfer-encoding" and "chunked" in value.lower()
    return status, reader, chunked


async def chunks(reader: asyncio.StreamReader, chunked: bool) -> Any:
    """The body as it arrives: chunk by chunk (chunked encoding) or read by read."""
    if not chunked:
        while data := await reader.read(65536):
            yield data
        return
    while True:
        size = int((await reader.readline()).split(b";")[0], 16)
        if size == 0:
            return
        yield await reader.readexactly(size)
        await reader.readexactly(2)


async def get_json(url: str) -> Any:
    status, reader, chunked = await http("GET", url)
    body = b"".join([part async for part in chunks(reader, chunked)])
    if status != 200:
        raise OSError(f"HTTP {status}")
    return json.loads(body)


# --- one request ------------------------------------------------------------------------------


def request_body(args: argparse.Namespace, prompt: str, output_len: int) -> tuple[str, dict[str, Any]]:
    sampling: dict[str, Any] = {"temperature": 0.0, "ignore_eos": not args.disable_ignore_eos}
    if args.backend == "sglang":
        params = {**sampling, "max_new_tokens": output_len}
        return "/generate", {"text": prompt, "sampling_params": params, "stream": not args.disable_stream}
    body: dict[str, Any] = {
        "model": args.model,
        "max_tokens": output_len,
        "stream": not args.disable_stream,
        "stream_options": {"include_usage": True},
        **sampling,
    }
    if args.backend in CHAT:
        body["messages"] = [{"role": "user", "content": prompt}]
        return CHAT[args.backend], body
    body["prompt"] = prompt
    return OAI[args.backend], body


async def send(args: argparse.Namespace, base: str, prompt: str, prompt_len: int, output_len: int) -> Output:
    path, body = request_body(args, prompt, output_len)
    if args.extra_request_body:
        body.update(json.loads(args.extra_request_body))
    out = Output(prompt_len=prompt_len)
    st = time.perf_counter()
    most_recent = st
    try:
        status, reader, chunked = await http("POST", base + path, json.dumps(body).encode())
        if status != 200:
            text = b"".join([part async for part in chunks(reader, chunked)]).decode(errors="replace")
            out.error = f"HTTP {status}: {text}"
            return out
        buffer = b""
        async for data in chunks(reader, chunked):
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                line = raw.strip().removeprefix(b"data: ").removeprefix(b"data:")
                if not line or line == b"[DONE]":
                    continue
                now = time.perf_counter()
                event = json.loads(line)
                text = event_text(args.backend, event, out)
                if text:
                    if not out.generated_text and out.ttft == 0.0:
                        out.ttft = now - st
                    else:
                        out.itl.append(now - most_recent)
                    most_recent = now
                    out.times.append(now)
                    out.generated_text += text
        out.latency = time.perf_counter() - st
        out.output_len = out.output_len or len(out.generated_text.split())
        out.success = True
    except Exception:
        out.error = "".join(traceback.format_exception(*sys.exc_info()))
    return out


def event_text(backend: str, event: dict[str, Any], out: Output) -> str:
    """The new text of one event; raises KeyError on an event without choices, as 0.5.10 does."""
    if backend == "sglang":
        out.output_len = int(event["meta_info"]["completion_tokens"])
        return str(event["text"])[len(out.generated_text) :]
    if event.get("usage"):
        out.output_len = int(event["usage"]["completion_tokens"])
        if not event.get("choices"):
            return ""
    choice = event["choices"][0]
    if backend in CHAT:
        return str(choice["delta"].get("content") or "")
    return str(choice.get("text") or "")


# --- the benchmark ----------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """numpy's default (linear) percentile."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "median": 0.0, "std": 0.0, "p90": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    ms = [v * 1000.0 for v in values]
    return {
        "mean": statistics.fmean(ms),
        "median": statistics.median(ms),
        "std": statistics.pstdev(ms),
        "p90": percentile(ms, 90),
        "p95": percentile(ms, 95),
        "p99": percentile(ms, 99),
        "max": max(ms),
    }


async def benchmark(args: argparse.Namespace, base: str) -> dict[str, Any]:
    rng = random.Random(args.seed)  # noqa: S311 - benchmark data
    low = max(int(args.random_input_len * args.random_range_ratio), 1)
    inputs = []
    for _ in range(args.num_prompts):
        n = rng.randint(low, args.random_input_len)
        m = rng.randint(max(int(args.random_output_len * args.random_range_ratio), 1), args.random_output_len)
        inputs.append((" ".join(rng.choices(WORDS, k=n)), n, m))
    print(f"#Input tokens: {sum(n for _, n, _ in inputs)}")
    print(f"#Output tokens: {sum(m for _, _, m in inputs)}")
    print(f"Starting warmup with {args.warmup_requests} sequences...")
    for prompt, n, m in inputs[: args.warmup_requests]:
        warm = await send(args, base, prompt, n, min(m, 32))
        if not warm.success:
            raise ValueError(
                f"Warmup failed - Please make sure benchmark arguments are correctly specified. Error: {warm.error}"
            )
    print(f"Warmup completed with {args.warmup_requests} sequences. Starting main benchmark run...")
    semaphore = asyncio.Semaphore(args.max_concurrency) if args.max_concurrency else None
    running = peak = 0

    async def limited(prompt: str, n: int, m: int) -> Output:
        nonlocal running, peak
        if semaphore is None:
            running += 1
            peak = max(peak, running)
            try:
                return await send(args, base, prompt, n, m)
            finally:
                running -= 1
        async with semaphore:
            running += 1
            peak = max(peak, running)
            try:
                return await send(args, base, prompt, n, m)
            finally:
                running -= 1

    start = time.perf_counter()
    tasks = []
    for prompt, n, m in inputs:
        tasks.append(asyncio.create_task(limited(prompt, n, m)))
        if not math.isinf(args.request_rate):
            await asyncio.sleep(rng.expovariate(args.request_rate))
    outputs = await asyncio.gather(*tasks)
    duration = time.perf_counter() - start
    return calculate(args, outputs, start, duration, peak)


def calculate(
    args: argparse.Namespace, outputs: list[Output], start: float, duration: float, peak: int
) -> dict[str, Any]:
    ok = [o for o in outputs if o.success]
    if not ok:
        warnings.warn(
            "All requests failed. This is likely due to a misconfiguration on the benchmark arguments.",
            UserWarning,
            stacklevel=2,
        )
        raise IndexError("index -1 is out of bounds for axis 0 with size 0")
    total_in = sum(o.prompt_len for o in ok)
    total_out = sum(o.output_len for o in ok)
    e2e, ttft = stats([o.latency for o in ok]), stats([o.ttft for o in ok])
    tpot = stats([(o.latency - o.ttft) / (o.output_len - 1) for o in ok if o.output_len > 1])
    itl = stats([gap for o in ok for gap in o.itl])
    per_second: dict[int, int] = {}
    for t in (t for o in ok for t in o.times):
        per_second[int(t - start)] = per_second.get(int(t - start), 0) + 1
    m: dict[str, Any] = {
        "duration": duration, "completed": len(ok), "total_input_tokens": total_in,
        "total_input_text_tokens": total_in, "total_input_vision_tokens": 0, "total_output_tokens": total_out,
        "total_output_tokens_retokenized": sum(len(o.generated_text.split()) for o in ok),
        "request_throughput": len(ok) / duration, "input_throughput": total_in / duration,
        "output_throughput": total_out / duration, "total_throughput": (total_in + total_out) / duration,
        "mean_e2e_latency_ms": e2e["mean"], "median_e2e_latency_ms": e2e["median"],
        "std_e2e_latency_ms": e2e["std"], "p90_e2e_latency_ms": e2e["p90"], "p99_e2e_latency_ms": e2e["p99"],
        "mean_ttft_ms": ttft["mean"], "median_ttft_ms": ttft["median"], "std_ttft_ms": ttft["std"],
        "p99_ttft_ms": ttft["p99"], "mean_tpot_ms": tpot["mean"], "median_tpot_ms": tpot["median"],
        "std_tpot_ms": tpot["std"], "p99_tpot_ms": tpot["p99"], "mean_itl_ms": itl["mean"],
        "median_itl_ms": itl["median"], "std_itl_ms": itl["std"], "p95_itl_ms": itl["p95"],
        "p99_itl_ms": itl["p99"], "max_itl_ms": itl["max"],
        "concurrency": sum(o.latency for o in ok) / duration, "accept_length": None,
        "max_output_tokens_per_s": float(max(per_second.values(), default=0)), "max_concurrent_requests": peak,
    }  # fmt: skip
    if args.output_details:
        m["details"] = {
            "input_lens": [o.prompt_len for o in outputs], "output_lens": [o.output_len for o in outputs],
            "ttfts": [o.ttft for o in outputs], "itls": [o.itl for o in outputs],
            "generated_texts": [o.generated_text for o in outputs], "errors": [o.error for o in outputs],
        }  # fmt: skip
    return m


def print_block(args: argparse.Namespace, m: dict[str, Any]) -> None:
    row, num = "{:<40} {:<10}", "{:<40} {:<10.2f}"
    print("\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    print(row.format("Backend:", args.backend))
    print(row.format("Traffic request rate:", args.request_rate))
    print(row.format("Max request concurrency:", args.max_concurrency or "not set"))
    for label, key, fmt in (
        ("Successful requests:", "completed", row), ("Benchmark duration (s):", "duration", num),
        ("Total input tokens:", "total_input_tokens", row), ("Total input text tokens:", "total_input_text_tokens", row),
        ("Total generated tokens:", "total_output_tokens", row),
        ("Total generated tokens (retokenized):", "total_output_tokens_retokenized", row),
        ("Request throughput (req/s):", "request_throughput", num), ("Input token throughput (tok/s):", "input_throughput", num),
        ("Output token throughput (tok/s):", "output_throughput", num),
        ("Peak output token throughput (tok/s):", "max_output_tokens_per_s", num),
        ("Peak concurrent requests:", "max_concurrent_requests", row), ("Total token throughput (tok/s):", "total_throughput", num),
        ("Concurrency:", "concurrency", num),
    ):  # fmt: skip
        print(fmt.format(label, m[key]))
    sections = (
        ("End-to-End Latency", "E2E Latency", "e2e_latency", ("mean", "median", "p90", "p99")),
        ("Time to First Token", "TTFT", "ttft", ("mean", "median", "p99")),
        ("Time per Output Token (excl. 1st token)", "TPOT", "tpot", ("mean", "median", "p99")),
        ("Inter-Token Latency", "ITL", "itl", ("mean", "median", "p95", "p99", "max")),
    )
    for title, label, key, kinds in sections:
        print("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        for kind in kinds:
            print(
                num.format(
                    f"{kind.capitalize() if kind in ('mean', 'median', 'max') else kind.upper()} {label} (ms):",
                    m[f"{kind}_{key}_ms"],
                )
            )
    print("=" * 50)


async def main_async(args: argparse.Namespace) -> int:
    base = args.base_url or f"http://{args.host}:{args.port or 30000}"
    print(f"benchmark_args={args}")
    print(f"Waiting up to {args.ready_check_timeout_sec}s for {base}/v1/models to become ready...")
    began = time.perf_counter()
    while True:
        try:
            models = await get_json(base + "/v1/models")
            break
        except (OSError, ValueError):
            if time.perf_counter() - began > args.ready_check_timeout_sec:
                raise
            await asyncio.sleep(0.2)
    print(f"Server ready in {time.perf_counter() - began:.1f}s.")
    args.model = args.model or models["data"][0]["id"]
    print(args)
    m = await benchmark(args, base)
    server_info = await get_json(base + "/server_info") if "sglang" in args.backend else None
    print_block(args, m)
    if args.output_file:
        details = m.pop("details", {})
        m.pop("max_itl_ms")
        line = {
            "tag": args.tag, "backend": args.backend, "dataset_name": args.dataset_name,
            "request_rate": args.request_rate, "max_concurrency": args.max_concurrency,
            "sharegpt_output_len": args.sharegpt_output_len, "random_input_len": args.random_input_len,
            "random_output_len": args.random_output_len, "random_range_ratio": args.random_range_ratio,
            "server_info": server_info, **m, **details,
        }  # fmt: skip
        with open(args.output_file, "a") as handle:
            handle.write(json.dumps(line) + "\n")
    return 0


def main() -> None:
    sys.exit(asyncio.run(main_async(parse_args(sys.argv[1:]))))


if __name__ == "__main__":
    main()
