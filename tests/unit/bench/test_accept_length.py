"""The server's speculative accept length, read from `/server_info` as bench_serving reads it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from bot.bench import server_reads
from bot.bench.server_reads import AcceptLengthReads, read_accept_length


def serve(monkeypatch: pytest.MonkeyPatch, body: object, status: int = 200) -> list[str]:
    asked: list[str] = []

    def fake_get(url: str, **_: Any) -> httpx.Response:
        asked.append(url)
        return httpx.Response(status, json=body, request=httpx.Request("GET", url))

    monkeypatch.setattr(server_reads, "http_get", fake_get)
    return asked


def test_the_first_internal_states_avg_spec_accept_length(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = serve(monkeypatch, {"internal_states": [{"avg_spec_accept_length": 2.65}, {}]})
    assert read_accept_length("http://h:30000/") == 2.65
    assert asked == ["http://h:30000/server_info"]


def test_the_decode_sides_under_pd_disaggregation(monkeypatch: pytest.MonkeyPatch) -> None:
    serve(monkeypatch, {"decode": [{"internal_states": [{"avg_spec_accept_length": 3.1}]}]})
    assert read_accept_length("http://h:30000") == 3.1


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"internal_states": [{"effective_max_running_requests_per_dp": 48}]}, 200),  # no speculation
        ({"internal_states": [{"avg_spec_accept_length": "2.6"}]}, 200),
        ({"internal_states": [{"avg_spec_accept_length": True}]}, 200),
        ({"internal_states": []}, 200),
        ([1, 2], 200),
        ({"detail": "Not Found"}, 404),
    ],
)
def test_none_when_there_is_none_to_read(monkeypatch: pytest.MonkeyPatch, body: object, status: int) -> None:
    serve(monkeypatch, body, status)
    assert read_accept_length("http://h:30000") is None


def test_a_start_that_reports_none_after_completed_requests_is_not_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = serve(monkeypatch, {"internal_states": [{"effective_max_running_requests_per_dp": 48}]})
    reads = AcceptLengthReads()
    assert reads.after_level("http://h:30000", completed=0) is None  # nothing decoded yet: ask again
    assert reads.after_level("http://h:30000", completed=8) is None
    assert reads.after_level("http://h:30000", completed=8) is None
    assert len(asked) == 2  # the third level did not ask


def test_a_speculative_start_is_asked_after_every_level(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = serve(monkeypatch, {"internal_states": [{"avg_spec_accept_length": 2.65}]})
    reads = AcceptLengthReads()
    assert [reads.after_level("http://h:30000", completed=4) for _ in range(3)] == [2.65] * 3
    assert len(asked) == 3
