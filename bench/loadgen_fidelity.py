"""flagbot's load generator next to SGLang's own bench_serving, both against the twin's ground truth.

One twin (started as a node starts it, from a temp install, pinned to CPU 0) serves every run;
its per-token truth trace is what "right" means. One run covers every dataset and load shape
(rows, in turn, each tool on the same row one after the other):

* `random`, closed loop at each of `--levels` (today's rows: 256 in / 100 out);
* `random`, open loop: Poisson arrivals at `--rate` requests/s capped at `--rate-cap` in flight
  (bench_serving `--request-rate R --max-concurrency C`); and, for flagbot alone, the same with
  gamma burstiness 0.25 (`LoadSpec.burstiness`): bench_serving 0.5.9 has no `--burstiness`
  (`get_request` draws `np.random.exponential` gaps only; vLLM's `bench serve` has it);
* `generated-shared-prefix` (G groups x P prompts, a shared system prompt of S tokens and a
  question of Q each, bench_serving's `--gsp-*`), at one concurrency and at one Poisson rate;
* a ShareGPT JSON prompt file this script writes (offline: conversations of the random
  dataset's words, varied lengths, a fresh file per row so no row repeats another's prompts),
  sampled by each tool (bench_serving `--dataset-name sharegpt --dataset-path`), at one
  concurrency and at one Poisson rate.

The tools:

* flagbot: `bot.bench.loadgen.run_load` (completions endpoint, `ignore_eos`, its own dataset
  code, one worker);
* SGLang `python -m sglang.bench_serving` 0.5.9, the last release whose client runs without
  torch (flagbot reference §5.5), installed by this script into its own venv under
  `--peers-dir` (`pip install --no-deps sglang==0.5.9` plus the client's own imports), with the
  same load: `--backend sglang-oai`, `--dataset-name random-ids --random-range-ratio 1` /
  `generated-shared-prefix` / `sharegpt`, `--max-concurrency C`, `--request-rate inf|R`, an
  offline word-level tokenizer this script writes (every 3-letter word, so a decoded prompt of
  N ids is N tokens to the twin too, and `random-ids` prompts do not repeat), and `HOME` set to a temporary directory for each run (its
  shared-prefix dataset is otherwise cached in `~/.cache/sglang/benchmark` and reused).

Both clients run pinned to CPU 1. For each row and tool the script prints the tool's figure
and its error against the truth of the same requests (the twin's actual emission times; the
last `requests` the twin received in the tool's window, so its warmup is left out):
mean TTFT, mean TPOT, median ITL, mean E2E and output tok/s. Truth: TTFT and E2E from the
request's arrival at the server to its first / last token; TPOT (last - first) / (n - 1); ITL
the gaps between consecutive tokens; output tok/s all tokens over first arrival -> last token.
A client necessarily adds its own way in and out (TCP, HTTP parsing) to TTFT and E2E: that is
part of its error here, as in bench-peers.md §2.4. On the shared-prefix rows a third line gives
the prompt tokens the twin served from its prefix cache (`cached_tokens` in its truth) and the
requests that hit a whole system prompt, against what the tool's prompts should produce if
every request after the first of its group (a group its warmup sent counts as sent) found its
system prompt cached: (G x P - G + 1) hits of S tokens. Fewer hits at concurrency > 1 are
requests of one group admitted in the same prefill batch, which share nothing (SGLang's
`get_new_batch_prefill`, modelled by the twin).

flagbot's client CPU per streamed event (`client.us_per_event`: the load generator's process
CPU time over its measured phase divided by the SSE events it parsed) is printed on every
flagbot row. At the end the random closed-loop case is run again at `--cpu-levels`, alternately
with this checkout's code and with the base commit's (`--base-commit`, default e2900e6, the
commit before datasets, load shapes and goodput: extracted with `git archive` to a temporary
directory and run in a child process with the same interpreter), `--cpu-repeats` times each
(`--cpu-requests` x concurrency requests a run),
and the medians are printed side by side: "unchanged or better" is that comparison. The
machine's load average is printed at the start and at the end: on a shared machine the CPU
time per event is the figure that counts, wall times less so.

`--speculative` starts the twin with speculative decoding (`--speculative-algorithm NGRAM
--speculative-num-steps 3`: accept length 2.65, so a chunk carries 2 or 3 tokens after the
first). The truth's ITL stays per token (the twin's own token times); each tool's ITL is per
token as it counts them (flagbot: the running usage; bench_serving: the chunk's text
retokenized, because the twin reports `avg_spec_accept_length`). A second line per tool
shows what the tool saw besides: the accept length it read, its peak output tok/s (one-second
buckets) and, for flagbot, the per-chunk median ITL. Prints figures; not a test.

    .venv/bin/python bench/loadgen_fidelity.py [--levels 1,4,16,64] [--peers-dir state/bench-peers]
        [--speculative] [--no-peer] [--only random,gsp,sharegpt,cpu]
        [--cpu-levels 16,64] [--cpu-repeats 3] [--cpu-requests 2]
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import random
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.bench.datasets import DatasetSpec  # noqa: E402
from bot.bench.loadgen import LoadSpec, run_load  # noqa: E402
from bot.bench.prompts import make_prompt  # noqa: E402
from bot.config.schema import SharedPrefixShape  # noqa: E402
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
GSP = SharedPrefixShape(
    num_groups=4, prompts_per_group=8, system_prompt_len=512, question_len=32, output_len=64
)
"""Small enough for a quick row; a system prompt 16 times the question, so hits show in TTFT."""
SHAREGPT_CONVERSATIONS = 48
SHAREGPT_PROMPT_WORDS = (16, 384)
SHAREGPT_ANSWER_WORDS = (8, 128)
BURSTINESS = 0.25
"""Gamma shape for flagbot's bursty row: gaps with a coefficient of variation of 2."""
BASE_COMMIT = "e2900e6"
"""The commit before issue 24's datasets, load shapes and goodput: the "today" of the CPU check."""
BASE_RUN = """
import json, sys
import bot
from bot.bench.loadgen import LoadSpec, run_load
base, concurrency, requests, input_len, output_len = sys.argv[1], *map(int, sys.argv[2:6])
result = run_load(LoadSpec(base_url=base, input_len=input_len, output_len=output_len,
    num_requests=requests, concurrency=concurrency, warmup_requests=1, seed=concurrency))
print(json.dumps({"bot": bot.__file__, "client": result.health.to_json()}))
"""
"""Run in a child with the base commit's `bot/` first on its path (its own LoadSpec)."""

