"""Secrets never reach the store: every row is redacted as it is written (docs/security.md#secrets).

Why a mapper event: evidence, audit events, snapshots (requested flags, environment, SGLang's
`server_args`), steps' outputs and approvals are written from many places; SQLAlchemy's
`before_insert`/`before_update` on every mapped class is the one choke point they all pass.
Text columns go through `bot.redaction.redact`, JSON columns through `redact_data`.

An update redacts only the columns it changes: the others were redacted when they were written,
and SQLAlchemy's UPDATE does not write them again. (Re-redacting them cost most of a run's
checkpoints: every `update_experiment` re-walked the run's whole stored state; issue 16 item 9.)

One column is kept as written: `dropin_backup.content`, the drop-in to restore byte for byte
(a literal secret in a unit's `ExecStart=` is there, as it is in the unit on the node: the reason
`config check` warns about one and suggests a `${VAR}` reference).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.orm import Mapper

from bot.redaction import redact, redact_data

KEPT_AS_WRITTEN = frozenset({("dropin_backup", "content")})
"""(table, column) pairs not redacted: what flagbot must restore exactly."""


def redact_row(mapper: Mapper[Any], target: object, *, changed_only: bool = False) -> None:
    """Mask the secrets in the row's text and JSON columns; with `changed_only` (an update), in
    the columns set or flagged modified since the row was loaded, the ones the UPDATE writes."""
    table = getattr(mapper.local_table, "name", "")
    changed = inspect(target).committed_state if changed_only else None
    for attribute in mapper.column_attrs:
        key = attribute.key
        if (table, key) in KEPT_AS_WRITTEN or (changed is not None and key not in changed):
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


def _before_insert(mapper: Mapper[Any], connection: object, target: object) -> None:
    redact_row(mapper, target)


def _before_update(mapper: Mapper[Any], connection: object, target: object) -> None:
    redact_row(mapper, target, changed_only=True)


def install() -> None:
    """Listen on every mapper (idempotent)."""
    if not event.contains(Mapper, "before_insert", _before_insert):
        event.listen(Mapper, "before_insert", _before_insert)
        event.listen(Mapper, "before_update", _before_update)
