"""The radix cache, seen only by a workload that shares prefixes (issue 24 item 5).

`try add --disable-radix-cache median_ttft_ms<=+100%` reads **regressed** on a profile of the
`generated-shared-prefix` dataset, decided by median TTFT: with the cache on, a group's long system
prompt is prefilled once and every later request of the group only its question; with it off,
every request prefills everything. The same try on a `random` profile of the same lengths reads no
effect: no two prompts share a prefix, so the cache never helped.

The story of docs/demo.md ("A second story"), its profiles read from that page. On a one-node
testbed of its own (instance 217, the `tiny-cpu` scenario, booted here and taken down
at the end; the session's nodes stay up): the seed's hybrid model runs the `extra_buffer` Mamba
strategy, which SGLang 0.5.10 refuses together with `--disable-radix-cache`, so the story needs a
dense model. The flag changes nothing else there (no memory, no capacity), so whatever a verdict
says comes from the workload. One stream at a time: a request's TTFT is then its own prefill
(about 0.2 s for 4,128 tokens at the scenario's 20,000 tok/s), never a place in a queue. The
bound is +100 %: without the cache a shared-prefix request's TTFT is about ten times what it is
with it, while a machine busy with other work moved the plain profile's median past +10 % once
(docs/testing.md, the second loaded run); a load that doubles a 0.2 s prefill is not in sight.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flagbot_lab.testbed import Testbed, unavailable_reason
from tests.integration.loop.support import booted, flagbot, flagbot_json, write_config
from tests.integration.loop.test_story import blocks

pytestmark = pytest.mark.asyncio(loop_scope="session")
INSTANCE = 217
FLAG = "--disable-radix-cache"
DEMO = Path(__file__).resolve().parents[3] / "docs" / "demo.md"


def demo_profiles() -> str:
    """The `shared` and `plain` profiles exactly as docs/demo.md tells a user to append them."""
    text = DEMO.read_text()
    start = text.index("cat >> state/twin-7.toml <<'EOF'\n") + len("cat >> state/twin-7.toml <<'EOF'\n")
    return text[start : text.index("\nEOF\n", start)] + "\n"


@pytest.fixture(scope="module")
def dense_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """One node running the tiny dense model, on an instance of its own."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"testbed unavailable: {reason}")
    with booted(Testbed(INSTANCE, tmp_path_factory.mktemp("dense"), nodes=1, scenario="tiny-cpu")) as bed:
        yield bed


async def test_disabling_the_radix_cache_regresses_ttft_only_where_prompts_share_a_prefix(
    dense_bed: Testbed, tmp_path: Path
) -> None:
    config = write_config(dense_bed, tmp_path)
    config.write_text(config.read_text() + demo_profiles())
    assert (await flagbot(config, "db", "upgrade"))[0] == 0

    code, shared, err = await flagbot_json(
        config, "try", "add", FLAG, "median_ttft_ms<=+100%", "profile=shared"
    )
    assert code == 0 and shared["verdict"] == "regressed", (shared, err)
    evidence = blocks(config, shared["experiment_id"])
    verdict = next(b for b in evidence if b["kind"] == "verdict")
    decided = "\n".join(verdict["details"])
    assert "median_ttft_ms" in decided and "fail" in decided, decided
    assert "generated-shared-prefix" in str(evidence)  # the evidence names the workload
    assert any("reverted the change" in b.get("headline", "") for b in evidence)  # back as it was

    code, plain, err = await flagbot_json(
        config, "try", "add", FLAG, "median_ttft_ms<=+100%", "profile=plain"
    )
    assert code == 0 and plain["verdict"] != "regressed", (plain, err)
    verdict = next(b for b in blocks(config, plain["experiment_id"]) if b["kind"] == "verdict")
    assert "median_ttft_ms" in "\n".join(verdict["details"]) and "fail" not in "\n".join(verdict["details"])
