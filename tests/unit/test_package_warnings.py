"""`import bot` silences asyncssh's DSA deprecation noise and nothing else (bot/__init__.py).

Why subprocesses: pytest records and resets warning filters around each test, so the filter a
real `flagbot` process installs is observed in a process of its own, with `-W default` so every
warning that is not filtered prints.
"""

from __future__ import annotations

import subprocess
import sys

DSA_MESSAGE = "DSA is deprecated and support will be removed in a future release."


def warn_from(module: str, message: str) -> str:
    """stderr of a process that imports bot, then warns `message` as if from `module`."""
    program = (
        "import warnings, bot\n"
        f"warnings.warn_explicit({message!r}, UserWarning, 'misc.py', 32, module={module!r})\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", program], capture_output=True, text=True, check=True
    )
    return done.stderr


def test_asyncssh_dsa_deprecation_is_silent() -> None:
    assert warn_from("asyncssh.crypto.misc", DSA_MESSAGE) == ""
    assert warn_from("asyncssh", DSA_MESSAGE) == ""


def test_other_warnings_still_show() -> None:
    assert "something else" in warn_from("asyncssh.crypto.misc", "something else is deprecated")
    assert "DSA is deprecated" in warn_from("cryptography.hazmat", DSA_MESSAGE)
    assert "DSA is deprecated" in warn_from("asyncsshx", DSA_MESSAGE)


def test_importing_asyncssh_after_bot_prints_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import bot, asyncssh"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stderr == ""
