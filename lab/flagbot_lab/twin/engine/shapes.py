"""Response bodies of the generation endpoints, in SGLang 0.5.10's wire shapes.

One `Reply` per request renders its streaming events and its complete body. Streaming events
are assembled from precomputed prefix/suffix strings around the token text because they are
built once per token at thousands per second; the complete bodies use `json.dumps`.

Shapes (SGLang's pydantic models dumped with their None fields, as `model_dump_json` does):

* chat chunk: `{"id","object":"chat.completion.chunk","created","model","choices":[{"index":0,
  "delta":{"role","content","reasoning_content","tool_calls"},"logprobs","finish_reason",
  "matched_stop"}],"usage":null}`. The first token is preceded by a role chunk
  (`{"role":"assistant","content":""}`) written in the same instant, then one chunk per token,
  then a finish chunk with an empty delta and `finish_reason`, then (with
  `stream_options.include_usage`) a `choices: []` chunk carrying `usage`, then `data: [DONE]`.
* completions chunk: `{"id","object":"text_completion","created","model","choices":[{"index":0,
  "text","logprobs","finish_reason","matched_stop"}],"usage":null}`; the finish reason rides on
  the last token's chunk; usage chunk and `[DONE]` as for chat.
* `/generate` (native): each event is `{"text": <cumulative>, "output_ids": [<cumulative>],
  "meta_info": {...}}`, `finish_reason` null until the last event, which also has
  `e2e_latency`; then `data: [DONE]`. Non-streaming returns the last event's object.
* A failing request: non-streaming gets HTTP 500 with SGLang's `ErrorResponse`
  (`{"object":"error","message","type":"InternalServerError","param":null,"code":500}`); a
  stream that already started gets that object as `data: {"error": {...}}` followed by
  `data: [DONE]`, as SGLang's OpenAI layer reports errors inside a stream.
"""

from __future__ import annotations

import json
from typing import Any

from .tokens import WORDS, text_of, word_json

__all__ = [
    "ChatReply",
    "CompletionReply",
    "DecodeSteps",
    "GenerateReply",
    "Reply",
    "error_body",
    "usage",
]

DONE = b"data: [DONE]\n\n"
TOKEN_ID_BASE = 1000


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def usage(prompt: int, completion: int, cached: int | None = None) -> dict[str, Any]:
    """OpenAI usage; `cached` only under `--enable-cache-report`, and only when non-zero
    (0.5.10 `entrypoints/openai/usage_processor.py` `_details_if_cached`)."""
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": {"cached_tokens": cached} if cached else None,
        "reasoning_tokens": 0,
    }


def error_body(message: str, status: int = 500, kind: str = "InternalServerError") -> dict[str, Any]:
    return {"object": "error", "message": message, "type": kind, "param": None, "code": status}


def finish_fields(reason: str, eos_id: int) -> tuple[str, Any]:
    """OpenAI finish_reason and SGLang's matched_stop (the EOS id when it stopped on EOS)."""
    return (reason, eos_id if reason == "stop" else None)


class DecodeSteps:
    """Which streamed token ends a chunk: each of its own, or under speculative decoding the
    tokens one decode step accepts.

    Why: real SGLang streams what a step produced; with EAGLE a step accepts several tokens, so
    a chunk carries several and a client that counts chunks under-counts tokens. The prefill's
    token goes alone; step k then ends at token floor(k x accept_length), so chunk sizes are
    the floor and ceiling of the accept length and average it over a long output.
    """

    __slots__ = ("_accept", "_next_end", "_step", "first")

    def __init__(self, accept_length: float | None) -> None:
        self._accept = accept_length if accept_length is not None and accept_length > 1 else None
        self._step = 0
        self._next_end = 0
        self.first = 0
        """The first token of the chunk not yet sent."""

    def take(self, index: int) -> int | None:
        """Token `index` was produced: the first token of the chunk it ends, or None if the
        chunk goes on."""
        if self._accept is None:
            self.first = index + 1
            return index
        if index < self._next_end:
            return None
        first = self.first
        while self._next_end <= index:
            self._step += 1
            self._next_end = int(self._step * self._accept)
        self.first = index + 1
        return first


