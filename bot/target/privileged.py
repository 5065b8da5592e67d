"""The one table of commands flagbot runs on a node, and the sudoers file generated from it.

Why one table: the commands flagbot may run as root on a GPU host are exactly the ones its sudo
rules allow, and nothing else. Keeping both in one place means a command cannot be added to the
code without appearing in the sudoers file (and in review), and the sudoers file cannot grant
more than the code uses. Reading commands (`systemctl show`, `journalctl`, `nvidia-smi`) are in
the same table, unprivileged, so every remote command flagbot runs has typed, validated
parameters and one rendering.

Rules the table keeps (checked at import by `_check_table`):

* a privileged command's arguments are literals or values derived from the unit name only,
  so the sudoers line can name the exact command, with no wildcard (sudo's `*` also matches
  `/` and spaces: `tee /etc/systemd/system/x.d/*.conf` would allow `../../anything.conf`);
* a privileged command has at least one argument (a sudoers command without arguments allows
  *any* arguments);
* programs are named by absolute path for sudo (`PROGRAMS`); sudo compares paths, and a rule
  for `systemctl restart sglang-qwen` is not one for `... sglang-qwen.service`.

Extending: add a `NodeCommand` to `COMMANDS`; a new parameter needs a validator in `PARAMS`.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from string import Formatter
from typing import Final

UNIT_NAME: Final = re.compile(r"^[A-Za-z0-9:_.@-]+\.service$")
"""The same pattern as `Target.unit` in the config schema: no spaces, no glob characters."""
USER_NAME: Final = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
SYSTEM_UNIT_DIR: Final = PurePosixPath("/etc/systemd/system")
DROPIN_NAME: Final = "50-flagbot.conf"
"""flagbot's own drop-in; `50-` sorts after vendor drop-ins that set defaults."""

PROGRAMS: Final[Mapping[str, str]] = {
    "systemctl": "/usr/bin/systemctl",
    "journalctl": "/usr/bin/journalctl",
    "tee": "/usr/bin/tee",
    "mkdir": "/usr/bin/mkdir",
    "nvidia-smi": "/usr/bin/nvidia-smi",
    "busctl": "/usr/bin/busctl",
    "cat": "/usr/bin/cat",
    "env": "/usr/bin/env",
    "rm": "/usr/bin/rm",
}
"""Absolute paths as on Debian/Ubuntu (merged /usr). Used for privileged commands, where sudo
matches the path; unprivileged commands run by bare name through the login PATH, as an operator
would type them (the twin's `nvidia-smi` need not live in /usr/bin)."""


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
    if not isinstance(value, str) or not UNIT_NAME.match(value):
        raise ParamError(f"unit: {value!r} is not a systemd service name like sglang-qwen.service")
    return value


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


_PYTHON_PATH = re.compile(r"^/(?:[A-Za-z0-9_+-][A-Za-z0-9._+-]*/)*python[0-9.]*$")


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
    "bus_property": _choice("ExecStart", "Environment"),
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
DERIVED: Final[Mapping[str, Callable[[str], str]]] = {
    "dropin": lambda unit: str(dropin_path(unit)),
    "dropin_backup": lambda unit: str(dropin_backup_path(unit)),
    "dropin_dir": lambda unit: str(dropin_dir(unit)),
    "unit_bus_path": unit_bus_path,
}
"""Values computed from `unit`, never given by a caller: the paths sudo allows are fixed."""


# --- the table ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Opt:
    """An optional argument: `flag value` when the parameter is given (`flag` alone for a switch)."""

    flag: str
    param: str


Token = str | Opt
"""A literal (which may hold `{param}` fields, filled with validated values) or an `Opt`."""


@dataclass(frozen=True)
class NodeCommand:
    name: str
    program: str
    args: tuple[Token, ...]
    privileged: bool
    doc: str
    stdin: bool = False
    """The command reads its payload on stdin (`tee` writing a file)."""

    @property
    def required(self) -> frozenset[str]:
        """Parameters a caller must give (derived ones excluded)."""
        names = {
            field
            for token in self.args
            if isinstance(token, str)
            for _, field, _, _ in Formatter().parse(token)
            if field
        }
        if names & DERIVED.keys():
            names = (names - DERIVED.keys()) | {"unit"}
        return frozenset(names)

    @property
    def optional(self) -> frozenset[str]:
        return frozenset(token.param for token in self.args if isinstance(token, Opt))


