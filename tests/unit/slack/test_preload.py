"""`bot.slack.dispatch.preload`, run once before `flagbot serve` takes its first request: what a
run would import later is imported, and the start-up heap is frozen, so neither an import nor a
full garbage collection of that heap lands in the middle of a burst of acknowledgements."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

AFTER_PRELOAD = textwrap.dedent(
    """
    import gc, json, sys
    from bot.slack.dispatch import preload

    preload()
    frozen, tracked = gc.get_freeze_count(), len(gc.get_objects())
    full = []
    gc.callbacks.append(lambda phase, info: full.append(1) if phase == "stop" and info["generation"] == 2 else None)
    preload()  # a second app in the same process (tests build many): nothing is done again
    print(json.dumps({
        "frozen": frozen,
        "tracked": tracked,
        "frozen_again": gc.get_freeze_count(),
        "collected_again": len(full),
        "matplotlib": "matplotlib.pyplot" in sys.modules,
    }))
    """
)


def test_preload_imports_the_chart_and_freezes_the_start_up_heap() -> None:
    done = subprocess.run(
        [sys.executable, "-c", AFTER_PRELOAD], capture_output=True, text=True, check=True, timeout=120
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["matplotlib"]  # the verdict's chart does not import it in a run's thread
    assert found["frozen"] > 50_000  # the imported modules' objects, out of the collector's scans
    assert found["tracked"] < found["frozen"] // 100  # a full collection now scans almost nothing
    assert found["collected_again"] == 0  # no second full collection
    assert found["frozen_again"] == found["frozen"]
