"""The diagnostic loop: playbooks run step by step under a target lease (contract: docs/loop.md).

Kept import-free on purpose: the CLI imports pieces of this package at start-up, and the
engine's dependencies (the store, SSH) load only when a command runs.
"""
