"""SGLang 0.5.10's log line formats, for the lines the twin prints (reference §1, §2.4-2.5, §7.1).

Why one module of format functions: flagbot's parsers are tested against real logs, so the twin
must print byte-for-byte the same shapes: `[YYYY-mm-dd HH:MM:SS<ranks>] <message>` with no level
name for SGLang's own lines (`configure_logger`), uvicorn's `INFO:     ` level prefix for its
lines, and bare text for what is printed before logging is configured (post-init warnings)
or by tqdm. The startup sequence (`startup.py`) and the runtime (HTTP server, scheduler,
shutdown) both render through here, so a format lives in exactly one place.

All `now` arguments are POSIX timestamps rendered in local time, as `logging` does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from http import HTTPStatus

READY_MESSAGE = "The server is fired up and ready to roll!"
SIGQUIT_MESSAGE = "Received sigquit from a child process. It usually means the child failed."
HEALTH_SHUTDOWN_MESSAGE = "Health check request received during shutdown. Returning 503."
GET_SERVER_INFO_DEPRECATED = (
    "Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
    "Please use '/server_info' instead."
)
GET_MODEL_INFO_DEPRECATED = (
    "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
    "Please use '/model_info' instead."
)
CACHE_FLUSHED_MESSAGE = "Cache flushed successfully!"
SCHEDULER_EXCEPTION_HEAD = "Scheduler hit an exception: Traceback (most recent call last):"


# -- prefixes ---------------------------------------------------------------------------------


def stamp(now: float, *, ms: bool = False) -> str:
    """`2026-03-09 21:45:34` (with `.123` when SGLANG_LOG_MS is on), local time."""
    text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    if ms:
        text += f".{int((now % 1) * 1000):03d}"
    return text


def prefix(now: float, ranks: str = "", *, ms: bool = False) -> str:
    """`[2026-03-09 21:45:34 TP0] `: `ranks` is the process prefix with its leading space
    (`" TP0"`, `" DP0 TP0"`) or `""` for the main process."""
    return f"[{stamp(now, ms=ms)}{ranks}] "


def line(now: float, message: str, ranks: str = "", *, ms: bool = False) -> str:
    """One SGLang log line (no trailing newline)."""
    return prefix(now, ranks, ms=ms) + message


def rank_prefix(
    tp_rank: int,
    *,
    tp_size: int,
    dp_rank: int | None = None,
    pp_rank: int = 0,
    pp_size: int = 1,
    ep_rank: int = 0,
    ep_size: int = 1,
) -> str:
    """The scheduler prefix of `run_scheduler_process` (§1.2): DP, PP, TP, EP in that order,
    each only when that parallelism is on; `""` for a single GPU."""
    text = ""
    if dp_rank is not None:
        text += f" DP{dp_rank}"
    if pp_size > 1:
        text += f" PP{pp_rank}"
    if tp_size > 1:
        text += f" TP{tp_rank}"
    if ep_size > 1:
        text += f" EP{ep_rank}"
    return text


# -- uvicorn (main process) -------------------------------------------------------------------


def uvicorn(now: float, message: str, level: str = "INFO") -> str:
    """uvicorn's default formatter as SGLang configures it: `[time] INFO:     message`."""
    return f"[{stamp(now)}] {level}:{' ' * (8 - len(level))} {message}"


def uvicorn_startup(now: float, *, pid: int, host: str, port: int) -> list[str]:
    """The four lines uvicorn prints when the HTTP server starts (stderr)."""
    return [
        uvicorn(now, f"Started server process [{pid}]"),
        uvicorn(now, "Waiting for application startup."),
        uvicorn(now, "Application startup complete."),
        uvicorn(now, f"Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)"),
    ]


def uvicorn_shutdown(now: float, *, pid: int) -> list[str]:
    """uvicorn's own shutdown lines (stderr), for a server that stops its loop cleanly."""
    return [
        uvicorn(now, "Shutting down"),
        uvicorn(now, "Waiting for application shutdown."),
        uvicorn(now, "Application shutdown complete."),
        uvicorn(now, f"Finished server process [{pid}]"),
    ]


def access(now: float, *, client: str, method: str, path: str, status: int, http_version: str = "1.1") -> str:
    """An access-log line (uvicorn writes these to **stdout**); `client` is `host:port`."""
    phrase = HTTPStatus(status).phrase
    return uvicorn(now, f'{client} - "{method} {path} HTTP/{http_version}" {status} {phrase}')


def port_in_use(now: float, *, host: str, port: int) -> str:
    """uvicorn's bind failure (then exit status 3); the errno text is Linux's."""
    return uvicorn(
        now,
        f"[Errno 98] error while attempting to bind on address ('{host}', {port}): address already in use",
        level="ERROR",
    )


# -- main process (no rank prefix) ------------------------------------------------------------


def ready(now: float) -> str:
    return line(now, READY_MESSAGE)


def chat_template(now: float, content_format: str = "string") -> str:
    return line(
        now, f"Using default HuggingFace chat template with detected content format: {content_format}"
    )


def sigterm(now: float) -> str:
    """What SGLang's asyncio SIGTERM handler logs (it gets no arguments, hence None, None)."""
    return line(now, "SIGTERM received. signum=None frame=None. Draining requests and shutting down...")


