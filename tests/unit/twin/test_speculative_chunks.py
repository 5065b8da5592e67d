"""The twin under speculative decoding: which tokens share a chunk, and how such a chunk reads."""

from __future__ import annotations

import json

from flagbot_lab.twin.engine.shapes import ChatReply, CompletionReply, DecodeSteps


def chunk_sizes(accept: float | None, tokens: int) -> list[int]:
    steps = DecodeSteps(accept)
    sizes = []
    for index in range(tokens - 1):
        first = steps.take(index)
        if first is not None:
            sizes.append(index - first + 1)
    sizes.append(tokens - steps.first)  # the last token flushes what is pending
    return sizes


def test_the_prefill_token_goes_alone_then_a_steps_accepted_tokens() -> None:
    sizes = chunk_sizes(2.65, 100)
    assert sizes[:6] == [1, 2, 3, 2, 3, 3]  # steps end at tokens 2, 5, 7, 10, 13 (floor(k x 2.65))
    assert sum(sizes) == 100
    assert set(sizes[1:-1]) == {2, 3}
    assert abs(sum(sizes[1:-1]) / len(sizes[1:-1]) - 2.65) < 0.05


def test_without_speculation_every_token_is_a_chunk() -> None:
    assert chunk_sizes(None, 5) == [1, 1, 1, 1, 1]
    assert chunk_sizes(1.0, 3) == [1, 1, 1]


def test_a_multi_token_chunk_has_every_tokens_text_and_the_running_usage() -> None:
    reply = CompletionReply("r", "m", 1, 7, 0, 2)
    reply.continuous_usage = True
    event = json.loads(reply.token(3, first=1).decode()[len("data: ") :])
    assert len(event["choices"][0]["text"].split()) == 3
    assert event["usage"]["completion_tokens"] == 4
    last = reply.last(6, "length", 0.5, first=4).decode().split("\n\n")[0]
    finish = json.loads(last[len("data: ") :])
    assert finish["choices"][0]["finish_reason"] == "length"
    assert finish["usage"]["completion_tokens"] == 7  # SGLang puts it on the finish chunk too
    assert len(finish["choices"][0]["text"].split()) == 3


def test_a_chat_chunk_starting_at_token_zero_has_the_role_chunk_first() -> None:
    events = ChatReply("r", "m", 1, 7, 0, 2).token(1, first=0).decode().split("\n\n")
    role, content = (json.loads(e[len("data: ") :]) for e in events[:2])
    assert role["choices"][0]["delta"] == {
        "role": "assistant", "content": "", "reasoning_content": None, "tool_calls": None
    }  # fmt: skip
    assert len(content["choices"][0]["delta"]["content"].split()) == 2
