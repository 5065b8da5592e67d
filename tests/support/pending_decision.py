"""A finished `try` whose Keep / Revert decision is pending, as `policy.on_regression = "ask"`
leaves it (tests of the Keep button and the `keep` command build one without running the loop)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.store import AsyncStore
from bot.store.experiments import create_experiment, update_experiment

ASKED_AT = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def pending_state(
    deadline: datetime | None = ASKED_AT + timedelta(minutes=30), default: str = "revert"
) -> dict[str, object]:
    conclusion: dict[str, object] = {"verdict": "regressed"}
    if deadline is not None:
        conclusion |= {"ask_deadline": deadline.isoformat(), "ask_default": default}
    return {"schema_version": 2, "restart": {"applied": True}, "conclusion": conclusion}


async def pending_try(
    store: AsyncStore,
    target: str,
    *,
    deadline: datetime | None = ASKED_AT + timedelta(minutes=30),
    default: str = "revert",
    channel: str | None = None,
    thread: str | None = None,
) -> int:
    """A succeeded, regressed try on `target` with its decision pending; its id."""
    row = await store.run(
        create_experiment,
        store.store,
        target=target,
        playbook="try",
        params={"changes": [{"op": "add", "flag": "--enable-metrics"}]},
        actor="slack:U0OPER",
    )
    assert row.id is not None
    state = pending_state(deadline, default)
    conclusion = state["conclusion"]
    assert isinstance(conclusion, dict)
    conclusion |= {"ask_channel": channel, "ask_thread": thread}
    await store.run(
        update_experiment, store.store, row.id, status="succeeded", verdict="regressed", state=state
    )
    return int(row.id)