def _cmd(
    name: str, program: str, *args: Token, privileged: bool = False, stdin: bool = False, doc: str
) -> tuple[str, NodeCommand]:
    return name, NodeCommand(name, program, tuple(args), privileged, doc, stdin)


COMMANDS: Final[Mapping[str, NodeCommand]] = dict(
    [
        # privileged: each renders to exactly one sudoers line
        _cmd("daemon-reload", "systemctl", "daemon-reload", privileged=True, doc="reread unit files"),
        _cmd(
            "reset-failed",
            "systemctl",
            "reset-failed",
            "{unit}",
            privileged=True,
            doc="clear a tripped start limit so the unit can be started again",
        ),
        _cmd("start", "systemctl", "start", "{unit}", privileged=True, doc="start the unit"),
        _cmd("stop", "systemctl", "stop", "{unit}", privileged=True, doc="stop the unit"),
        _cmd("restart", "systemctl", "restart", "{unit}", privileged=True, doc="restart the unit"),
        _cmd(
            "make-dropin-dir",
            "mkdir",
            "-p",
            "{dropin_dir}",
            privileged=True,
            doc="create the drop-in directory on a host where it does not exist yet",
        ),
        _cmd(
            "write-dropin",
            "tee",
            "{dropin}",
            privileged=True,
            stdin=True,
            doc="write flagbot's drop-in (content on stdin; tee echoes it)",
        ),
        _cmd(
            "write-dropin-backup",
            "tee",
            "{dropin_backup}",
            privileged=True,
            stdin=True,
            doc="save the previous drop-in content before a write",
        ),
        # unprivileged: reading only
        _cmd(
            "cat", "systemctl", "cat", "{unit}", doc="the unit file and its drop-ins, as systemd reads them"
        ),
        _cmd(
            "show",
            "systemctl",
            "show",
            "{unit}",
            "-p",
            "{properties}",
            Opt("--timestamp", "timestamp"),
            doc="unit properties, `Key=value` per line (`timestamp='us+utc'`: parseable times)",
        ),
        _cmd(
            "journal",
            "journalctl",
            "-u",
            "{unit}",
            "--no-pager",
            Opt("-o", "output"),
            Opt("--all", "all"),
            Opt("--since", "since"),
            Opt("--until", "until"),
            Opt("-n", "lines"),
            doc="the unit's journal (ops is in systemd-journal; `--all` keeps long and odd lines)",
        ),
        _cmd(
            "journal-invocation",
            "journalctl",
            "_SYSTEMD_INVOCATION_ID={invocation}",
            "--no-pager",
            Opt("-o", "output"),
            Opt("--all", "all"),
            Opt("-n", "lines"),
            doc="the journal of one invocation of a unit (its own lines, not systemd's)",
        ),
        _cmd(
            "gpu-query",
            "nvidia-smi",
            "--query-gpu={gpu_fields}",
            "--format=csv,noheader,nounits",
            doc="GPU facts, one CSV line per GPU",
        ),
        _cmd("gpu-list", "nvidia-smi", "-L", doc="GPU names and UUIDs"),
        _cmd(
            "journal-grep",
            "journalctl",
            "-u",
            "{unit}",
            "--no-pager",
            "--all",
            "-o",
            "short-iso-precise",
            "--grep",
            "{pattern}",
            Opt("--since", "since"),
            Opt("-n", "lines"),
            doc="the unit's journal lines matching a PCRE2 pattern, filtered by journalctl on the host",
        ),
        _cmd(
            "journal-grep-invocation",
            "journalctl",
            "INVOCATION_ID={invocation}",
            "+",
            "_SYSTEMD_INVOCATION_ID={invocation}",
            "--no-pager",
            "--all",
            "-o",
            "short-iso-precise",
            "--grep",
            "{pattern}",
            Opt("-n", "lines"),
            doc="matching lines of one invocation: the service's own and systemd's about it",
        ),
        _cmd(
            "journal-starts",
            "journalctl",
            "-u",
            "{unit}",
            "MESSAGE_ID=39f53479d3a045ac8e11786248231fbf",
            "--no-pager",
            "-o",
            "json",
            "--output-fields=INVOCATION_ID",
            "--reverse",
            "-n",
            "{lines}",
            doc="the unit's last starts (systemd's `Started` message), newest first, with their InvocationID",
        ),
        _cmd(
            "sglang-help",
            "env",
            "{python}",
            "-m",
            "sglang.launch_server",
            "--help",
            doc="SGLang's own flag list, from the interpreter the unit's ExecStart names",
        ),
        _cmd(
            "sglang-version",
            "env",
            "{python}",
            "-c",
            "import sglang; print(sglang.__version__)",
            doc="the installed SGLang version (the server may be down; /server_info needs it up)",
        ),
        _cmd(
            "journal-follow",
            "journalctl",
            "-u",
            "{unit}",
            "--follow",
            "--no-pager",
            Opt("-o", "output"),
            Opt("--all", "all"),
            Opt("--since", "since"),
            Opt("-n", "lines"),
            doc="follow the unit's journal (streamed; flagbot ends it by closing the stream)",
        ),
        _cmd(
            "unit-property",
            "busctl",
            "--json=short",
            "get-property",
            "org.freedesktop.systemd1",
            "{unit_bus_path}",
            "org.freedesktop.systemd1.Service",
            "{bus_property}",
            doc="one unit property as JSON: the exact argv of ExecStart, which `systemctl show` "
            "prints joined by spaces (ambiguous for arguments holding spaces)",
        ),
        _cmd(
            "read-dropin",
            "cat",
            "{dropin}",
            doc="flagbot's drop-in as it is on disk (exits 1 when there is none yet)",
        ),
        _cmd(
            "read-dropin-backup",
            "cat",
            "{dropin_backup}",
            doc="the backup of the drop-in's previous content",
        ),
        _cmd(
            "bench-serving",
            "env",
            "{python}",
            "-m",
            "{bench_module}",
            "--backend",
            "{bench_backend}",
            "--base-url",
            "{base_url}",
            "--dataset-name",
            "random-ids",
            "--random-input-len",
            "{input_len}",
            "--random-output-len",
            "{output_len}",
            "--random-range-ratio",
            "1.0",
            "--num-prompts",
            "{num_prompts}",
            "--request-rate",
            "{request_rate}",
            Opt("--max-concurrency", "max_concurrency"),
            Opt("--model", "bench_model"),
            Opt("--tokenizer", "bench_tokenizer"),
            "--seed",
            "{seed}",
            "--warmup-requests",
            "{warmup_requests}",
            "--output-file",
            "{bench_output}",
            "--output-details",
            doc="SGLang's own benchmark client on node 0, fixed lengths (random-ids needs no download)",
        ),
        _cmd("read-bench-output", "cat", "{bench_output}", doc="the JSONL bench-serving appended to"),
        _cmd("remove-bench-output", "rm", "-f", "{bench_output}", doc="remove bench-serving's output file"),
    ]
)