class Reply:
    """Base: what every generation endpoint's reply knows about its request."""

    def __init__(
        self, rid: str, model: str, created: int, prompt_tokens: int, offset: int, eos_id: int
    ) -> None:
        self.rid = rid
        self.model = model
        self.created = created
        self.prompt_tokens = prompt_tokens
        self.offset = offset
        self.eos_id = eos_id
        self.include_usage = False
        self.continuous_usage = False
        self.cached_tokens = 0
        """Prompt tokens the prefix cache served (set once the request is admitted)."""
        self.cache_report = False
        self.retractions = 0
        """`--enable-cache-report`: OpenAI usage carries `prompt_tokens_details.cached_tokens`."""
        self._tail = ""

    def _usage(self, completion: int) -> dict[str, Any]:
        return usage(self.prompt_tokens, completion, self.cached_tokens if self.cache_report else None)

    def _token_tail(self, index: int) -> str:
        """The chunk tail; with `continuous_usage_stats` every chunk carries the running usage."""
        if not self.continuous_usage:
            return self._tail
        used = _dumps(self._usage(index + 1))
        return self._tail.replace('"usage":null', f'"usage":{used}')

    def _text_json(self, first: int, index: int) -> str:
        """Tokens `first`..`index` as one JSON string (one chunk under speculative decoding)."""
        if first == index:
            return word_json(self.offset, index)
        return '"' + "".join(word_json(self.offset, i)[1:-1] for i in range(first, index + 1)) + '"'

    def token(self, index: int, first: int | None = None) -> bytes:
        """The chunk that ends with token `index` and starts with `first` (default: itself)."""
        raise NotImplementedError

    def finish(self, reason: str, completion: int, e2e: float) -> bytes:
        raise NotImplementedError

    def last(self, index: int, reason: str, e2e: float, first: int | None = None) -> bytes:
        """Everything written when the last token (`index`) is emitted, `[DONE]` included."""
        return self.token(index, first) + self.finish(reason, index + 1, e2e)

    def body(self, reason: str, completion: int, e2e: float) -> dict[str, Any]:
        raise NotImplementedError

    def stream_error(self, message: str) -> bytes:
        return f"data: {_dumps({'error': error_body(message)})}\n\n".encode() + DONE

    def _usage_chunk(self, obj: str, completion: int) -> str:
        chunk = {
            "id": self.rid,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": self._usage(completion),
        }
        return f"data: {_dumps(chunk)}\n\n"


class ChatReply(Reply):
    OBJECT = "chat.completion.chunk"

    def __init__(
        self, rid: str, model: str, created: int, prompt_tokens: int, offset: int, eos_id: int
    ) -> None:
        super().__init__(rid, model, created, prompt_tokens, offset, eos_id)
        head = _dumps({"id": rid, "object": self.OBJECT, "created": created, "model": model})[:-1]
        self._head = f'data: {head},"choices":[{{"index":0,"delta":'
        self._tail = ',"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}\n\n'

    def _delta(self, role: str | None, content: str, tail: str) -> str:
        role_json = "null" if role is None else _dumps(role)
        delta = f'{{"role":{role_json},"content":{content},"reasoning_content":null,"tool_calls":null}}'
        return self._head + delta + tail

    def token(self, index: int, first: int | None = None) -> bytes:
        first = index if first is None else first
        text = self._delta(None, self._text_json(first, index), self._token_tail(index))
        if first == 0:
            text = self._delta("assistant", '""', self._tail) + text
        return text.encode()

    def finish(self, reason: str, completion: int, e2e: float) -> bytes:
        finish, matched = finish_fields(reason, self.eos_id)
        delta = '{"role":null,"content":null,"reasoning_content":null,"tool_calls":null}'
        tail = f',"logprobs":null,"finish_reason":{_dumps(finish)},"matched_stop":{_dumps(matched)}}}],"usage":null}}\n\n'
        out = self._head + delta + tail
        if self.include_usage:
            out += self._usage_chunk(self.OBJECT, completion)
        return out.encode() + DONE

    def body(self, reason: str, completion: int, e2e: float) -> dict[str, Any]:
        finish, matched = finish_fields(reason, self.eos_id)
        message = {
            "role": "assistant",
            "content": text_of(self.offset, completion),
            "reasoning_content": None,
            "tool_calls": None,
        }
        return {
            "id": self.rid,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish,
                    "matched_stop": matched,
                    "hidden_states": None,
                }
            ],
            "usage": self._usage(completion),
            "metadata": {"weight_version": "default"},
        }


