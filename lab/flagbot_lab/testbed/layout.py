"""Names, addresses and paths of a testbed instance: one place, so cleanup finds what `up` made.

Everything a testbed creates on the host is named after its instance number, so an idempotent
teardown (and the `leftovers` checker) can find it from the number alone, even after a crash
that lost every in-memory record: network namespaces `fb<i>n<k>`, host veths `fbv<i>n<k>`, the
bridge `fbbr<i>`, cgroups `flagbot-testbed/<i>/n<k>` in every hierarchy, and mounts whose
source is `fbtb<i>n<k>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_INSTANCE: Final = 1
"""The demo's instance; `flagbot twin up` uses it unless told otherwise."""
TEST_INSTANCE: Final = 201
"""The integration tests' instance: a test run never tears down a running demo."""
BENCH_INSTANCE: Final = 202
MAX_NODES: Final = 16
UNIT: Final = "sglang-qwen.service"
UNIT_LAYOUTS: Final = ("one-name", "head-worker", "template")
"""How the nodes name their service (docs/operations.md, unit layouts): `one-name` runs `UNIT`
everywhere; `head-worker` runs `HEAD_UNIT` on node 0 and `WORKER_UNIT` on the others;
`template` installs one `TEMPLATE_UNIT` file (`--node-rank %i`) and node k runs instance k."""
HEAD_UNIT: Final = "sglang-head.service"
WORKER_UNIT: Final = "sglang-worker.service"
TEMPLATE_UNIT: Final = "sglang@.service"
OPS_USER: Final = "ops"
HTTP_PORT: Final = 30000
DIST_INIT_PORT: Final = 50000
"""Port of node 0's rendezvous (`--dist-init-addr 10.200.<i>.2:50000`)."""
SAFETY_ROUTE: Final = "10.200.0.0/16"
"""`unreachable` in the root namespace: a missing node answers "No route to host" at once
instead of its packets taking the default route out of the machine."""
CGROUP_PARENT: Final = "flagbot-testbed"
RUNTIME_BASE: Final = Path("/run/flagbot-testbed")
"""Mount points and the cross-base-dir instance locks. Not under the project: a node root is a
full view of the host `/`, and tools that walk the project tree (setuptools building a wheel,
`grep -r`, editors) would descend into it."""
STATE_DIR: Final = Path("state")
"""flagbot's runtime data, relative to the working directory like `state/flagbot.db`."""
DEFAULT_BASE_DIR: Final = STATE_DIR / "testbed"

_NAME = re.compile(r"^fb(?:br|v)?(\d+)(?:n(\d+))?$")


def check_unit_layout(unit_layout: str) -> str:
    if unit_layout not in UNIT_LAYOUTS:
        raise TestbedError(f"unit layout {unit_layout!r}: use one of {', '.join(UNIT_LAYOUTS)}")
    return unit_layout


def node_unit(unit_layout: str, k: int) -> str:
    """The service node k runs in `unit_layout` (what flagbot's config names for it)."""
    if unit_layout == "head-worker":
        return HEAD_UNIT if k == 0 else WORKER_UNIT
    if unit_layout == "template":
        return TEMPLATE_UNIT.replace("@.", f"@{k}.")
    return UNIT


def unit_file(unit_layout: str, k: int) -> str:
    """The unit file node k holds in /etc/systemd/system: the template itself for `template`."""
    return TEMPLATE_UNIT if unit_layout == "template" else node_unit(unit_layout, k)


class TestbedError(Exception):
    """A testbed problem, phrased for the operator (the CLI prints it without a traceback)."""

    __test__ = False  # not a pytest test class despite the name


def check_instance(instance: int) -> int:
    if isinstance(instance, bool) or not 1 <= instance <= 254:
        raise TestbedError(f"instance {instance!r}: use 1..254 (it is the third octet of 10.200.<i>.0/24)")
    return instance


@dataclass(frozen=True)
class Layout:
    """Where instance `instance` with `nodes` nodes keeps its things."""

    instance: int
    base_dir: Path
    nodes: int

    def __post_init__(self) -> None:
        check_instance(self.instance)
        if not 1 <= self.nodes <= MAX_NODES:
            raise TestbedError(f"nodes: {self.nodes} is not between 1 and {MAX_NODES}")

    # network
    @property
    def bridge(self) -> str:
        return f"fbbr{self.instance}"

    @property
    def subnet(self) -> str:
        return f"10.200.{self.instance}.0/24"

    @property
    def host_address(self) -> str:
        return f"10.200.{self.instance}.1"

    def address(self, k: int) -> str:
        return f"10.200.{self.instance}.{k + 2}"

    def netns(self, k: int) -> str:
        """Also the nspawn machine name."""
        return f"fb{self.instance}n{k}"

    def veth(self, k: int) -> str:
        return f"fbv{self.instance}n{k}"

    def hostname(self, k: int) -> str:
        return f"gpu{k}-fb{self.instance}"

    def mount_source(self, k: int) -> str:
        """The `source` of the node's tmpfs and overlay mounts, so cleanup can find them."""
        return f"fbtb{self.instance}n{k}"

    @property
    def dist_init_addr(self) -> str:
        return f"{self.address(0)}:{DIST_INIT_PORT}"

    @property
    def base_url(self) -> str:
        return f"http://{self.address(0)}:{HTTP_PORT}"

    # cgroups
    @property
    def cgroup(self) -> str:
        return f"{CGROUP_PARENT}/{self.instance}"

    def node_cgroup(self, k: int) -> str:
        return f"{self.cgroup}/n{k}"

    # files
    @property
    def instance_dir(self) -> Path:
        return self.base_dir / str(self.instance)

    def node_dir(self, k: int) -> Path:
        """The node's files that outlive it (console.log)."""
        return self.instance_dir / f"n{k}"

    @property
    def runtime_dir(self) -> Path:
        return RUNTIME_BASE / str(self.instance)

    def root(self, k: int) -> Path:
        """The node's `/`: overlay of the host `/` (read-only lower) and a tmpfs upper."""
        return self.runtime_dir / f"n{k}" / "root"

    def rw(self, k: int) -> Path:
        """The tmpfs holding the overlay's upper and work directories."""
        return self.runtime_dir / f"n{k}" / "rw"

    def console_log(self, k: int) -> Path:
        return self.node_dir(k) / "console.log"

    @property
    def known_hosts(self) -> Path:
        return self.instance_dir / "known_hosts"

    @property
    def state_file(self) -> Path:
        return self.instance_dir / "state.json"

    @property
    def client_key(self) -> Path:
        """One client key pair per base dir; instances share it, each node trusts its `.pub`."""
        return self.base_dir / "client_ed25519"

    @property
    def lock_file(self) -> Path:
        return self.base_dir / f"{self.instance}.lock"

    @property
    def global_lock_file(self) -> Path:
        """Per instance across base dirs: two test sessions with different tmp dirs exclude
        each other too."""
        return RUNTIME_BASE / f"{self.instance}.lock"


def parse_name(name: str) -> tuple[int, int | None] | None:
    """`fb201n1` → (201, 1), `fbbr201` → (201, None); anything else → None."""
    match = _NAME.match(name)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)) if match.group(2) is not None else None
