"""The benchmark plan for a configured target: one place that turns a target, a profile name and
a command's overrides into a `BenchPlan`.

Why one place: `flagbot bench`, `/flagbot bench`, a playbook's measure step and a scheduled
check all benchmark a target, and each used to assemble the plan itself (the target's URL, its
default profile, its bench_serving command), with its own wording for an unknown profile.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.bench.datasets import dataset_spec
from bot.bench.metrics import ServiceLevels
from bot.bench.run import Backend, BenchPlan
from bot.config import Settings


class UnknownProfileError(LookupError):
    """A profile name flagbot.toml's [bench] does not define."""


class NotForBenchServingError(ValueError):
    """A plan for `backend=bench_serving` that asks for what flagbot's remote bench_serving run
    does not send or measure (another dataset, gamma arrivals, goodput): refused rather than
    measured as something else."""


def profile_name(settings: Settings, target: str | None, requested: str | None) -> str:
    """`requested`, else the target's `benchmark_profile` (`quick` without a target); checked."""
    config = settings.targets.get(target) if target else None
    name = requested or (config.benchmark_profile if config else "quick")
    if name not in settings.bench:
        raise UnknownProfileError(f"no benchmark profile {name!r}; profiles: {', '.join(settings.bench)}")
    return name


def plan_for(
    settings: Settings,
    target: str,
    *,
    profile: str | None = None,
    concurrency: Sequence[int] | None = None,
    repeats: int | None = None,
    backend: Backend | None = None,
    label: str = "",
    snapshot_id: int | None = None,
    base_url: str | None = None,
    dataset: str | None = None,
    slo: ServiceLevels | None = None,
) -> BenchPlan:
    """The plan that measures `target` (a configured one, or with `base_url` any server, stored
    under `target`); UnknownProfileError for a profile that is not configured, DatasetError
    for a dataset word (`dataset`, else the profile's) that cannot be used,
    NotForBenchServingError for what that backend cannot do. `slo` replaces the profile's
    goodput objectives."""
    config = settings.targets.get(target)
    name = profile_name(settings, target if config else None, profile)
    chosen = dataset_spec(settings.bench[name], dataset, settings.bench_prompt_dir)
    plan = BenchPlan.build(
        target=target,
        base_url=base_url or (config.http_base() if config else ""),
        profile_name=name,
        profile=settings.bench[name],
        concurrency=concurrency,
        repeats=repeats,
        backend=backend,
        label=label,
        snapshot_id=snapshot_id,
        dataset=chosen,
        slo=slo,
        **(
            {
                "bench_serving": config.bench_serving,
                "sglang_version": config.sglang_version,
                "timeout_s": config.timeouts.benchmark.total_seconds(),
                "tokenizer": str(config.bench.tokenizer) if config.bench.tokenizer else None,
            }
            if config
            else {}
        ),
    )
    if plan.backend == "bench_serving" and (
        chosen.kind != "random" or plan.objectives() or plan.profile.burstiness != 1
    ):
        raise NotForBenchServingError(
            "backend=bench_serving sends its own random dataset with Poisson arrivals and reports "
            "no goodput here: use backend=builtin for another dataset, burstiness or slo"
        )
    return plan
