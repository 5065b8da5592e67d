"""Help text and read-back, both generated from the registry so they never disagree with it."""

from __future__ import annotations

from typing import Any

from bot.commands.grammar import Invocation
from bot.commands.registry import COMMANDS, get_command
from bot.sglang.expectation import OPERATORS
from bot.sglang.metrics import BENCH, CAPACITY, STATUS

CHANGE_HELP = (
    "CHANGE (try): `add --x [VALUE ...]`, `set --x VALUE` (or `--x=VALUE`), `remove --x`, "
    "`env set NAME=VALUE`, `env unset NAME`; flags are written with their dashes, as SGLang spells "
    "them; a bare `--x` continues the verb before it (`add` at first: `set --a 1 --b 2` sets both). "
    "e.g. `add --enable-metrics`, `set --mem-fraction-static 0.85`, `remove --disable-cuda-graph`"
)


def expectation_help() -> list[str]:
    """What an EXPECTATION is, and the metrics it may name (the metric table the grammar checks
    names against: `bot.sglang.metrics`)."""
    return [
        f"EXPECTATION: METRIC OP VALUE with OP one of {' '.join(OPERATORS)} (spaces around OP allowed); "
        "a VALUE ending in % is relative to the reference (`output_throughput>=-2%`: at most 2 % below); "
        "words compare with == and != only. "
        "e.g. `max_running_requests>=48`, `output_throughput>=-2%`, `median_ttft_ms<500`, `startup_error==none`",
        "metrics an EXPECTATION may name:",
        f"  capacity (the start's log): {', '.join(CAPACITY)}",
        f"  start status: {', '.join(STATUS)}",
        f"  benchmark (bench_serving's keys): {', '.join(BENCH)}",
        "  parsed.FIELD: any field of the printed server_args (`parsed.max_running_requests==48`)",
    ]


def help_text(topic: str | None = None) -> str:
    """All commands with their tier, or one command's usage, options and examples."""
    if topic is None:
        width = max(len(spec.name) for spec in COMMANDS)
        lines = ["flagbot commands (same words in Slack: /flagbot COMMAND ...):"]
        lines += [
            f"  {spec.name:<{width}}  {spec.summary}{'  [mutating]' if spec.tier == 'mutating' else ''}"
            for spec in COMMANDS
        ]
        lines.append("`help COMMAND` shows its usage and examples.")
        lines += [CHANGE_HELP, *expectation_help()]
        return "\n".join(lines)
    spec = get_command(topic)
    if spec is None:
        return f"unknown command {topic!r}; commands: {', '.join(s.name for s in COMMANDS)}"
    lines = [f"{spec.name}: {spec.summary}", f"usage: {spec.usage}", f"tier: {spec.tier}"]
    lines += [f"  {sub.name}: {sub.help} ({sub.tier})" for sub in spec.subs]
    lines += [f"  {opt.name}=: {opt.help}" for opt in spec.options]
    lines += ["examples:", *(f"  {example}" for example in spec.examples)]
    if spec.changes:
        lines.append(CHANGE_HELP)
    if spec.expectations or any(sub.expectations for sub in spec.subs):
        lines += expectation_help()
    return "\n".join(lines)


def describe_invocation(invocation: Invocation) -> dict[str, Any]:
    """What the grammar understood, as plain data (for `flagbot explain` and for audit records)."""
    return {
        "command": invocation.name,
        "sub": invocation.sub,
        "tier": invocation.tier,
        "positionals": {k: list(v) if isinstance(v, tuple) else v for k, v in invocation.positionals.items()},
        "options": invocation.options,
        "changes": [change.to_json() for change in invocation.changes],
        "expectations": [str(expectation) for expectation in invocation.expectations],
        **({"notes": list(invocation.notes)} if invocation.notes else {}),
    }
