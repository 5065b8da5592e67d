"""Throughput of `parse_log_stream` on a large synthetic journal built from the corpus.

The journal is mostly steady-state noise (corpus lines that carry no startup information:
batch lines, access-log lines, tqdm bars, library chatter) with a few whole corpus startups
spliced in, every line behind a journald prefix as `journalctl -u <unit>` prints it. It is
written to a temp file, parsed on one core, timed, and removed. Prints figures; not a test.

    .venv/bin/python bench/parse_throughput.py [--size-mb 200] [--starts 4] [--chunk-kb 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from bot.sglang.log import parse_log_stream
from bot.sglang.log_events import KEYWORDS

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "corpus" / "sglang-logs"


def journal_prefix(pid: int) -> bytes:
    """journald's short prefix; each startup gets its own PID, as a restarted unit does."""
    return b"Mar 09 21:45:34 llm-two sglang-qwen[%d]: " % pid


def corpus_files() -> list[Path]:
    index = json.loads((CORPUS / "index.json").read_text())
    return [CORPUS / entry["file"] for entry in index]


def noise_lines(files: list[Path]) -> list[bytes]:
    """Corpus lines no keyword matches: what a steady-state journal is made of."""
    lines: list[bytes] = []
    for path in files:
        for raw in path.read_bytes().split(b"\n"):
            text = raw.decode("utf-8", "replace")
            if raw.strip() and not any(k in text for k in KEYWORDS):
                lines.append(raw.rstrip(b"\r"))
    return lines


def with_prefix(lines: list[bytes], pid: int) -> bytes:
    prefix = journal_prefix(pid)
    return b"".join(prefix + line + b"\n" for line in lines)


def write_journal(path: Path, size: int, starts: int) -> None:
    """Startups (whole corpus files, in index order) spaced evenly through the noise."""
    files = corpus_files()
    noise = noise_lines(files)
    every = max(1, size // max(1, starts))
    with path.open("wb") as out:
        written, pid = 0, 4550
        for n in range(max(1, starts)):
            pid += 1
            startup = with_prefix(files[n % len(files)].read_bytes().split(b"\n"), pid)
            block = with_prefix(noise, pid)
            out.write(startup)
            written += len(startup)
            while written < min(size, every * (n + 1)):
                out.write(block)
                written += len(block)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time parse_log_stream on a synthetic journal.")
    parser.add_argument("--size-mb", type=float, default=200.0)
    parser.add_argument("--starts", type=int, default=4)
    parser.add_argument("--chunk-kb", type=int, default=1024)
    args = parser.parse_args(argv)
    fd, name = tempfile.mkstemp(prefix="flagbot-bench-", suffix=".journal")
    os.close(fd)
    path = Path(name)
    try:
        write_journal(path, int(args.size_mb * (1 << 20)), args.starts)
        size = path.stat().st_size
        with path.open("rb") as stream:
            t0 = time.perf_counter()
            report = parse_log_stream(stream, chunk_size=args.chunk_kb << 10)
            elapsed = time.perf_counter() - t0
    finally:
        path.unlink(missing_ok=True)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    mb = size / (1 << 20)
    print(f"input: {mb:.1f} MB, {report.lines} lines, {len(report.starts)} starts found")
    print(f"parse: {elapsed:.2f} s  ->  {mb / elapsed:.1f} MB/s (one core)")
    print(f"peak RSS: {peak_kb / 1024:.1f} MB (whole process, includes the interpreter)")
    print(f"last start: ready={report.ready} effective={report.effective}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