def _check_table() -> None:
    """The table's promises, checked at import so a bad extension fails every test at once."""
    for command in COMMANDS.values():
        unknown = (command.required | command.optional) - PARAMS.keys()
        if unknown:
            raise AssertionError(f"{command.name}: parameters without a validator: {sorted(unknown)}")
        if command.program not in PROGRAMS:
            raise AssertionError(f"{command.name}: program {command.program!r} has no absolute path")
        if command.privileged and (command.optional or command.required - {"unit"} or not command.args):
            raise AssertionError(f"{command.name}: a privileged command takes literals and the unit only")


_check_table()


# --- rendering ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rendered:
    """One command ready to run: `argv` for a local exec, `shell` for a remote shell (SSH)."""

    command: NodeCommand
    argv: list[str]

    @property
    def shell(self) -> str:
        return shlex.join(self.argv)


def _fill(command: NodeCommand, params: Mapping[str, object]) -> list[str]:
    values: dict[str, str] = {}
    for name, value in params.items():
        if name not in command.required | command.optional:
            raise ParamError(f"{command.name} takes no parameter {name!r}")
        if value is not None:
            values[name] = PARAMS[name](value)
    missing = command.required - values.keys()
    if missing:
        raise ParamError(f"{command.name} needs {', '.join(sorted(missing))}")
    if "unit" in values:
        values |= {key: derive(values["unit"]) for key, derive in DERIVED.items()}
    out: list[str] = []
    for token in command.args:
        if isinstance(token, Opt):
            raw = params.get(token.param)
            if isinstance(raw, bool):
                out.extend([token.flag] if raw else [])
            elif token.param in values:
                out.extend([token.flag, values[token.param]])
            continue
        out.append(token.format_map(values))
    return out


