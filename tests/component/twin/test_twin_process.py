"""The twin as a real process, started as a node starts it, observed from outside.

Readiness is observed by polling with a short interval and a deadline, never by sleeping a
fixed time. Every process is killed by the fixtures at teardown.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import time
from typing import Any

import httpx

from bot.sglang.log import parse_log_text
from tests.support.twin_process import MODEL, Twin, TwinFactory, free_port, tiny

READY = "The server is fired up and ready to roll!"


def events_of(response: httpx.Response) -> list[Any]:
    out: list[Any] = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


# -- startup ----------------------------------------------------------------------------------


def test_unknown_flag_exits_2_before_anything_else(twins: TwinFactory) -> None:
    twin = twins.start("--bogus")
    assert twin.wait_exit() == 2
    err = twin.stderr()
    assert "error: unrecognized arguments: --bogus" in err
    assert "server_args=" not in err and "Uvicorn" not in err
    assert twin.truth() == []


def test_port_refused_while_loading_then_503_then_200(twins: TwinFactory) -> None:
    twin = twins.start()
    seen: list[int | str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        code = twin.health()
        state: int | str = "refused" if code is None else code
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == 200:
            break
        assert twin.proc.poll() is None, twin.stderr()
        time.sleep(0.01)
    assert seen == ["refused", 503, 200]
    assert READY in twin.stderr()
    # without --enable-metrics there is no /metrics route at all
    r = httpx.get(twin.base + "/metrics")
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}


def test_startup_lines_in_order_and_parsed_by_flagbot(served: Twin) -> None:
    served.wait_for(lambda: READY in served.stderr(), what="ready line")
    err = served.stderr()
    markers = [
        "server_args=ServerArgs(",
        "Load weight end.",
        "KV Cache is allocated.",
        "Capture cuda graph end.",
        "] max_total_num_tokens=",  # the capacity line follows graph capture (reference §8)
        "INFO:     Started server process",
        "INFO:     Uvicorn running on http://127.0.0.1:",
        READY,
    ]
    positions = [err.index(m) for m in markers]
    assert positions == sorted(positions)
    assert re.search(
        r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] INFO:     Started server process \[\d+\]$", err, re.M
    )
    start = next(r for r in served.truth() if r["kind"] == "start")
    report = parse_log_text(err)
    assert report.ready
    assert report.parsed["max_running_requests"] == 2
    assert report.effective["max_running_requests"] == start["effective"]["max_running_requests"] == 2
    assert report.effective["max_total_num_tokens"] == start["effective"]["max_total_num_tokens"]
    assert report.effective["context_len"] == start["effective"]["context_len"] == 40960
    assert start["argv"] == served.argv and start["pid"] == served.proc.pid
    info = httpx.get(served.base + "/server_info").json()
    assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 2
    assert info["max_total_num_tokens"] == start["effective"]["max_total_num_tokens"]
    state = json.loads(served.state_file.read_text())
    assert state["pid"] == served.proc.pid and state["phase"] == "ready"
    assert state["gpu_memory_used_mib"][0] > 1024


# -- serving ----------------------------------------------------------------------------------


def test_streaming_chat_with_usage_and_its_truth_record(served: Twin) -> None:
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Tell me a story about a twin."}],
        "max_tokens": 12,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    r = httpx.post(served.base + "/v1/chat/completions", json=body, timeout=20)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = events_of(r)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert chunks[0]["choices"][0]["delta"] == {
        "role": "assistant", "content": "", "reasoning_content": None, "tool_calls": None
    }  # fmt: skip
    text = "".join(c["choices"][0]["delta"]["content"] or "" for c in chunks if c["choices"])
    assert len(text.split()) == 12
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["completion_tokens"] == 12
    assert usage["total_tokens"] == usage["prompt_tokens"] + 12
    rid = chunks[0]["id"]
    served.wait_for(lambda: any(rec.get("id") == rid for rec in served.truth()), 5, "truth record")
    record = next(rec for rec in served.truth() if rec.get("id") == rid)
    assert record["endpoint"] == "/v1/chat/completions" and record["stream"] is True
    assert record["completion_tokens"] == 12 and record["prompt_tokens"] == usage["prompt_tokens"]
    assert record["ttft_actual_s"] >= record["ttft_sched_s"] - 0.005
    # a busy machine makes tokens late, never early: only the load-independent bound is asserted
    assert record["gap_actual_mean_s"] >= record["gap_sched_mean_s"] - 0.002


def test_streaming_completions_with_usage(served: Twin) -> None:
    body = {"prompt": "a b c d", "max_tokens": 7, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    events = events_of(httpx.post(served.base + "/v1/completions", json=body, timeout=20))
    texts = [c for c in events[:-1] if c["choices"]]
    assert len(texts) == 7 and texts[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["usage"] == {
        "prompt_tokens": 4, "total_tokens": 11, "completion_tokens": 7,
        "prompt_tokens_details": None, "reasoning_tokens": 0,
    }  # fmt: skip


def test_non_streaming_chat_completions_and_generate(served: Twin) -> None:
    chat = httpx.post(
        served.base + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "ignore_eos": True},
        timeout=20,
    ).json()
    assert chat["object"] == "chat.completion"
    assert len(chat["choices"][0]["message"]["content"].split()) == 5
    assert chat["usage"]["completion_tokens"] == 5 and chat["model"] == MODEL
    comp = httpx.post(
        served.base + "/v1/completions", json={"prompt": [1, 2, 3], "max_tokens": 3}, timeout=20
    )
    assert comp.json()["usage"]["prompt_tokens"] == 3
    gen = httpx.post(
        served.base + "/generate",
        json={"text": "a b", "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}},
        timeout=20,
    ).json()
    assert gen["meta_info"]["completion_tokens"] == 4 and len(gen["output_ids"]) == 4
    assert gen["meta_info"]["finish_reason"] == {"type": "length", "length": 4}
    models = httpx.get(served.base + "/v1/models").json()
    assert models["data"][0]["id"] == MODEL and models["data"][0]["max_model_len"] == 40960


def test_deprecated_server_info_logs_its_warning(served: Twin) -> None:
    assert httpx.get(served.base + "/get_server_info").status_code == 200
    served.wait_for(lambda: "Endpoint '/get_server_info' is deprecated" in served.stderr(), 5, "warning")
    served.wait_for(lambda: '"GET /get_server_info HTTP/1.1" 200 OK' in served.stdout(), 5, "access line")


async def test_queueing_beyond_max_running_shows_in_ttft_and_metrics(served: Twin) -> None:
    body = {
        "messages": [{"role": "user", "content": "q"}],
        "max_tokens": 60,
        "ignore_eos": True,
        "stream": True,
    }
    queue_seen = 0.0
    running_seen = 0.0

    async def scrape(client: httpx.AsyncClient, stop: asyncio.Event) -> None:
        nonlocal queue_seen, running_seen
        while not stop.is_set():
            text = (await client.get("/metrics")).text
            for line in text.splitlines():
                if line.startswith("sglang:num_queue_reqs{"):
                    queue_seen = max(queue_seen, float(line.rsplit(" ", 1)[1]))
                if line.startswith("sglang:num_running_reqs{"):
                    running_seen = max(running_seen, float(line.rsplit(" ", 1)[1]))
            await asyncio.sleep(0.01)

    async def one(client: httpx.AsyncClient) -> float:
        """TTFT as benchmark tools take it (first non-empty content); reads the stream to its end,
        since leaving early would disconnect and abort the request."""
        t0 = time.monotonic()
        ttft = None
        async with client.stream("POST", "/v1/chat/completions", json=body) as r:
            async for line in r.aiter_lines():
                if ttft is None and '"content":"' in line and '"content":""' not in line:
                    ttft = time.monotonic() - t0
        assert ttft is not None
        return ttft

    async with httpx.AsyncClient(base_url=served.base, timeout=30) as client:
        stop = asyncio.Event()
        scraper = asyncio.create_task(scrape(client, stop))
        ttfts = sorted(await asyncio.gather(*(one(client) for _ in range(6))))
        stop.set()
        await scraper
    assert queue_seen >= 1 and running_seen == 2
    # two run at once (~229 tok/s each): the third wave starts after two 60-token waves (~0.26 s each)
    # (that only two run at once is `running_seen == 2`; how fast the first two start is the load's)
    assert ttfts[4] > 0.4  # queued behind two waves: load can only make it later

    def queued_in_truth() -> int:  # the truth file is flushed once a second
        return sum(r.get("max_new") == 60 and r["queue_wait_s"] > 0.1 for r in served.truth())

    served.wait_for(lambda: queued_in_truth() >= 4, 5, "queue waits in the truth file")
    metrics = httpx.get(served.base + "/metrics").text
    assert f'sglang:max_total_num_tokens{{engine_type="unified",model_name="{MODEL}"' in metrics
    assert "sglang:generation_tokens_total" in metrics and "sglang:gen_throughput" in metrics


# -- stopping and failing ---------------------------------------------------------------------


def test_sigterm_drains_then_the_main_process_kills_itself(twins: TwinFactory) -> None:
    """SGLang's sigterm watchdog ends in `kill_process_tree(os.getpid())`: systemd sees
    `code=killed, status=9/KILL` after a drain, not an exit status."""
    twin = twins.start()
    twin.wait_ready()
    twin.proc.send_signal(signal.SIGTERM)
    assert twin.wait_exit() == -signal.SIGKILL
    err = twin.stderr()
    assert "SIGTERM received. signum=None frame=None. Draining requests and shutting down..." in err
    assert (
        "Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[]." in err
    )
    assert not twin.state_file.exists()
    assert twin.truth()[-1] == {**twin.truth()[-1], "kind": "exit", "exit_code": 0, "killed_by": "SIGKILL"}


def test_sigterm_while_loading_is_death_by_sigterm(twins: TwinFactory) -> None:
    """No SIGTERM handler exists before the server runs: the process dies of the signal, which
    systemd counts as a clean end (no restart under Restart=on-failure)."""
    slow_load = tiny()
    slow_load["timings"]["weight_load_s"] = 60.0  # still loading when the signal arrives
    twin = twins.start(scenario=slow_load)
    twin.wait_for(lambda: "Load weight begin" in twin.stderr(), what="loading")
    twin.proc.send_signal(signal.SIGTERM)
    assert twin.wait_exit() == -signal.SIGTERM
    assert twin.truth()[-1] == {**twin.truth()[-1], "kind": "exit", "killed_by": "SIGTERM"}


def test_a_failed_start_dies_of_sigkill_after_the_sigquit_line(twins: TwinFactory) -> None:
    """SGLang 0.5.10's launch-phase SIGQUIT handler SIGKILLs its own process: systemd sees
    `code=killed`, which `Restart=on-abnormal` restarts (an exit status it would not)."""
    twin = twins.start(scenario=tiny(oom_start=True))
    assert twin.wait_exit() == -signal.SIGKILL
    assert "Received sigquit from a child process." in twin.stderr()
    assert twin.truth()[-1] == {**twin.truth()[-1], "kind": "exit", "killed_by": "SIGKILL"}


def test_a_launch_line_post_init_refuses_exits_1_with_sglangs_value_error(twins: TwinFactory) -> None:
    """0.5.10 `_handle_mamba_radix_cache` raises in the main process before `server_args=`: no
    scheduler ran, so no SIGQUIT handler kills anything; Python exits 1 (`code=exited`)."""
    hybrid = tiny()
    hybrid["model"].update(
        architecture="Qwen3_5MoeForConditionalGeneration",
        hybrid={"full_attention_layers": 7, "state_bytes_per_request": 1 << 20},
    )
    twin = twins.start("--speculative-algorithm", "EAGLE", scenario=hybrid)
    assert twin.wait_exit() == 1
    err = twin.stderr()
    assert (
        err.rstrip()
        .splitlines()[-1]
        .startswith(
            "ValueError: Speculative decoding for Qwen3_5MoeForConditionalGeneration is not compatible with radix cache"
        )
    )
    assert "server_args=" not in err and "Received sigquit" not in err
    assert parse_log_text(err).startup_error == err.rstrip().splitlines()[-1]
    assert twin.truth()[-1] == {**twin.truth()[-1], "kind": "exit", "exit_code": 1, "killed_by": None}


def test_crash_after_n_seconds_is_a_sigkill_after_its_line(twins: TwinFactory) -> None:
    twin = twins.start(scenario=tiny(crash_after_s=0.3))
    twin.wait_ready()
    assert twin.wait_exit() == -signal.SIGKILL
    err = twin.stderr()
    crash = err.index("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert err.index("Scheduler hit an exception: Traceback (most recent call last):") < crash
    assert err.index("Received sigquit from a child process.") > crash
    assert parse_log_text(err).startup_error is not None or "illegal memory access" in err


# -- multi-node -------------------------------------------------------------------------------


def pair(twins: TwinFactory, extra0: tuple[str, ...] = (), extra1: tuple[str, ...] = ()) -> tuple[Twin, Twin]:
    addr = f"127.0.0.1:{free_port()}"
    common = ("--tp-size", "2", "--nnodes", "2", "--dist-init-addr", addr)
    node0 = twins.start(*common, "--node-rank", "0", *extra0)
    node1 = twins.start(*common, "--node-rank", "1", *extra1)
    return node0, node1


def test_two_nodes_rendezvous_node0_serves_node1_answers_dummy_health(twins: TwinFactory) -> None:
    node0, node1 = pair(twins)
    node1.wait_ready()
    node0.wait_ready()
    assert httpx.get(node1.base + "/v1/models").status_code == 404
    assert httpx.get(node0.base + "/v1/models").status_code == 200
    assert READY in node0.stderr() and READY not in node1.stderr()
    assert "Uvicorn running" not in node1.stderr()
    assert " TP1] " in node1.stderr() and " TP0] " in node0.stderr()


def test_node0_alone_fails_after_the_rendezvous_timeout(twins: TwinFactory) -> None:
    addr = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    node0 = twins.start("--tp-size", "2", "--nnodes", "2", "--node-rank", "0", "--dist-init-addr", addr)
    assert node0.wait_exit(30) == -signal.SIGKILL
    assert time.monotonic() - t0 >= 1.5  # the test scenario's rendezvous timeout
    err = node0.stderr()
    assert "torch.distributed.DistStoreError: Timed out after" in err and "1/2 clients joined" in err
    assert "Uvicorn" not in err


def test_differing_flags_fail_on_both_nodes(twins: TwinFactory) -> None:
    node0, node1 = pair(twins, extra0=("--mem-fraction-static", "0.8"))
    assert node0.wait_exit(30) == -signal.SIGKILL
    assert node1.wait_exit(30) == -signal.SIGKILL
    for node in (node0, node1):
        assert "NCCL error" in node.stderr()
        assert "Received sigquit from a child process." in node.stderr()


def test_failing_requests_get_sglang_error_shapes(twins: TwinFactory) -> None:
    twin = twins.start(scenario=tiny(request_failure_fraction=1.0))
    twin.wait_ready()
    chat = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 20, "ignore_eos": True}
    r = httpx.post(twin.base + "/v1/chat/completions", json=chat, timeout=20)
    assert r.status_code == 500
    assert r.json()["object"] == "error" and r.json()["code"] == 500
    events = events_of(
        httpx.post(twin.base + "/v1/chat/completions", json={**chat, "stream": True}, timeout=20)
    )
    assert events[-1] == "[DONE]" and events[-2]["error"]["type"] == "InternalServerError"
    twin.wait_for(lambda: sum(r.get("outcome") == "failed" for r in twin.truth()) >= 2, 5, "failed records")


def test_hang_during_warmup_never_turns_ready(twins: TwinFactory) -> None:
    twin = twins.start(scenario=tiny(hang_during_warmup=True))
    twin.wait_for(lambda: twin.health() == 503, what="uvicorn up, warming up")
    deadline = time.monotonic() + 1.5  # well past the scenario's 0.4 s warmup
    while time.monotonic() < deadline:
        assert twin.health() == 503
        time.sleep(0.05)
    assert READY not in twin.stderr()
    assert httpx.get(twin.base + "/model_info").status_code == 200  # the API already answers


def test_a_weight_load_hang_stops_logging_and_never_opens_the_port(twins: TwinFactory) -> None:
    """`faults.hang_in`: the start goes silent after `Load weight begin.` (engine/hangs.py), as a
    rank stuck on its checkpoint does; the process stays alive and a SIGTERM still ends it."""
    twin = twins.start(scenario=tiny(hang_in="weight_load"))
    twin.wait_for(lambda: "Load weight begin." in twin.stderr(), what="the weight load to begin")
    deadline = time.monotonic() + 1.5  # the whole tiny start takes well under a second
    while time.monotonic() < deadline:
        assert twin.health() is None and twin.proc.poll() is None
        time.sleep(0.05)
    err = twin.stderr()
    assert "Load weight end." not in err and "max_total_num_tokens=" not in err
    twin.proc.send_signal(signal.SIGTERM)
    assert twin.wait_exit() == -signal.SIGTERM


def test_busy_port_fails_after_loading_like_uvicorn(twins: TwinFactory) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        twin = twins.start(port=blocker.getsockname()[1])
        assert twin.wait_exit(30) == 3
    err = twin.stderr()
    assert "] max_total_num_tokens=" in err  # the model loaded first: the conflict shows only now
    assert re.search(
        r"ERROR:    \[Errno 98\] error while attempting to bind on address \('127\.0\.0\.1', \d+\)", err
    )
