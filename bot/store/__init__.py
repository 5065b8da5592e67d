"""flagbot's store: sqlmodel tables, Alembic migrations, and one repository API (sync and async)."""

from bot.store.loop_models import (
    AuditEvent,
    Baseline,
    EvidenceRecord,
    Experiment,
    ExperimentStep,
    Hypothesis,
    Investigation,
    KnowledgeObservation,
    Lease,
    LeaseWaiter,
)
from bot.store.models import Measurement, Snapshot
from bot.store.redacted_rows import install as _install_row_redaction
from bot.store.schedule_models import CheckRun, DriftEvent, DriftState, VerificationCheck
from bot.store.slack_models import ApprovalRequest, SeenKey
from bot.store.store import AsyncStore, Store, StoreNotReadyError

_install_row_redaction()  # every row is redacted as it is written (bot/store/redacted_rows.py)

__all__ = [
    "ApprovalRequest",
    "AsyncStore",
    "AuditEvent",
    "Baseline",
    "CheckRun",
    "DriftEvent",
    "DriftState",
    "EvidenceRecord",
    "Experiment",
    "ExperimentStep",
    "Hypothesis",
    "Investigation",
    "KnowledgeObservation",
    "Lease",
    "LeaseWaiter",
    "Measurement",
    "SeenKey",
    "Snapshot",
    "Store",
    "StoreNotReadyError",
    "VerificationCheck",
]
