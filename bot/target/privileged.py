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
  for `systemctl stop sglang-qwen` is not one for `... sglang-qwen.service`.

No `systemctl restart`: flagbot restarts a target as stop-every-rank then start-every-rank
(`bot/target/restart.py`), so a restart entry would be a grant no code path needs (docs/security.md).
A privileged entry is granted only while flagbot's own code runs it
(tests/unit/target/test_privileged_usage.py).

Extending: add a `NodeCommand` to `COMMANDS`; a new parameter needs a validator in `PARAMS`
(or in `LIST_PARAMS` for a `Rest` token: several words, each quoted on its own, unprivileged only).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from bot.target.command_spec import NodeCommand, Opt, Rest, entry
from bot.target.params import (
    DERIVED,
    DROPIN_NAME,
    LIST_PARAMS,
    PARAMS,
    SYSTEM_UNIT_DIR,
    ParamError,
    dropin_backup_path,
    dropin_dir,
    dropin_path,
    unit_bus_path,
    unit_name,
)

__all__ = [
    "COMMANDS",
    "DERIVED",
    "DROPIN_NAME",
    "DRY_RUN_PROGRAM",
    "LIST_PARAMS",
    "PARAMS",
    "PROGRAMS",
    "SYSTEM_UNIT_DIR",
    "USER_NAME",
    "NodeCommand",
    "Opt",
    "ParamError",
    "Rendered",
    "Rest",
    "dropin_backup_path",
    "dropin_dir",
    "dropin_path",
    "render",
    "render_params",
    "unit_bus_path",
    "unit_name",
]


USER_NAME: Final = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")

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
    "sudo": "/usr/bin/sudo",
}
"""Absolute paths as on Debian/Ubuntu (merged /usr). Used for privileged commands, where sudo
matches the path; unprivileged commands run by bare name through the login PATH, as an operator
would type them (the twin's `nvidia-smi` need not live in /usr/bin)."""

# --- the table ----------------------------------------------------------------------------------

DRY_RUN_PROGRAM: Final = (
    "import sys; from sglang.srt.server_args import prepare_server_args; "
    'print("server_args=" + repr(prepare_server_args(sys.argv[1:])), flush=True)'
)
"""Run by `python -c` with the flags as its argv: SGLang's own `prepare_server_args` (argparse,
then `ServerArgs.__post_init__`), printed as the startup line prints it. Bad flags exit 2 with
argparse's message; post-init warnings go to stderr. No braces: the text is a table literal."""


CONTAINER_RUN: Final = ("{runtime}", "run", "--rm", "--pull", "never", "--network", "none")
"""How flagbot starts the unit's image for a question: removed afterwards, never pulled (the image the
unit runs is already there, and flagbot must not fetch another), no network (a flag list and a dry run
need none)."""


