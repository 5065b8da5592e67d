"""The nodes of a target record their units at the same time: no node's record may undo another's.

Found on the testbed: both nodes' `record_unit` read the target's row, then each wrote the whole
row back, so the second write put back the first node's old checksum, and the next `try`
refused that node as "changed by hand". Real SQLite and PostgreSQL, as `flagbot serve` uses them.
"""

from __future__ import annotations

import asyncio

from bot.store import AsyncStore, Store
from bot.target.ledger import Ledger, sha256_text

NODES = [f"10.200.9.{k}" for k in range(2, 6)]


async def test_concurrent_unit_records_and_a_divergence_keep_every_node(empty_store: Store) -> None:
    empty_store.upgrade()
    store = AsyncStore(empty_store)
    try:
        ledger = Ledger("twin", store)
        for round_ in range(3):
            texts = {node: f"# unit of {node}, round {round_}\n" for node in NODES}
            await asyncio.gather(
                *(ledger.record_unit(node, text, path="systemctl cat x") for node, text in texts.items()),
                ledger.mark_diverged([NODES[0]], f"round {round_}"),
            )
            fresh = Ledger("twin", store)  # what the next command (another process) reads
            for node, text in texts.items():
                checksum, left = await fresh.unit_as_left(node)
                assert checksum == sha256_text(text), (round_, node)
                assert left == text
            divergence = await fresh.divergence()
            assert divergence is not None and divergence.reason == f"round {round_}"
            await ledger.clear_diverged()
            assert await Ledger("twin", store).divergence() is None
    finally:
        await store.aclose()
