"""The change rules (bot/config/change_rules.py): environment by allow-list, protected flags.

The walk over every start-up name and every deny-list entry is here; the comparison of the
stored lists with the running interpreter's `--help-env` and `sudo -V` is a component test
(it runs those programs): tests/component/config/test_startup_env_lists.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.config.change_rules import (
    DEFAULT_ENV_ALLOW,
    DEFAULT_PROTECTED_FLAGS,
    ENV_DENY,
    EXTRA_STARTUP_ENV,
    PYTHON_HELP_ENV,
    STARTUP_ENV,
    SUDO_ENV_DELETE,
    ChangeRules,
    changes_refusal,
    env_refusal,
    flag_refusal,
    plan_refusal,
)
from bot.config.schema import TargetPolicy
from bot.redaction import redact
from bot.sglang.catalog import FlagCatalog
from bot.sglang.change import Change
from bot.sglang.flagset import FlagItem, FlagSet

RULES = TargetPolicy().change_rules("prod")
WIDE = TargetPolicy(env_allow=["*"]).change_rules("prod")
"""An admin who widened the allow-list to everything: start-up and deny-listed names stay refused."""


def example(pattern: str) -> str:
    """A variable name the pattern matches (`LD_*` -> `LD_X`, `*_FILE` -> `X_FILE`)."""
    return pattern.replace("*", "X")


STARTUP_NAMES = sorted({example(entry) for entry in STARTUP_ENV})
DENY_NAMES = sorted({example(entry) for entry in ENV_DENY})
NAMED_IN_THE_ISSUE = (
    "NCCL_NET_PLUGIN",
    "NCCL_TUNER_PLUGIN",
    "NCCL_PROFILER_PLUGIN",
    "NCCL_ENV_PLUGIN",
    "NCCL_DEBUG_FILE",
    "NCCL_TOPO_FILE",
    "NCCL_GRAPH_FILE",
    "NCCL_TOPO_DUMP_FILE",
    "NCCL_GRAPH_DUMP_FILE",
    "NCCL_CONF_FILE",
    "CUDA_INJECTION64_PATH",
    "CUDA_CACHE_PATH",
    "CUDA_HOME",
    "TORCH_EXTENSIONS_DIR",
    "TORCH_HOME",
    "PYTORCH_KERNEL_CACHE_PATH",
    "PYTORCH_TUNABLEOP_FILENAME",
    "SGLANG_TORCH_PROFILER_DIR",
    "SGLANG_EXTERNAL_MODEL_PACKAGE",
)


def test_the_lists_hold_what_the_issue_names() -> None:
    for name in ("BASH_ENV", "LD_PRELOAD", "PYTHONPATH", "PYTHONWARNINGS", "BROWSER", "PYTHONSTARTUP"):
        assert env_refusal(RULES, name, "x", admin=True) is not None, name
    assert "*=()*" in SUDO_ENV_DELETE and "LD_*" in SUDO_ENV_DELETE
    assert set(PYTHON_HELP_ENV) <= set(STARTUP_ENV) and set(EXTRA_STARTUP_ENV) <= set(STARTUP_ENV)
    assert DEFAULT_ENV_ALLOW == (
        "NCCL_*",
        "SGLANG_*",
        "CUDA_*",
        "TORCH_*",
        "PYTORCH_*",
        "NVIDIA_*",
        "OMP_NUM_THREADS",
    )


@pytest.mark.parametrize("name", STARTUP_NAMES)
def test_every_startup_name_is_refused_for_everyone_naming_the_rule(name: str) -> None:
    for rules in (RULES, WIDE):
        for admin in (False, True):
            why = env_refusal(rules, name, "1", admin=admin)
            assert why is not None and "changes how a process starts" in why, (name, why)
            assert "target prod" in why and f"policy.env_admin_allow names {name}" in why
    assert env_refusal(RULES, name, None, admin=True) is not None  # an unset too


@pytest.mark.parametrize("name", sorted({*DENY_NAMES, *NAMED_IN_THE_ISSUE}))
def test_every_deny_list_name_is_refused_for_everyone_naming_the_rule(name: str) -> None:
    for rules in (RULES, WIDE):
        for admin in (False, True):
            why = env_refusal(rules, name, "/tmp/x", admin=admin)
            assert why is not None and "environment deny-list" in why, (name, why)
            assert f"policy.env_admin_allow names {name}" in why


@pytest.mark.parametrize("name", [*STARTUP_NAMES[:3], "LD_PRELOAD", "LD_LIBRARY_PATH", "NCCL_NET_PLUGIN"])
def test_an_admin_entry_lets_admins_and_only_admins_change_that_exact_variable(name: str) -> None:
    rules = TargetPolicy(env_admin_allow=[name]).change_rules("prod")
    assert env_refusal(rules, name, "/opt/x", admin=True) is None
    why = env_refusal(rules, name, "/opt/x", admin=False)
    assert why == f"{name} may be changed on target prod by an admin only (policy.env_admin_allow)"
    # the entry names that variable only: its neighbours under the same pattern stay refused
    assert env_refusal(rules, name + "_2", "1", admin=True) is not None


@pytest.mark.parametrize(
    "name",
    [
        "NCCL_DEBUG",
        "NCCL_ALGO",
        "NCCL_IB_HCA",
        "SGLANG_ENABLE_JIT_DEEPGEMM",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_LAUNCH_BLOCKING",
        "TORCH_NCCL_BLOCKING_WAIT",
        "PYTORCH_CUDA_ALLOC_CONF",
        "NVIDIA_TF32_OVERRIDE",
        "OMP_NUM_THREADS",
    ],
)
def test_tuning_variables_in_the_allow_list_are_anyone_s(name: str) -> None:
    assert env_refusal(RULES, name, "1", admin=False) is None
    assert env_refusal(RULES, name, None, admin=False) is None


@pytest.mark.parametrize("name", ["HF_TOKEN", "HF_HUB_OFFLINE", "MY_VAR", "nccl_debug", "OMP_PROC_BIND"])
def test_a_name_outside_the_allow_list_is_refused_naming_it(name: str) -> None:
    why = env_refusal(RULES, name, "1", admin=True)
    assert why is not None and why.startswith(f"{name} is not in policy.env_allow of target prod (NCCL_*, ")


def test_a_value_shaped_like_a_shell_function_is_refused_whatever_the_name() -> None:
    why = env_refusal(RULES, "NCCL_DEBUG", "() { :; }; touch /pwned", admin=True)
    assert why is not None and "sudo's env_delete rule `*=()*`" in why
    assert env_refusal(RULES, "NCCL_DEBUG", "INFO", admin=False) is None


def test_every_default_protected_flag_is_a_canonical_flag_of_sglang_0_5_10() -> None:
    catalog = FlagCatalog.load("0.5.10")
    for flag in DEFAULT_PROTECTED_FLAGS:
        assert catalog.canonical(flag) == flag, flag
    assert len(set(DEFAULT_PROTECTED_FLAGS)) == len(DEFAULT_PROTECTED_FLAGS)


@pytest.mark.parametrize("flag", DEFAULT_PROTECTED_FLAGS)
def test_every_protected_flag_is_admin_only_by_default(flag: str) -> None:
    assert flag_refusal(RULES, flag, admin=False) == (
        f"`{flag}` is a protected flag of target prod (policy.protected_flags): only an admin may change it"
    )
    assert flag_refusal(RULES, flag, admin=True) is None


@pytest.mark.parametrize("flag", DEFAULT_PROTECTED_FLAGS)
def test_a_refusal_survives_the_redaction_it_is_posted_through(flag: str) -> None:
    """`--api-key is a protected flag` would lose its verb to the mask (`--api-key ********`):
    the flag is quoted, so every refusal reaches the user as written."""
    why = flag_refusal(RULES, flag, admin=False)
    assert why is not None and redact(why) == why


def test_refuse_mode_refuses_admins_too() -> None:
    rules = TargetPolicy(protected_flags_mode="refuse").change_rules("prod")
    why = flag_refusal(rules, "--model-path", admin=True)
    assert why is not None and 'protected_flags_mode = "refuse"' in why and "edit the unit" in why
    assert flag_refusal(rules, "--tp-size", admin=False) is None


def test_changes_refusal_reads_each_kind_of_change() -> None:
    ok = [Change("set", "--tp-size", "2"), Change("env-set", env_name="NCCL_DEBUG", env_value="INFO")]
    assert changes_refusal(RULES, ok, admin=False) is None
    for bad in (
        Change("set", "--model-path", "/m"),
        Change("add", "--trust-remote-code"),
        Change("remove", "--api-key"),
        Change("env-set", env_name="LD_PRELOAD", env_value="/x.so"),
        Change("env-unset", env_name="PYTHONPATH"),
    ):
        assert changes_refusal(RULES, [*ok, bad], admin=False) is not None, bad


def test_a_plan_is_judged_by_what_it_changes_and_by_canonical_names() -> None:
    unit = FlagSet((FlagItem("--model", "/models/a"), FlagItem("--tp-size", "2")))
    env = {"LD_LIBRARY_PATH": "/opt/lib", "NCCL_DEBUG": "WARN"}
    canonical = FlagCatalog.load("0.5.10").canonical
    same_model = FlagSet((FlagItem("--model-path", "/models/a"), FlagItem("--tp-size", "4")))
    # a protected flag and a refused variable the unit already has are not changes
    assert plan_refusal(RULES, (unit, env), (same_model, env), admin=False, canonical=canonical) is None
    other_model = FlagSet((FlagItem("--model-path", "/models/b"), FlagItem("--tp-size", "2")))
    why = plan_refusal(RULES, (unit, env), (other_model, env), admin=False, canonical=canonical)
    assert why is not None and why.startswith("`--model-path` is a protected flag of target prod")
    assert plan_refusal(RULES, (unit, env), (other_model, env), admin=True, canonical=canonical) is None
    dropped = {"NCCL_DEBUG": "WARN"}
    why = plan_refusal(RULES, (unit, env), (unit, dropped), admin=True, canonical=canonical)
    assert why is not None and why.startswith("LD_LIBRARY_PATH changes how a process starts")


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("env_allow", ["NCCL DEBUG"], "is not a variable name pattern"),
        ("env_allow", ["NCCL_$X"], "is not a variable name pattern"),
        ("env_admin_allow", ["LD_*"], "give exact variable names"),
        ("protected_flags", ["model-path"], "is not an SGLang flag name"),
        ("protected_flags_mode", "sometimes", "'admin' or 'refuse'"),
    ],
)
def test_bad_settings_are_refused_naming_the_problem(field: str, value: object, says: str) -> None:
    with pytest.raises(ValidationError, match=says.replace("*", r"\*").replace("$", r"\$")):
        TargetPolicy.model_validate({field: value})


def test_the_policy_carries_its_settings_into_the_rules() -> None:
    policy = TargetPolicy(
        env_allow=["NCCL_*"],
        env_admin_allow=["LD_LIBRARY_PATH"],
        protected_flags=["--port"],
        protected_flags_mode="refuse",
    )
    assert policy.change_rules("dev") == ChangeRules(
        target="dev",
        env_allow=("NCCL_*",),
        env_admin_allow=("LD_LIBRARY_PATH",),
        protected_flags=("--port",),
        protected_flags_mode="refuse",
    )
    assert TargetPolicy().protected_flags == list(DEFAULT_PROTECTED_FLAGS)
    assert TargetPolicy().env_allow == list(DEFAULT_ENV_ALLOW)


def test_the_docs_list_what_the_code_holds() -> None:
    root = Path(__file__).parents[3]
    config = (root / "docs" / "config.md").read_text(encoding="utf-8")
    section = config[
        config.index("The default `protected_flags`") : config.index("Setting `protected_flags`")
    ]
    assert set(re.findall(r"`(--[a-z0-9-]+)`", section)) == set(DEFAULT_PROTECTED_FLAGS)
    assert f"{len(DEFAULT_PROTECTED_FLAGS)} flags of SGLang 0.5.10" in config
    assert "`[" + ", ".join(f'"{p}"' for p in DEFAULT_ENV_ALLOW) + "]`" in config
    security = (root / "docs" / "security.md").read_text(encoding="utf-8")
    rules = security[security.index("## What an operator may change") : security.index("## What is stored")]
    for entry in (*ENV_DENY, *(n for n in EXTRA_STARTUP_ENV if n != "PYTHON*")):
        assert f"`{entry}`" in rules, entry
