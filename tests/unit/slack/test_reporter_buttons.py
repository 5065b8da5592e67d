"""The finished card's buttons come from the stored experiment (`bot.app.decisions`), through
the reporter; when the store cannot answer, the card has none rather than misleading ones."""

from __future__ import annotations

from typing import Any

from bot.loop.report import RunOutcome
from bot.slack.render import CardState
from bot.slack.reporter import SlackThreadReporter
from bot.store.loop_models import Experiment


class Client:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    async def chat_update(self, **kwargs: Any) -> dict[str, Any]:
        self.updates.append(kwargs)
        return {"ok": True}

    async def chat_postMessage(self, **kwargs: Any) -> dict[str, Any]:
        return {"ok": True, "ts": "2.0"}


class Store:
    def __init__(self, row: Experiment | None, fail: bool = False) -> None:
        self.store, self.row, self.fail = object(), row, fail

    async def run(self, _fn: Any, _store: Any, *_args: Any) -> Any:
        if self.fail:
            raise RuntimeError("the database is gone")
        return self.row


def kept_try() -> Experiment:
    state = {
        "schema_version": 2,
        "after": {"set_id": 3},
        "restart": {"applied": True},
        "conclusion": {"verdict": "improved", "kept": True},
    }
    return Experiment(
        id=5,
        target="lab",
        playbook="try",
        params={"changes": [{}]},
        status="succeeded",
        state=state,
        actor="x",
    )


def shown(client: Client) -> list[str]:
    blocks = client.updates[-1]["blocks"]
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


async def finish(store: Store) -> Client:
    client = Client()
    card = CardState(5, "try", "lab", "U1", "/flagbot try --x", status="running")
    reporter = SlackThreadReporter(client, "C1", "1.0", card, store=store)
    await reporter.finished(RunOutcome(5, "try", "lab", "succeeded", "improved", "kept"))
    return client


async def test_the_finished_card_shows_the_buttons_chosen_for_the_stored_outcome() -> None:
    assert shown(await finish(Store(kept_try()))) == ["flagbot_revert", "flagbot_rerun"]


async def test_no_buttons_when_the_experiment_cannot_be_read() -> None:
    assert shown(await finish(Store(None))) == []
    assert shown(await finish(Store(kept_try(), fail=True))) == []
