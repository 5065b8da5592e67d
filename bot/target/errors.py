"""What can go wrong between flagbot and a node, as typed errors whose message a human can act on.

Every error names the host: with two or more nodes per target, "connection refused" without a
host is useless in a Slack thread. Callers branch on the type (an unreachable node marks a
target *diverged*; a failed command is evidence), never on message text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.target.command_result import CommandResult


class TargetError(Exception):
    """Base of every error the target layer raises on purpose."""


class UnreachableError(TargetError):
    """The node could not be reached (no route, refused, connect timeout, connection lost)."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"{host}: unreachable: {reason}")
        self.host = host
        self.reason = reason


class ConnectFailedError(UnreachableError):
    """The SSH connection could not be opened (refused, no answer, login refused): nothing ran on
    the node. A run that meets this before any change never reached the node (`never_reached`)."""


class LocalFileError(TargetError):
    """A file on the bot host that connecting needs (the private key, known_hosts) is missing,
    unreadable or unusable: said before any connection is tried, never as "unreachable"."""

    def __init__(self, host: str, what: str, path: str, problem: str) -> None:
        super().__init__(
            f"{host}: not connected: {what} {path} {problem} (a file on the bot host; nothing was sent)"
        )
        self.host = host
        self.what = what
        self.path = path
        self.problem = problem


class ConnectionLostError(UnreachableError):
    """A connection that was up broke under a command (sshd restarted, a NAT idle cut, the session
    process killed): the host may well be up, so a safe command is re-run once on a fresh
    connection (`bot.target.ssh_reconnect.RETRY_SAFE`); only when that reconnect fails too is the node
    unreachable. `argv_shell` is the command that was running, `detail` what the transport said.
    """

    def __init__(self, host: str, argv_shell: str, detail: str = "") -> None:
        super().__init__(host, f"connection lost during `{argv_shell}`" + (f": {detail}" if detail else ""))
        self.argv_shell = argv_shell
        self.detail = detail


class HostKeyError(TargetError):
    """The node's host key is not in known_hosts, or differs from the one recorded there.

    flagbot never connects to a host it cannot verify: the message carries the offered key's
    SHA256 fingerprint so an operator can compare it with `ssh-keygen -lf` on the host before
    adding it to known_hosts.
    """

    def __init__(self, host: str, fingerprint: str | None, reason: str = "host key not verified") -> None:
        offered = fingerprint or "unknown (the host did not offer a key again)"
        super().__init__(
            f"{host}: {reason}; the host offered {offered}. Check it on the host "
            "(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) and fix known_hosts; flagbot refuses "
            "to connect until it matches"
        )
        self.host = host
        self.fingerprint = fingerprint
        self.reason = reason


class CommandFailed(TargetError):  # noqa: N818 - the name the API promises
    """A table command exited non-zero (with `check=True`); the result holds stdout and stderr."""

    def __init__(self, result: CommandResult, host: str = "") -> None:
        detail = (
            result.stderr.decode("utf-8", "replace").strip()
            or result.stdout.decode("utf-8", "replace").strip()
        )
        where = f"{host}: " if host else ""
        super().__init__(
            f"{where}`{result.argv_shell}` exited {result.exit_status}"
            + (f": {detail[:500]}" if detail else "")
        )
        self.result = result
        self.host = host

    @property
    def sudo_refused(self) -> bool:
        """sudo -n refused the command: the host's sudoers file lacks the rule (regenerate it)."""
        return b"a password is required" in self.result.stderr


class CommandTimeout(TargetError):  # noqa: N818 - the name the API promises
    """A table command did not finish within its timeout; the remote process was terminated."""

    def __init__(self, host: str, argv_shell: str, timeout: float) -> None:
        super().__init__(f"{host}: `{argv_shell}` did not finish within {timeout:g} s (terminated)")
        self.host = host
        self.argv_shell = argv_shell
        self.timeout = timeout


class DivergedError(TargetError):
    """The target is marked diverged (a node missed part of a change); run a reconcile first."""

    def __init__(self, target: str, nodes: list[str], reason: str | None) -> None:
        super().__init__(
            f"target {target} is diverged (nodes {', '.join(nodes) or '?'}: {reason or 'unknown'}); "
            "flagbot refuses further changes until `reconcile` brings every node to the same drop-in"
        )
        self.target = target
        self.nodes = nodes
        self.reason = reason


def never_reached(exc: BaseException) -> bool:
    """`exc` stopped a connection before anything ran on the node: a local key or known_hosts
    problem, an unverified host key, or a connection that could not be opened."""
    return isinstance(exc, LocalFileError | HostKeyError | ConnectFailedError)
