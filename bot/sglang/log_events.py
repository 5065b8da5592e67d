"""Recognise the SGLang startup lines that matter, one message at a time.

Each function takes the message left after `logline.parse_line` and returns a small dict, or
None when the message is not that kind of line. Formats drift between releases, so every
field is looked up on its own rather than by one positional regex; a line that lost its tail
still yields the fields it has. Numbers are bounded in length so a garbled line cannot make
`int()` raise or a float overflow to infinity.

`KEYWORDS` is the cheap pre-filter: a line that contains none of these substrings cannot be
any of the lines below, so the streaming parser never looks at it again.
"""

from __future__ import annotations

import re
from typing import Any

from bot.sglang.logline import LogLine

KEYWORDS: tuple[str, ...] = (
    "server_args=",
    "max_total_num_tokens=",
    "KV Cache is allocated",
    "Load weight ",
    "Capture ",
    "ready to roll",
    "rror",
    "xception",
    "sigquit",
    "WARN",
    "deprecated",
    "reset to",
    "adjusted to",
    "not specified",
    "because",
    "Started ",
    "Main process exited",
    "Use the profiled value",
)
"""Every line any extractor below can match contains at least one of these (all ASCII)."""

READY_TEXT = "The server is fired up and ready to roll!"

_NUM = r"-?\d{1,15}(?:\.\d{1,6})?"
_CAPACITY_RE = re.compile(
    r"\b(max_total_num_tokens|chunked_prefill_size|max_prefill_tokens|max_running_requests|"
    rf"context_len|available_gpu_mem|available_cpu_mem)=({_NUM})"
)
_CAPACITY_FIELDS = {
    "max_total_num_tokens": "max_total_num_tokens",
    "chunked_prefill_size": "chunked_prefill_size",
    "max_prefill_tokens": "max_prefill_tokens",
    "max_running_requests": "max_running_requests",
    "context_len": "context_len",
    "available_gpu_mem": "available_gpu_mem_gb",
    "available_cpu_mem": "available_cpu_mem_gb",
}
_KV_RE = re.compile(r"(dtype|#tokens|K size|V size|KV size): ([^,\s]{1,40})")
_KV_FIELDS = {"#tokens": "tokens", "K size": "k_size_gb", "V size": "v_size_gb", "KV size": "kv_size_gb"}
_WEIGHT_RE = re.compile(
    rf"(elapsed|avail mem|mem usage)=({_NUM})|\b(type|dtype|quant|fmt)=([^,\s]{{1,200}}?)(?=,|\s|$)"
)
_GRAPH_RE = re.compile(r"Capture (?P<kind>[\w ]{1,60}?) (?P<phase>begin|end)\b")
_GRAPH_NUM_RE = re.compile(rf"(Time elapsed: |elapsed=|mem usage=|avail mem=)({_NUM})")
_GRAPH_NUM_FIELDS = {
    "Time elapsed: ": "elapsed_s",
    "elapsed=": "elapsed_s",
    "mem usage=": "mem_usage_gb",
    "avail mem=": "avail_mem_gb",
}
_EXCEPTION_RE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?::(?: .*)?)?")
_ARGPARSE_RE = re.compile(r"(?:[\w.\-/ ]{0,200}: )?error: \S.*")
_KNOWN_FATAL_RE = re.compile(
    r"Initialization failed\. warmup error|Capture cuda graph failed|"
    r"Not enough memory\. Please try to increase|CUDA out of memory|OutOfMemoryError|NCCL error"
)
_WEAK_FATAL_RE = re.compile(
    r"Received sigquit from a child process|\bhit an exception\b|"
    r"Main process exited, code=(?:killed|dumped|exited, status=(?!0/)\d)"
)
_AUTO_ADJUST_RE = re.compile(
    r"\b(?:reset|adjusted) to\b|\bdeprecated\b|not specified\. Use\b|"
    r"\b(?:[Dd]isabl|[Ee]nabl)\w* [^.]{0,120}?\bbecause\b|"
    r"is larger than the profiled value .*Use the profiled value instead"
)
_STARTED_UNIT_RE = re.compile(r"Started \S.*")


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def capacity(message: str) -> dict[str, Any] | None:
    """The capacity summary a scheduler prints once its KV pool exists (all three layouts).

    `max_total_tokens=131072 is larger than the profiled value ...` is a different line: it
    lacks `max_total_num_tokens=`, so it is not taken for this one.
    """
    pos = message.find("max_total_num_tokens=")
    if pos < 0:
        return None
    values: dict[str, Any] = {}
    for key, num in _CAPACITY_RE.findall(message, pos):
        values.setdefault(_CAPACITY_FIELDS[key], _number(num))
    return values


