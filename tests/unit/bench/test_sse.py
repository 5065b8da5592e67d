"""The SSE decoder and the chunk reading: what counts as a token, usage and errors in a stream."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from bot.bench.sse import SSEDecoder, interpret


def chat(content: str | None, role: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    delta = {"role": role, "content": content, "reasoning_content": None, "tool_calls": None}
    body = {
        "id": "x",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta}],
        "usage": usage,
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def test_events_are_split_at_blank_lines_and_kept_across_reads() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"a":1}\n\ndata: {"b"') == [b'{"a":1}']
    assert decoder.pending() == b'data: {"b"'
    assert decoder.feed(b":2}\n\ndata: [DONE]\n\n") == [b'{"b":2}', b"[DONE]"]
    assert decoder.pending() == b""


def test_crlf_cr_comments_other_fields_and_multiline_data() -> None:
    decoder = SSEDecoder()
    stream = b": keep-alive\r\n\r\nevent: message\r\nid: 7\r\ndata: line1\r\ndata:line2\r\n\r\ndata\n\n"
    assert decoder.feed(stream) == [b"line1\nline2", b""]


def test_a_crlf_split_between_two_reads_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: 1\r\n\r") == []
    assert decoder.feed(b"\ndata: 2\r\n\r\n") == [b"1", b"2"]


@given(st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_any_split_of_a_stream_gives_the_same_payloads(cuts: list[int]) -> None:
    stream = b"".join([chat("", role="assistant"), chat("Hello"), chat(" world"), b"data: [DONE]\r\n\r\n"])
    expected = SSEDecoder().feed(stream)
    decoder = SSEDecoder()
    got: list[bytes] = []
    last = 0
    for cut in sorted({min(c, len(stream)) for c in cuts}):
        got += decoder.feed(stream[last:cut])
        last = cut
    got += decoder.feed(stream[last:])
    assert got == expected
    assert len(got) == 4


def test_the_role_chunk_and_the_finish_chunk_are_not_tokens() -> None:
    decoder = SSEDecoder()
    payloads = decoder.feed(chat("", role="assistant") + chat("Hi") + chat(None) + b"data: [DONE]\n\n")
    chunks = [interpret(p) for p in payloads]
    assert [c.content for c in chunks] == [False, True, False, False]
    assert chunks[-1].done


def test_completion_text_reasoning_and_the_usage_chunk() -> None:
    text = interpret(json.dumps({"choices": [{"index": 0, "text": " the"}]}).encode())
    assert text.content
    thinking = interpret(
        json.dumps({"choices": [{"delta": {"content": None, "reasoning_content": "Hm"}}]}).encode()
    )
    assert thinking.content
    usage = {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}
    final = interpret(json.dumps({"choices": [], "usage": usage}).encode())
    assert not final.content
    assert final.usage == usage


def test_errors_inside_a_stream_are_reported_with_their_message() -> None:
    sglang = {"error": {"object": "error", "message": "Internal server error", "code": 500}}
    assert interpret(json.dumps(sglang).encode()).error == "Internal server error"
    top = {"object": "error", "message": "out of memory", "type": "InternalServerError"}
    assert interpret(json.dumps(top).encode()).error == "out of memory"
    assert interpret(b'{"error": "plain text"}').error == "plain text"
    assert "unreadable" in (interpret(b"{not json").error or "")
    assert "unexpected" in (interpret(b"[1, 2]").error or "")


def test_a_content_chunk_keeps_its_text_for_the_tokenizer() -> None:
    running = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    chunk = interpret(chat(" abc def", usage=running)[6:-2])
    assert chunk.text == " abc def"
    assert chunk.usage == running
    assert interpret(json.dumps({"choices": [{"index": 0, "text": " x y"}]}).encode()).text == " x y"
