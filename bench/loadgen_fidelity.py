"""flagbot's load generator next to SGLang's own bench_serving, both against the twin's ground truth.

One twin (started as a node starts it, from a temp install, pinned to CPU 0) serves every run;
its per-token truth trace is what "right" means. At each concurrency level, in turn:

* flagbot: `bot.bench.loadgen.run_load` (closed loop, completions endpoint, `ignore_eos`);
* SGLang `python -m sglang.bench_serving` 0.5.9, the last release whose client runs without
  torch (flagbot reference §5.5), installed by this script into its own venv under
  `--peers-dir` (`pip install --no-deps sglang==0.5.9` plus the client's own imports), with the
  same load: `--backend sglang-oai --dataset-name random-ids --random-range-ratio 1
  --max-concurrency C --request-rate inf`, an offline word-level tokenizer this script writes
  (3-letter words, so a decoded prompt of N ids is N tokens to the twin too).

Both clients run pinned to CPU 1. For each tool and level the script prints the tool's figure
and its error against the truth of the same requests (the twin's actual emission times):
mean TTFT, mean TPOT, median ITL, mean E2E and output tok/s. Truth: TTFT and E2E from the
request's arrival at the server to its first / last token; TPOT (last - first) / (n - 1); ITL
the gaps between consecutive tokens; output tok/s all tokens over first arrival -> last token.
A client necessarily adds its own way in and out (TCP, HTTP parsing) to TTFT and E2E: that is
part of its error here, as in bench-peers.md §2.4. Prints figures; not a test.

`--speculative` starts the twin with speculative decoding (`--speculative-algorithm NGRAM
--speculative-num-steps 3`: accept length 2.65, so a chunk carries 2 or 3 tokens after the
first). The truth's ITL stays per token (the twin's own token times); each tool's ITL is per
token as it counts them (flagbot: the running usage; bench_serving: the chunk's text
retokenized, because the twin reports `avg_spec_accept_length`). A second line per tool
shows what the tool saw besides: the accept length it read, its peak output tok/s (one-second
buckets) and, for flagbot, the per-chunk median ITL.

    .venv/bin/python bench/loadgen_fidelity.py [--levels 1,4,16,64] [--peers-dir state/bench-peers] [--speculative]
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.bench.loadgen import LoadSpec, run_load  # noqa: E402
from bot.bench.prompts import WORDS  # noqa: E402
from flagbot_lab.twin.install import NODE_SITE, install_into  # noqa: E402
from tests.support.twin_process import Twin, TwinFactory, tiny  # noqa: E402

PEER = "sglang==0.5.9"
PEER_DEPS = [
    "aiohttp",
    "numpy",
    "requests",
    "tqdm",
    "transformers<5",
    "pybase64",
    "IPython",
    "pillow",
    "datasets",
    "orjson",
    "pydantic",
]
RATE = 50.0
"""Tokens per second of each stream (flat: the same at any batch size)."""
INPUT_LEN = 256
OUTPUT_LEN = 100
TTFT_S = 0.1
"""The twin's prefill time for one prompt when nothing else is prefilling (queues add to it)."""
SPECULATIVE = ("--speculative-algorithm", "NGRAM", "--speculative-num-steps", "3")
"""NGRAM needs no draft model; the twin's accept length for 3 steps is 2.65."""


def scenario() -> dict[str, Any]:
    document = copy.deepcopy(tiny())
    scale = 100.0 / RATE
    document["timings"].update({"decode_scale": scale, "warmup_s": 0.2})
    document["throughput"] = {
        "single_stream_tok_s": 100.0,
        "aggregate_curve": [[8192, 100.0 * 8192]],
        "prefill_tok_s": scale * INPUT_LEN / TTFT_S,
    }
    document["noise"].update({"run_cv": 0.0, "request_cv": 0.0})
    return document


# --- the peer's venv -----------------------------------------------------------------------------


