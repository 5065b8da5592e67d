"""Read a node's unit as systemd sees it: its files, its state and the SGLang launch line.

Three views are combined, each for what it is exact at:

* `systemctl cat` — the files (vendor unit, then drop-ins, each after a `# /path` header) as
  they are on disk: the launch form (direct, docker, script: the foundation's parser decides),
  the vendor line without flagbot's drop-in, and the checksum that detects hand edits;
* `systemctl show` — the unit's state (`ActiveState`, `InvocationID`, `NRestarts`,
  `NeedDaemonReload`, ...) as loaded;
* `busctl get-property ... ExecStart` — the exact argv systemd will run. `systemctl show`
  prints it joined by spaces, which cannot tell `--x "a b"` from `--x a b`.

The flags flagbot reports and edits are the words the process receives: `$$` is a `$`, and a
`$VAR` reference is replaced by the unit's `Environment=` value. A reference to a variable
`Environment=` does not set (one from `EnvironmentFile=`) is kept as written when it is a whole
word, `${NAME}` or `--flag=${NAME}` (how a secret such as `--api-key` stays on the node, and how
`--node-rank ${NODE_RANK}` differs per node), and refused with its name in any other form
(docs/security.md#secrets). The `EnvironmentFile=` files the login can read are read too
(`file_env`): what a reference stands for is then known for validation (the dry run, the
requested values) and display (`shown_references`, secrets masked), while the drop-in keeps the
reference as written.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from bot.redaction import MASK, redactor, remember_launch
from bot.sglang.flagset import FlagSet
from bot.sglang.launch import (
    LaunchInScriptError,
    LaunchLine,
    LaunchParseError,
    parse_flags,
    parse_launch_text,
)
from bot.sglang.launch_docker import find_docker_run, with_container_env
from bot.sglang.launch_unit import parse_environment_file
from bot.target.lines import split_lines
from bot.target.privileged import dropin_path
from bot.target.ssh import NodeSession
from bot.target.systemd_quote import env_references, is_reference_word, substitute_env

MAX_ENV_FILES = 8
"""`EnvironmentFile=` files read per unit (a unit naming more is read up to this many)."""

SHOW_PROPERTIES = (
    "ExecStart",
    "ActiveState",
    "SubState",
    "InvocationID",
    "ExecMainStartTimestamp",
    "NRestarts",
    "NeedDaemonReload",
    "DropInPaths",
    "FragmentPath",
    "Environment",
    "Result",
)
_HEADER = re.compile(r"^# (/\S+)$")
_EXEC_ENTRY = re.compile(
    r"\{ path=(?P<path>.*?) ; argv\[\]=(?P<argv>.*?) ; (?:ignore_errors|flags)=(?P<flags>.*?)"
    r" ; start_time=\[(?P<start>.*?)\] ; stop_time=\[(?P<stop>.*?)\] ; pid=(?P<pid>\d+)"
    r" ; code=(?P<code>.*?) ; status=(?P<status>.*?) \}"
)
SCRIPT_ADVICE = (
    "To let flagbot edit flags, change the unit on the host so that ExecStart= runs "
    "`<python> -m sglang.launch_server <flags>` (or `sglang serve`, or `docker run ... <image> <flags>`) "
    "directly, with the script's environment as Environment= lines."
)


class UnitReadError(ValueError):
    """The unit's output could not be understood; the message names the node and what was odd."""


@dataclass(frozen=True)
class UnitFile:
    """One file of the unit as `systemctl cat` shows it."""

    path: str
    text: str


@dataclass(frozen=True)
class ExecEntry:
    """One command of `ExecStart=` as `systemctl show` prints it (argv joined by spaces)."""

    path: str
    argv_text: str
    pid: int
    status: str