def render(
    name: str, *, sudo: bool = True, programs: Mapping[str, str] = PROGRAMS, **params: object
) -> Rendered:
    """The argv of table command `name`, with validated parameters.

    Privileged commands get `sudo -n` (never prompt: a missing rule fails at once with
    `a password is required` instead of hanging) and the program's absolute path, the form the
    sudoers line names. `sudo=False` is for a target that logs in as root.
    """
    return render_params(name, params, sudo=sudo, programs=programs)


def render_params(
    name: str, params: Mapping[str, object], *, sudo: bool = True, programs: Mapping[str, str] = PROGRAMS
) -> Rendered:
    """`render` with the parameters as a mapping (for callers that pass them through)."""
    command = COMMANDS.get(name)
    if command is None:
        raise ParamError(f"no node command {name!r}; known: {', '.join(COMMANDS)}")
    args = _fill(command, params)
    if not command.privileged:
        return Rendered(command, [command.program, *args])
    program = programs[command.program]
    return Rendered(command, [*(["sudo", "-n"] if sudo else []), program, *args])


# --- sudoers ------------------------------------------------------------------------------------

_SUDOERS_SPECIAL = re.compile(r"([\\,:=])")


def _sudoers_word(text: str) -> str:
    """sudoers(5): `,` `:` `=` and `\\` in command arguments are escaped; glob characters refused."""
    if re.search(r"[*?\[\]\s!#\"']", text):
        raise ParamError(f"{text!r} cannot appear in an exact sudoers rule")
    return _SUDOERS_SPECIAL.sub(r"\\\1", text)


def sudoers_text(user: str, unit: str, *, programs: Mapping[str, str] = PROGRAMS) -> str:
    """The sudoers file that lets `user` run exactly the privileged commands for `unit`.

    One line per command, absolute paths, every argument spelled out: sudo then refuses any
    other argument list, path or unit. Install it as `/etc/sudoers.d/flagbot` (mode 0440) after
    checking it with `validate_sudoers`.
    """
    if not USER_NAME.match(user):
        raise ParamError(f"user: {user!r} is not a login name")
    unit_name(unit)
    lines = [
        f"# flagbot: what {user} may run as root for {unit}. Generated from bot/target/privileged.py;",
        "# one exact command per line (no wildcards). Regenerate instead of editing.",
    ]
    for command in COMMANDS.values():
        if command.privileged:
            params = {"unit": unit} if "unit" in command.required else {}
            argv = render(command.name, sudo=False, programs=programs, **params).argv
            if not argv[0].startswith("/"):
                raise ParamError(f"{command.program}: sudoers needs an absolute path, got {argv[0]!r}")
            words = " ".join(_sudoers_word(word) for word in argv)
            lines.append(f"{user} ALL=(root) NOPASSWD: {words}")
    return "\n".join(lines) + "\n"


def missing_programs(root: Path = Path("/"), *, programs: Mapping[str, str] = PROGRAMS) -> list[str]:
    """Privileged programs whose absolute path does not exist under `root` (a node's tree)."""
    needed = {COMMANDS[name].program for name in COMMANDS if COMMANDS[name].privileged}
    return sorted(programs[prog] for prog in needed if not (root / programs[prog].lstrip("/")).exists())


def validate_sudoers(text: str, *, visudo: str = "/usr/sbin/visudo") -> None:
    """Run `visudo -cf` on `text`; raise `ValueError` with visudo's message when it is refused."""
    with tempfile.NamedTemporaryFile("w", prefix="flagbot-sudoers-", suffix=".tmp") as handle:
        handle.write(text)
        handle.flush()
        result = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [visudo, "-cf", handle.name], capture_output=True, text=True, check=False
        )
    if result.returncode != 0:
        raise ValueError(f"visudo refused the sudoers file: {(result.stderr or result.stdout).strip()}")
