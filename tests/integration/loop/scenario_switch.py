"""Run the testbed's twin under another scenario for one test, and put the session's back after.

Each node's twin reads its hidden truth from `/etc/sglang-twin/scenario.json` at every start
(`flagbot_lab.twin.install.SCENARIO_FILE`; the shim's `scenario_path`), and the host sees each node's
tree under `Layout.root(k)`. So switching is: write the compiled scenario into every node's
root, restart both ranks together on the vendor line, wait until node 0 answers `/health`.
A scenario of another SGLang release (its `sglang_version`) also switches the node's `sglang`
shim to that release (`flagbot_lab.twin.install.fit_release`: `sglang.__version__` and the
benchmark client modules; the engine holds every release's flag list already). A scenario whose
`launch` differs from the running one's also gets its own vendor unit (`install.unit_text`,
then `systemctl daemon-reload` as root in every node), as an operator who moves a deployment to
another release edits the unit: 0.5.23 has no `--mamba-scheduler-strategy`
(`--mamba-radix-cache-strategy` replaced it), so seed-gb10's line would not parse there. Leaving
(also after a failure) writes the original bytes back, fits the shim back, and restarts the same
way, so the testbed is left exactly as found: same scenario file, same shim, same unit, vendor
flags, the session's scenario running. Both moves are checked against the twin's ground truth (the `scenario` of the newest
`start` record on every node), not assumed.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from flagbot_lab.testbed import UNIT, Testbed
from flagbot_lab.testbed.layout import HTTP_PORT
from flagbot_lab.twin.install import NODE_SITE, SCENARIO_FILE, fit_release, unit_text
from flagbot_lab.twin.schema import compile_scenario
from tests.integration.loop.support import wait_for
from tests.integration.target.support import truth_records
from tests.integration.target.support_control import restore_baseline


def _write(path: Path, data: bytes) -> None:
    """Replace the file atomically, readable by the node's root-run twin (as install_into does)."""
    tmp = path.with_suffix(".json.switch")
    tmp.write_bytes(data)
    tmp.chmod(0o644)
    os.replace(tmp, path)


def running_scenario(bed: Testbed, k: int) -> str | None:
    """The scenario of node k's newest twin start, from its ground truth (None before any)."""
    starts = [r for r in truth_records(bed, k) if r.get("kind") == "start"]
    return str(starts[-1].get("scenario")) if starts else None


def _write_units(bed: Testbed, units: list[Path], texts: list[bytes]) -> None:
    """Each node's vendor unit replaced, then systemd told (the running server is not touched)."""
    for k, (path, data) in enumerate(zip(units, texts, strict=True)):
        path.write_bytes(data)
        done = bed.run_as_root(k, ["systemctl", "daemon-reload"])
        assert done.returncode == 0, done.stderr


async def _restart_into(bed: Testbed, name: str) -> None:
    """Both ranks restarted together on the vendor line, then every node's newest start is `name`'s."""
    await restore_baseline(bed)
    nodes = range(len(bed.addresses))
    await wait_for(
        lambda: all(running_scenario(bed, k) == name for k in nodes),
        timeout=10,
        what=f"every node's twin to start with scenario {name}",
    )


@asynccontextmanager
async def twin_scenario(bed: Testbed, name: str) -> AsyncIterator[None]:
    """The twin runs scenario `name` (a shipped name) inside the block, the found one after."""
    roots = [bed.layout.root(k) for k in range(len(bed.addresses))]
    paths = [root / SCENARIO_FILE for root in roots]
    originals = [path.read_bytes() for path in paths]
    versions = [root / NODE_SITE / "sglang" / "_version.py" for root in roots]
    shims = [path.read_bytes() for path in versions]
    units = [root / "etc/systemd/system" / UNIT for root in roots]
    found_units = [path.read_bytes() for path in units]
    found = {json.loads(data)["name"] for data in originals}
    assert len(found) == 1, f"the nodes run different scenarios: {sorted(found)}"
    compiled = compile_scenario(name)
    document = (json.dumps(compiled, indent=1, sort_keys=False) + "\n").encode()
    release = str(compiled.get("sglang_version") or "0.5.10")
    found_release = str(json.loads(originals[0]).get("sglang_version") or "0.5.10")
    relaunch = compiled["launch"] != json.loads(originals[0])["launch"]
    try:
        for root, path in zip(roots, paths, strict=True):
            _write(path, document)
            fit_release(root, release)
        if relaunch:
            texts = [
                unit_text(
                    compiled, node_rank=k, dist_init_addr=bed.layout.dist_init_addr, port=HTTP_PORT
                ).encode()
                for k in range(len(roots))
            ]
            _write_units(bed, units, texts)
        await _restart_into(bed, name)
        yield
    finally:
        for root, path, data in zip(roots, paths, originals, strict=True):
            _write(path, data)
            fit_release(root, found_release)
        if relaunch:
            _write_units(bed, units, found_units)
        await _restart_into(bed, found.pop())
        assert [path.read_bytes() for path in paths] == originals
        assert [path.read_bytes() for path in versions] == shims
        assert [path.read_bytes() for path in units] == found_units


@contextmanager
def scenario_patched(bed: Testbed, patch: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Every node's compiled scenario changed by `patch` inside the block, the found bytes after.

    Nothing is restarted: the twin reads the file at its next start, so the running server keeps
    the scenario it started with and only the starts made inside the block see the change (a
    flag rule added here acts on the start that has the flag)."""
    paths = [bed.layout.root(k) / SCENARIO_FILE for k in range(len(bed.addresses))]
    originals = [path.read_bytes() for path in paths]
    try:
        for path, data in zip(paths, originals, strict=True):
            document = json.loads(data)
            patch(document)
            _write(path, (json.dumps(document, indent=1) + "\n").encode())
        yield
    finally:
        for path, data in zip(paths, originals, strict=True):
            _write(path, data)
