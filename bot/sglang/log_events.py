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

from bot.sglang.adjustments import ADJUSTING, KNOWN, flag_of
from bot.sglang.logline import LogLine

KEYWORDS: tuple[str, ...] = (
    "server_args=",
    "max_total_num_tokens=",
    "KV Cache ",
    "SWAKVPool ",
    "KV cache dtype: ",
    "Init torch distributed ",
    "is using nccl==",
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
    "Mamba Cache ",
    "by the mamba state",
    "Setup Custom allreduce",
    "Automatically ",
    "Casting ",
    "reduced from",
    "isabl",
    "nabl",
    "change",
    "switching",
    "etting ",
    "set to",
    "verrid",
    "fall",
    "forc",
    "ncompatible",
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
_KV_STATES = (("is allocated", None), ("VA upper bound", "va_upper_bound"), ("skipped", "skipped"))
_KV_SKIPPED_RE = re.compile(r"Logical #tokens: (\d{1,15})")
_SWA_POOL_RE = re.compile(
    rf"^SWAKVPool (mem usage|VA upper bound): ({_NUM}) GB, swa size: (\d{{1,15}}), full size: (\d{{1,15}})"
)
_KV_FIELDS = {"#tokens": "tokens", "K size": "k_size_gb", "V size": "v_size_gb", "KV size": "kv_size_gb"}
_WEIGHT_RE = re.compile(
    rf"(elapsed|avail mem|mem usage)=({_NUM})|\b(type|dtype|quant|fmt)=([^,\s]{{1,200}}?)(?=,|\s|$)"
)
_DIST_RE = re.compile(rf"(elapsed|mem usage)=({_NUM}) ?(?:s|GB)\b")
_NCCL_RE = re.compile(r"is using nccl==([\w.+-]{1,40})")
_COMMITTED_RE = re.compile(rf"Committed real weights after CUDA graph capture in ({_NUM}) s")
_GRAPH_RE = re.compile(r"Capture (?P<kind>[\w ]{1,60}?) (?P<phase>begin|end)\b")
_GRAPH_NUM_RE = re.compile(rf"(Time elapsed: |elapsed=|mem usage=|avail mem=)({_NUM})")
_GRAPH_TEXT_RE = re.compile(r"\b(backend|num_tokens_per_req)=([\w.-]{1,40})")
_GRAPH_LIST_RE = re.compile(r"\b(bs|num_tokens)=\[([\d, ]{0,20000})\]")
_GRAPH_LIST_FIELDS = {"bs": "max_bs", "num_tokens": "max_num_tokens"}
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
_LAUNCHER_RE = re.compile(r"Attempt \d{1,6}\b")
_NUMBERED_RE = re.compile(r"\d{1,3}\. ")
_MAMBA_RE = re.compile(
    r"(max_mamba_cache_size|conv_state size|ssm_state size|intermediate_ssm_state_cache size|"
    rf"intermediate_conv_window_cache size): ({_NUM})"
)
_MAMBA_FIELDS = {
    "max_mamba_cache_size": "max_mamba_cache_size",
    "conv_state size": "conv_state_gb",
    "ssm_state size": "ssm_state_gb",
    "intermediate_ssm_state_cache size": "intermediate_ssm_state_cache_gb",
    "intermediate_conv_window_cache size": "intermediate_conv_window_cache_gb",
}
_MAMBA_CAP_RE = re.compile(
    r"max_running_requests is capped to (\d{1,15}) by the mamba state cache "
    r"\(max_mamba_cache_size=(\d{1,15}), (\d{1,6}) state slots per request\)"
)
CHAIN_LINKS = {
    "During handling of the above exception, another exception occurred:": "during handling of",
    "The above exception was the direct cause of the following exception:": "caused by",
}
"""Python's chained-traceback separators -> how the next exception relates to the one before."""


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
    """The KV pool line, in every form the releases print (memory_pool.py).

    `KV Cache is allocated. #tokens: N, K size: X GB, V size: Y GB` (MHA) or `..., KV size: X GB`
    (MLA) up to 0.5.12; `dtype: torch.bfloat16, ` after the first period from 0.5.13; from 0.5.19
    (`_finalize_allocation_log`) a pool label may come first (`MiniMax ... KV Cache is allocated`,
    kept as `pool`), `VA upper bound` replaces `is allocated` for a pool sized after graph capture
    (`state: "va_upper_bound"`), and a no-op pool prints `KV Cache skipped (no-op pool). Logical
    #tokens: N, ...` (`state: "skipped"`). A line of this kind without any size or token count
    gets `unparsed` with the reason.
    """
    pos = message.find("KV Cache ")
    if pos < 0:
        return _swa_pool(message)
    after = message[pos + 9 :]
    state: str | None = ""
    for text, name in _KV_STATES:
        if after.startswith(text):
            state = name
            break
    if state == "":
        return None
    values: dict[str, Any] = {}
    label = message[:pos].strip()
    if label and pos <= 120:
        values["pool"] = label
    if state is not None:
        values["state"] = state
    if state == "skipped":
        match = _KV_SKIPPED_RE.search(after)
        if match:
            values["tokens"] = int(match.group(1))
        return values
    for key, text in _KV_RE.findall(after):
        if key == "dtype":
            values.setdefault("dtype", text)
            continue
        try:
            values.setdefault(_KV_FIELDS[key], _number(text) if len(text) <= 22 else None)
        except ValueError:
            continue
    if not any(key in values for key in _KV_FIELDS.values()):
        values["unparsed"] = "no #tokens, K size, V size or KV size on a KV cache line"
    return values


def _swa_pool(message: str) -> dict[str, Any] | None:
    """A hybrid sliding-window model's two pools in one line, swa_memory_pool.py `SWAKVPool.__init__`
    (0.5.10 `SWAKVPool mem usage: X GB, swa size: N, full size: M`; 0.5.23 also `VA upper bound`
    for a pool sized after graph capture). Its two `KV Cache is allocated` lines come first, the
    window layers' pool then the full layers'; this one gives their total and which pool is the
    full one, whose size is `max_total_num_tokens` (model_runner_kv_cache_mixin.py
    `_resolve_hybrid_swa_tokens`). Kept as a KV entry with `state: "hybrid_swa"` (or
    `"hybrid_swa_va_upper_bound"`), `tokens` the full pool's, `swa_tokens` the window pool's."""
    match = _SWA_POOL_RE.match(message.lstrip()) if message.lstrip().startswith("SWAKVPool ") else None
    if match is None:
        return None
    state = "hybrid_swa" if match.group(1) == "mem usage" else "hybrid_swa_va_upper_bound"
    return {
        "pool": "SWAKVPool",
        "state": state,
        "tokens": int(match.group(4)),
        "swa_tokens": int(match.group(3)),
        "kv_size_gb": _number(match.group(2)),
    }


_KV_DTYPE_RE = re.compile(r"^Using KV cache dtype: (torch\.\w{1,40})")


def kv_dtype(message: str) -> str | None:
    """`Using KV cache dtype: torch.bfloat16` (model_runner.py `configure_kv_cache_dtype`, TP
    rank 0, 0.5.9-0.5.23): the element type of the KV pool, which `--kv-cache-dtype auto` leaves
    to the model. Capacity predictions scale the KV cell by it."""
    match = _KV_DTYPE_RE.match(message.lstrip()) if "KV cache dtype: " in message else None
    return match.group(1) if match else None


def mamba_cache(message: str) -> dict[str, Any] | None:
    """The hybrid (Mamba / linear-attention) state pool line, memory_pool.py `MambaPool.__init__`.

    0.5.9, 0.5.10 and 0.5.23 print `Mamba Cache is allocated. max_mamba_cache_size: N, conv_state
    size: X GB, ssm_state size: Y GB ` and, with speculative decoding, `intermediate_ssm_state_cache
    size: Z GB intermediate_conv_window_cache size: W GB ` after it. `max_mamba_cache_size` is the
    number of state slots of this rank's pool; the sizes are kept in GB. A line of this kind without
    the slot count gets `unparsed`.
    """
    pos = message.find("Mamba Cache is allocated")
    if pos < 0 or pos > 120:
        return None
    values: dict[str, Any] = {}
    for key, num in _MAMBA_RE.findall(message, pos):
        values.setdefault(_MAMBA_FIELDS[key], _number(num))
    if "max_mamba_cache_size" not in values:
        values["unparsed"] = "no max_mamba_cache_size on a Mamba Cache line"
    return values


def mamba_cap(message: str) -> dict[str, Any] | None:
    """0.5.23's `max_running_requests is capped to N by the mamba state cache (max_mamba_cache_size=M,
    R state slots per request). ...` (kv_cache_configurator.py `_resolve_max_num_reqs`)."""
    match = _MAMBA_CAP_RE.search(message) if "by the mamba state" in message else None
    if match is None:
        return None
    return {
        "max_running_requests": int(match.group(1)),
        "max_mamba_cache_size": int(match.group(2)),
        "ratio": int(match.group(3)),
    }


def chain_link(message: str) -> str | None:
    """ "during handling of" / "caused by" for Python's chained-traceback separator lines, else None."""
    return CHAIN_LINKS.get(message.strip())


def distributed_init(message: str) -> dict[str, Any] | None:
    """The distributed init, model_runner.py `init_torch_distributed` (and pynccl.py):
    `Init torch distributed begin.`, `sglang is using nccl==2.27.5` and `Init torch distributed
    ends. elapsed=2.87 s, mem usage=1.21 GB` (0.5.9: no `elapsed=`). Why a stage of its own: a
    rank whose peer never reaches the rendezvous stops logging after the NCCL line, so the
    begin without its end is what a stalled multi-node start shows."""
    stripped = message.lstrip()
    nccl = _NCCL_RE.search(stripped) if stripped.startswith(("sglang is using", "SGLang is using")) else None
    if nccl is not None:
        return {"phase": "nccl", "nccl": nccl.group(1)}
    if stripped.startswith("Init torch distributed begin"):
        return {"phase": "begin"}
    if not stripped.startswith("Init torch distributed ends"):
        return None
    values: dict[str, Any] = {"phase": "end"}
    for key, num in _DIST_RE.findall(stripped):
        values.setdefault("elapsed_s" if key == "elapsed" else "mem_usage_gb", _number(num))
    return values


def weights(message: str) -> dict[str, Any] | None:
    """`Load weight begin. avail mem=...` and `Load weight end. [elapsed=...,] type=..., ...`.

    0.5.23's overlapped startup load (`startup_weight_load.py`) ends with `Load weight end.
    Committed real weights after CUDA graph capture in T s (capture overlap window W s, startup
    overlap total S s)`: `T` is taken as `elapsed_s`, `committed_after_capture` is set. Releases
    before about 0.5.0 print no `elapsed=`; an `end` line with none of elapsed, type and avail mem
    gets `unparsed`.
    """
    stripped = message.lstrip()
    if stripped.startswith("Load weight begin"):
        phase = "begin"
    elif stripped.startswith("Load weight end"):
        phase = "end"
    else:
        return None
    values: dict[str, Any] = {"phase": phase}
    committed = _COMMITTED_RE.search(message) if phase == "end" else None
    if committed:
        values["elapsed_s"] = _number(committed.group(1))
        values["committed_after_capture"] = True
    for num_key, num, text_key, text in _WEIGHT_RE.findall(message):
        if num_key:
            field = {"elapsed": "elapsed_s", "avail mem": "avail_mem_gb", "mem usage": "mem_usage_gb"}
            values.setdefault(field[num_key], _number(num))
        else:
            values.setdefault(text_key, text)
    if phase == "end" and not ({"elapsed_s", "avail_mem_gb", "type"} & set(values)):
        values["unparsed"] = "no elapsed time, type or avail mem on a weight load end line"
    return values


def cuda_graph(message: str) -> dict[str, Any] | None:
    """Graph capture begin/end lines, as model_runner.py (cuda_graph_setup.py from 0.5.20) prints them.

    0.5.9-0.5.13: `Capture cuda graph begin. This can take up to several minutes. avail mem=X GB`,
    `Capture cuda graph end. Time elapsed: T s. mem usage=U GB. avail mem=A GB.` and the same for
    `piecewise CUDA graph` (and `npu graph`, `cpu graph`). 0.5.14+: `Capture <role> <phase> CUDA
    graph begin. backend=full, num_tokens_per_req=1, avail mem=X GB` (prefill: `num_tokens=[...]`)
    and `... end. [bs=[...], ]elapsed=T s, mem usage=U GB, avail mem=A GB.`; `backend`,
    `num_tokens_per_req` and the largest captured `bs` / `num_tokens` are kept. An `end` line
    without its elapsed time gets `unparsed`.
    """
    match = _GRAPH_RE.search(message)
    if match is None or match.start() > 40:
        return None
    values: dict[str, Any] = {"kind": match.group("kind"), "phase": match.group("phase")}
    rest = message[match.end() :]
    for key, num in _GRAPH_NUM_RE.findall(rest):
        values.setdefault(_GRAPH_NUM_FIELDS[key], _number(num))
    if "=" in rest:
        for key, text in _GRAPH_TEXT_RE.findall(rest):
            values.setdefault(key, int(text) if text.isdigit() else text)
        for key, items in _GRAPH_LIST_RE.findall(rest):
            numbers = [int(item) for item in items.replace(",", " ").split() if len(item) <= 15]
            if numbers:
                values.setdefault(_GRAPH_LIST_FIELDS[key], max(numbers))
    if values["phase"] == "end" and "elapsed_s" not in values:
        values["unparsed"] = "no elapsed time on a capture end line"
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


def is_warning(line: LogLine, *, in_error: bool = False) -> bool:
    """A WARNING from SGLang's own logger, or an automatic adjustment of a flag.

    Post-init adjustments are printed bare before logging is configured (`Max running requests
    is reset to 48 ...`), with a level tag in newer releases (`WARNING server_args.py:N: ...`),
    or ANSI-coloured (`'--cuda-graph-max-bs' is deprecated ...`); all of them land here, and so do
    the adjustment texts of `adjustments.KNOWN` whatever their level (up to 0.5.10 SGLang's prefix
    carries no level, and `Automatically reduce --mem-fraction-static ...` is an INFO line), and a
    bare line (`ServerArgs.__post_init__` prints before logging is configured, so without SGLang's
    prefix) that adjusts a flag it names (`FlashMLA only supports a page_size of 64, change
    page_size to 64.`, `adjustments.ADJUSTING` and `flag_of`). A prefixed line without a level
    (SGLang's prefix has none up to 0.5.23) counts only by `KNOWN` or the adjustment wordings
    above: its INFO lines often name a flag without changing it. Nor is a bare line inside an
    error message (`in_error`: after a fatal line, e.g. the numbered `Possible solutions:` of a
    graph-capture failure, `3. disable torch compile by not using --enable-torch-compile`).
    NCCL `WARN` lines, glog `W` lines and Python `UserWarning`s are library noise and do not. Nor
    are a launcher script's own lines: `Attempt N ...`, or a Python logging WARNING of a logger
    that is not SGLang's (`... - launcher - WARNING - ...`) unless its text is SGLang's.
    """
    msg = line.message
    if line.fmt == "glog" or not msg or _LAUNCHER_RE.match(msg):
        return False
    if line.level in ("WARNING", "WARN") and (
        line.fmt == "sglang" or (line.fmt == "logger" and (line.source or "").startswith("sglang"))
    ):
        return True
    if "UserWarning" in msg:
        return False
    if _AUTO_ADJUST_RE.search(msg) or any(pattern.search(msg) for pattern, _flag in KNOWN):
        return True
    return (
        line.fmt == "bare"
        and not in_error
        and not _NUMBERED_RE.match(msg)
        and msg[0] not in " \t"
        and bool(ADJUSTING.search(msg))
        and flag_of(msg) is not None
    )


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
