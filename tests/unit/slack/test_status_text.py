"""Slack's `status` answer: the units (a node's own only where it is not node 0's), how /health was
reached, the latest start's capacity beside the known-good one, and the `${NAME}` references."""

from __future__ import annotations

from typing import Any

from bot.slack.status_text import own_unit, status_text


def _data(**extra: Any) -> dict[str, Any]:
    return {
        "unit": "sglang-head.service",
        "health": 200,
        "http_way": "through an SSH forward on node 0",
        "nodes": [
            {"node": "a", "unit": "sglang-head.service", "active": "active"},
            {"node": "b", "unit": "sglang-worker.service", "active": "active"},
        ],
        "references": {"${NODE_RANK}": "0", "${SGLANG_API_KEY}": "***"},
        "diverged": None,
        "known_good_snapshot_id": 7,
        "latest_snapshot": {"id": 9, "parsed_max_running_requests": 48, "effective_max_running_requests": 26},
        "freeze": None,
        "waiting": [],
        **extra,
    }


def test_a_node_with_another_unit_than_node_0_is_named_with_it() -> None:
    assert own_unit({"node": "b", "unit": "sglang-worker.service"}, "sglang-head.service") == (
        " (sglang-worker.service)"
    )
    assert own_unit({"node": "a", "unit": "sglang-head.service"}, "sglang-head.service") == ""
    assert own_unit({"node": "a"}, "sglang-head.service") == ""


def test_the_status_says_what_runs_how_it_was_reached_and_what_the_references_hold() -> None:
    assert status_text("qwen", _data()).splitlines() == [
        "*qwen* `sglang-head.service`: /health 200; a active; b (sglang-worker.service) active",
        "HTTP: through an SSH forward on node 0",
        "latest start: snapshot #9, max_running_requests effective 26 (parsed 48); known-good #7",
        "references (EnvironmentFile=): `${NODE_RANK}` = 0, `${SGLANG_API_KEY}` = ***",
    ]


def test_a_target_never_observed_says_only_what_it_knows() -> None:
    text = status_text(
        "qwen",
        _data(
            http_way="",
            references={},
            latest_snapshot=None,
            known_good_snapshot_id=None,
            health=None,
            freeze={"text": "frozen until Monday by U1"},
            waiting=[{"text": "try by U2, queued 3 min ago"}],
        ),
    )
    assert text.splitlines() == [
        "*qwen* `sglang-head.service`: /health None; a active; b (sglang-worker.service) active",
        ":snowflake: frozen until Monday by U1",
        ":hourglass: queued: try by U2, queued 3 min ago",
    ]
