"""The launch line of one node of a two-node twin scenario, as the testbed's units pass it."""

from __future__ import annotations

from collections.abc import Sequence

DIST_INIT_ADDR = "10.0.0.1:5000"


def pair_argv(launch: Sequence[str], node_rank: int, *extra: str) -> list[str]:
    """`launch` (a scenario's baseline flags) on node `node_rank` of two, then `extra`."""
    return [
        *launch,
        "--nnodes",
        "2",
        "--node-rank",
        str(node_rank),
        "--dist-init-addr",
        DIST_INIT_ADDR,
        *extra,
    ]
