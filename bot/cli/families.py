"""Which console commands one command module registers: names only, nothing imported.

Why a module of its own: `bot.main` maps each command word to the module that registers it
without importing that module (its imports are what a quick start avoids), and the modules
register the same names from here, so the two lists cannot drift apart.
"""

from __future__ import annotations

LOOP_COMMANDS = (
    "try",
    "revert",
    "verify",
    "isolate",
    "restart",
    "baseline",
    "cancel",
    "keep",
    "freeze",
    "unfreeze",
)
"""Registered by `bot.cli.loop`."""

RECORD_COMMANDS = ("hypothesis", "knowledge", "log")
"""Registered by `bot.cli.records`: read the store only, without the loop's imports."""

TARGET_COMMANDS = frozenset({"status", "observe", "grep", "logs", "rollback", "reconcile"})
"""Registered by `bot.cli.chat`, run by `bot.cli.status` (`status`) and `bot.cli.target` (the rest)."""
