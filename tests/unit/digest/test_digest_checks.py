"""The optional check results: no module, no function, no table, rows of any reasonable shape."""

from __future__ import annotations

import sys
import types
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from bot.digest import checks
from bot.digest.checks import CHECKS_MODULE, failed_checks

START = datetime(2026, 11, 23, tzinfo=UTC)
END = datetime(2026, 11, 30, tzinfo=UTC)
STORE: Any = object()


def _module(monkeypatch: pytest.MonkeyPatch, **attributes: Any) -> None:
    module = types.ModuleType(CHECKS_MODULE)
    for name, value in attributes.items():
        setattr(module, name, value)
    monkeypatch.setitem(sys.modules, CHECKS_MODULE, module)


def test_no_checks_module_means_no_checks_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(checks.importlib, "import_module", missing)
    assert failed_checks(STORE, START, END) == (None, "no checks recorded")


def test_a_module_without_the_function_means_no_checks_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    _module(monkeypatch)
    assert failed_checks(STORE, START, END) == (None, "no checks recorded")


def test_a_missing_table_means_no_checks_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    def between(store: Any, start: datetime, end: datetime) -> list[Any]:
        raise OperationalError("SELECT ...", {}, Exception("no such table: check_run"))

    _module(monkeypatch, failed_checks_between=between)
    found, note = failed_checks(STORE, START, END)
    assert found is None
    assert "flagbot db upgrade" in note


def test_rows_of_either_shape_become_lines_of_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Any, datetime, datetime]] = []
    row = types.SimpleNamespace(
        check_id=7,
        target="sglang-qwen",
        experiment_id=12,
        ran_at=datetime(2026, 11, 25, 3, tzinfo=UTC),
        summary="max_running_requests 26, expected 48",
        result="fail",
    )
    mapping = {
        "target": "other",
        "name": "24h",
        "at": datetime(2026, 11, 24, tzinfo=UTC),
        "detail": {"why": "x"},
    }

    def between(store: Any, start: datetime, end: datetime) -> list[Any]:
        seen.append((store, start, end))
        return [row, mapping]

    _module(monkeypatch, failed_checks_between=between)
    everything, note = failed_checks(STORE, START, END)
    assert seen == [(STORE, START, END)] and note == ""
    assert everything is not None
    assert [(c.name, c.target, c.text) for c in everything] == [
        ("24h", "other", "x"),  # oldest first
        ("check #7", "sglang-qwen", "max_running_requests 26, expected 48"),
    ]
    mine, _ = failed_checks(STORE, START, END, target="sglang-qwen")
    assert mine is not None and [(c.experiment_id, c.at) for c in mine] == [(12, row.ran_at)]
