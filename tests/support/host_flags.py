"""What a host's `python -m sglang.launch_server --help` prints, for tests of the host's flag list.

The text is the twin's own `--help` (`flagbot_lab.twin.engine.args.build_parser`: SGLang 0.5.10's
argparse surface, printed by argparse itself), so what flagbot parses is what a node running the
twin prints. A test can make it another release's: `aliases` adds option strings to a flag (0.5.23
spells `--enable-hierarchical-cache` also `--enable-hicache`: `sglang/srt/arg_groups/fields/memory.py`
of the 0.5.23 wheel), `drop` removes flags (one a release no longer has).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from bot.app.context import cache_dir
from bot.config import Settings
from bot.sglang.catalog import FlagCatalog
from bot.target.flaglist import remember_target, save_catalog
from flagbot_lab.twin.engine.args import build_parser

HICACHE_ALIAS = {"--enable-hierarchical-cache": ("--enable-hicache",)}
"""0.5.23's alias, which the packaged 0.5.10 list lacks."""


def host_help(aliases: Mapping[str, Sequence[str]] = HICACHE_ALIAS, drop: Sequence[str] = ()) -> str:
    """The twin's `--help`, with `aliases` added and the flags `drop` names taken out."""
    parser: argparse.ArgumentParser = build_parser()
    options = parser._option_string_actions
    for name in drop:
        action = options[name]
        parser._remove_action(action)
        for group in parser._action_groups:
            if action in group._group_actions:
                group._group_actions.remove(action)
        for option in action.option_strings:
            options.pop(option, None)
    for name, extra in aliases.items():
        action = options[name]
        for option in extra:
            action.option_strings.append(option)
            options[option] = action
    return parser.format_help()


def seed_flag_lists(settings: Settings, version: str = "0.5.10") -> None:
    """As if every target's host had said it runs `version` and printed the packaged list of it:
    for tests whose subject is not the flag list, on targets that listen nowhere (flags are then
    judged before Slack's ack, from the cache, as on a bot that has read its hosts before)."""
    directory = cache_dir(settings)
    save_catalog(directory, version, list(FlagCatalog.load(version)))
    for name, target in settings.targets.items():
        remember_target(directory, name, target, version)
