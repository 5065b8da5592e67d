"""One node: an overlay root prepared as a GPU host, then booted with systemd-nspawn.

The recipe is reference/testbed.md §2b with its pitfalls fixed up front: `/` of the host as the
read-only lower layer (packages installed on the host are on every node) and a tmpfs upper (the
host tree is never written), an opaque empty `/dev` (nspawn refuses a populated one), a machine
id of its own (else journald refuses to link journals), `/etc/hosts` and an empty
`resolv.conf` (else sudo and Python's `getfqdn` wait 10-20 s on DNS that cannot answer), boot
services that make no sense on a node masked, a fresh host key, and the deploy user `ops`.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Protocol

from bot.target.privileged import dropin_dir
from bot.target.sudoers import sudoers_text
from flagbot_lab.testbed import cgroups
from flagbot_lab.testbed.keys import new_host_key
from flagbot_lab.testbed.layout import HTTP_PORT, OPS_USER, UNIT, Layout, TestbedError, node_unit, unit_file
from flagbot_lab.testbed.system import replace_file, replace_symlink, run, tool

MASKED_UNITS = (
    "postgresql.service",  # on the host image; boot took 2.9 s instead of 0.7 s with it
    "postgresql@.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
    "man-db.timer",
    "systemd-timesyncd.service",
    "getty@tty1.service",  # no terminal: the console is a pipe
)
SSHD_CONFIG = """\
# flagbot testbed node: keys only, one fresh host key per boot
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UseDNS no
"""


class TwinInstaller(Protocol):
    """What the testbed needs from the twin (`flagbot_lab.twin.install` provides it)."""

    def install_into(self, root: Path, *, scenario: str) -> None: ...

    def unit_text(
        self, scenario: str, *, node_rank: int, dist_init_addr: str, host: str, port: int
    ) -> str: ...


def mount_root(layout: Layout, k: int) -> None:
    """tmpfs for the upper layer (it must be another file system than the lower `/`), overlay."""
    root, rw, source = layout.root(k), layout.rw(k), layout.mount_source(k)
    root.mkdir(parents=True, exist_ok=True)
    rw.mkdir(parents=True, exist_ok=True)
    run([tool("mount"), "-t", "tmpfs", "-o", "size=1g,mode=0755", source, rw])
    (rw / "upper" / "dev").mkdir(parents=True)
    (rw / "work").mkdir()
    os.setxattr(rw / "upper" / "dev", "trusted.overlay.opaque", b"y")
    options = f"lowerdir=/,upperdir={rw / 'upper'},workdir={rw / 'work'}"
    run([tool("mount"), "-t", "overlay", "-o", options, source, root])


def _mask(root: Path) -> None:
    system = root / "etc/systemd/system"
    for unit in MASKED_UNITS:
        replace_symlink(system / unit, "/dev/null")
        for wants in system.glob(f"*.wants/{unit}"):
            wants.unlink()


def _add_ops_user(layout: Layout, k: int, client_pub: str) -> None:
    root = layout.root(k)
    exists = run([tool("chroot"), root, "getent", "passwd", OPS_USER], check=False).returncode == 0
    if not exists:
        run([tool("chroot"), root, "useradd", "-m", "-s", "/bin/bash", "-G", "systemd-journal", OPS_USER])
    else:
        run([tool("chroot"), root, "usermod", "-s", "/bin/bash", "-aG", "systemd-journal", OPS_USER])
    home = root / "home" / OPS_USER
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(parents=True, exist_ok=True)
    replace_file(ssh_dir / "authorized_keys", client_pub + "\n", 0o600)
    entry = run([tool("chroot"), root, "getent", "passwd", OPS_USER]).stdout.split(":")
    for path in (home, ssh_dir, ssh_dir / "authorized_keys"):
        os.chown(path, int(entry[2]), int(entry[3]))
    os.chmod(ssh_dir, 0o700)


def prepare(
    layout: Layout,
    k: int,
    *,
    client_pub: str,
    sudoers: str,
    installer: TwinInstaller,
    scenario: str,
    unit_layout: str = "one-name",
) -> str:
    """Mount and fill node k's tree; return its new host public key (`ssh-ed25519 AAAA...`).

    The twin's unit goes in under the name `unit_layout` gives node k; for `template` the file
    is `sglang@.service` with `--node-rank %i` (systemd puts the instance there), enabled as
    instance k, as a real templated deployment does."""
    mount_root(layout, k)
    root = layout.root(k)
    etc = root / "etc"
    hostname = layout.hostname(k)
    replace_file(etc / "hostname", hostname + "\n")
    replace_file(etc / "machine-id", uuid.uuid4().hex + "\n", 0o444)
    replace_file(etc / "hosts", f"127.0.0.1 localhost\n127.0.1.1 {hostname}\n")
    replace_file(etc / "resolv.conf", "")
    _mask(root)
    host_key = new_host_key(etc / "ssh")
    replace_file(etc / "ssh/sshd_config.d/flagbot-testbed.conf", SSHD_CONFIG)
    _add_ops_user(layout, k, client_pub)
    for stale in (etc / "sudoers.d").glob("*"):
        if stale.name != "README":
            stale.unlink()
    replace_file(etc / "sudoers.d/flagbot", sudoers, 0o440)
    installer.install_into(root, scenario=scenario)
    unit = installer.unit_text(
        scenario,
        node_rank=k,
        dist_init_addr=layout.dist_init_addr,
        host="0.0.0.0",  # noqa: S104 - the node's own netns; nothing outside the bridge reaches it
        port=HTTP_PORT,
    )
    if "Restart=on-failure" not in unit or "WantedBy=multi-user.target" not in unit:
        raise TestbedError("the twin's unit must have Restart=on-failure and WantedBy=multi-user.target")
    runs, file = node_unit(unit_layout, k), unit_file(unit_layout, k)
    replace_file(etc / "systemd/system" / file, unit_for_layout(unit, unit_layout, k))
    replace_symlink(etc / "systemd/system/multi-user.target.wants" / runs, f"/etc/systemd/system/{file}")
    (root / str(dropin_dir(runs)).lstrip("/")).mkdir(parents=True, exist_ok=True)
    return host_key


def unit_for_layout(text: str, unit_layout: str, k: int) -> str:
    """Node k's unit text as `unit_layout` installs it: as written, or for `template` with
    `--node-rank %i` in place of k (one file serves every instance; systemd fills in `%i`)."""
    if unit_file(unit_layout, k) == node_unit(unit_layout, k):
        return text
    templated, found = re.subn(rf"--node-rank {k}(?= |$)", "--node-rank %i", text, flags=re.MULTILINE)
    if found != 1:
        raise TestbedError("the twin's unit must pass --node-rank once to make a template of it")
    return templated


def node_sudoers(unit: str = UNIT) -> str:
    """The node's sudo rules: exactly the privileged table for the unit the node runs."""
    return sudoers_text(OPS_USER, unit)


def start(layout: Layout, k: int) -> subprocess.Popen[bytes]:
    """Boot node k's systemd in its netns, from its own cgroups; return the nspawn process.

    nspawn runs in a new session (it must outlive `flagbot twin up`, and a Ctrl-C in the
    terminal must not reach it); its output goes to the node's console.log.
    """
    paths = cgroups.create(layout.node_cgroup(k))
    argv = [
        tool("systemd-nspawn"),
        "--quiet",
        "--boot",
        f"--directory={layout.root(k)}",
        f"--machine={layout.netns(k)}",
        "--register=no",
        "--keep-unit",
        f"--network-namespace-path=/run/netns/{layout.netns(k)}",
        "--console=pipe",
    ]
    with layout.console_log(k).open("ab") as log:
        try:
            return subprocess.Popen(  # noqa: S603 - argv list built from Layout
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: cgroups.join(paths),  # joins the node's cgroups before exec
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise TestbedError(f"could not start node {k} in cgroup {layout.node_cgroup(k)}: {exc}") from None
