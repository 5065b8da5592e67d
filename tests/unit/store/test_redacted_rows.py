"""Every row is redacted as it is written; the drop-in backup, to be restored byte for byte, is not."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import Session

from bot import redaction
from bot.redaction import MASK
from bot.store import EvidenceRecord, Snapshot, Store, redacted_rows
from bot.store.experiments import create_experiment, update_experiment
from bot.store.models import DropinBackup

DROPIN = "[Service]\nExecStart=\nExecStart=/p --api-key sk-inTheDropin1\n"


def test_rows_are_masked_on_insert_and_update_but_the_dropin_backup_is_kept(tmp_path: Path) -> None:
    store = Store.open(None, sqlite_path=tmp_path / "db.sqlite")
    store.upgrade()
    try:
        snapshot = store.add(
            Snapshot(
                target="lab",
                requested_flags=[
                    {"flag": "--api-key", "value": "sk-flagValue1"},
                    {"flag": "--tp", "value": "2"},
                ],
                environment={"HF_TOKEN": "hf_envValue1", "NCCL_DEBUG": "INFO"},
                server_args={"api_key": "sk-printed1", "max_total_tokens": 10},
                startup_error="ExecStart=/p --api-key=sk-error1",
            )
        )
        store.add(DropinBackup(target="lab", node="n0", path="/x", content=DROPIN, sha256="0" * 64))
        with Session(store.engine) as session:
            row = session.get(Snapshot, snapshot.id)
            assert row is not None
            row.startup_error = "again: HF_TOKEN=hf_updated1"
            session.add(row)
            session.commit()
        with store.engine.connect() as connection:
            snap = connection.execute(
                text("SELECT requested_flags, environment, server_args, startup_error FROM snapshot")
            ).one()
            backup = connection.execute(text("SELECT content FROM dropin_backup")).scalar_one()
        dumped = " ".join(str(value) for value in snap)
        for secret in ("sk-flagValue1", "hf_envValue1", "sk-printed1", "hf_updated1"):
            assert secret not in dumped
        assert (
            MASK in dumped and "NCCL_DEBUG" in dumped and "'max_total_tokens': 10" in dumped.replace('"', "'")
        )
        assert backup == DROPIN  # kept as written: it is restored byte for byte
        record = store.add(
            EvidenceRecord(
                target="lab", kind="text", title="HF_TOKEN=hf_title1", data={"text": "--api-key sk-ev1"}
            )
        )
        assert record.data == {"text": f"--api-key {MASK}"} and record.title == f"HF_TOKEN={MASK}"
    finally:
        store.close()


def test_an_update_redacts_only_the_columns_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint's `update_experiment` (the status, the cursor) does not walk the stored state
    again: it was redacted when written, and the UPDATE does not write it. A column it sets is."""
    store = Store.open(None, sqlite_path=tmp_path / "db.sqlite")
    store.upgrade()
    walked: list[object] = []

    def counted(value: object) -> object:
        walked.append(value)
        return redaction.redact_data(value)

    monkeypatch.setattr(redacted_rows, "redact_data", counted)
    try:
        state = {"report": {"HF_TOKEN": "hf_stateValue1", "steps": list(range(5))}}
        created = create_experiment(store, target="lab", playbook="try", params={}, actor="cli:t")
        assert created.id is not None
        experiment = update_experiment(store, created.id, state=state)
        assert experiment.id is not None
        assert experiment.state == {"report": {"HF_TOKEN": MASK, "steps": [0, 1, 2, 3, 4]}}
        walked.clear()
        update_experiment(store, experiment.id, status="running", cursor=3)
        assert walked == []  # nothing of the state, the params or the summary walked again
        updated = update_experiment(store, experiment.id, state={"ask": {"SECRET_X": "a-new-secret1"}})
        assert walked == [{"ask": {"SECRET_X": "a-new-secret1"}}]
        assert updated.state == {"ask": {"SECRET_X": MASK}}
        with store.engine.connect() as connection:
            stored = connection.execute(text("SELECT state, cursor FROM experiment")).one()
        assert "a-new-secret1" not in str(stored[0]) and stored[1] == 3
    finally:
        store.close()