Dataset = Literal["random", "gsp", "sharegpt"]


@dataclass(frozen=True)
class Row:
    """One dataset and load shape, run by each tool that supports it."""

    dataset: Dataset
    concurrency: int
    requests: int
    seed: int
    rate: float | None = None
    """Open loop: Poisson arrivals at this many requests/s, `concurrency` capping those in flight."""
    burstiness: float = 1.0
    prompt_file: Path | None = None

    @property
    def shape(self) -> str:
        if self.rate is None:
            return f"c={self.concurrency}"
        bursts = f" gamma {self.burstiness:g}" if self.burstiness != 1 else ""
        return f"rate={self.rate:g}{bursts} cap {self.concurrency}"

    @property
    def output_len(self) -> int:
        return GSP.output_len if self.dataset == "gsp" else OUTPUT_LEN


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


def write_sharegpt(path: Path, seed: int) -> Path:
    """A ShareGPT JSON file of `SHAREGPT_CONVERSATIONS` two-turn conversations of the random
    dataset's 3-letter words (one token a word to both tools and the twin), varied lengths."""
    rng = random.Random(f"fidelity-sharegpt:{seed}")
    conversations = [
        {
            "id": f"c{index}",
            "conversations": [
                {"from": "human", "value": make_prompt(rng, rng.randint(*SHAREGPT_PROMPT_WORDS))},
                {"from": "gpt", "value": make_prompt(rng, rng.randint(*SHAREGPT_ANSWER_WORDS))},
            ],
        }
        for index in range(SHAREGPT_CONVERSATIONS)
    ]
    path.write_text(json.dumps(conversations))
    return path


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