def kv_cache(message: str) -> dict[str, Any] | None:
    """`KV Cache is allocated. ...` in its MHA, MLA (`KV size`) and 0.5.13+ (`dtype:`) forms."""
    if "KV Cache is allocated" not in message:
        return None
    values: dict[str, Any] = {}
    for key, text in _KV_RE.findall(message):
        if key == "dtype":
            values.setdefault("dtype", text)
            continue
        try:
            values.setdefault(_KV_FIELDS[key], _number(text) if len(text) <= 22 else None)
        except ValueError:
            continue
    return values


def weights(message: str) -> dict[str, Any] | None:
    """`Load weight begin. avail mem=...` and `Load weight end. [elapsed=...,] type=..., ...`."""
    stripped = message.lstrip()
    if stripped.startswith("Load weight begin"):
        phase = "begin"
    elif stripped.startswith("Load weight end"):
        phase = "end"
    else:
        return None
    values: dict[str, Any] = {"phase": phase}
    for num_key, num, text_key, text in _WEIGHT_RE.findall(message):
        if num_key:
            field = {"elapsed": "elapsed_s", "avail mem": "avail_mem_gb", "mem usage": "mem_usage_gb"}
            values.setdefault(field[num_key], _number(num))
        else:
            values.setdefault(text_key, text)
    return values


def cuda_graph(message: str) -> dict[str, Any] | None:
    """Graph capture begin/end lines: cuda, piecewise, npu, draft, 0.5.16 target/draft phases."""
    match = _GRAPH_RE.search(message)
    if match is None or match.start() > 40:
        return None
    values: dict[str, Any] = {"kind": match.group("kind"), "phase": match.group("phase")}
    for key, num in _GRAPH_NUM_RE.findall(message, match.end()):
        values.setdefault(_GRAPH_NUM_FIELDS[key], _number(num))
    return values


def fatal(line: LogLine) -> str | None:
    """'fatal', 'weak' or None: does this line say the server is dying?

    'fatal' is the error itself: the last line of a Python traceback (`RuntimeError: ...`,
    `torch.OutOfMemoryError: ...`), an argparse `error:`, or SGLang's own OOM, warmup and
    graph-capture failure messages. 'weak' lines only say that something died
    (`Received sigquit from a child process`, `Scheduler hit an exception:`, systemd's
    `Main process exited`); they stand in for the error when the real one is missing.
    Indented lines are traceback frames quoting source, glog lines are C++ library noise
    (Mooncake's `E0227 ... Failed to register memory`), and neither counts.
    """
    msg = line.message
    if not msg or msg[0] in " \t" or line.fmt == "glog":
        return None
    if line.fmt in ("bare", "logger") and (_EXCEPTION_RE.fullmatch(msg) or _ARGPARSE_RE.fullmatch(msg)):
        return "fatal"
    if _KNOWN_FATAL_RE.search(msg) and "NCCL WARN" not in msg:
        return "fatal"
    if _WEAK_FATAL_RE.search(msg):
        return "weak"
    return None


def is_warning(line: LogLine) -> bool:
    """A WARNING from SGLang's own logger, or an automatic adjustment of a flag.

    Post-init adjustments are printed bare before logging is configured (`Max running requests
    is reset to 48 ...`), with a level tag in newer releases (`WARNING server_args.py:N: ...`),
    or ANSI-coloured (`'--cuda-graph-max-bs' is deprecated ...`); all of them land here.
    NCCL `WARN` lines, glog `W` lines and Python `UserWarning`s are library noise and do not.
    """
    if line.fmt == "glog" or not line.message:
        return False
    if line.level in ("WARNING", "WARN") and line.fmt in ("sglang", "logger"):
        return True
    return bool(_AUTO_ADJUST_RE.search(line.message)) and "UserWarning" not in line.message


def unit_started(line: LogLine) -> bool:
    """systemd's `Started <unit>` line, which opens a new run of the service."""
    msg = line.message
    if not msg.startswith("Started "):
        return False
    if line.unit == "systemd":
        return True
    return (
        line.unit is None and line.fmt == "bare" and ".service" in msg and bool(_STARTED_UNIT_RE.match(msg))
    )