@dataclass(frozen=True)
class UnitState:
    """The unit's properties as loaded by systemd (`systemctl show`)."""

    active_state: str
    sub_state: str
    invocation_id: str | None
    exec_main_start: datetime | None
    n_restarts: int
    need_daemon_reload: bool
    dropin_paths: list[str]
    fragment_path: str
    exec_start: list[ExecEntry]
    result: str = ""
    """`success`, `exit-code`, `start-limit-hit`, ...: why the unit last stopped or failed."""
    raw: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class UnitView:
    """Everything flagbot reads of one node's unit in one go (~4 commands, run concurrently)."""

    node: str
    unit: str
    cat_text: str
    files: list[UnitFile]
    state: UnitState
    exec_argv: list[str]
    """The exact argv of the (last) ExecStart command, as systemd stores it (`$$` and `$VAR` unresolved)."""
    exec_count: int
    environment: dict[str, str]
    """The unit's `Environment=` (merged, as loaded)."""
    launch: LaunchLine
    """The current launch line: entrypoint, environment and flags the process receives."""
    prefix: list[str]
    """The words before the flags (interpreter and module, or `docker run ... image`)."""
    vendor: LaunchLine | None
    """The launch line without flagbot's drop-in; None when flagbot's drop-in holds the only ExecStart."""
    file_env: dict[str, str] = field(default_factory=dict)
    """The variables of the unit's `EnvironmentFile=` files the login could read (later files win)."""
    file_env_unread: tuple[str, ...] = ()
    """`path: why` for each `EnvironmentFile=` the login could not read (its references stay unknown)."""

    @property
    def sha256(self) -> str:
        return unit_checksum(self.cat_text)

    @property
    def flags(self) -> FlagSet:
        return self.launch.flags

    @property
    def env(self) -> dict[str, str]:
        return self.launch.env

    def expand(self, argv: list[str]) -> list[str]:
        """`argv` with each reference word (`${NAME}`, `--flag=${NAME}`) whose variable an
        `EnvironmentFile=` sets replaced by its value: what the process will receive, for the dry
        run and for judging values. Never written back (the drop-in keeps the reference)."""
        return expand_references(argv, self.file_env)

    def expanded_flags(self, flags: FlagSet) -> FlagSet:
        """`flags` as the process will receive them (see `expand`)."""
        return parse_flags(self.expand(flags.argv())) if self.file_env else flags

    def shown_references(self, flags: FlagSet) -> dict[str, str]:
        """`${NAME}` -> what it stands for, for display: its value with secrets masked (a secret
        name, or the value of a secret flag), or why it is not known."""
        secret = redactor()
        shown: dict[str, str] = {}
        argv = flags.argv()
        for index, word in enumerate(argv):
            if not is_reference_word(word):
                continue
            name = env_references(word)[0]
            flag = word.partition("=")[0] if word.startswith("--") else (argv[index - 1] if index else "")
            if name not in self.file_env:
                why = "; ".join(self.file_env_unread) or "set by no EnvironmentFile= the login can read"
                shown[f"${{{name}}}"] = f"not known ({why})"
            elif secret.is_secret_name(name) or (flag.startswith("--") and secret.is_secret_flag(flag)):
                shown[f"${{{name}}}"] = MASK
            else:
                shown[f"${{{name}}}"] = secret.redact(self.file_env[name])
        return shown

    @property
    def flagbot_dropin(self) -> UnitFile | None:
        """flagbot's drop-in as systemd sees it on disk, if there is one."""
        wanted = str(dropin_path(self.unit))
        return next((item for item in self.files if item.path == wanted), None)

    def argv_with(self, flags: FlagSet, container_env: dict[str, str] | None = None) -> list[str]:
        """The full argv that runs `flags` with this unit's interpreter/wrapper.

        A secret flag whose value is the redaction mask (flags read back from the store, where
        secrets are masked) keeps the value this unit has now: flagbot never writes the mask.
        `container_env` (a container launcher only) replaces the `docker run -e` options: a
        container's environment is part of its argument list, not the unit's `Environment=`.
        """
        prefix = self.prefix
        if container_env is not None:
            if self.launch.kind != "docker":
                raise ValueError(
                    f"{self.node}: the unit does not run a container; its environment is Environment="
                )
            prefix = with_container_env(prefix, self.unmask_container_env(container_env))
        return [*prefix, *unmask_flags(flags, self.flags, self.node).argv()]

    def unmask_container_env(self, env: dict[str, str]) -> dict[str, str]:
        """`env` with each masked value replaced by the container's current one (see `argv_with`)."""
        out = dict(env)
        for name, value in env.items():
            if value == MASK:
                if name not in self.launch.env or self.launch.env[name] == MASK:
                    raise UnitReadError(_masked_gone(self.node, name))
                out[name] = self.launch.env[name]
        return out

    def unmask_env(self, env: dict[str, str]) -> dict[str, str]:
        """`env` with each masked value replaced by this unit's current one (see `argv_with`)."""
        out = dict(env)
        for name, value in env.items():
            if value == MASK:
                if name not in self.environment:
                    raise UnitReadError(_masked_gone(self.node, name))
                out[name] = self.environment[name]
        return out