def ensure_peer(peers: Path) -> Path:
    """The venv's python, created and filled once (a stamp file marks a finished install)."""
    venv = peers / "sglang-0.5.9"
    python = venv / "bin" / "python"
    stamp = venv / ".flagbot-ready"
    if stamp.exists():
        return python
    print(f"installing {PEER} (client only, no torch) into {venv} ...", flush=True)
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", PEER], check=True)
    subprocess.run([*pip, *PEER_DEPS], check=True)
    check = [str(python), "-m", "sglang.bench_serving", "--help"]
    subprocess.run(check, check=True, capture_output=True, env=offline())
    stamp.write_text(PEER + "\n")
    return python


def offline() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


TOKENIZER = """
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
words = json.loads(sys.argv[2])
vocab = {w: i for i, w in enumerate(words)}
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=words[-1]))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=words[-1])
fast.save_pretrained(sys.argv[1])
json.dump({"model_type": "llama"}, open(sys.argv[1] + "/config.json", "w"))
"""


def ensure_tokenizer(python: Path, peers: Path) -> Path:
    """A word-level tokenizer of 3-letter words (its unknown token too): N ids decode to N words,
    which the twin counts as N tokens, so bench_serving's prompts have the requested length."""
    path = peers / "wordtok3"
    if not (path / "tokenizer.json").exists():
        words = [*WORDS, "zzz"]
        subprocess.run(
            [str(python), "-c", TOKENIZER, str(path), json.dumps(words)], check=True, env=offline()
        )
    return path


# --- truth ---------------------------------------------------------------------------------------


def truth_of(twin: Twin, since: float, until: float, count: int) -> list[dict[str, Any]]:
    """The `count` measured requests of one run (warmups ask for fewer tokens)."""
    deadline = time.monotonic() + 10
    while True:
        records = [
            r
            for r in twin.truth()
            if r.get("kind") == "request"
            and r.get("max_new") == OUTPUT_LEN
            and since <= r["arrival_unix"] <= until
        ]
        if len(records) >= count or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def truth_figures(records: list[dict[str, Any]]) -> dict[str, float]:
    gaps: list[float] = []
    for r in records:
        times = [
            (s + late) / 1e6 for s, late in zip(r["trace"]["sched_us"], r["trace"]["late_us"], strict=True)
        ]
        gaps += [b - a for a, b in itertools.pairwise(times)]
    first = min(r["arrival_unix"] for r in records)
    last = max(r["arrival_unix"] + r["last_actual_s"] for r in records)
    return {
        "mean_ttft_ms": statistics.fmean(r["ttft_actual_s"] for r in records) * 1000,
        "mean_tpot_ms": statistics.fmean(
            (r["last_actual_s"] - r["ttft_actual_s"]) / (r["completion_tokens"] - 1) for r in records
        )
        * 1000,
        "median_itl_ms": statistics.median(gaps) * 1000,
        "mean_e2e_latency_ms": statistics.fmean(r["last_actual_s"] for r in records) * 1000,
        "output_throughput": sum(r["completion_tokens"] for r in records) / (last - first),
    }


METRICS = ("mean_ttft_ms", "mean_tpot_ms", "median_itl_ms", "mean_e2e_latency_ms", "output_throughput")
SEEN = ("accept_length", "max_output_tokens_per_s", "median_chunk_itl_ms")
"""What a tool reports besides, printed without a truth to compare with."""


# --- the two clients -----------------------------------------------------------------------------


def flagbot(twin: Twin, concurrency: int, requests: int) -> dict[str, Any]:
    result = run_load(
        LoadSpec(
            base_url=twin.base, input_len=INPUT_LEN, output_len=OUTPUT_LEN, num_requests=requests,
            concurrency=concurrency, warmup_requests=1, seed=concurrency,
        )
    )  # fmt: skip
    if result.client_bound:
        print(f"  (flagbot client-bound: {result.health.reasons})")
    return result.metrics


