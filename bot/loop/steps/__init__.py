"""The domain actions of the built-in playbooks; importing this package registers them.

`target_steps`: heal, snapshot, apply + restart, await the start, restore, the interrupt check.
`measure_steps`: benchmark, compare, keep or revert. `state_steps`: revert plans, verify,
baseline. `learn_steps`: the hypothesis log and knowledge observations. `analysis_steps`:
preflight, ranked hypotheses, isolate. `predict_steps`: the capacity prediction before a restart
(it can stop a try) and its score once the start is observed. `schedule_steps`: verification checks later (bot.schedule).
"""

from bot.loop.steps import (
    analysis_steps,
    learn_steps,
    measure_steps,
    predict_steps,
    schedule_steps,
    state_steps,
    target_steps,
)

__all__ = [
    "analysis_steps",
    "learn_steps",
    "measure_steps",
    "predict_steps",
    "schedule_steps",
    "state_steps",
    "target_steps",
]
