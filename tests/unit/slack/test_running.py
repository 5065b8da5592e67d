"""What a failed background run tells the user in Slack (bot.slack.running.error_reporter): a
fault the user can act on in its own words, anything else only by an error id."""

from __future__ import annotations

from typing import Any

from bot.bench.run import BenchmarkTimeoutError
from bot.slack.running import error_reporter
from bot.slack.threads import Where


class _Client:
    def __init__(self) -> None:
        self.said: list[dict[str, Any]] = []

    async def chat_postEphemeral(self, **kwargs: Any) -> None:
        self.said.append(kwargs)


async def test_a_benchmark_past_its_timeout_is_said_in_its_own_words() -> None:
    client = _Client()
    report = error_reporter(client, Where("C1", "1.2"), "U1")  # type: ignore[arg-type]
    await report("e1", BenchmarkTimeoutError(1800))
    assert client.said == [
        {
            "channel": "C1",
            "user": "U1",
            "thread_ts": "1.2",
            "text": "benchmark exceeded timeouts.benchmark (1800 s)",
        }
    ]


async def test_an_unexpected_fault_is_named_by_its_error_id_only() -> None:
    client = _Client()
    report = error_reporter(client, Where("C1", None), "U1")  # type: ignore[arg-type]
    await report("e2", RuntimeError("internal detail"))
    assert "internal detail" not in client.said[0]["text"] and "e2" in client.said[0]["text"]