class CompletionReply(Reply):
    OBJECT = "text_completion"

    def __init__(
        self, rid: str, model: str, created: int, prompt_tokens: int, offset: int, eos_id: int
    ) -> None:
        super().__init__(rid, model, created, prompt_tokens, offset, eos_id)
        head = _dumps({"id": rid, "object": self.OBJECT, "created": created, "model": model})[:-1]
        self._head = f'data: {head},"choices":[{{"index":0,"text":'
        self._tail = ',"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}\n\n'

    def token(self, index: int, first: int | None = None) -> bytes:
        first = index if first is None else first
        return (self._head + self._text_json(first, index) + self._token_tail(index)).encode()

    def finish(self, reason: str, completion: int, e2e: float) -> bytes:
        out = self._usage_chunk(self.OBJECT, completion) if self.include_usage else ""
        return out.encode() + DONE

    def last(self, index: int, reason: str, e2e: float, first: int | None = None) -> bytes:
        """SGLang puts the finish reason on the chunk that carries the last text (and, with
        `continuous_usage_stats`, the running usage, as on every chunk)."""
        first = index if first is None else first
        finish, matched = finish_fields(reason, self.eos_id)
        used = _dumps(self._usage(index + 1)) if self.continuous_usage else "null"
        tail = f',"logprobs":null,"finish_reason":{_dumps(finish)},"matched_stop":{_dumps(matched)}}}],"usage":{used}}}\n\n'
        return (self._head + self._text_json(first, index) + tail).encode() + self.finish(
            reason, index + 1, e2e
        )

    def body(self, reason: str, completion: int, e2e: float) -> dict[str, Any]:
        finish, matched = finish_fields(reason, self.eos_id)
        return {
            "id": self.rid,
            "object": self.OBJECT,
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "text": text_of(self.offset, completion),
                    "logprobs": None,
                    "finish_reason": finish,
                    "matched_stop": matched,
                    "hidden_states": None,
                }
            ],
            "usage": self._usage(completion),
            "metadata": {"weight_version": "default"},
        }


class GenerateReply(Reply):
    """SGLang's native `/generate`; text and output_ids are cumulative in every event."""

    def __init__(
        self, rid: str, model: str, created: int, prompt_tokens: int, offset: int, eos_id: int
    ) -> None:
        super().__init__(rid, model, created, prompt_tokens, offset, eos_id)
        self._text: list[str] = []
        self._ids: list[str] = []

    def _token_id(self, index: int) -> int:
        return TOKEN_ID_BASE + (self.offset + index) % len(WORDS)

    def _meta(self, reason: dict[str, Any] | None, completion: int, e2e: float | None) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": self.rid,
            "finish_reason": reason,
            "prompt_tokens": self.prompt_tokens,
            "weight_version": "default",
            "total_retractions": self.retractions,
            "completion_tokens": completion,
            "cached_tokens": self.cached_tokens,
        }
        if e2e is not None:
            meta["e2e_latency"] = round(e2e, 6)
        return meta

    def _reason(self, reason: str, completion: int) -> dict[str, Any]:
        if reason == "stop":
            return {"type": "stop", "matched": self.eos_id}
        return {"type": "length", "length": completion}

    def _event(self, index: int, meta: dict[str, Any], first: int | None = None) -> bytes:
        for i in range(index if first is None else first, index + 1):
            self._text.append(word_json(self.offset, i)[1:-1])
            self._ids.append(str(self._token_id(i)))
        text = "".join(self._text)
        return f'data: {{"text":"{text}","output_ids":[{",".join(self._ids)}],"meta_info":{_dumps(meta)}}}\n\n'.encode()

    def token(self, index: int, first: int | None = None) -> bytes:
        return self._event(index, self._meta(None, index + 1, None), first)

    def finish(self, reason: str, completion: int, e2e: float) -> bytes:
        return DONE

    def last(self, index: int, reason: str, e2e: float, first: int | None = None) -> bytes:
        """The last token's event carries the finish reason and `e2e_latency`."""
        meta = self._meta(self._reason(reason, index + 1), index + 1, e2e)
        return self._event(index, meta, first) + DONE

    def body(self, reason: str, completion: int, e2e: float) -> dict[str, Any]:
        return {
            "text": text_of(self.offset, completion),
            "output_ids": [self._token_id(i) for i in range(completion)],
            "meta_info": self._meta(self._reason(reason, completion), completion, e2e),
        }
