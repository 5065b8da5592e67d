"""Helpers the domain actions share: the target's config, flag sets from JSON, metric values.

Flag sets reach the steps as JSON from the store (a snapshot's `requested_flags`, an older
experiment's state); `flags_from_json` (defined with the run's state, which stores flag sets the
same way) turns them back into FlagSets. `snapshot_value` (bot/loop/snapshot_values.py) reads a
start's capacity or status metric; readers outside the steps import it from there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bot.config.change_rules import (
    ChangeNotAllowedError,
    ChangeRules,
    changes_refusal,
    flag_refusal,
    plan_refusal,
)
from bot.config.schema import Target, TargetPolicy
from bot.loop.actions import StepContext
from bot.loop.expectations import bench_value as bench_value  # re-exported for the steps
from bot.loop.expectations import is_server_metric as is_server_metric  # re-exported for the steps
from bot.loop.run_state import flags_from_json as flags_from_json  # re-exported for the steps
from bot.loop.snapshot_values import snapshot_value as snapshot_value  # re-exported for the steps
from bot.sglang.catalog import FlagCatalog
from bot.sglang.change import Change
from bot.sglang.expectation import Expectation, parse_expectation
from bot.sglang.flagset import FlagSet
from bot.target.flaglist import cached_catalog, remembered_version


def target_of(ctx: StepContext) -> Target:
    return ctx.settings.targets[ctx.target]


def changes_of(ctx: StepContext, key: str = "changes") -> list[Change]:
    return [Change.from_json(item) for item in ctx.params.get(key) or []]


def canonical_of(ctx: StepContext) -> Callable[[str], str]:
    """The target's flag names made canonical (a name SGLang does not know stays as written), by
    the host's own list when its version's list is cached (`bot.target.flaglist`), else by the
    packaged list of the configured version."""
    config = ctx.settings.targets.get(ctx.target)
    hosts = None
    if config is not None:
        hosts = cached_catalog(remembered_version(ctx.cache_dir, ctx.target, config), ctx.cache_dir)
    catalog = hosts or FlagCatalog.nearest(config.sglang_version if config is not None else None)[0]

    def canonical(name: str) -> str:
        try:
            return catalog.canonical(name)
        except ValueError:
            return name

    return canonical


def change_rules_of(ctx: StepContext) -> ChangeRules:
    """The target's change rules (`bot/config/change_rules.py`), the defaults for an unnamed target."""
    config = ctx.settings.targets.get(ctx.target)
    return (config.policy if config is not None else TargetPolicy()).change_rules(ctx.target)


def check_changes(ctx: StepContext, changes: Iterable[Change]) -> None:
    """ChangeNotAllowedError (naming the rule) when the run's actor may not ask for these changes."""
    why = changes_refusal(change_rules_of(ctx), changes, admin=ctx.admin)
    if why is not None:
        raise ChangeNotAllowedError(why)


def check_flags(ctx: StepContext, flags: Iterable[str]) -> None:
    """ChangeNotAllowedError when one of these flags (any spelling) is protected from the run's actor."""
    canonical = canonical_of(ctx)
    for flag in flags:
        why = flag_refusal(change_rules_of(ctx), canonical(flag), admin=ctx.admin)
        if why is not None:
            raise ChangeNotAllowedError(why)


def check_write(
    ctx: StepContext,
    before: tuple[FlagSet, Mapping[str, str]],
    after: tuple[FlagSet, Mapping[str, str] | None],
) -> None:
    """ChangeNotAllowedError when writing `after` over `before` changes what the run's actor may not
    change (whichever step planned it); `after`'s environment None keeps `before`'s. `--node-rank`
    is left out: every write sets each node's own (`flags_for_nodes`), whatever a plan says."""
    flags, env = after
    why = plan_refusal(
        change_rules_of(ctx),
        (without_rank(before[0]), before[1]),
        (without_rank(flags), before[1] if env is None else env),
        admin=ctx.admin,
        canonical=canonical_of(ctx),
    )
    if why is not None:
        raise ChangeNotAllowedError(why)


def expectations_of(ctx: StepContext, key: str = "expect") -> list[Expectation]:
    return [parse_expectation(text) for text in ctx.params.get(key) or []]


def without_rank(flags: FlagSet) -> FlagSet:
    """Node 0's flags minus `--node-rank` (each node gets its own when the flags are applied)."""
    return FlagSet(tuple(item for item in flags.items if item.flag != "--node-rank"))


def describe_flags(flags: FlagSet) -> str:
    return " ".join(flags.argv())


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def rests_on(ctx: StepContext) -> str:
    """`rests on snapshot #3, snapshot #5, set #7, set #8`: what the run's verdict cites."""
    conclusion = ctx.state.conclusion
    parts = [f"snapshot #{i}" for i in conclusion.snapshot_ids] + [f"set #{i}" for i in conclusion.set_ids]
    return "rests on " + (", ".join(parts) or "nothing stored")
