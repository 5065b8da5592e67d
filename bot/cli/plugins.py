"""Commands that installed add-ons bring to `flagbot`, found through the `flagbot.commands` entry points.

Why a plugin group and not an import: the lab (the SGLang twin, the nspawn testbed, the demo and
the Slack stand-in, package `flagbot_lab`) is for developers and must not ship in the product's
wheel or image. When it is installed (`make demo`, `make test`), its entry point adds `flagbot
twin …` and `flagbot demo`; when it is not, those commands simply do not exist. Each entry point
names a callable that takes the Typer application and registers its commands on it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points

import typer

PLUGIN_GROUP = "flagbot.commands"


def installed_plugins() -> list[EntryPoint]:
    """The entry points of the `flagbot.commands` group, in name order (a stable help listing)."""
    return sorted(entry_points(group=PLUGIN_GROUP), key=lambda point: point.name)


def register_plugins(app: typer.Typer) -> list[str]:
    """Let every installed add-on register its commands; returns the names of those that did.

    A broken add-on (it fails to import, or names something that is not a callable) is reported
    on stderr with its name and skipped: the product's own commands keep working without it.
    """
    registered: list[str] = []
    for point in installed_plugins():
        try:
            register: Callable[[typer.Typer], None] = point.load()
            if not callable(register):
                raise TypeError(f"{point.value} is not callable")
            register(app)
        except Exception as exc:  # an add-on's failure must not take the product CLI down
            print(
                f"warning: flagbot add-on {point.name!r} ({point.value}) not loaded: {exc}", file=sys.stderr
            )
            continue
        registered.append(point.name)
    return registered
