"""Help text and read-back, both generated from the registry so they never disagree with it."""

from __future__ import annotations

from typing import Any

from bot.commands.grammar import Invocation
from bot.commands.registry import COMMANDS, get_command


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
        return "\n".join(lines)
    spec = get_command(topic)
    if spec is None:
        return f"unknown command {topic!r}; commands: {', '.join(s.name for s in COMMANDS)}"
    lines = [f"{spec.name}: {spec.summary}", f"usage: {spec.usage}", f"tier: {spec.tier}"]
    lines += [f"  {sub.name}: {sub.help} ({sub.tier})" for sub in spec.subs]
    lines += [f"  {opt.name}=: {opt.help}" for opt in spec.options]
    lines += ["examples:", *(f"  {example}" for example in spec.examples)]
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