def expand_references(argv: list[str], file_env: dict[str, str]) -> list[str]:
    """`argv` with each reference word whose variable `file_env` sets replaced by its value."""
    return [
        substitute_env(word, file_env)
        if is_reference_word(word) and env_references(word)[0] in file_env
        else word
        for word in argv
    ]


def _masked_gone(node: str, what: str) -> str:
    return (
        f"{node}: the value of `{what}` was redacted in flagbot's records and the unit no longer has it; "
        f"flagbot cannot write it back: set `{what}` on the node (best as a ${{VAR}} reference to an "
        "EnvironmentFile= variable)"
    )


def unmask_flags(flags: FlagSet, current: FlagSet, node: str) -> FlagSet:
    """`flags` with every masked secret value replaced by the value `current` has for that flag."""

    def masked(value: object) -> bool:
        return value == MASK or (isinstance(value, tuple) and MASK in value)

    if not any(masked(item.value) for item in flags.items):
        return flags
    now = {item.flag: item.value for item in current.items}
    items = []
    for item in flags.items:
        if masked(item.value):
            if item.flag not in now or masked(now[item.flag]):
                raise UnitReadError(_masked_gone(node, item.flag))
            item = replace(item, value=now[item.flag])
        items.append(item)
    return FlagSet(tuple(items))


def unit_checksum(cat_text: str) -> str:
    return hashlib.sha256(cat_text.encode()).hexdigest()


def split_cat(text: str, paths: list[str] | None = None) -> list[UnitFile]:
    """Split `systemctl cat` output into its files (vendor first, then drop-ins in order).

    systemctl prints `# <path>` before each file and one newline between files, so a file's
    text is exactly what lies between its header line and the newline before the next header.
    With `paths` (FragmentPath and DropInPaths from `systemctl show`) only those headers split:
    a comment inside a unit that looks like a header cannot confuse the split.
    """
    if paths is None:
        paths = [m[1] for line in text.split("\n") if (m := _HEADER.match(line))]
    files: list[UnitFile] = []
    position = 0
    current: str | None = None
    body_start = 0
    for path in paths:
        header = f"# {path}\n"
        if current is None and text.startswith(header, position):
            found = position
        else:
            found = text.find("\n" + header, position)
            if found < 0:
                continue
            found += 1
        if current is not None:
            files.append(UnitFile(current, text[body_start : found - 1]))
        current, body_start = path, found + len(header)
        position = body_start
    if current is not None:
        files.append(UnitFile(current, text[body_start:]))
    return files


def join_files(files: list[UnitFile]) -> str:
    """Files back to one unit text (comment headers kept, so parse errors name real lines)."""
    return "\n".join(f"# {item.path}\n{item.text}" for item in files)


def parse_show(text: str) -> dict[str, str]:
    """`Key=value` lines of `systemctl show` (values may contain `=`), split at `\\n` only.

    A value may hold any other line break (U+2028, `\\x85`, `\\v`, ...: `bot.target.lines`); split
    there, an `Environment=` value could forge `ActiveState=` or `NeedDaemonReload=`. systemd prints
    each property once: a key seen twice means the output is not what it seems, and is refused."""
    out: dict[str, str] = {}
    for line in split_lines(text):
        key, eq, value = line.partition("=")
        if not eq:
            continue
        if key in out:
            raise UnitReadError(f"`systemctl show` printed {key}= twice; refusing to guess which is real")
        out[key] = value
    return out


