"""Failed verification checks of a week, through one small optional interface.

Why optional: scheduled checks (`bot/schedule/`, their results in `bot.store.checks`) are built
separately; the digest must work before they exist, on a database migrated before their table
was added, and after. The contract is one function:

    bot.store.checks.failed_checks_between(store, start, end) -> iterable of rows

each row a mapping or an object with (any of) `target`, `name`/`kind`/`check` (else `check_id`), the time it ran
(`finished_at`/`ran_at`/`checked_at`/`at`/`created_at`), what it found
(`summary`/`detail`/`message`/`reason`/`result`) and `experiment_id`. No module, no function,
or no table yet: None, and the digest says "no checks recorded".
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from datetime import datetime

from sqlalchemy.exc import OperationalError, ProgrammingError

from bot.digest.model import CheckLine
from bot.store import Store

__all__ = ["CHECKS_MODULE", "failed_checks"]

log = logging.getLogger(__name__)
CHECKS_MODULE = "bot.store.checks"
NO_CHECKS = "no checks recorded"

_NAME_KEYS = ("name", "kind", "check", "check_name")
_TIME_KEYS = ("finished_at", "ran_at", "checked_at", "at", "created_at")
_TEXT_KEYS = ("summary", "detail", "message", "reason", "result", "state")


def failed_checks(
    store: Store, start: datetime, end: datetime, *, target: str | None = None
) -> tuple[list[CheckLine] | None, str]:
    """(the failed checks in [start, end), oldest first; or None) and a note for the reader."""
    try:
        module = importlib.import_module(CHECKS_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name not in (CHECKS_MODULE, "bot.store"):
            raise
        return None, NO_CHECKS
    between = getattr(module, "failed_checks_between", None)
    if not callable(between):
        return None, NO_CHECKS
    try:
        rows = list(between(store, start, end))
    except (OperationalError, ProgrammingError) as exc:  # the table is not there yet (not migrated)
        log.warning("check results unreadable (%s); the digest says no checks recorded", type(exc).__name__)
        return None, f"{NO_CHECKS} (the database has no check results yet: `flagbot db upgrade`)"
    lines = [_line(row) for row in rows]
    if target is not None:
        lines = [line for line in lines if line.target in (target, "")]
    lines.sort(key=lambda line: (line.at is None, line.at or start))
    return lines, ""


def _get(row: object, keys: tuple[str, ...]) -> object:
    for key in keys:
        value = row.get(key) if isinstance(row, Mapping) else getattr(row, key, None)
        if value not in (None, "", {}, []):
            return value
    return None


def _line(row: object) -> CheckLine:
    at = _get(row, _TIME_KEYS)
    text = _get(row, _TEXT_KEYS)
    if isinstance(text, Mapping):
        text = text.get("summary") or text.get("why") or ", ".join(f"{k}={v}" for k, v in text.items())
    experiment = _get(row, ("experiment_id",))
    check_id = _get(row, ("check_id",))
    name = _get(row, _NAME_KEYS) or (f"check #{check_id}" if check_id is not None else "check")
    return CheckLine(
        target=str(_get(row, ("target",)) or ""),
        name=str(name),
        text=str(text or "failed"),
        at=at if isinstance(at, datetime) else None,
        experiment_id=experiment if isinstance(experiment, int) else None,
    )
