"""The twin's prefix cache seen over HTTP: a shared system prompt is served from the cache,
reported as `cached_tokens` (in `/generate`'s meta_info always, in OpenAI usage under
`--enable-cache-report`), and prefilled faster than with `--disable-radix-cache`.

Requests go one at a time, and TTFT is compared on the twin's own scheduled figures (the truth
file's `ttft_sched_s`), which do not depend on the machine's load.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.twin_process import Twin, TwinFactory

SYSTEM = "You answer questions about the house style guide, briefly and with one example. " * 60


def chat(twin: Twin, question: str) -> dict[str, Any]:
    body = {
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        "max_tokens": 4,
        "ignore_eos": True,
    }
    reply: dict[str, Any] = httpx.post(twin.base + "/v1/chat/completions", json=body, timeout=30).json()
    return reply


def generate(twin: Twin, question: str) -> dict[str, Any]:
    body = {"text": SYSTEM + question, "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
    reply: dict[str, Any] = httpx.post(twin.base + "/generate", json=body, timeout=30).json()
    return reply


def ttft_sched(twin: Twin, rid: str) -> float:
    twin.wait_for(lambda: any(r.get("id") == rid for r in twin.truth()), 5, f"truth record of {rid}")
    record = next(r for r in twin.truth() if r.get("id") == rid)
    value: float = record["ttft_sched_s"]
    return value


def run(twin: Twin) -> dict[str, Any]:
    twin.wait_ready()
    first, second = chat(twin, "What is a serial comma?"), chat(twin, "How are dates written?")
    gen_first, gen_second = generate(twin, "Headings?"), generate(twin, "Numbers?")
    return {
        "details": [first["usage"]["prompt_tokens_details"], second["usage"]["prompt_tokens_details"]],
        "prompt_tokens": second["usage"]["prompt_tokens"],
        "generate_cached": [
            gen_first["meta_info"]["cached_tokens"],
            gen_second["meta_info"]["cached_tokens"],
        ],
        "ttft": [ttft_sched(twin, first["id"]), ttft_sched(twin, second["id"])],
    }


def test_shared_prefix_is_cached_and_prefilled_faster_than_without_the_radix_cache(
    twins: TwinFactory,
) -> None:
    radix = twins.start("--enable-cache-report")
    no_radix = twins.start("--enable-cache-report", "--disable-radix-cache")
    on, off = run(radix), run(no_radix)

    assert on["details"][0] is None  # nothing cached yet: SGLang leaves the details out
    cached = on["details"][1]["cached_tokens"]
    assert len(SYSTEM) // 4 <= cached < on["prompt_tokens"]
    assert on["generate_cached"][1] >= len(SYSTEM) // 4
    assert on["ttft"][1] < on["ttft"][0] / 5  # the second prefill is the question alone

    assert off["details"] == [None, None] and off["generate_cached"] == [0, 0]
    assert on["ttft"][1] < off["ttft"][1] / 5


def test_openai_usage_has_no_cache_details_without_enable_cache_report(twins: TwinFactory) -> None:
    twin = twins.start()
    twin.wait_ready()
    chat(twin, "First?")
    assert chat(twin, "Second?")["usage"]["prompt_tokens_details"] is None
    generate(twin, "Third?")
    assert generate(twin, "Fourth?")["meta_info"]["cached_tokens"] > 0  # /generate always reports it