def offline(home: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    if home is not None:
        env["HOME"] = str(home)
    return env


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
    """A word-level tokenizer of every 3-letter lowercase word (its unknown token too): N ids
    decode to N words, which the twin counts as N tokens, so bench_serving's prompts have the
    requested length. Every 3-letter word, not just flagbot's 113: bench_serving's `random-ids`
    prompt i is the ids (offset_i + i + j) mod vocab, so with a vocabulary of 114 two requests in
    a hundred share their start, and the whole prompt, and the twin's prefix cache answered them."""
    path = peers / "wordtok3-all"
    if not (path / "tokenizer.json").exists():
        words = ["".join(letters) for letters in itertools.product(string.ascii_lowercase, repeat=3)]
        subprocess.run(
            [str(python), "-c", TOKENIZER, str(path), json.dumps(words)], check=True, env=offline()
        )
    return path


# --- truth ---------------------------------------------------------------------------------------


def truth_of(twin: Twin, since: float, until: float, count: int, warmups: int) -> list[dict[str, Any]]:
    """The `count` measured requests of one run: the last `count` to arrive in its window (its
    `warmups` sequential warmup requests arrive first)."""
    deadline = time.monotonic() + 10
    while True:
        records = [
            r for r in twin.truth() if r.get("kind") == "request" and since <= r["arrival_unix"] <= until
        ]
        if len(records) >= count + warmups or time.monotonic() > deadline:
            return sorted(records, key=lambda r: r["arrival_unix"])[-count:]
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
    decoding = [r for r in records if r["completion_tokens"] > 1]
    return {
        "mean_ttft_ms": statistics.fmean(r["ttft_actual_s"] for r in records) * 1000,
        "mean_tpot_ms": statistics.fmean(
            (r["last_actual_s"] - r["ttft_actual_s"]) / (r["completion_tokens"] - 1) for r in decoding
        )
        * 1000,
        "median_itl_ms": statistics.median(gaps) * 1000,
        "mean_e2e_latency_ms": statistics.fmean(r["last_actual_s"] for r in records) * 1000,
        "output_throughput": sum(r["completion_tokens"] for r in records) / (last - first),
    }


def cache_line(row: Row, records: list[dict[str, Any]]) -> str:
    """What the twin's prefix cache served (`cached_tokens` in its truth). On a shared-prefix row,
    next to the ideal: every request after its group's first (the warmup's group counted as
    sent) hits its system prompt. Elsewhere the ideal is none: flagbot salts every prompt, and
    bench_serving's prompts share nothing either unless the tokenizer's vocabulary is small."""
    served = sum(r["cached_tokens"] for r in records)
    if row.dataset != "gsp":
        return f"cached tokens (twin) {served}"
    hits = sum(1 for r in records if r["cached_tokens"] >= GSP.system_prompt_len)
    ideal_hits = len(records) - GSP.num_groups + 1
    ideal = ideal_hits * GSP.system_prompt_len
    return (
        f"cached tokens (twin) {served} vs ideal {ideal} ({served / ideal - 1:+.1%});"
        f" requests hitting a system prompt {hits}/{len(records)} vs ideal {ideal_hits}"
    )


METRICS = ("mean_ttft_ms", "mean_tpot_ms", "median_itl_ms", "mean_e2e_latency_ms", "output_throughput")
SEEN = ("accept_length", "max_output_tokens_per_s", "median_chunk_itl_ms")
"""What a tool reports besides, printed without a truth to compare with."""


# --- the two clients -----------------------------------------------------------------------------

Tool = Callable[[Twin, Row], dict[str, Any] | None]
"""Runs one row against the twin and returns its metrics, or None when it cannot run the row."""


def flagbot_dataset(row: Row) -> DatasetSpec:
    if row.dataset == "gsp":
        return DatasetSpec(kind="generated-shared-prefix", shared_prefix=GSP)
    if row.dataset == "sharegpt":
        return DatasetSpec(kind="sharegpt", prompt_file=row.prompt_file)
    return DatasetSpec()


def flagbot(twin: Twin, row: Row) -> dict[str, Any]:
    result = run_load(
        LoadSpec(
            base_url=twin.base, input_len=INPUT_LEN, output_len=row.output_len, num_requests=row.requests,
            concurrency=row.concurrency, request_rate=row.rate, burstiness=row.burstiness,
            warmup_requests=1, seed=row.seed, prompt_salt=row.seed, dataset=flagbot_dataset(row),
        )
    )  # fmt: skip
    if result.client_bound:
        print(f"  (flagbot client-bound: {result.health.reasons})")
    return {**result.metrics, "us_per_event": result.health.figures.get("us_per_event")}


def bench_serving_dataset(row: Row) -> list[str]:
    if row.dataset == "gsp":
        return [
            "--dataset-name", "generated-shared-prefix", "--gsp-num-groups", str(GSP.num_groups),
            "--gsp-prompts-per-group", str(GSP.prompts_per_group),
            "--gsp-system-prompt-len", str(GSP.system_prompt_len), "--gsp-question-len", str(GSP.question_len),
            "--gsp-output-len", str(GSP.output_len),
        ]  # fmt: skip
    if row.dataset == "sharegpt":
        return ["--dataset-name", "sharegpt", "--dataset-path", str(row.prompt_file)]
    return [
        "--dataset-name", "random-ids", "--random-input-len", str(INPUT_LEN),
        "--random-output-len", str(OUTPUT_LEN), "--random-range-ratio", "1.0",
    ]  # fmt: skip


def bench_serving(python: Path, tokenizer: Path, cpu: int | None) -> Tool:
    def run(twin: Twin, row: Row) -> dict[str, Any] | None:
        if row.burstiness != 1:
            return None  # 0.5.9 has no --burstiness: Poisson gaps only (`get_request`)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out.jsonl"
            rate = "inf" if row.rate is None else f"{row.rate:g}"
            argv = [
                str(python), "-m", "sglang.bench_serving", "--backend", "sglang-oai", "--base-url", twin.base,
                "--tokenizer", str(tokenizer), *bench_serving_dataset(row), "--num-prompts", str(row.requests),
                "--max-concurrency", str(row.concurrency), "--request-rate", rate, "--warmup-requests", "1",
                "--seed", str(row.seed), "--disable-tqdm", "--output-file", str(out),
            ]  # fmt: skip
            if cpu is not None:
                argv = ["taskset", "-c", str(cpu), *argv]
            done = subprocess.run(
                argv, capture_output=True, text=True, env=offline(Path(tmp)), timeout=1800, check=False
            )
            if done.returncode != 0 or not out.exists():
                raise SystemExit(f"bench_serving failed ({done.returncode}):\n{done.stderr[-3000:]}")
            line: dict[str, Any] = json.loads(out.read_text().splitlines()[-1])
            return line

    return run


# --- the client's CPU per event, this checkout against the base commit ---------------------------


def base_checkout(commit: str, into: Path) -> Path:
    """The base commit's `bot/` package, extracted read-only from git (no worktree is touched)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "bot"], check=True, capture_output=True
    ).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def us_per_event_base(base: Path, twin: Twin, concurrency: int, requests: int) -> float:
    done = subprocess.run(
        [sys.executable, "-c", BASE_RUN, twin.base, str(concurrency), str(requests), str(INPUT_LEN), str(OUTPUT_LEN)],
        capture_output=True, text=True, cwd=base, env={**os.environ, "PYTHONPATH": str(base)},
        timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"base commit's run_load failed:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.splitlines()[-1])
    if not str(report["bot"]).startswith(str(base)):
        raise SystemExit(f"the child imported {report['bot']}, not the base commit's bot/")
    return float(report["client"]["us_per_event"])


def cpu_comparison(
    twin: Twin, commit: str, levels: list[int], repeats: int, per_slot: int, tmp: Path
) -> None:
    base = base_checkout(commit, tmp / "base")
    print(
        f"\nflagbot client CPU per streamed event, random dataset, closed loop ({repeats} runs each, median):"
    )
    print(f"{'level':>5} {'this checkout':>16} {'base ' + commit:>16} {'change':>8}")
    for concurrency in levels:
        requests = per_slot * concurrency
        now: list[float] = []
        before: list[float] = []
        for _ in range(repeats):
            now.append(flagbot(twin, Row("random", concurrency, requests, concurrency))["us_per_event"])
            before.append(us_per_event_base(base, twin, concurrency, requests))
        a, b = statistics.median(now), statistics.median(before)
        print(f"{concurrency:5d} {a:13.1f} µs {b:13.1f} µs {a / b - 1:+8.1%}", flush=True)
        print(
            f"{'':5} runs: now {', '.join(f'{x:.1f}' for x in now)}; base {', '.join(f'{x:.1f}' for x in before)}"
        )


# --- the rows ------------------------------------------------------------------------------------


def rows(args: argparse.Namespace, tmp: Path) -> list[Row]:
    chosen = set(args.only.split(","))
    plan: list[Row] = []
    if "random" in chosen:
        for concurrency in (int(x) for x in args.levels.split(",")):
            plan.append(Row("random", concurrency, max(args.min_requests, 2 * concurrency), concurrency))
        plan.append(Row("random", args.rate_cap, args.rate_requests, 101, rate=args.rate))
        plan.append(
            Row("random", args.rate_cap, args.rate_requests, 102, rate=args.rate, burstiness=BURSTINESS)
        )
    if "gsp" in chosen:
        requests = GSP.num_groups * GSP.prompts_per_group
        plan.append(Row("gsp", args.row_concurrency, requests, 201))
        plan.append(Row("gsp", args.rate_cap, requests, 202, rate=args.rate / 2))
    if "sharegpt" in chosen:
        for seed, rate in ((301, None), (302, args.rate)):
            path = write_sharegpt(tmp / f"sharegpt-{seed}.json", seed)
            concurrency = args.row_concurrency if rate is None else args.rate_cap
            plan.append(Row("sharegpt", concurrency, args.rate_requests, seed, rate=rate, prompt_file=path))
    return plan


def print_row(
    row: Row, name: str, measured: dict[str, Any], truth: dict[str, float], worst: dict[str, float]
) -> None:
    cells = []
    for metric in METRICS:
        error = measured[metric] / truth[metric] - 1
        worst[name] = max(worst[name], abs(error))
        cells.append(f"{measured[metric]:10.2f} ({truth[metric]:8.2f}) {error:+6.1%}")
    label = f"{row.dataset} {row.shape}"
    print(f"{label:32} {name:20} " + " ".join(f"{c:>24}" for c in cells), flush=True)
    seen = ", ".join(f"{key} {measured[key]:.2f}" for key in SEEN if measured.get(key) is not None)
    if measured.get("us_per_event") is not None:
        seen += f", client CPU {measured['us_per_event']:.1f} µs/event"
    print(f"{'':32} {'':20} also: n={row.requests}, {seen}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--levels", default="1,4,16,64", help="random dataset, closed loop")
    parser.add_argument(
        "--min-requests", type=int, default=8, help="requests per level: max(this, 2 x concurrency)"
    )
    parser.add_argument(
        "--only",
        default="random,gsp,sharegpt,cpu",
        help="datasets to run; cpu: the comparison with the base commit",
    )
    parser.add_argument(
        "--rate", type=float, default=8.0, help="open-loop rows: requests/s (shared prefix: half)"
    )
    parser.add_argument("--rate-cap", type=int, default=32, help="open-loop rows: most requests in flight")
    parser.add_argument(
        "--rate-requests", type=int, default=32, help="requests of the open-loop and file rows"
    )
    parser.add_argument(
        "--row-concurrency", type=int, default=4, help="shared-prefix and file rows, closed loop"
    )
    parser.add_argument("--peers-dir", type=Path, default=ROOT / "state" / "bench-peers")
    parser.add_argument("--no-peer", action="store_true", help="flagbot only (no venv, no download)")
    parser.add_argument("--base-commit", default=BASE_COMMIT)
    parser.add_argument("--cpu-levels", default="16,64")
    parser.add_argument("--cpu-repeats", type=int, default=3)
    parser.add_argument("--cpu-requests", type=int, default=2, help="requests a run: this x concurrency")
    parser.add_argument(
        "--speculative", action="store_true", help="the twin with speculative decoding (multi-token chunks)"
    )
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    tools: dict[str, Tool] = {"flagbot": flagbot}
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
    skipped: list[str] = []
    try:
        flags = SPECULATIVE if args.speculative else ()
        twin = factory.start(*flags, scenario=scenario(), env={"SGLANG_TWIN_TRUTH_TRACE": "1"})
        if client_cpu is not None:
            os.sched_setaffinity(twin.proc.pid, {cpus[0]})
            os.sched_setaffinity(0, {client_cpu})
        twin.wait_ready()
        print(
            f"twin: {RATE:g} tok/s a stream, TTFT {TTFT_S * 1000:.0f} ms alone for {INPUT_LEN} tokens;"
            f" random {INPUT_LEN} in / {OUTPUT_LEN} out; gsp {GSP.num_groups} groups x {GSP.prompts_per_group},"
            f" system prompt {GSP.system_prompt_len}, question {GSP.question_len}, output {GSP.output_len};"
            f" sharegpt {SHAREGPT_CONVERSATIONS} conversations, prompts {SHAREGPT_PROMPT_WORDS[0]}-"
            f"{SHAREGPT_PROMPT_WORDS[1]} words, answers {SHAREGPT_ANSWER_WORDS[0]}-{SHAREGPT_ANSWER_WORDS[1]}"
            + (f", speculative: {' '.join(SPECULATIVE)}" if args.speculative else "")
        )
        plan = rows(args, tmp)
        if plan:
            print(f"{'row':32} {'tool':20} " + " ".join(f"{m:>24}" for m in METRICS))
        for row in plan:
            for name, tool in tools.items():
                since = time.time()
                measured = tool(twin, row)
                if measured is None:
                    skipped.append(f"{row.dataset} {row.shape}: {name} has no --burstiness (Poisson only)")
                    continue
                records = truth_of(twin, since, time.time(), row.requests, warmups=1)
                print_row(row, name, measured, truth_figures(records), worst)
                print(f"{'':32} {'':20} {cache_line(row, records)}", flush=True)
        if plan:
            print("cells: tool's figure (truth) error; worst absolute error over all rows and metrics:")
            for name, error in worst.items():
                print(f"  {name}: {error:.1%}")
        for line in skipped:
            print(f"not run: {line}")
        if "cpu" in args.only.split(",") and not args.speculative:
            levels = [int(x) for x in args.cpu_levels.split(",")]
            cpu_comparison(twin, args.base_commit, levels, args.cpu_repeats, args.cpu_requests, tmp)
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        factory.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