def gracefully_exiting(now: float, remaining: Sequence[str]) -> str:
    """Logged every 5 s while draining; `remaining` are request ids still running."""
    return line(
        now,
        f"Gracefully exiting... Remaining number of requests {len(remaining)}. "
        f"Remaining requests remaining_rids={list(remaining)!r}.",
    )


def health_during_shutdown(now: float) -> str:
    return line(now, HEALTH_SHUTDOWN_MESSAGE)


def get_server_info_deprecated(now: float) -> str:
    return line(now, GET_SERVER_INFO_DEPRECATED)


def get_model_info_deprecated(now: float) -> str:
    return line(now, GET_MODEL_INFO_DEPRECATED)


def sigquit(now: float) -> str:
    return line(now, SIGQUIT_MESSAGE)


def warmup_failed(now: float, traceback_text: str) -> str:
    return line(now, f"Initialization failed. warmup error: {traceback_text}")


def health_check_failed(now: float, *, timeout_s: int, tic: float, last_receive: float) -> str:
    """`/health` got nothing from the scheduler within the timeout (times as %H:%M:%S)."""
    t1 = time.strftime("%H:%M:%S", time.localtime(tic))
    t2 = time.strftime("%H:%M:%S", time.localtime(last_receive))
    return line(
        now,
        f"Health check failed. Server couldn't get a response from detokenizer for last {timeout_s} "
        f"seconds. tic start time: {t1}. last_heartbeat time: {t2}",
    )


def launch_server_user_warning(path: str, lineno: int) -> list[str]:
    """The bare `warnings.warn` lines `python -m sglang.launch_server` prints in 0.5.10 (§6)."""
    return [
        f"{path}:{lineno}: UserWarning: 'python -m sglang.launch_server' is still supported, "
        "but 'sglang serve' is the recommended entrypoint.",
        "  Example: sglang serve --model-path <model> [options]",
        "  warnings.warn(",
    ]


# -- scheduler (TP rank 0 / attention-TP rank 0) ----------------------------------------------


def _usage(token_usage: float, mamba_usage: float | None) -> str:
    """Hybrid-SSM models print full-token and mamba usage instead of `token usage`."""
    if mamba_usage is None:
        return f"token usage: {token_usage:.2f}, "
    return f"full token usage: {token_usage:.2f}, mamba usage: {mamba_usage:.2f}, "


def prefill_batch(
    now: float,
    ranks: str,
    *,
    new_seq: int,
    new_token: int,
    cached_token: int,
    token_usage: float,
    running: int,
    queued: int,
    cuda_graph: bool,
    input_throughput: float,
    mamba_usage: float | None = None,
) -> str:
    return line(
        now,
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached_token}, "
        f"{_usage(token_usage, mamba_usage)}#running-req: {running}, #queue-req: {queued}, "
        f"cuda graph: {cuda_graph}, input throughput (token/s): {input_throughput:.2f}",
        ranks,
    )


def retract(
    now: float,
    ranks: str,
    *,
    retracted: int,
    gained: int,
    old_ratio: float,
    new_ratio: float,
    mamba_gained: int | None = None,
) -> str:
    """0.5.10 `scheduler.py` `update_running_batch`, when `check_decode_mem` fails (a warning;
    SGLang's own lines carry no level name); `mamba_gained` is 0.5.23's hybrid-model field."""
    mamba = "" if mamba_gained is None else f", #mamba_num_gained: {mamba_gained}"
    return line(
        now,
        f"KV cache pool is full. Retract requests. #retracted_reqs: {retracted}, "
        f"#new_tokens_gained: {gained}{mamba}, #new_token_ratio: {old_ratio:.4f} -> {new_ratio:.4f}",
        ranks,
    )


def decode_batch(
    now: float,
    ranks: str,
    *,
    running: int,
    tokens: int,
    token_usage: float,
    cuda_graph: bool,
    gen_throughput: float,
    queued: int,
    accept_len: float | None = None,
    accept_rate: float | None = None,
    mamba_usage: float | None = None,
) -> str:
    """Logged every `--decode-log-interval` decode steps; accept len/rate with spec decoding."""
    spec = ""
    if accept_len is not None:
        spec = f"accept len: {accept_len:.2f}, accept rate: {accept_rate or 0.0:.2f}, "
    return line(
        now,
        f"Decode batch, #running-req: {running}, #token: {tokens}, {_usage(token_usage, mamba_usage)}"
        f"{spec}cuda graph: {cuda_graph}, gen throughput (token/s): {gen_throughput:.2f}, #queue-req: {queued}",
        ranks,
    )


def cache_flushed(now: float, ranks: str) -> str:
    return line(now, CACHE_FLUSHED_MESSAGE, ranks)


def cache_not_flushed(now: float, ranks: str, *, queued: int, running: int) -> str:
    return line(
        now,
        f"Cache not flushed because there are pending requests. #queue-req: {queued}, #running-req: {running}",
        ranks,
    )


def scheduler_exception(now: float, ranks: str, exception_line: str, frames: Sequence[str] = ()) -> list[str]:
    """A scheduler's fatal exception: the prefixed first line, then the traceback bare (the
    logger's message holds newlines, so the journal gets each on its own line)."""
    return [
        line(now, SCHEDULER_EXCEPTION_HEAD, ranks),
        *frames,
        exception_line,
    ]
