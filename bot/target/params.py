"""Typed parameters of the node command table: each validator turns a value into exact argv text.

A parameter is refused (`ParamError`, naming it) before anything is rendered, so no value a user
typed reaches a remote shell or a sudo rule unchecked. Also the paths flagbot writes (the one
drop-in and its backup), derived from the unit name only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Final

from bot.config.hook_command import HookCommandError, breaks_a_line, check_hook_command
from bot.config.unit_names import UnitNameError, check_service_name

SYSTEM_UNIT_DIR: Final = PurePosixPath("/etc/systemd/system")
DROPIN_NAME: Final = "50-flagbot.conf"
"""flagbot's own drop-in; `50-` sorts after vendor drop-ins that set defaults."""


class ParamError(ValueError):
    """A parameter value that the table refuses; the message names the parameter."""


def dropin_dir(unit: str) -> PurePosixPath:
    """`/etc/systemd/system/<unit>.d`: where systemd reads administrator drop-ins."""
    return SYSTEM_UNIT_DIR / f"{unit_name(unit)}.d"


def dropin_path(unit: str) -> PurePosixPath:
    """The one drop-in flagbot writes; the vendor unit file is never edited."""
    return dropin_dir(unit) / DROPIN_NAME


def unit_bus_path(unit: str) -> str:
    """The unit's D-Bus object path: every byte outside `[A-Za-z0-9]` as `_xx` (sd_bus_path_encode)."""
    name = unit_name(unit)
    escaped = "".join(ch if ch.isascii() and ch.isalnum() else f"_{ord(ch):02x}" for ch in name)
    return f"/org/freedesktop/systemd1/unit/{escaped}"


def dropin_backup_path(unit: str) -> PurePosixPath:
    """Backup of the drop-in's previous content. `.bak` is not a `.conf`: systemd ignores it."""
    return dropin_dir(unit) / f"{DROPIN_NAME}.bak"


# --- parameter validators: value -> the exact argv text ---------------------------------------


def unit_name(value: object) -> str:
    """The config's rule (`bot.config.unit_names`), a template refused: no command runs one."""
    try:
        return check_service_name(value)
    except UnitNameError as exc:
        raise ParamError(f"unit: {exc}") from None


def _names(pattern: str, what: str) -> Callable[[object], str]:
    compiled = re.compile(pattern)

    def check(value: object) -> str:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, Sequence) or not items:
            raise ParamError(f"{what}: give at least one name")
        for item in items:
            if not isinstance(item, str) or not compiled.match(item):
                raise ParamError(f"{what}: {item!r} is not a valid name")
        return ",".join(str(item) for item in items)

    return check