def parse_exec_property(value: str) -> list[ExecEntry]:
    """systemd's `ExecStart={ path=... ; argv[]=... ; ... }` format, one entry per command."""
    entries = [
        ExecEntry(path=m["path"], argv_text=m["argv"], pid=int(m["pid"]), status=m["status"])
        for m in _EXEC_ENTRY.finditer(value)
    ]
    if value.strip() and not entries:
        raise UnitReadError(f"cannot read ExecStart property {value[:200]!r}")
    return entries


def _timestamp(value: str) -> datetime | None:
    """`Sun 2026-11-29 20:14:49.559217 UTC` (show's `--timestamp us+utc`); empty or n/a: None."""
    value = value.strip()
    if not value or value == "n/a":
        return None
    for fmt in ("%a %Y-%m-%d %H:%M:%S.%f UTC", "%a %Y-%m-%d %H:%M:%S UTC"):
        try:
            return datetime.strptime(value, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def parse_state(text: str) -> UnitState:
    raw = parse_show(text)
    restarts = raw.get("NRestarts", "0")
    return UnitState(
        active_state=raw.get("ActiveState", ""),
        sub_state=raw.get("SubState", ""),
        invocation_id=raw.get("InvocationID") or None,
        exec_main_start=_timestamp(raw.get("ExecMainStartTimestamp", "")),
        n_restarts=int(restarts) if restarts.isdigit() else 0,
        need_daemon_reload=raw.get("NeedDaemonReload") == "yes",
        dropin_paths=raw.get("DropInPaths", "").split(),
        fragment_path=raw.get("FragmentPath", ""),
        exec_start=parse_exec_property(raw.get("ExecStart", "")),
        result=raw.get("Result", ""),
        raw=raw,
    )


def parse_bus_exec(text: str) -> list[list[str]]:
    """`busctl --json=short get-property ... ExecStart` -> the argv of each command."""
    data = json.loads(text)
    return [list(entry[1]) for entry in data["data"]]


def parse_bus_environment_files(text: str) -> list[str]:
    """`busctl --json=short get-property ... EnvironmentFiles` (`a(sb)`: path, ignore-errors) -> the paths."""
    return [str(item[0]) for item in json.loads(text)["data"]]


async def read_environment_files(session: NodeSession, paths: list[str]) -> tuple[dict[str, str], list[str]]:
    """(variables, `path: why` for each file not read) of the unit's `EnvironmentFile=` files, read
    as the login (`read-env-file`, never sudo: a root-only secrets file stays unread, and its
    references stay unknown). The secret values read are masked wherever they show up."""
    env: dict[str, str] = {}
    unread: list[str] = []
    usable = [path for path in paths[:MAX_ENV_FILES] if "*" not in path]
    results = await asyncio.gather(
        *(session.run("read-env-file", env_file=path, check=False) for path in usable), return_exceptions=True
    )
    for path, result in zip(usable, results, strict=True):
        if isinstance(result, BaseException):
            unread.append(f"{path}: {result}")
        elif result.exit_status != 0:
            error = result.stderr.decode("utf-8", "replace").strip().splitlines()
            unread.append(f"{path}: {error[-1] if error else f'cat exited {result.exit_status}'}")
        else:
            env.update(parse_environment_file(result.text))
    unread.extend(f"{path}: not read (more than {MAX_ENV_FILES} files)" for path in paths[MAX_ENV_FILES:])
    redactor().remember_mapping(env)
    return env, unread


def parse_bus_environment(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in json.loads(text)["data"]:
        name, eq, value = str(item).partition("=")
        if eq:
            env[name] = value
    return env


async def read_state(session: NodeSession) -> UnitState:
    """Only the unit's state (one ~10 ms command): for polling during a restart."""
    result = await session.run("show", properties=list(SHOW_PROPERTIES), timestamp="us+utc")
    return parse_state(result.text)


def _launch_text(files: list[UnitFile], *, without: str | None = None) -> str:
    return join_files([item for item in files if item.path != without])


def _literal(argv: list[str], env: dict[str, str], node: str) -> list[str]:
    """The words the process receives: `$$` -> `$`, `Environment=` references replaced.

    A reference to a variable `Environment=` does not set (one from `EnvironmentFile=`, whose
    value flagbot may know but never writes in its place) is kept as written when the word is a reference word (`${NAME}` or
    `--flag=${NAME}`: systemd expands it at start, and flagbot writes it back unchanged); in any
    other word it is refused, as is a literal word that would read back as a reference.
    """
    out = []
    for word in argv:
        if is_reference_word(word) and env_references(word)[0] not in env:
            out.append(word)
            continue
        try:
            literal = substitute_env(word, env)
        except KeyError as exc:
            name = exc.args[0]
            raise UnitReadError(
                f"{node}: ExecStart word {word!r} uses ${name}, which is not set by Environment= "
                "(flagbot never writes an EnvironmentFile= value in its place): flagbot keeps a reference only as a whole word, "
                f"${{{name}}} or --flag=${{{name}}}; write it so in the unit, or set {name} with Environment="
            ) from None
        if is_reference_word(literal):
            raise UnitReadError(
                f"{node}: ExecStart word {word!r} is the literal text {literal!r}, which flagbot would write "
                "back as a reference to a variable; write it differently in the unit"
            )
        out.append(literal)
    return out


async def read_unit(session: NodeSession) -> UnitView:
    """Read the unit of `session` (cat, show, and the exact ExecStart and Environment over D-Bus).

    Raises `LaunchInScriptError` when ExecStart runs a script (with what to change on the host),
    `LaunchParseError` when there is no SGLang launch line, `UnitReadError` for odd output.
    """
    cat, show, bus_exec, bus_env, bus_files = await asyncio.gather(
        session.run("cat"),
        session.run("show", properties=list(SHOW_PROPERTIES), timestamp="us+utc"),
        session.run("unit-property", bus_property="ExecStart"),
        session.run("unit-property", bus_property="Environment"),
        session.run("unit-property", bus_property="EnvironmentFiles"),
    )
    state = parse_state(show.text)
    files = split_cat(cat.text, [state.fragment_path, *state.dropin_paths] if state.fragment_path else None)
    if not files:
        raise UnitReadError(f"{session.name}: `systemctl cat {session.unit}` printed no unit file")
    commands = parse_bus_exec(bus_exec.text)
    environment = parse_bus_environment(bus_env.text)
    try:
        cat_line = parse_launch_text(_launch_text(files), kind="unit")
    except LaunchInScriptError as exc:
        raise LaunchInScriptError(f"{session.name}: {session.unit}: {exc}. {SCRIPT_ADVICE}") from None
    except LaunchParseError as exc:
        raise LaunchParseError(f"{session.name}: {session.unit}: {exc}") from None
    if not commands:
        raise UnitReadError(f"{session.name}: the loaded unit has no ExecStart (is a daemon-reload pending?)")
    exec_argv = commands[-1]
    env_files = parse_bus_environment_files(bus_files.text)
    file_env, unread = await read_environment_files(session, env_files) if env_files else ({}, [])
    literal = _literal(exec_argv, environment, session.name)
    # these secret values are masked wherever they show up (a secret flag's `${NAME}` too)
    remember_launch(expand_references(literal, file_env), environment)
    count = len(cat_line.flags.argv())
    if count > len(literal) - 1:
        raise UnitReadError(
            f"{session.name}: the loaded ExecStart {literal!r} does not match the unit files "
            "(a daemon-reload is pending?)"
        )
    split = len(literal) - count
    flags = parse_flags(literal[split:])
    docker = cat_line.kind == "docker" or find_docker_run(cat_line.wrapper) is not None
    launch = LaunchLine(
        entrypoint=cat_line.entrypoint,
        env=dict(cat_line.env) if docker else environment,
        flags=flags,
        kind="docker" if docker else cat_line.kind,
        wrapper=list(cat_line.wrapper),
        line=cat_line.line,
    )
    vendor: LaunchLine | None
    try:
        vendor = parse_launch_text(_launch_text(files, without=str(dropin_path(session.unit))), kind="unit")
    except LaunchParseError:
        vendor = None
    return UnitView(
        node=session.name,
        unit=session.unit,
        cat_text=cat.text,
        files=files,
        state=state,
        exec_argv=exec_argv,
        exec_count=len(commands),
        environment=environment,
        launch=launch,
        prefix=literal[:split],
        vendor=vendor,
        file_env=file_env,
        file_env_unread=tuple(unread),
    )
