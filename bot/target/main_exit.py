"""How the unit's main process ended, and what systemd's `Restart=` does about it.

SGLang's main process ends in two ways that systemd tells apart (`ExecMainCode`): an exit status
(`code=exited`: argparse's 2, an uncaught error in the main process's own startup, 1) or death by
a signal (`code=killed`). A scheduler's failed start takes the second way: its SIGQUIT handler
SIGKILLs the main process itself (0.5.10 `entrypoints/engine.py`, `utils/common.py`
`kill_process_tree`), and so does the kernel's OOM killer. `Restart=` reacts differently:
`on-failure` restarts both, `on-abnormal` only the signal. So a unit whose server failed is
either `failed` (nothing restarts it), in `auto-restart` (a restart loop begins) or, after a
death by a "clean" signal (SIGTERM, SIGINT, SIGHUP, SIGPIPE), `inactive`. Readiness must
report each of them as a failed start at once, with the way the process ended, rather than wait
out its ready bound (`systemd.service(5)`, "Restart=" and "SuccessExitStatus=").
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Literal

ExitKind = Literal["exited", "killed", "dumped"]

EXEC_MAIN_CODES: dict[str, ExitKind] = {"1": "exited", "2": "killed", "3": "dumped"}
"""`systemctl show -p ExecMainCode`: the `si_code` of the main process's SIGCHLD
(CLD_EXITED, CLD_KILLED, CLD_DUMPED); 0 while it has not ended."""

CLEAN_SIGNALS = frozenset({signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE})
"""Signals systemd counts as a clean end of a service's main process."""

RESTARTS_ON_UNCLEAN_EXIT = frozenset({"always", "on-failure"})
RESTARTS_ON_UNCLEAN_SIGNAL = frozenset({"always", "on-failure", "on-abnormal", "on-abort"})
RESTARTS_ON_CLEAN = frozenset({"always", "on-success"})


@dataclass(frozen=True)
class MainExit:
    """The main process's end as `systemctl status` words it: `code=killed, status=9/KILL`."""

    kind: ExitKind
    status: int
    """The exit status, or the signal's number for `killed` and `dumped`."""

    @classmethod
    def from_show(cls, code: str, status: str) -> MainExit | None:
        """From `ExecMainCode` and `ExecMainStatus`; None while the process has not ended."""
        kind = EXEC_MAIN_CODES.get(code.strip())
        text = status.strip()
        if kind is None or not text.isdigit():
            return None
        return cls(kind, int(text))

    @property
    def signal_name(self) -> str | None:
        if self.kind == "exited":
            return None
        try:
            return signal.Signals(self.status).name.removeprefix("SIG")
        except ValueError:
            return str(self.status)

    @property
    def clean(self) -> bool:
        """Exit status 0 or a clean signal (systemd's `EXIT_CLEAN_DAEMON`, no SuccessExitStatus=)."""
        if self.kind == "exited":
            return self.status == 0
        return self.kind == "killed" and self.status in {int(s) for s in CLEAN_SIGNALS}

    def restarted_by(self, restart: str) -> bool:
        """Does a unit with this `Restart=` start the server again after this end?"""
        if self.clean:
            return restart in RESTARTS_ON_CLEAN
        if self.kind == "exited":
            return restart in RESTARTS_ON_UNCLEAN_EXIT
        return restart in RESTARTS_ON_UNCLEAN_SIGNAL

    def describe(self) -> str:
        name = self.signal_name
        return f"code={self.kind}, status={self.status}" + (f"/{name}" if name else "")


def explain(main_exit: MainExit | None, restart: str) -> str:
    """One clause for a failure's message: how the process ended and what `Restart=` does then."""
    policy = restart or "no"
    if main_exit is None:
        return f"Restart={policy}"
    then = "restarts it" if main_exit.restarted_by(policy) else "does not restart it"
    return f"main process {main_exit.describe()}; Restart={policy} {then}"
