"""Benchmarks flagbot can trust: a load generator with bench_serving's metrics, a remote
bench_serving runner, and (in `stats`/`verdict`) noise-aware comparisons.

Nothing is imported here on purpose: the load generator's worker processes are spawned and
import `bot.bench.worker` afresh, and must not pay for numpy-heavy or database modules they
never use.
"""
