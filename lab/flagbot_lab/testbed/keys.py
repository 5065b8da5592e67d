"""SSH keys: one client key pair per base dir, a fresh host key per node boot, known_hosts.

A node boots from a tmpfs upper layer, so its host key is new at every boot (as on a reinstalled
host): known_hosts is rewritten from the nodes' new public keys at every `up`, and a client that
kept an old file is refused, as flagbot must be.
"""

from __future__ import annotations

import os
from pathlib import Path

from flagbot_lab.testbed.system import run, tool


def ensure_client_key(path: Path) -> str:
    """Create the client key pair if missing; return the public key line."""
    if not path.exists() or not path.with_suffix(".pub").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in (path, path.with_suffix(".pub")):
            stale.unlink(missing_ok=True)
        run([tool("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", "flagbot-testbed", "-f", path])
    os.chmod(path, 0o600)
    return path.with_suffix(".pub").read_text().strip()


def new_host_key(ssh_dir: Path) -> str:
    """Replace every host key in a node's /etc/ssh with one new ed25519 key; return `type base64`."""
    for old in ssh_dir.glob("ssh_host_*"):
        old.unlink()
    key = ssh_dir / "ssh_host_ed25519_key"
    run([tool("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", key])
    kind, blob = key.with_suffix(".pub").read_text().split()[:2]
    return f"{kind} {blob}"


def write_known_hosts(path: Path, entries: list[tuple[str, str]]) -> None:
    """`<address> ssh-ed25519 AAAA...` per node (port 22 needs no `[addr]:port` form)."""
    text = "".join(f"{address} {key}\n" for address, key in entries)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.chmod(tmp, 0o644)
    tmp.replace(path)