def _count(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
        raise ParamError(f"lines: {value!r} is not a count between 1 and 1000000")
    return str(value)


_JOURNAL_TIME = re.compile(r"^[0-9A-Za-z@+:. -]{1,40}$")


def _journal_time(value: object) -> str:
    """`2026-11-29 17:27:04`, `-5min`, `@1764430000`, `today`: journalctl's time syntax."""
    if not isinstance(value, str) or not _JOURNAL_TIME.match(value) or value.strip() != value:
        raise ParamError(f"since: {value!r} is not a journalctl time")
    return value


def _invocation(value: object) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{32}", value):
        raise ParamError(f"invocation: {value!r} is not a systemd InvocationID (32 hex digits)")
    return value


def _choice(*choices: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        if value not in choices:
            raise ParamError(f"{value!r} is not one of {', '.join(choices)}")
        return str(value)

    return check


def _switch(value: object) -> str:
    if not isinstance(value, bool):
        raise ParamError(f"{value!r} is not true or false")
    return ""


_PYTHON_PATH = re.compile(r"^/(?:[A-Za-z0-9_.+-]+/)*python[0-9.]*$")
"""A segment may start with a dot (`/opt/sglang/.venv/bin/python`); `/./` and `/../` are refused."""


def _python(value: object) -> str:
    """An absolute interpreter path as a unit's ExecStart names it (`/opt/venv/bin/python3`)."""
    if not isinstance(value, str) or not _PYTHON_PATH.match(value) or "/../" in value or "/./" in value:
        raise ParamError(f"python: {value!r} is not an absolute path to a python interpreter")
    return value


def _pattern(value: object) -> str:
    """A journalctl `--grep` pattern (PCRE2): one line of printable text, at most 512 characters."""
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= 512
        or any(ord(ch) < 32 or ord(ch) == 127 for ch in value)
    ):
        raise ParamError(f"pattern: {value!r} is not one line of 1-512 printable characters")
    return value


# bench_serving on node 0 (bot/bench/remote.py): every value typed, the output file's place fixed.

BENCH_OUTPUT: Final = re.compile(r"^/tmp/flagbot-bench-[0-9a-f]{32}\.jsonl$")
"""bench_serving appends to `--output-file`; flagbot names a fresh file under /tmp, reads it, removes it."""
_BASE_URL = re.compile(r"^https?://[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~/-]{0,200})?$")
_MODEL = re.compile(r"^[A-Za-z0-9_/][A-Za-z0-9._/:+-]{0,254}$")
"""A served model name, an HF id or a path; never starting with `-` (it would read as an option)."""


def _int_in(name: str, low: int, high: int) -> Callable[[object], str]:
    def check(value: object) -> str:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ParamError(f"{name}: {value!r} is not a whole number from {low} to {high}")
        return str(value)

    return check


def _rate(value: object) -> str:
    """Requests per second (`inf`: all at once, bench_serving's default)."""
    if value == "inf" or value == float("inf"):
        return "inf"
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e6:
        raise ParamError(f"request_rate: {value!r} is not a positive rate or inf")
    return repr(float(value))


def _matching(name: str, pattern: re.Pattern[str], what: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        if not isinstance(value, str) or not pattern.match(value) or "/../" in value or value.endswith("/.."):
            raise ParamError(f"{name}: {value!r} is not {what}")
        return value

    return check


_FLAG_WORD = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*(?:=.*)?$", re.DOTALL)
_NEGATIVE_NUMBER = re.compile(r"^-(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
MAX_ARGV_WORDS: Final = 2000
MAX_ARGV_WORD: Final = 16384


def _argv_words(value: object) -> list[str]:
    """An SGLang argv, one list element per word: a flag (`--x`, `--x=v`) or a value.

    Each word becomes one argv element (quoted on its own for the remote shell), so a value may
    hold spaces or quotes but never a control character or NUL (nothing that could end a line
    in the shell or the audit log); a word starting with `-` must look like a flag or a
    negative number. Whether a flag exists is the caller's business (it knows the host's list).
    """
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
        raise ParamError("argv: give a non-empty list of words")
    if len(value) > MAX_ARGV_WORDS:
        raise ParamError(f"argv: {len(value)} words, at most {MAX_ARGV_WORDS}")
    words: list[str] = []
    for word in value:
        if not isinstance(word, str) or len(word) > MAX_ARGV_WORD:
            raise ParamError(f"argv: {word!r} is not a word of at most {MAX_ARGV_WORD} characters")
        if breaks_a_line(word):
            raise ParamError(f"argv: {word!r} holds a control character or a line break")
        if word.startswith("-") and not (_FLAG_WORD.match(word) or _NEGATIVE_NUMBER.match(word)):
            raise ParamError(f"argv: {word!r} starts with '-' but is neither a flag name nor a number")
        words.append(word)
    return words


# the container launcher (`docker run ... IMAGE python3 -m sglang.launch_server ...`): the unit's
# own runtime and image, run by the login itself (never through sudo: docs/security.md)

_RUNTIME = re.compile(r"^(?:/(?:[A-Za-z0-9_.+-]+/)*)?(?:docker|podman|nerdctl)$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$")
"""An image reference as `docker run` takes it (`lmsysorg/sglang:v0.5.10`, `repo@sha256:...`); never
starting with `-` (it would read as an option)."""
_CONTAINER_PYTHON = re.compile(r"^(?:/(?:[A-Za-z0-9_.+-]+/)*)?python[0-9.]*$")
_GPUS = re.compile(r'^[A-Za-z0-9"=,:._-]{1,200}$')
_ENV_FILE = re.compile(r"^/(?:[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*/)*[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*$")


PARAMS: Final[Mapping[str, Callable[[object], str]]] = {
    "unit": unit_name,
    "properties": _names(r"^[A-Z][A-Za-z0-9]{0,63}$", "properties"),
    "since": _journal_time,
    "until": _journal_time,
    "lines": _count,
    "invocation": _invocation,
    "output": _choice("short-iso", "short-precise", "cat", "json", "export"),
    "all": _switch,
    "gpu_fields": _names(r"^[a-z][a-z0-9_.]{0,63}$", "gpu_fields"),
    "python": _python,
    "pattern": _pattern,
    "bus_property": _choice("ExecStart", "Environment", "EnvironmentFiles"),
    "runtime": _matching("runtime", _RUNTIME, "docker, podman or nerdctl (by name or absolute path)"),
    "image": _matching("image", _IMAGE, "a container image reference"),
    "container_python": _matching(
        "container_python", _CONTAINER_PYTHON, "a python interpreter (a name or an absolute path)"
    ),
    "container_gpus": _matching("container_gpus", _GPUS, "a `--gpus` value such as all or device=0,1"),
    "env_file": _matching("env_file", _ENV_FILE, "an absolute path to an EnvironmentFile="),
    "timestamp": _choice("us+utc", "utc", "unix", "pretty"),
    "bench_module": _choice("sglang.bench_serving", "sglang.benchmark.serving"),
    "bench_backend": _choice("sglang-oai", "sglang-oai-chat", "vllm", "vllm-chat", "sglang"),
    "base_url": _matching("base_url", _BASE_URL, "an http(s)://host[:port][/path] URL"),
    "bench_model": _matching("bench_model", _MODEL, "a model name or path"),
    "bench_tokenizer": _matching("bench_tokenizer", _MODEL, "a tokenizer name or path"),
    "input_len": _int_in("input_len", 1, 10_000_000),
    "output_len": _int_in("output_len", 1, 10_000_000),
    "num_prompts": _int_in("num_prompts", 1, 10_000_000),
    "max_concurrency": _int_in("max_concurrency", 1, 1_000_000),
    "request_rate": _rate,
    "seed": _int_in("seed", 0, 2**31 - 1),
    "warmup_requests": _int_in("warmup_requests", 0, 1000),
    "bench_output": _matching("bench_output", BENCH_OUTPUT, "/tmp/flagbot-bench-<32 hex>.jsonl"),  # noqa: S108
}


def _hook_words(value: object) -> list[str]:
    """A drain hook's command (`bot.config.hook_command`: the config's own rule, applied again)."""
    try:
        return check_hook_command(value)
    except HookCommandError as exc:
        raise ParamError(f"hook_argv: {exc}") from None


LIST_PARAMS: Final[Mapping[str, Callable[[object], list[str]]]] = {
    "argv": _argv_words,
    "hook_argv": _hook_words,
}
"""Parameters that render to several argv words (a `Rest` token), each validated on its own."""
DERIVED: Final[Mapping[str, Callable[[str], str]]] = {
    "dropin": lambda unit: str(dropin_path(unit)),
    "dropin_backup": lambda unit: str(dropin_backup_path(unit)),
    "dropin_dir": lambda unit: str(dropin_dir(unit)),
    "unit_bus_path": unit_bus_path,
}
"""Values computed from `unit`, never given by a caller: the paths sudo allows are fixed."""
