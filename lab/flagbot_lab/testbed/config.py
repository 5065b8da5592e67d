"""`twin.toml`: a flagbot config whose default target is the testbed, so every command of the
project runs against the nodes with `flagbot --config state/twin.toml ...`."""

from __future__ import annotations

import json
from pathlib import Path

from bot.config import ConfigError, load_settings
from flagbot_lab.testbed.layout import OPS_USER, TEMPLATE_UNIT, Layout, TestbedError, node_unit

SGLANG_VERSION = "0.5.10"


def _q(text: str) -> str:
    """A TOML basic string (JSON's escapes are a subset of TOML's)."""
    return json.dumps(text, ensure_ascii=False)


def twin_config_text(
    layout: Layout, *, key_path: Path, known_hosts: Path, scenario: str, unit_layout: str = "one-name"
) -> str:
    """The config; `unit_layout` as an operator writes it: the target's `unit` (the template
    itself for `template`), a node's own `unit` where it differs (the worker)."""
    target_unit = TEMPLATE_UNIT if unit_layout == "template" else node_unit(unit_layout, 0)

    def own(k: int) -> str:
        unit = node_unit(unit_layout, k)
        return "" if unit_layout == "template" or unit == target_unit else f", unit = {_q(unit)}"

    nodes = ",\n".join(
        f"  {{ host = {_q(layout.address(k))}, port = 22, user = {_q(OPS_USER)}{own(k)} }}"
        for k in range(layout.nodes)
    )
    return f"""\
# flagbot config for testbed instance {layout.instance} (scenario {scenario}), written by the testbed
# at every boot: the nodes' host keys are new each time. Use: flagbot --config <this file> ...
default_target = "twin"

[targets.twin]
unit = {_q(target_unit)}
base_url = {_q(layout.base_url)}
sglang_version = {_q(SGLANG_VERSION)}
nodes = [
{nodes},
]

[targets.twin.ssh]
key_path = {_q(str(key_path.resolve()))}
known_hosts = {_q(str(known_hosts.resolve()))}
sudo = true

# A testbed restarts far more often than a deployment should (each test, each isolate probe):
# policy.max_restarts_per_hour (6 by default) would refuse the stories, not protect anything.
[targets.twin.policy]
max_restarts_per_hour = 1000

# The testbed's stories stay short: a try and a verify measure the profile's repeats a side and
# look once, as before a try sized its sides (what sizing and sequential looks buy is measured by
# bench/verdict_power.py and the component tests, not by booting nodes for minutes).
[verdicts]
min_repeats = 2
max_repeats = 2
looks = 1
"""


def write_twin_config(path: Path, text: str) -> None:
    """Write and validate with flagbot's own loader: a config the bot would refuse is a bug here."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    try:
        load_settings(tmp, required=True)
    except ConfigError as exc:
        tmp.unlink()
        raise TestbedError(f"generated config is invalid: {exc}") from None
    tmp.replace(path)
