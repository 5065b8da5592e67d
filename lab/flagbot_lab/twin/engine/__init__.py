"""The twin's engine: scenario, argument surface, post-init, memory model, startup lines.

Why a separate package with strict rules: on a test node this directory is installed as the
top-level package `sglang_twin` next to the `sglang` shim, and runs under the node's
`/usr/bin/python3` where nothing but the standard library exists. So every module here uses
the standard library only and imports its siblings relatively (`from .scenario import ...`);
on the host the same code is `flagbot_lab.twin.engine` for the unit tests.
"""
