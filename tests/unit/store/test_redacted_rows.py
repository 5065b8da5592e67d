"""Every row is redacted as it is written; the drop-in backup, to be restored byte for byte, is not."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlmodel import Session

from bot.redaction import MASK
from bot.store import EvidenceRecord, Snapshot, Store
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
