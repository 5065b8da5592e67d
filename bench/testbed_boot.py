"""Boot and teardown time of the two-node testbed (aim: < 10 s to sshd up).

Per round: time until both nodes' sshd answer, until node 0's `/health` is 200 (the twin's own
startup included), and for a clean teardown (checked with `leftovers`). Runs on its own
instance (202) in a temporary base dir, so neither a running demo nor a test session is
touched. Needs root and the testbed's Debian packages. Prints figures; not a test.

    .venv/bin/python bench/testbed_boot.py [--rounds 3] [--nodes 2] [--scenario seed-gb10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from flagbot_lab.testbed import BENCH_INSTANCE, Testbed, TestbedError, leftovers, unavailable_reason


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--scenario", default="seed-gb10")
    parser.add_argument("--instance", type=int, default=BENCH_INSTANCE)
    parser.add_argument("--health-timeout", type=float, default=300.0)
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 2
    print(f"{args.nodes} nodes, scenario {args.scenario} (the SGLang twin), instance {args.instance}")
    rows: list[tuple[float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="flagbot-bench-testbed-") as base:
        for round_no in range(1, args.rounds + 1):
            bed = Testbed(args.instance, Path(base), args.nodes, args.scenario)
            start = time.monotonic()
            try:
                bed.up(replace=True)
                sshd = time.monotonic() - start
                bed.wait_healthy(args.health_timeout)
                healthy = time.monotonic() - start
            except TestbedError as exc:
                print(f"error: {exc}", file=sys.stderr)
                bed.down()
                return 1
            stop = time.monotonic()
            bed.down()
            teardown = time.monotonic() - stop
            left = leftovers(args.instance)
            if left:
                print(f"error: teardown left {left}", file=sys.stderr)
                return 1
            rows.append((sshd, healthy, teardown))
            print(
                f"round {round_no}: sshd up on all nodes {sshd:5.2f} s | node-0 /health 200 {healthy:5.2f} s"
                f" | clean teardown {teardown:5.2f} s (prepare {bed.times.prepared:.2f} s)"
            )
    if len(rows) > 1:
        med = [statistics.median(column) for column in zip(*rows, strict=True)]
        print(f"median:  sshd up {med[0]:5.2f} s | /health 200 {med[1]:5.2f} s | teardown {med[2]:5.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