def bench_serving(
    python: Path, tokenizer: Path, cpu: int | None
) -> Callable[[Twin, int, int], dict[str, Any]]:
    def run(twin: Twin, concurrency: int, requests: int) -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out.jsonl"
            argv = [
                str(python), "-m", "sglang.bench_serving", "--backend", "sglang-oai", "--base-url", twin.base,
                "--tokenizer", str(tokenizer), "--dataset-name", "random-ids", "--random-input-len", str(INPUT_LEN),
                "--random-output-len", str(OUTPUT_LEN), "--random-range-ratio", "1.0", "--num-prompts", str(requests),
                "--max-concurrency", str(concurrency), "--request-rate", "inf", "--warmup-requests", "1",
                "--seed", str(concurrency), "--disable-tqdm", "--output-file", str(out),
            ]  # fmt: skip
            if cpu is not None:
                argv = ["taskset", "-c", str(cpu), *argv]
            done = subprocess.run(
                argv, capture_output=True, text=True, env=offline(), timeout=1800, check=False
            )
            if done.returncode != 0 or not out.exists():
                raise SystemExit(f"bench_serving failed ({done.returncode}):\n{done.stderr[-3000:]}")
            line: dict[str, Any] = json.loads(out.read_text().splitlines()[-1])
            return line

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--levels", default="1,4,16,64")
    parser.add_argument(
        "--min-requests", type=int, default=8, help="requests per level: max(this, 2 x concurrency)"
    )
    parser.add_argument("--peers-dir", type=Path, default=ROOT / "state" / "bench-peers")
    parser.add_argument("--no-peer", action="store_true", help="flagbot only (no venv, no download)")
    parser.add_argument(
        "--speculative", action="store_true", help="the twin with speculative decoding (multi-token chunks)"
    )
    args = parser.parse_args()
    tools: dict[str, Callable[[Twin, int, int], dict[str, Any]]] = {"flagbot": flagbot}
    cpus = sorted(os.sched_getaffinity(0))
    client_cpu = cpus[1] if len(cpus) >= 2 else None
    if not args.no_peer:
        python = ensure_peer(args.peers_dir)
        tools["bench_serving 0.5.9"] = bench_serving(
            python, ensure_tokenizer(python, args.peers_dir), client_cpu
        )
    tmp = Path(tempfile.mkdtemp(prefix="flagbot-loadgen-fidelity-"))
    install_into(tmp / "node", scenario=tiny())
    factory = TwinFactory(tmp / "node" / NODE_SITE, tmp)
    worst: dict[str, float] = dict.fromkeys(tools, 0.0)
    try:
        flags = SPECULATIVE if args.speculative else ()
        twin = factory.start(*flags, scenario=scenario(), env={"SGLANG_TWIN_TRUTH_TRACE": "1"})
        if client_cpu is not None:
            os.sched_setaffinity(twin.proc.pid, {cpus[0]})
            os.sched_setaffinity(0, {client_cpu})
        twin.wait_ready()
        print(
            f"twin: {RATE:g} tok/s a stream, {INPUT_LEN} in / {OUTPUT_LEN} out, TTFT {TTFT_S * 1000:.0f} ms alone"
            + (f", speculative: {' '.join(SPECULATIVE)}" if args.speculative else "")
        )
        print(f"{'level':>5} {'tool':20} " + " ".join(f"{m:>24}" for m in METRICS))
        for concurrency in (int(x) for x in args.levels.split(",")):
            requests = max(args.min_requests, 2 * concurrency)
            for name, tool in tools.items():
                since = time.time()
                measured = tool(twin, concurrency, requests)
                truth = truth_figures(truth_of(twin, since, time.time(), requests))
                cells = []
                for metric in METRICS:
                    error = measured[metric] / truth[metric] - 1
                    worst[name] = max(worst[name], abs(error))
                    cells.append(f"{measured[metric]:10.2f} ({truth[metric]:8.2f}) {error:+6.1%}")
                print(f"{concurrency:5d} {name:20} " + " ".join(f"{c:>24}" for c in cells), flush=True)
                seen = ", ".join(
                    f"{key} {measured[key]:.2f}" for key in SEEN if measured.get(key) is not None
                )
                print(f"{'':5} {'':20} also: {seen}", flush=True)
        print("cells: tool's figure (truth) error; worst absolute error over all levels and metrics:")
        for name, error in worst.items():
            print(f"  {name}: {error:.1%}")
    finally:
        factory.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
