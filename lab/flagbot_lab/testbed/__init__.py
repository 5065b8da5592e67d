"""The testbed: real systemd + journald + sshd + sudo "GPU nodes" in systemd-nspawn.

Used by the integration tests, the demo and the benchmarks; see docs/testbed.md.
`Testbed(instance, base_dir, nodes, scenario).up()` boots the nodes, `down()` removes every
trace, `leftovers(instance)` lists what is still there.
"""

from flagbot_lab.testbed.instance import (
    BootTimes,
    NodeStatus,
    Testbed,
    TestbedStatus,
    leftovers,
    load_twin_installer,
)
from flagbot_lab.testbed.layout import (
    BENCH_INSTANCE,
    DEFAULT_BASE_DIR,
    DEFAULT_INSTANCE,
    OPS_USER,
    TEST_INSTANCE,
    UNIT,
    Layout,
    TestbedError,
)
from flagbot_lab.testbed.node import TwinInstaller
from flagbot_lab.testbed.system import unavailable_reason

__all__ = [
    "BENCH_INSTANCE",
    "DEFAULT_BASE_DIR",
    "DEFAULT_INSTANCE",
    "OPS_USER",
    "TEST_INSTANCE",
    "UNIT",
    "BootTimes",
    "Layout",
    "NodeStatus",
    "Testbed",
    "TestbedError",
    "TestbedStatus",
    "TwinInstaller",
    "leftovers",
    "load_twin_installer",
    "unavailable_reason",
]
