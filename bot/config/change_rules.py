"""What an operator may change on a target: environment by allow-list, protected flags.

Why: `try env set NAME=VALUE` and `try set --flag V` become a root-written drop-in on every GPU
node. Quoting keeps the value one word; it cannot say whether the word is harmless. A variable
such as `LD_PRELOAD`, `PYTHONPATH` or `BASH_ENV` runs code when the server starts, and a flag
such as `--model-path`, `--trust-remote-code` or `--host` changes what runs or where it listens.
These rules decide *what* may be asked for; `docs/security.md` ("What an operator may change")
states them, `docs/config.md` the settings.

The rules, per changed environment variable NAME (set or unset):

1. NAME is in `policy.env_admin_allow` (exact name): an admin may change it, nobody else.
2. NAME is a start-up name (`STARTUP_ENV`: every name `python3 --help-env` lists, sudo's
   `env_delete` list as `sudo -V` prints it as root, and a few more): refused for everyone.
3. NAME is on the deny-list (`ENV_DENY`: names inside the allowed prefixes that load code,
   pick a file to read or write, or an address): refused for everyone.
4. NAME matches no pattern of `policy.env_allow`: refused for everyone.
5. Otherwise anyone who may run the command may change it. A value shaped like an exported
   shell function (sudo's `*=()*`) is refused whatever the name.

and per changed flag in `policy.protected_flags` (canonical names): only an admin may change it
(`policy.protected_flags_mode = "admin"`), or nobody (`"refuse"`: edit the unit instead).

The lists are data here, not settings: `tests/unit/config/test_change_rules.py` compares
`PYTHON_HELP_ENV` with the running interpreter's `--help-env` and `SUDO_ENV_DELETE` with
`sudo -V` (as root, when sudo is installed), so a new name is caught.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Final, Literal

from bot.sglang.change import Change
from bot.sglang.flagset import FlagSet

PYTHON_HELP_ENV: Final[tuple[str, ...]] = (
    # `python3 --help-env` of CPython 3.11 (the order it prints them)
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONPLATLIBDIR",
    "PYTHONCASEOK",
    "PYTHONUTF8",
    "PYTHONIOENCODING",
    "PYTHONFAULTHANDLER",
    "PYTHONHASHSEED",
    "PYTHONINTMAXSTRDIGITS",
    "PYTHONMALLOC",
    "PYTHONCOERCECLOCALE",
    "PYTHONBREAKPOINT",
    "PYTHONDEVMODE",
    "PYTHONPYCACHEPREFIX",
    "PYTHONWARNDEFAULTENCODING",
    "PYTHONNODEBUGRANGES",
    "PYTHONDEBUG",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONINSPECT",
    "PYTHONNOUSERSITE",
    "PYTHONOPTIMIZE",
    "PYTHONSAFEPATH",
    "PYTHONUNBUFFERED",
    "PYTHONVERBOSE",
    "PYTHONWARNINGS",
    # added by CPython 3.12 to 3.14 (a node's SGLang often runs a newer Python than flagbot)
    "PYTHONPERFSUPPORT",
    "PYTHON_PERF_JIT_SUPPORT",
    "PYTHON_CPU_COUNT",
    "PYTHON_FROZEN_MODULES",
    "PYTHON_GIL",
    "PYTHON_HISTORY",
    "PYTHON_BASIC_REPL",
    "PYTHON_COLORS",
    "PYTHON_JIT",
    "PYTHONEXECUTABLE",
    "PYTHONLEGACYWINDOWSFSENCODING",
    "PYTHONLEGACYWINDOWSSTDIO",
    "PYTHONTRACEMALLOC",
    "PYTHONPROFILEIMPORTTIME",
    "PYTHONASYNCIODEBUG",
    "PYTHONDUMPREFS",
    "PYTHONDUMPREFSFILE",
    "PYTHONMALLOCSTATS",
    "PYTHONUSERBASE",
    "PYTHON_PRESITE",
    "PYTHON_THREAD_INHERIT_CONTEXT",
    "PYTHON_CONTEXT_AWARE_WARNINGS",
    "PYTHON_TLBC",
)
"""Every variable `python3 --help-env` names: each changes how the interpreter that runs SGLang
starts (`PYTHONSTARTUP`, `PYTHONPATH`, `PYTHONWARNINGS` import or run code of the setter's choice)."""

SUDO_ENV_DELETE: Final[tuple[str, ...]] = (
    # `sudo -V` as root, "Environment variables to remove:" (sudo 1.9.13p3), in its order
    "*=()*",
    "RUBYOPT",
    "RUBYLIB",
    "PYTHONUSERBASE",
    "PYTHONINSPECT",
    "PYTHONPATH",
    "PYTHONHOME",
    "TMPPREFIX",
    "ZDOTDIR",
    "READNULLCMD",
    "NULLCMD",
    "FPATH",
    "PERL5DB",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERLIO_DEBUG",
    "JAVA_TOOL_OPTIONS",
    "SHELLOPTS",
    "BASHOPTS",
    "GLOBIGNORE",
    "PS4",
    "BASH_ENV",
    "ENV",
    "TERMCAP",
    "TERMPATH",
    "TERMINFO_DIRS",
    "TERMINFO",
    "_RLD*",
    "LD_*",
    "PATH_LOCALE",
    "NLSPATH",
    "HOSTALIASES",
    "RES_OPTIONS",
    "LOCALDOMAIN",
    "CDPATH",
    "IFS",
)
"""sudo's `env_delete`: what sudo strips before it runs a command as root, because each changes
how a program or a shell starts. `LD_*` and `_RLD*` are patterns; `*=()*` is a NAME=VALUE
pattern (a value that is a bash function definition), checked against the value."""

EXTRA_STARTUP_ENV: Final[tuple[str, ...]] = (
    "PYTHON*",  # whatever a future CPython adds
    "GCONV_PATH",  # glibc's iconv loads the modules this names
    "GLIBC_TUNABLES",  # parsed by the dynamic loader before main (CVE-2023-4911)
    "LOCPATH",
    "MALLOC_*",
    "BROWSER",  # Python's webbrowser runs it
    "PATH",
    "HOME",
    "SHELL",
    "NODE_OPTIONS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)
"""More names that change how a process starts (not in either list above)."""

STARTUP_ENV: Final[tuple[str, ...]] = tuple(
    dict.fromkeys((*PYTHON_HELP_ENV, *(n for n in SUDO_ENV_DELETE if "=" not in n), *EXTRA_STARTUP_ENV))
)
"""Names and patterns refused for everyone unless `policy.env_admin_allow` names the variable."""

ENV_DENY: Final[Mapping[str, str]] = {
    "NCCL_*PLUGIN*": "NCCL loads the named shared library (net, tuner, profiler, env plugins)",
    "NCCL_CONF_FILE": "NCCL reads more variables from this file (NCCL_NET_PLUGIN among them)",
    "NCCL_COMM_ID": "multi-node addressing: where the ranks rendezvous",
    "NCCL_RAS_ADDR": "NCCL's RAS service listens on this address",
    "CUDA_INJECTION*": "the CUDA driver loads the named shared library into the process",
    "CUDA_HOME": "where JIT compilers (torch extensions, Triton, FlashInfer) find nvcc and headers",
    "CUDA_ROOT": "where JIT compilers find nvcc and headers",
    "CUDA_MPS_*": "which MPS control daemon the process talks to, and where it logs",
    "CUDA_*COREDUMP*": "writes GPU core dumps",
    "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "makes torch.load unpickle checkpoints (runs code in them)",
    "TORCH_COMPILE_DEBUG": "writes torch.compile's debug tree to disk",
    "TORCH_TRACE": "writes structured traces to the named directory",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "writes the flight recorder's dump to a file",
    "TORCH_LOGS_OUT": "writes torch's logs to the named file",
    "SGLANG_EXTERNAL_MODEL_PACKAGE": "SGLang imports models from the named Python package",
    "SGLANG_USE_MODELSCOPE": "downloads the model from another hub",
    "*_PLUGIN": "names a library or module to load",
    "*_FILE": "names a file to read or write",
    "*_FILENAME": "names a file to read or write",
    "*_FILE_*": "names a file to read or write",
    "*_PATH": "names a path to load from or write to",
    "*_DIR": "names a directory to load from or write to",
    "*_DIRECTORY": "names a directory to load from or write to",
    "*_FOLDER": "names a directory to write to",
    "*_HOME": "names a directory to load from",
    "*_PREFIX": "names a path prefix to load from or write to",
}
"""Inside the allowed prefixes: names that load code, read or write a file of the setter's choice,
or choose an address. Each with why; the path-shaped patterns catch the long tail
(`NCCL_TOPO_FILE`, `NCCL_DEBUG_FILE`, `CUDA_CACHE_PATH`, `TORCH_EXTENSIONS_DIR`,
`PYTORCH_TUNABLEOP_FILENAME`, `SGLANG_TORCH_PROFILER_DIR`, ...)."""

DEFAULT_ENV_ALLOW: Final[tuple[str, ...]] = (
    "NCCL_*",
    "SGLANG_*",
    "CUDA_*",
    "TORCH_*",
    "PYTORCH_*",
    "NVIDIA_*",
    "OMP_NUM_THREADS",
)
"""What SGLang tuning sets: collectives, SGLang's own switches, CUDA, PyTorch, thread counts."""

DEFAULT_PROTECTED_FLAGS: Final[tuple[str, ...]] = (
    # what code or model runs
    "--model-path",
    "--tokenizer-path",
    "--revision",
    "--load-format",
    "--model-loader-extra-config",
    "--model-impl",
    "--trust-remote-code",
    "--custom-weight-loader",
    "--forward-hooks",
    "--enable-custom-logit-processor",
    "--json-model-override-args",
    "--chat-template",
    "--completion-template",
    "--lora-paths",
    "--download-dir",
    "--config",
    "--speculative-draft-model-path",
    "--speculative-draft-model-revision",
    "--speculative-draft-load-format",
    "--modelopt-checkpoint-restore-path",
    "--decrypted-config-file",
    "--decrypted-draft-config-file",
    "--remote-instance-weight-loader-seed-instance-ip",
    "--modelexpress-config",
    "--hicache-storage-backend-extra-config",
    # where it writes or sends what it serves
    "--modelopt-checkpoint-save-path",
    "--modelopt-export-path",
    "--crash-dump-folder",
    "--log-requests-target",
    "--export-metrics-to-file-dir",
    "--file-storage-path",
    "--debug-tensor-dump-output-folder",
    "--otlp-traces-endpoint",
    "--kv-events-config",
    "--tool-server",
    "--encoder-urls",
    # where it listens
    "--host",
    "--port",
    "--nccl-port",
    "--disaggregation-bootstrap-port",
    "--engine-info-bootstrap-port",
    # multi-node addressing
    "--dist-init-addr",
    "--nnodes",
    "--node-rank",
    # credentials
    "--api-key",
    "--admin-api-key",
    "--ssl-keyfile",
    "--ssl-certfile",
    "--ssl-ca-certs",
    "--ssl-keyfile-password",
)
"""SGLang 0.5.10's flags (canonical names) that change what code or model runs, where the server
writes or sends what it serves, where it listens, how the nodes find each other, or its
credentials."""

ProtectedMode = Literal["admin", "refuse"]


class ChangeNotAllowedError(ValueError):
    """A change the target's rules do not allow this actor; the message names the rule."""


@dataclass(frozen=True)
class ChangeRules:
    """One target's rules (from its `policy`): the fields `TargetPolicy` carries."""

    target: str
    env_allow: Sequence[str] = DEFAULT_ENV_ALLOW
    env_admin_allow: Sequence[str] = ()
    protected_flags: Sequence[str] = DEFAULT_PROTECTED_FLAGS
    protected_flags_mode: ProtectedMode = "admin"


def _first_match(name: str, patterns: Iterable[str]) -> str | None:
    return next((pattern for pattern in patterns if fnmatchcase(name, pattern)), None)


def env_refusal(rules: ChangeRules, name: str, value: str | None, *, admin: bool) -> str | None:
    """Why changing variable `name` (to `value`; None: unset) is refused on the target, or None."""
    where = f"target {rules.target}"
    if value is not None and fnmatchcase(f"{name}={value}", "*=()*"):
        return (
            f"env set {name}: the value looks like an exported shell function (sudo's env_delete "
            f"rule `*=()*`); refused on {where}"
        )
    if name in rules.env_admin_allow:
        if admin:
            return None
        return f"{name} may be changed on {where} by an admin only (policy.env_admin_allow)"
    unless = f"; only an admin, and only when policy.env_admin_allow names {name}"
    startup = _first_match(name, STARTUP_ENV)
    if startup is not None:
        source = _startup_source(startup)
        return (
            f"{name} changes how a process starts ({source}: {startup}): refused on {where} for "
            f"everyone{unless}"
        )
    deny = _first_match(name, ENV_DENY)
    if deny is not None:
        return (
            f"{name} is on flagbot's environment deny-list ({deny}: {ENV_DENY[deny]}): refused on "
            f"{where} for everyone{unless}"
        )
    if _first_match(name, rules.env_allow) is None:
        allowed = ", ".join(rules.env_allow) or "nothing"
        return f"{name} is not in policy.env_allow of {where} ({allowed}): refused{unless}"
    return None


def _startup_source(pattern: str) -> str:
    if pattern in PYTHON_HELP_ENV:
        return "python3 --help-env"
    if pattern in SUDO_ENV_DELETE:
        return "sudo's env_delete"
    return "flagbot's start-up list"


def flag_refusal(rules: ChangeRules, flag: str, *, admin: bool) -> str | None:
    """Why changing `flag` (canonical) is refused on the target, or None."""
    if flag not in rules.protected_flags:
        return None
    if rules.protected_flags_mode == "refuse":
        return (
            f"`{flag}` is a protected flag of target {rules.target} (policy.protected_flags, "
            'protected_flags_mode = "refuse"): flagbot does not change it; edit the unit instead'
        )
    if admin:
        return None
    return (
        f"`{flag}` is a protected flag of target {rules.target} (policy.protected_flags): only an "
        "admin may change it"
    )


def changes_refusal(rules: ChangeRules, changes: Iterable[Change], *, admin: bool) -> str | None:
    """The first refusal among the changes a command asks for (flags canonical), or None."""
    for change in changes:
        if change.env_name is not None:
            value = change.env_value if change.op == "env-set" else None
            why = env_refusal(rules, change.env_name, value, admin=admin)
        elif change.flag is not None:
            why = flag_refusal(rules, change.flag, admin=admin)
        else:
            why = None
        if why is not None:
            return why
    return None


def plan_refusal(
    rules: ChangeRules,
    before: tuple[FlagSet, Mapping[str, str]],
    after: tuple[FlagSet, Mapping[str, str]],
    *,
    admin: bool,
    canonical: Callable[[str], str] | None = None,
) -> str | None:
    """The first refusal among the differences between two launch lines (flags and environment):
    what a write would change, whichever command planned it."""
    name = canonical or (lambda flag: flag)
    old_flags, old_env = before
    new_flags, new_env = after

    def values(flags: FlagSet) -> dict[str, list[object]]:
        out: dict[str, list[object]] = {}
        for item in flags.items:
            out.setdefault(name(item.flag), []).append(item.value)
        return out

    old, new = values(old_flags), values(new_flags)
    for flag in sorted(set(old) | set(new)):
        if old.get(flag) != new.get(flag):
            why = flag_refusal(rules, flag, admin=admin)
            if why is not None:
                return why
    for var in sorted(set(old_env) | set(new_env)):
        if old_env.get(var) != new_env.get(var):
            why = env_refusal(rules, var, new_env.get(var), admin=admin)
            if why is not None:
                return why
    return None
