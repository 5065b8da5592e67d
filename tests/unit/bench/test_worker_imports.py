"""A load worker's module does not bring flagbot's configuration models into the worker.

Every worker collects its whole heap after each run, while the parent stores the result and
sends the next run (`bot.bench.worker.worker_main`); the configuration models (pydantic) made
that heap ~20,000 objects bigger and the next run's start later (`bot.bench.prompt_groups`).
A shared-prefix plan's shape reaches the worker as a plain `GroupShape`, so unpickling a plan
does not import them either.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

from bot.bench.loadgen import LoadSpec, plans
from bot.bench.prompt_groups import GroupShape
from bot.config.schema import SharedPrefixShape

ROOT = Path(__file__).resolve().parents[3]


def test_the_worker_module_and_a_shared_prefix_plan_load_without_the_config_models() -> None:
    from bot.bench.datasets import DatasetSpec

    shape = SharedPrefixShape(num_groups=3, prompts_per_group=2, output_len=7)
    spec = LoadSpec(
        base_url="http://127.0.0.1:9",
        dataset=DatasetSpec(kind="generated-shared-prefix", shared_prefix=shape),
    )
    [plan] = plans(spec, "m")
    assert plan.shared_prefix == GroupShape(3, 2, 7)
    check = (
        "import pickle, sys\n"
        "import bot.bench.worker\n"
        f"plan = pickle.loads({pickle.dumps(plan)!r})\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('bot.config', 'pydantic')))\n"
        "print(loaded or 'none', plan.shared_prefix.num_groups)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["none", "3"]
