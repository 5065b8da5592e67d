"""One bridge per instance, one network namespace per node, and nothing that leaves the machine.

Layout of instance i: bridge `fbbr<i>` in the root namespace with the host at `10.200.<i>.1/24`;
node k lives in namespace `fb<i>n<k>` with `eth0` = `10.200.<i>.<k+2>/24`, whose peer
`fbv<i>n<k>` is a port of the bridge. Nodes reach each other and the host (to reach a service
of the host, bind it on 10.200.<i>.1) and nothing else: a node has no default route, forwarding
stays off, and the root namespace holds `unreachable 10.200.0.0/16` so an address of a missing
node fails at once instead of following the host's default route.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from flagbot_lab.testbed.layout import SAFETY_ROUTE, Layout, TestbedError, parse_name
from flagbot_lab.testbed.system import mounts, run, tool

NETNS_DIR = Path("/run/netns")


def _ip(*args: str, check: bool = True) -> str:
    return run([tool("ip"), *args], check=check).stdout


def _ip_json(*args: str) -> list[dict[str, Any]]:
    text = _ip("-j", *args).strip()
    data = json.loads(text) if text else []
    return [item for item in data if isinstance(item, dict)]


def netns_names() -> list[str]:
    return [str(item["name"]) for item in _ip_json("netns", "list") if "name" in item]


def link_names() -> list[str]:
    return [str(item["ifname"]) for item in _ip_json("link", "show") if "ifname" in item]


def bridges_in_use() -> list[int]:
    """Instances whose bridge exists: they need the shared safety route."""
    out = []
    for name in link_names():
        parsed = parse_name(name)
        if name.startswith("fbbr") and parsed and parsed[1] is None:
            out.append(parsed[0])
    return out


def has_safety_route() -> bool:
    routes = _ip_json("route", "show", "exact", SAFETY_ROUTE)
    return any(route.get("type") == "unreachable" for route in routes)


def ensure_bridge(layout: Layout) -> None:
    """Create the instance's bridge with the host address, and the safety route if missing."""
    _ip("link", "add", layout.bridge, "type", "bridge")
    _ip("addr", "add", f"{layout.host_address}/24", "dev", layout.bridge)
    _ip("link", "set", layout.bridge, "up")
    if not has_safety_route():
        _ip("route", "add", "unreachable", SAFETY_ROUTE)


def add_node(layout: Layout, k: int) -> None:
    """Namespace, veth pair (node side `eth0`), address; no default route inside."""
    ns, veth = layout.netns(k), layout.veth(k)
    _ip("netns", "add", ns)
    _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
    _ip("link", "set", veth, "master", layout.bridge, "up")
    _ip("-n", ns, "addr", "add", f"{layout.address(k)}/24", "dev", "eth0")
    _ip("-n", ns, "link", "set", "lo", "up")
    _ip("-n", ns, "link", "set", "eth0", "up")


def set_link(layout: Layout, k: int, up: bool) -> None:
    """Take a node's cable out (or put it back): its host side veth goes down."""
    _ip("link", "set", layout.veth(k), "up" if up else "down")


def remove_instance(instance: int) -> None:
    """Delete every namespace and link of `instance`; drop shared state nobody uses any more."""
    for name in link_names():
        parsed = parse_name(name)
        if parsed and parsed[0] == instance and (name.startswith(("fbv", "fbbr"))):
            _ip("link", "del", name, check=False)
    for name in netns_names():
        parsed = parse_name(name)
        if parsed and parsed[0] == instance and parsed[1] is not None and not name.startswith("fbv"):
            _ip("netns", "del", name, check=False)
    drop_shared_if_unused()


def drop_shared_if_unused() -> None:
    """The safety route goes with the last bridge; `/run/netns` (which `ip netns` turns into a
    bind mount of itself) goes when it holds no namespace at all."""
    if not bridges_in_use() and has_safety_route():
        _ip("route", "del", "unreachable", SAFETY_ROUTE, check=False)
    if NETNS_DIR.is_dir() and not any(NETNS_DIR.iterdir()):
        if any(point == str(NETNS_DIR) for _, point, _ in mounts()):
            run([tool("umount"), str(NETNS_DIR)], check=False)
        with contextlib.suppress(OSError):
            NETNS_DIR.rmdir()


def leftovers(instance: int) -> list[str]:
    found = []
    for name in netns_names():
        parsed = parse_name(name)
        if parsed and parsed[0] == instance and not name.startswith(("fbv", "fbbr")):
            found.append(f"network namespace {name}")
    for name in link_names():
        parsed = parse_name(name)
        if parsed and parsed[0] == instance and name.startswith(("fbv", "fbbr")):
            found.append(f"link {name}")
    if has_safety_route() and not bridges_in_use():
        found.append(f"route unreachable {SAFETY_ROUTE} with no testbed bridge")
    return found


def require_free(layout: Layout) -> None:
    """Refuse to boot over addresses someone else (not a testbed) uses."""
    for item in _ip_json("-4", "addr", "show"):
        for info in item.get("addr_info", []):
            local = str(info.get("local", ""))
            if local.startswith(f"10.200.{layout.instance}.") and item.get("ifname") != layout.bridge:
                raise TestbedError(
                    f"10.200.{layout.instance}.0/24 is already used by {item.get('ifname')}; "
                    "pick another --instance"
                )