COMMANDS: Final[Mapping[str, NodeCommand]] = dict(
    [
        # privileged: each renders to exactly one sudoers line
        entry("daemon-reload", "systemctl", "daemon-reload", privileged=True, doc="reread unit files"),
        entry(
            "reset-failed",
            "systemctl",
            "reset-failed",
            "{unit}",
            privileged=True,
            doc="clear a tripped start limit so the unit can be started again",
        ),
        entry("start", "systemctl", "start", "{unit}", privileged=True, doc="start the unit"),
        entry("stop", "systemctl", "stop", "{unit}", privileged=True, doc="stop the unit"),
        entry(
            "make-dropin-dir",
            "mkdir",
            "-p",
            "{dropin_dir}",
            privileged=True,
            doc="create the drop-in directory on a host where it does not exist yet",
        ),
        entry(
            "write-dropin",
            "tee",
            "{dropin}",
            privileged=True,
            stdin=True,
            doc="write flagbot's drop-in (content on stdin; tee echoes it)",
        ),
        entry(
            "write-dropin-backup",
            "tee",
            "{dropin_backup}",
            privileged=True,
            stdin=True,
            doc="save the previous drop-in content before a write",
        ),
        # unprivileged: reading only
        entry(
            "cat", "systemctl", "cat", "{unit}", doc="the unit file and its drop-ins, as systemd reads them"
        ),
        entry(
            "show",
            "systemctl",
            "show",
            "{unit}",
            "-p",
            "{properties}",
            Opt("--timestamp", "timestamp"),
            doc="unit properties, `Key=value` per line (`timestamp='us+utc'`: parseable times)",
        ),
        entry(
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
        entry(
            "journal-invocation",
            "journalctl",
            "_SYSTEMD_INVOCATION_ID={invocation}",
            "--no-pager",
            Opt("-o", "output"),
            Opt("--all", "all"),
            Opt("-n", "lines"),
            doc="the journal of one invocation of a unit (its own lines, not systemd's)",
        ),
        entry(
            "gpu-query",
            "nvidia-smi",
            "--query-gpu={gpu_fields}",
            "--format=csv,noheader,nounits",
            doc="GPU facts, one CSV line per GPU",
        ),
        entry("gpu-list", "nvidia-smi", "-L", doc="GPU names and UUIDs"),
        entry(
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
        entry(
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
        entry(
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
        entry(
            "sglang-help",
            "env",
            "{python}",
            "-m",
            "sglang.launch_server",
            "--help",
            doc="SGLang's own flag list, from the interpreter the unit's ExecStart names",
        ),
        entry(
            "sglang-version",
            "env",
            "{python}",
            "-c",
            "import sglang; print(sglang.__version__)",
            doc="the installed SGLang version (the server may be down; /server_info needs it up)",
        ),
        entry(
            "sglang-dry-run",
            "env",
            "{python}",
            "-c",
            DRY_RUN_PROGRAM,
            Rest("argv"),
            doc="SGLang's own argument resolution (argparse, then post-init) for a flag argv, printed "
            "as `server_args=...`; loads no model, binds no port",
        ),
        # the same three through the unit's container runtime and image, as the login itself (its
        # own docker-group or rootless access; never sudo: sudoers grants no runtime)
        entry(
            "container-sglang-help",
            "env",
            *CONTAINER_RUN,
            "--entrypoint",
            "{container_python}",
            "{image}",
            "-m",
            "sglang.launch_server",
            "--help",
            doc="SGLang's own flag list, from the image and interpreter the unit's `docker run` names",
        ),
        entry(
            "container-sglang-version",
            "env",
            *CONTAINER_RUN,
            "--entrypoint",
            "{container_python}",
            "{image}",
            "-c",
            "import sglang; print(sglang.__version__)",
            doc="the SGLang version of the unit's image",
        ),
        entry(
            "container-sglang-dry-run",
            "env",
            *CONTAINER_RUN,
            Opt("--gpus", "container_gpus"),
            "--entrypoint",
            "{container_python}",
            "{image}",
            "-c",
            DRY_RUN_PROGRAM,
            Rest("argv"),
            doc="SGLang's argument resolution inside the unit's image (`--gpus` as the unit gives it, so "
            "post-init sees the GPUs); no network, loads no model",
        ),
        entry(
            "read-env-file",
            "cat",
            "--",
            "{env_file}",
            doc="an EnvironmentFile= the unit names, read as the login (a file it cannot read stays unread); "
            "`--` keeps its rendering apart from `read-dropin`'s",
        ),
        entry(
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
        entry(
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
        entry(
            "read-dropin",
            "cat",
            "{dropin}",
            doc="flagbot's drop-in as it is on disk (exits 1 when there is none yet)",
        ),
        entry(
            "read-dropin-backup",
            "cat",
            "{dropin_backup}",
            doc="the backup of the drop-in's previous content",
        ),
        entry(
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
        entry(
            "sudo-list",
            "sudo",
            "-l",
            "-n",
            doc="what the login may run through sudo (never prompting) (`config check --connect` "
            "compares it with the generated sudoers file); grants nothing",
        ),
        entry(
            "hook-command",
            "env",
            "--",
            Rest("hook_argv"),
            doc="a drain hook the config names (`[targets.X.drain] stop_hook`/`resume_hook` with "
            "`command`), run as the login, never through sudo",
        ),
        entry("read-bench-output", "cat", "{bench_output}", doc="the JSONL bench-serving appended to"),
        entry("remove-bench-output", "rm", "-f", "{bench_output}", doc="remove bench-serving's output file"),
    ]
)


def _check_table() -> None:
    """The table's promises, checked at import so a bad extension fails every test at once."""
    for command in COMMANDS.values():
        rests = [token for token in command.args if isinstance(token, Rest)]
        lists = {token.param for token in rests}
        unknown = ((command.required | command.optional) - lists - PARAMS.keys()) | (
            lists - LIST_PARAMS.keys()
        )
        if unknown:
            raise AssertionError(f"{command.name}: parameters without a validator: {sorted(unknown)}")
        if rests and (len(rests) > 1 or command.args[-1] is not rests[0]):
            raise AssertionError(f"{command.name}: a Rest token comes last, once")
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
    lists: dict[str, list[str]] = {}
    rests = {token.param for token in command.args if isinstance(token, Rest)}
    for name, value in params.items():
        if name not in command.required | command.optional:
            raise ParamError(f"{command.name} takes no parameter {name!r}")
        if value is not None and name in rests:
            lists[name] = LIST_PARAMS[name](value)
        elif value is not None:
            values[name] = PARAMS[name](value)
    missing = command.required - values.keys() - lists.keys()
    if missing:
        raise ParamError(f"{command.name} needs {', '.join(sorted(missing))}")
    if "unit" in values:
        values |= {key: derive(values["unit"]) for key, derive in DERIVED.items()}
    out: list[str] = []
    for token in command.args:
        if isinstance(token, Rest):
            out.extend(lists[token.param])
            continue
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
