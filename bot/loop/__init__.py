"""The diagnostic loop: playbooks run step by step under a target lease (contract: docs/loop.md).

Kept import-free on purpose: importing one module of the loop loads that module and what it
imports, not the whole loop; the built-in steps (`bot.loop.steps`) load and register themselves
only when `ensure_builtin_actions` imports them.
"""
