"""What every section of `flagbot.toml` is built from: `Strict`, the model that refuses unknown keys,
and `Duration`, a time span written the way humans write one (`90s`, `10m`, `24h`).

Its own module so that `bot.config.schema` and `bot.config.drain` share one definition of both
without importing each other; chat parsers that read a duration (`parse_duration`) take it from here too.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: object) -> object:
    """Accept `90`, `"90s"`, `"10m"`, `"24h"`, `"1d"`; humans write durations, not seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration, e.g. 90s, 10m, 24h")
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"{value!r} is not a duration; write e.g. 90s, 10m, 24h or 1d")
        return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    return value


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


class Strict(BaseModel):
    """Base for every section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)
