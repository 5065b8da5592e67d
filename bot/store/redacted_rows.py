"""Secrets never reach the store: every row is redacted as it is written (docs/security.md#secrets).

Why a mapper event: evidence, audit events, snapshots (requested flags, environment, SGLang's
`server_args`), steps' outputs and approvals are written from many places; SQLAlchemy's
`before_insert`/`before_update` on every mapped class is the one choke point they all pass.
Text columns go through `bot.redaction.redact`, JSON columns through `redact_data`.

One column is kept as written: `dropin_backup.content`, the drop-in to restore byte for byte
(a literal secret in a unit's `ExecStart=` is there, as it is in the unit on the node: the reason
`config check` warns about one and suggests a `${VAR}` reference).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Mapper

from bot.redaction import redact, redact_data

KEPT_AS_WRITTEN = frozenset({("dropin_backup", "content")})
"""(table, column) pairs not redacted: what flagbot must restore exactly."""


def redact_row(mapper: Mapper[Any], target: object) -> None:
    table = getattr(mapper.local_table, "name", "")
    for attribute in mapper.column_attrs:
        key = attribute.key
        if (table, key) in KEPT_AS_WRITTEN:
            continue
        value = target.__dict__.get(key)
        if isinstance(value, str):
            redacted: object = redact(value)
        elif isinstance(value, dict | list):
            redacted = redact_data(value)
        else:
            continue
        if redacted != value:
            setattr(target, key, redacted)


def _before_write(mapper: Mapper[Any], connection: object, target: object) -> None:
    redact_row(mapper, target)


def install() -> None:
    """Listen on every mapper (idempotent)."""
    if not event.contains(Mapper, "before_insert", _before_write):
        event.listen(Mapper, "before_insert", _before_write)
        event.listen(Mapper, "before_update", _before_write)
