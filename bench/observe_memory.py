"""Peak memory of observe's journal read for 20,000 and 200,000 journal entries (issue 17, item 7).

observe reads one invocation's journal (`journalctl _SYSTEMD_INVOCATION_ID=... -o json --all`)
until a little after SGLang's ready line; when the ready line has rotated away it reads on to
`MAX_JOURNAL_BYTES`. This feeds such a journal (a `server_args=` line, a capacity line, then
steady-state batch lines and the odd warning; no ready line) through the real reading code,
`bot.target.invocation_journal.read_invocation`, from a fake node whose `stream()` yields
`journalctl -o json` bytes in 64 KiB chunks as `NodeSession.stream` does, generated lazily (the
generator holds one chunk). The parser's report and the startup durations are made as observe
makes them. No SSH, no nspawn.

Each size runs in a child process of its own: the growth is the child's peak RSS during the read
(`VmHWM`, reset just before it through /proc/self/clear_refs) minus its RSS just before the read
(after imports and a small warm-up read). The issue requires
less than 20 MiB more from 20,000 to 200,000 entries.

    .venv/bin/python bench/observe_memory.py [--sizes 20000 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

INVOCATION = "f" * 32
CHUNK = 65536
SERVER_ARGS = (
    "[2026-11-29 20:14:39] server_args=ServerArgs(model_path='/models/qwen', tokenizer_path='/models/qwen', "
    "tp_size=2, max_running_requests=48, mem_fraction_static=0.856, random_seed=12345, node_rank=0, "
    "chunked_prefill_size=8192)"
)
CAPACITY = (
    "[2026-11-29 20:14:47 TP0] max_total_num_tokens=1833679, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=26, context_len=262144, available_gpu_mem=13.26 GB"
)
BATCH = (
    "[2026-11-29 20:{m:02d}:{s:02d} TP0] Decode batch. #running-req: 26, #token: {t}, gen throughput: 1582.3"
)
WARNING = "[2026-11-29 20:15:00] WARNING: the queue is long because max_running_requests was reached"


def message(k: int) -> str:
    if k == 0:
        return SERVER_ARGS
    if k == 1:
        return CAPACITY
    if k % 500 == 0:
        return WARNING
    return BATCH.format(m=(k // 60) % 60, s=k % 60, t=80000 + k)


def entry_bytes(k: int) -> bytes:
    doc = {
        "__CURSOR": f"s=0;i={k:x}",
        "__REALTIME_TIMESTAMP": str(1_764_447_279_000_000 + k * 1000),
        "_SYSTEMD_INVOCATION_ID": INVOCATION,
        "_PID": "4242",
        "MESSAGE": message(k),
    }
    return (json.dumps(doc) + "\n").encode()


class JournalNode:
    """What `read_invocation` needs of a node: a name and `stream()` of `-o json` bytes."""

    name = "bench-node"
    index = 0

    def __init__(self, entries: int) -> None:
        self.entries = entries

    async def stream(self, command: str, /, **params: object) -> AsyncIterator[bytes]:
        buffer = bytearray()
        for k in range(self.entries):
            buffer += entry_bytes(k)
            if len(buffer) >= CHUNK:
                yield bytes(buffer)
                buffer.clear()
                await asyncio.sleep(0)  # a network read would yield here
        if buffer:
            yield bytes(buffer)


def status_kib(field: str) -> int:
    """`VmRSS` (now) or `VmHWM` (the peak since the last reset) of this process, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> bool:
    """Start the peak (`VmHWM`) afresh at the current RSS (Linux: `5` to clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


async def read(entries: int) -> dict[str, object]:
    from bot.target.invocation_journal import read_invocation  # deferred: imported before the baseline
    from bot.target.snapshot_facts import startup_durations  # deferred: as above

    journal = await read_invocation(JournalNode(entries), INVOCATION)  # type: ignore[arg-type]
    report = journal.report
    # the code before the streaming change (e6ca966) kept every entry and indexed their times
    times = journal.times if hasattr(journal, "times") else [e.realtime for e in journal.entries]
    startup = startup_durations(report, times)
    return {
        "entries_read": journal.range()["lines"],
        "truncated": journal.truncated,
        "server_args": report.server_args is not None,
        "capacity_s": startup.get("capacity_s"),
    }


def child(entries: int) -> None:
    asyncio.run(read(2_000))  # warm-up: imports, the parser's caches, the event loop
    fresh = reset_peak()
    before = status_kib("VmRSS")
    facts = asyncio.run(read(entries))
    # without a reset, ru_maxrss is the peak since the process started (the warm-up's included)
    peak = status_kib("VmHWM") if fresh else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"entries": entries, "rss_before_kib": before, "peak_kib": peak, **facts}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 200_000])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return
    results = []
    for size in args.sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(size)], check=True, capture_output=True, text=True
        ).stdout
        results.append(json.loads(out))
    print(f"{'entries':>8} {'read':>8} {'truncated':>9} {'RSS before':>11} {'peak RSS':>9} {'growth':>9}")
    for r in results:
        growth = (int(r["peak_kib"]) - int(r["rss_before_kib"])) / 1024
        print(
            f"{r['entries']:>8} {r['entries_read']:>8} {r['truncated']!s:>9} "
            f"{int(r['rss_before_kib']) / 1024:>8.1f} MiB {int(r['peak_kib']) / 1024:>6.1f} MiB "
            f"{growth:>6.1f} MiB"
        )
    if len(results) >= 2:
        first, last = results[0], results[-1]
        grow = [(int(r["peak_kib"]) - int(r["rss_before_kib"])) / 1024 for r in (first, last)]
        print(
            f"peak RSS growth from {first['entries']} to {last['entries']} entries: "
            f"{grow[1] - grow[0]:+.1f} MiB (the issue requires < 20 MiB)"
        )


if __name__ == "__main__":
    main()
