"""Parsing and validating the generation requests (`/v1/chat/completions`, `/v1/completions`,
`/generate`) into one `GenSpec`, with SGLang's error wording.

Why one shape: the scheduler only needs prompt tokens, the output budget and whether EOS may
end the output early; the endpoint only needs how to render. What differs per endpoint is
where those values live in the body and their defaults (SGLang 0.5.10: completions
`max_tokens` 16, `/generate` `max_new_tokens` 128, chat unbounded up to the context length).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .prefix import chat_key, ids_key, text_key
from .tokens import content_text, count_chat_tokens, count_text_tokens

__all__ = [
    "BadRequestError",
    "GenSpec",
    "parse_chat",
    "parse_completion",
    "parse_generate",
    "validate_length",
]

COMPLETION_DEFAULT_MAX = 16
GENERATE_DEFAULT_MAX = 128


class BadRequestError(Exception):
    """A 400 with SGLang's message."""


@dataclass
class GenSpec:
    kind: str
    prompt_tokens: int
    max_new: int | None
    ignore_eos: bool
    stream: bool
    include_usage: bool = False
    continuous_usage: bool = False
    model: str | None = None
    prompt_key: str | None = None
    """The prompt as the prefix cache sees it (`prefix.py`)."""


def _obj(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequestError("Input should be a valid dictionary or object to extract fields from")
    return body


def _int_or_none(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequestError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _stream_options(body: dict[str, Any]) -> tuple[bool, bool]:
    opts = body.get("stream_options")
    if not isinstance(opts, dict):
        return False, False
    return bool(opts.get("include_usage")), bool(opts.get("continuous_usage_stats"))


def parse_chat(body: Any) -> GenSpec:
    body = _obj(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequestError("Messages cannot be empty.")
    max_new = _int_or_none(body.get("max_completion_tokens"), "max_completion_tokens")
    if max_new is None:
        max_new = _int_or_none(body.get("max_tokens"), "max_tokens")
    include, continuous = _stream_options(body)
    return GenSpec(
        kind="chat",
        prompt_tokens=count_chat_tokens(messages),
        prompt_key=chat_key(
            [
                (str(m.get("role", "")), content_text(m.get("content")))
                for m in messages
                if isinstance(m, dict)
            ]
        ),
        max_new=max_new,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=bool(body.get("stream", False)),
        include_usage=include,
        continuous_usage=continuous,
        model=body.get("model") if isinstance(body.get("model"), str) else None,
    )


def _prompt_tokens(prompt: Any) -> tuple[int, str]:
    """A string, a list of token ids, or a one-element list of either (batches unsupported);
    (tokens, prefix-cache key)."""
    if isinstance(prompt, str):
        return count_text_tokens(prompt), text_key(prompt)
    if isinstance(prompt, list) and prompt:
        if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return len(prompt), ids_key(prompt)
        if len(prompt) == 1:
            return _prompt_tokens(prompt[0])
        raise BadRequestError("The twin serves one prompt per request; batched prompts are not supported.")
    raise BadRequestError("Input should be a valid string or a list of token ids")


def parse_completion(body: Any) -> GenSpec:
    body = _obj(body)
    if "prompt" not in body:
        raise BadRequestError("Field required: prompt")
    max_new = _int_or_none(body.get("max_tokens", COMPLETION_DEFAULT_MAX), "max_tokens")
    include, continuous = _stream_options(body)
    tokens, key = _prompt_tokens(body["prompt"])
    return GenSpec(
        kind="completion",
        prompt_tokens=tokens,
        prompt_key=key,
        max_new=COMPLETION_DEFAULT_MAX if max_new is None else max_new,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=bool(body.get("stream", False)),
        include_usage=include,
        continuous_usage=continuous,
        model=body.get("model") if isinstance(body.get("model"), str) else None,
    )


def parse_generate(body: Any) -> GenSpec:
    body = _obj(body)
    params = body.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise BadRequestError("sampling_params must be an object")
    ids = body.get("input_ids")
    text = body.get("text")
    key: str | None
    if isinstance(ids, list) and ids:
        if isinstance(ids[0], list):
            raise BadRequestError(
                "The twin serves one prompt per request; batched input_ids are not supported."
            )
        whole = all(isinstance(t, int) and not isinstance(t, bool) for t in ids)
        prompt, key = len(ids), ids_key(ids) if whole else None
    elif isinstance(text, str):
        prompt, key = count_text_tokens(text), text_key(text)
    elif isinstance(text, list) and len(text) == 1 and isinstance(text[0], str):
        prompt, key = count_text_tokens(text[0]), text_key(text[0])
    else:
        raise BadRequestError("Either text or input_ids should be provided.")
    max_new = _int_or_none(params.get("max_new_tokens", GENERATE_DEFAULT_MAX), "max_new_tokens")
    return GenSpec(
        kind="generate",
        prompt_tokens=prompt,
        prompt_key=key,
        max_new=GENERATE_DEFAULT_MAX if max_new is None else max_new,
        ignore_eos=bool(params.get("ignore_eos", False)),
        stream=bool(body.get("stream", False)),
    )


def validate_length(spec: GenSpec, context_len: int) -> None:
    """SGLang's `_validate_one_request` checks, word for word."""
    if spec.prompt_tokens >= context_len:
        raise BadRequestError(
            f"The input ({spec.prompt_tokens} tokens) is longer than the model's context length "
            f"({context_len} tokens)."
        )
    if spec.max_new is not None and spec.max_new + spec.prompt_tokens > context_len:
        total = spec.max_new + spec.prompt_tokens
        raise BadRequestError(
            f"Requested token count exceeds the model's maximum context length of {context_len} tokens. "
            f"You requested a total of {total} tokens: {spec.prompt_tokens} tokens from the input messages "
            f"and {spec.max_new} tokens for the completion. Please reduce the number of tokens in the input "
            "messages or the completion to fit within the limit."
        )
