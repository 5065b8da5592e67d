"""`[verdicts]`: how benchmark comparisons decide improved / regressed / no effect (docs/verdicts.md).

Kept apart from schema.py so the statistics settings, their defaults and their checks read in
one place; plain data only (no numpy), since every command loads the configuration.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from bot.sglang.metrics import BENCH, CAPACITY

Better = Literal["higher", "lower"]
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%?\s*$")
_TOLERANCE = re.compile(r"^\s*(exact|\d+(?:\.\d+)?%?)\s*$")


def parse_percent(value: object) -> object:
    """`3`, `3.0` and `"3%"` all mean three percent: operators write percentages, not fractions."""
    if isinstance(value, bool):
        raise ValueError("a percentage, e.g. 3 or '3%'")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        match = _PERCENT.match(value)
        if not match:
            raise ValueError(f"{value!r} is not a percentage; write e.g. 3 or '3%'")
        return float(match.group(1))
    return value


def parse_tolerance(value: object) -> object:
    """`"exact"` (or 0), `"2%"` (relative to the reference) or a number in the value's own unit."""
    if isinstance(value, bool):
        raise ValueError("a tolerance: 'exact', '2%' or a number")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a tolerance cannot be negative")
        return "exact" if value == 0 else str(float(value))
    if isinstance(value, str) and _TOLERANCE.match(value):
        return value.strip()
    raise ValueError(f"{value!r} is not a tolerance; write 'exact', '2%' or a number such as 0.5")


Percent = Annotated[float, BeforeValidator(parse_percent)]
Tolerance = Annotated[str, BeforeValidator(parse_tolerance)]

DEFAULT_GUARDED: dict[str, Better] = {
    "output_throughput": "higher",
    "median_ttft_ms": "lower",
    "median_tpot_ms": "lower",
}
DEFAULT_CAPACITY: dict[str, str] = {
    "max_running_requests": "exact",
    "max_total_num_tokens": "2%",
    "available_gpu_mem_gb": "0.5",
}


class Verdicts(BaseModel):
    """Minimum effect, confidence, the sequential plan, the guarded metrics and capacity tolerances."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_effect: Percent = Field(3.0, gt=0, lt=100, description="smallest change that counts, percent")
    confidence: Percent = Field(95.0, ge=50, lt=100, description="of each verdict, percent")
    min_repeats: int = Field(3, ge=2, description="repeats a side before the first look")
    max_repeats: int = Field(10, ge=2, description="repeats a side at the last look (the cap)")
    looks: int = Field(3, ge=1, description="planned looks, evenly from min_repeats to max_repeats")
    spending: Literal["obrien-fleming", "pocock", "linear"] = "obrien-fleming"
    power: Percent = Field(90.0, ge=50, lt=100, description="a try's planned power, percent")
    power_against: Percent = Field(5.0, gt=0, lt=100, description="the real change that power is against")
    guarded: dict[str, Better] = Field(default_factory=lambda: dict(DEFAULT_GUARDED))
    min_effect_for: dict[str, Percent] = Field(default_factory=dict)
    capacity: dict[str, Tolerance] = Field(default_factory=lambda: dict(DEFAULT_CAPACITY))

    @model_validator(mode="after")
    def _consistent(self) -> Verdicts:
        if self.max_repeats < self.min_repeats:
            raise ValueError(f"max_repeats {self.max_repeats} is below min_repeats {self.min_repeats}")
        for name in self.guarded:
            if name not in BENCH:
                raise ValueError(f"guarded metric {name!r} is not a bench_serving metric name")
        for name, value in self.min_effect_for.items():
            if name not in self.guarded:
                raise ValueError(f"min_effect_for.{name}: not a guarded metric")
            if not 0 < value < 100:
                raise ValueError(f"min_effect_for.{name}: a percentage between 0 and 100")
        for name in self.capacity:
            if name not in CAPACITY:
                raise ValueError(f"capacity value {name!r} is not one of {', '.join(CAPACITY)}")
        return self
