"""The one registry of commands: name, arguments, help and risk tier.

The CLI, the Slack slash command, the help text and (later) RBAC all read this table, so a
command cannot exist in one place and be missing or differently described in another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Tier = Literal["read-only", "mutating"]
"""read-only never touches a target's configuration or load; mutating restarts, edits or loads it."""

OptionKind = Literal["text", "int", "duration", "week", "choice", "id", "list", "flags"]


@dataclass(frozen=True)
class Option:
    """A flagbot option, written `name=value` (or `--name value` in commands without flag changes)."""

    name: str
    kind: OptionKind
    help: str
    choices: tuple[str, ...] = ()
    maximum: int | None = None
    """The largest value: of an `int`, of each number of a `list`, in seconds of a `duration`
    (`bot.commands.values` has the defaults; docs/commands.md lists them)."""


DAY_S = 86_400


@dataclass(frozen=True)
class Positional:
    name: str
    help: str
    required: bool = True
    repeat: bool = False
    raw: bool = False
    """Takes any word, even one starting with `--` (a grep pattern)."""
    kind: Literal["text", "id", "name"] = "text"
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sub:
    """A subcommand (`hypothesis add`, `checks pause`), with its own positionals and tier."""

    name: str
    help: str
    tier: Tier = "read-only"
    positionals: tuple[Positional, ...] = ()
    expectations: bool = False


@dataclass(frozen=True)
class CommandSpec:
    name: str
    summary: str
    tier: Tier
    usage: str
    examples: tuple[str, ...]
    positionals: tuple[Positional, ...] = ()
    options: tuple[Option, ...] = ()
    subs: tuple[Sub, ...] = ()
    default_sub: str | None = None
    changes: bool = False
    expectations: bool = False
    needs_expectation: bool = False
    free_options: bool = False
    """`run` passes any `key=value` to the playbook, which validates its own parameters."""
    chat: bool = True
    aliases: tuple[str, ...] = field(default_factory=tuple)

    def option(self, name: str) -> Option | None:
        return next((opt for opt in self.options if opt.name == name), None)

    def sub(self, name: str) -> Sub | None:
        return next((sub for sub in self.subs if sub.name == name), None)

    def tier_for(self, sub: str | None) -> Tier:
        """A subcommand can be riskier than its command (`checks pause` vs `checks list`)."""
        found = self.sub(sub) if sub else None
        return found.tier if found else self.tier


TARGET = Option("target", "text", "target name from flagbot.toml; default_target when omitted")
WAIT_MAX_S = 4 * 3_600
WAIT = Option(
    "wait",
    "duration",
    "when another run holds the target's lease, wait this long for it, then run (default 0: refuse at once)",
    maximum=WAIT_MAX_S,
)
"""`wait=DURATION` of the commands that take the target's lease (docs/commands.md, "wait=")."""
PROFILE = Option("profile", "text", "benchmark profile from [bench] in flagbot.toml")
BECAUSE = Option("because", "text", "why: the hypothesis in words, kept in the log")
EXPERIMENT = Positional(
    "experiment", "experiment id (default: the latest on the target)", required=False, kind="id"
)

COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec(
        "help",
        "Show commands, or one command's usage.",
        "read-only",
        "help [COMMAND]",
        ("help", "help try"),
        positionals=(Positional("command", "a command name", required=False, kind="name"),),
    ),
    CommandSpec(
        "status",
        "Target state: unit, invocation, flags, lease, running experiment.",
        "read-only",
        "status [target=NAME]",
        ("status", "status target=sglang-qwen"),
        options=(TARGET,),
    ),
    CommandSpec(
        "observe",
        "Re-read the running server (journal of this start, /server_info) without a restart.",
        "read-only",
        "observe [target=NAME]",
        ("observe",),
        options=(TARGET,),
    ),
    CommandSpec(
        "predict",
        "Predict what a flag change does to capacity from the last observed start, without a restart.",
        "read-only",
        "predict CHANGE [CHANGE ...] [EXPECTATION ...] [target=NAME]",
        (
            "predict set --mem-fraction-static=0.85",
            "predict add --max-running-requests 64 max_running_requests>=48",
            "predict add --kv-cache-dtype fp8_e4m3 max_total_num_tokens>=+50% target=sglang-qwen",
        ),
        options=(TARGET,),
        changes=True,
        expectations=True,
    ),
    CommandSpec(
        "grep",
        "Search the journal of the current start (or the previous one, since=, the last lines) for a pattern.",
        "read-only",
        "grep PATTERN [scope=this|previous|since|last] [since=DURATION] [lines=N] [target=NAME]",
        (
            "grep max_running_requests",
            'grep "Not enough memory" since=2h',
            'grep "unrecognized arguments" scope=previous',
            "grep error scope=last lines=20",
        ),
        positionals=(Positional("pattern", "text to search for (fixed string)", raw=True),),
        options=(
            TARGET,
            Option(
                "scope",
                "choice",
                "this start (default), the previous start, since= a time ago, or the unit's last matching lines",
                ("this", "previous", "since", "last"),
            ),
            Option("since", "duration", "look back this far instead of this start", maximum=366 * DAY_S),
            Option("lines", "int", "show at most this many matching lines (the newest)", maximum=1000),
        ),
    ),
    CommandSpec(
        "logs",
        "The unit's latest journal lines on node 0 (bounded; since= a time ago).",
        "read-only",
        "logs [lines=N] [since=DURATION] [target=NAME]",
        ("logs", "logs lines=200", "logs since=30m"),
        options=(
            TARGET,
            Option("lines", "int", "show at most this many lines, the newest (default 50)", maximum=1000),
            Option("since", "duration", "only lines from this long ago on", maximum=366 * DAY_S),
        ),
    ),
    CommandSpec(
        "try",
        "Apply a flag change, restart, observe, measure, and judge it.",
        "mutating",
        "try CHANGE [CHANGE ...] [EXPECTATION ...] [target=NAME] [wait=DURATION] [profile=NAME] [because=TEXT] [keep=POLICY] [hypothesis=ID] [dry-run=yes] [force=yes]",
        (
            "try add --enable-fused-moe-sum-all-reduce",
            "try --enable-flashinfer-allreduce-fusion --enable-fused-moe-sum-all-reduce max_running_requests>=48",
            'try set --mem-fraction-static=0.85 output_throughput>=-2% because="more KV cache"',
            "try remove --disable-piecewise-cuda-graph target=sglang-qwen",
            "try add --cuda-graph-bs 4 8 16 add --chunked-prefill-size -1",
            "try env set NCCL_DEBUG=INFO",
            "try add --enable-fused-moe-sum-all-reduce dry-run=yes",
        ),
        options=(
            TARGET,
            WAIT,
            PROFILE,
            BECAUSE,
            Option(
                "keep",
                "choice",
                "keep the change: auto (by verdict), always, never",
                ("auto", "always", "never"),
            ),
            Option("hypothesis", "id", "hypothesis this experiment tests"),
            Option(
                "dry-run",
                "choice",
                "stop after the preflight and show the drop-in diff (`--dry-run` on the CLI)",
                ("yes", "no"),
            ),
            Option(
                "force",
                "choice",
                "write the drop-in even though the unit was changed by hand (the diff is kept as "
                "evidence; admin on a production target; `--force` on the CLI)",
                ("yes", "no"),
            ),
        ),
        changes=True,
        expectations=True,
    ),
    CommandSpec(
        "revert",
        "Undo a change (default: the latest kept try), then verify the effective values are the baseline's.",
        "mutating",
        "revert [EXPERIMENT|baseline] [EXPECTATION ...] [flags=--X,--Y] [target=NAME] [wait=DURATION] [profile=NAME] [force=yes]",
        ("revert", "revert 12", "revert baseline", "revert flags=--enable-flashinfer-allreduce-fusion"),
        positionals=(
            Positional(
                "what",
                "an experiment id, or `baseline` (default: the latest kept try)",
                required=False,
                kind="id",
                choices=("baseline",),
            ),
        ),
        options=(
            TARGET,
            WAIT,
            Option("flags", "flags", "comma-separated flags to take out (their baseline value returns)"),
            Option(
                "force",
                "choice",
                "write the drop-in even though the unit was changed by hand (admin on a production "
                "target; `--force` on the CLI)",
                ("yes", "no"),
            ),
            PROFILE,
        ),
        expectations=True,
    ),
    CommandSpec(
        "restart",
        "Restart the SGLang service on every node with the same flags (no unit change), wait until it serves.",
        "mutating",
        "restart [target=NAME] [wait=DURATION] [dry-run=yes]",
        ("restart", "restart target=sglang-qwen", "restart dry-run=yes"),
        options=(
            TARGET,
            WAIT,
            Option(
                "dry-run",
                "choice",
                "say what the restart would do and change nothing (`--dry-run` on the CLI)",
                ("yes", "no"),
            ),
        ),
    ),
    CommandSpec(
        "freeze",
        "Freeze the target: refuse every command that changes it (reads go on) until unfreeze or until=.",
        "mutating",
        "freeze reason=TEXT [until=DURATION|TIME] [target=NAME]",
        (
            'freeze reason="launch day"',
            'freeze reason="incident 4512" until=4h',
            'freeze reason="release" until=2026-12-24T18:00Z',
        ),
        options=(
            TARGET,
            Option("reason", "text", "why the target is frozen, shown in every refusal (required)"),
            Option(
                "until",
                "text",
                "when the freeze ends by itself: a duration from now (4h, 2d) or a UTC time "
                "(2026-12-24T18:00Z); default: until `unfreeze`",
            ),
        ),
    ),
    CommandSpec(
        "unfreeze",
        "Lift the target's freeze set with `freeze` (a window in flagbot.toml stays).",
        "mutating",
        "unfreeze [target=NAME]",
        ("unfreeze", "unfreeze target=sglang-qwen"),
        options=(TARGET,),
    ),
    CommandSpec(
        "verify",
        "Check expectations against the running server (benchmarks if a metric needs one).",
        "mutating",
        "verify EXPECTATION [EXPECTATION ...] [target=NAME] [profile=NAME] [wait=DURATION]",
        ("verify max_running_requests>=48", "verify output_throughput>=-2% median_ttft_ms<500"),
        options=(TARGET, WAIT, PROFILE),
        expectations=True,
        needs_expectation=True,
    ),
    CommandSpec(
        "bench",
        "Benchmark the running server with a profile; compare with a stored measurement set.",
        "mutating",
        "bench [profile=NAME] [concurrency=LIST] [repeats=N] [backend=builtin|bench_serving] [dataset=NAME] [slo=OBJECTIVES] [compare-to=ID] [rerun=EXPERIMENT] [wait=DURATION] [target=NAME]",
        (
            "bench",
            "bench rerun=42",
            "bench profile=quick concurrency=1,64",
            "bench profile=full repeats=5",
            "bench backend=bench_serving",
            "bench dataset=generated-shared-prefix slo=ttft_ms:500,tpot_ms:50",
            "bench compare-to=12",
            "bench wait=10m",
        ),
        options=(
            TARGET,
            PROFILE,
            Option("concurrency", "list", "comma-separated concurrency levels", maximum=4096),
            Option("repeats", "int", "repeats per level (default: the profile's)", maximum=100),
            Option(
                "backend",
                "choice",
                "builtin: flagbot's load generator; bench_serving: SGLang's client on node 0 over SSH",
                ("builtin", "bench_serving"),
            ),
            Option(
                "dataset",
                "text",
                "random, generated-shared-prefix, or a prompt file under bench_prompt_dir: "
                "sharegpt:FILE or jsonl:FILE (default: the profile's)",
            ),
            Option("slo", "text", "goodput objectives in ms, e.g. ttft_ms:500,tpot_ms:50,e2e_ms:8000"),
            Option("compare-to", "id", "a stored measurement set to judge this one against"),
            Option(
                "rerun",
                "id",
                "re-run this experiment's benchmark (its after-set's profile, levels and backend) "
                "on the running server, no restart, and compare with that after-set",
            ),
            Option(
                "wait",
                "duration",
                "when the target's lease is held, wait this long for it (default 0: refuse at once)",
                maximum=DAY_S,
            ),
        ),
    ),
    CommandSpec(
        "baseline",
        "Show, pin or diff the target's baseline (snapshot + measurement).",
        "read-only",
        "baseline [show|pin|set|diff] [target=NAME] [profile=NAME] [because=TEXT] [wait=DURATION]",
        ("baseline", "baseline pin", "baseline set", "baseline diff"),
        options=(TARGET, WAIT, PROFILE, BECAUSE),
        subs=(
            Sub("show", "the pinned baseline"),
            Sub("pin", "measure now and pin it", tier="mutating"),
            Sub("set", "the same as pin", tier="mutating"),
            Sub("diff", "current flags and capacity against the baseline"),
        ),
        default_sub="show",
    ),
    CommandSpec(
        "hypothesis",
        "Keep the hypothesis log: add, list, show, close.",
        "read-only",
        "hypothesis add TEXT [EXPECTATION] [variable=FLAG] | list [status=STATUS] | show ID | close ID VERDICT [because=TEXT]",
        (
            'hypothesis add "fused MoE sum costs KV memory" max_running_requests>=48',
            'hypothesis add "the fusion is a no-op on SM 12.1" variable=--enable-flashinfer-allreduce-fusion',
            "hypothesis list status=open",
            "hypothesis show 3",
            'hypothesis close 3 refuted because="48 was only the parsed value"',
        ),
        options=(
            TARGET,
            BECAUSE,
            Option("status", "choice", "filter by status", ("open", "confirmed", "refuted", "inconclusive")),
            Option(
                "variable", "text", "the one variable the hypothesis is about (default: a flag named in it)"
            ),
        ),
        subs=(
            Sub(
                "add",
                "record a falsifiable statement",
                tier="mutating",
                positionals=(Positional("text", "the statement", raw=True),),
                expectations=True,
            ),
            Sub("list", "hypotheses on the target"),
            Sub(
                "show",
                "one hypothesis with its experiments",
                positionals=(Positional("id", "hypothesis id", kind="id"),),
            ),
            Sub(
                "close",
                "record the outcome",
                tier="mutating",
                positionals=(
                    Positional("id", "hypothesis id", kind="id"),
                    Positional(
                        "verdict",
                        "confirmed|refuted|inconclusive",
                        choices=("confirmed", "refuted", "inconclusive"),
                    ),
                ),
            ),
        ),
        default_sub="list",
    ),
    CommandSpec(
        "knowledge",
        "The knowledge base's learned facts: list, show, forget (retract) one.",
        "read-only",
        'knowledge [list [flag=FLAG] [retracted=yes]] | show ID | forget ID because="TEXT"',
        (
            "knowledge",
            "knowledge list flag=--enable-metrics",
            "knowledge show 12",
            'knowledge forget 12 because="learned from an assumed premise; never measured"',
        ),
        options=(
            Option("because", "text", "why the fact is retracted, kept in the audit trail (forget needs it)"),
            Option("flag", "text", "only the facts about this flag"),
            Option("retracted", "choice", "list retracted facts too", ("yes", "no")),
        ),
        subs=(
            Sub("list", "learned facts, newest first (retracted ones with retracted=yes)"),
            Sub("show", "one fact with its evidence", positionals=(Positional("id", "fact id", kind="id"),)),
            Sub(
                "forget",
                "retract a fact: kept and shown as retracted, never cited again",
                tier="mutating",
                positionals=(Positional("id", "fact id", kind="id"),),
            ),
        ),
        default_sub="list",
    ),
    CommandSpec(
        "isolate",
        "Find which changed flag caused a regression, with as few restarts as possible.",
        "mutating",
        "isolate EXPECTATION [since=BASELINE] [end=good|reference|current] [target=NAME] [profile=NAME] [wait=DURATION]",
        ("isolate max_running_requests>=48", "isolate output_throughput>=-3% since=baseline"),
        options=(
            TARGET,
            WAIT,
            PROFILE,
            Option(
                "since", "id", "the known-good reference: baseline or an experiment id", choices=("baseline",)
            ),
            Option(
                "end",
                "choice",
                "where to leave the target: without the culprits (good), on the reference, or as it was",
                ("good", "reference", "current"),
            ),
        ),
        expectations=True,
        needs_expectation=True,
    ),
    CommandSpec(
        "run",
        "Run any playbook, built-in or your own, with key=value parameters.",
        "mutating",
        "run PLAYBOOK [key=value ...] [wait=DURATION]",
        ("run baseline", "run verify expect=max_running_requests>=48"),
        positionals=(Positional("playbook", "playbook name (see playbooks)", kind="name"),),
        free_options=True,
    ),
    CommandSpec(
        "playbooks", "List playbooks and their parameters.", "read-only", "playbooks", ("playbooks",)
    ),
    CommandSpec(
        "log",
        "The experiment and hypothesis log of a target.",
        "read-only",
        "log [EXPERIMENT [markdown=yes]] [limit=N] [since=DURATION] [target=NAME]",
        ("log", "log limit=20", "log since=7d", "log 12", "log 12 markdown=yes"),
        positionals=(
            Positional("experiment", "one experiment's steps and evidence", required=False, kind="id"),
        ),
        options=(
            TARGET,
            Option("limit", "int", "at most this many entries", maximum=1000),
            Option("since", "duration", "only what happened this recently", maximum=366 * DAY_S),
            Option(
                "markdown",
                "choice",
                "one experiment as a Markdown document for a post-mortem (`--markdown` on the CLI)",
                ("yes", "no"),
            ),
        ),
    ),
    CommandSpec(
        "cancel",
        "Stop a running experiment; the target is rolled back to its last known-good flags.",
        "mutating",
        "cancel [EXPERIMENT] [target=NAME] [waiter=ID]",
        ("cancel", "cancel waiter=3"),
        positionals=(EXPERIMENT,),
        options=(
            TARGET,
            Option(
                "waiter",
                "id",
                "a command waiting for the target (wait=), as `status` lists it: stop its wait",
            ),
        ),
    ),
    CommandSpec(
        "keep",
        "Keep a change whose decision is pending (Keep / Revert asked in its thread): nothing restarts.",
        "mutating",
        "keep EXPERIMENT [target=NAME]",
        ("keep 12",),
        positionals=(Positional("experiment", "the experiment whose change to keep", kind="id"),),
        options=(TARGET,),
    ),
    CommandSpec(
        "rollback",
        "Restore the flags of the last verified start (the drop-in's backup).",
        "mutating",
        "rollback [target=NAME]",
        ("rollback",),
        options=(TARGET,),
    ),
    CommandSpec(
        "reconcile",
        "Bring a diverged target back: every node gets the flags flagbot meant, ranks restart together.",
        "mutating",
        "reconcile [target=NAME]",
        ("reconcile", "reconcile target=sglang-qwen"),
        options=(TARGET,),
    ),
    CommandSpec(
        "checks",
        "Scheduled verification checks: list, pause, resume, run now, delete.",
        "read-only",
        "checks [list|pause ID|resume ID|run ID|delete ID]",
        ("checks", "checks pause 4", "checks run 4"),
        subs=(
            Sub("list", "checks with last result and next run"),
            *(
                Sub(name, text, tier="mutating", positionals=(Positional("id", "check id", kind="id"),))
                for name, text in (
                    ("pause", "stop running a check"),
                    ("resume", "run it again"),
                    ("run", "run it now"),
                    ("delete", "remove it"),
                )
            ),
        ),
        default_sub="list",
    ),
    CommandSpec(
        "digest",
        "The weekly post-mortem digest, now.",
        "read-only",
        "digest [week=YYYY-Www]",
        ("digest", "digest week=2026-W48", "digest --week 2026-W48"),
        options=(Option("week", "week", "ISO week, e.g. 2026-W48"),),
    ),
)

_BY_NAME = {spec.name: spec for spec in COMMANDS} | {
    alias: spec for spec in COMMANDS for alias in spec.aliases
}


def get_command(name: str) -> CommandSpec | None:
    return _BY_NAME.get(name.lower())
