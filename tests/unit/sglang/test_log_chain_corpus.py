"""Chained tracebacks made of real SGLang output (the corpus's 010.log and 026.log, copied in
tests/fixtures/corpus): real frames with Python 3.12's caret lines, a rank prefix only on the
first line, the main process's sigquit line after. Python prints a chain oldest first, so the
start died of the last exception; the parser's headline must be that one, under journald's prefix
too, with every exception of the chain and how each follows the one before."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.sglang.log import parse_log_text
from bot.sglang.log_report import chain_text

JOURNAL = "Feb 27 11:41:07 node0 sglang[1370591]: "
MOONCAKE = "RuntimeError: open: Address family not supported by protocol"
NCCL = "RuntimeError: NCCL error: remote process exited or there was a network error"
SEPARATORS = {
    "during handling of": "During handling of the above exception, another exception occurred:",
    "caused by": "The above exception was the direct cause of the following exception:",
}


def _lines(fixtures_dir: Path, name: str) -> list[str]:
    return (fixtures_dir / "corpus" / "sglang-logs" / name).read_text().splitlines()


def _traceback(lines: list[str], last: str) -> list[str]:
    """From the scheduler's `Traceback (most recent call last):` line to the exception `last`."""
    start = next(i for i, line in enumerate(lines) if "Scheduler hit an exception: Traceback" in line)
    return lines[start : lines.index(last) + 1]


def _chain(fixtures_dir: Path, link: str) -> list[str]:
    """026's Mooncake failure, then Python's separator, then 010's NCCL failure raised from it."""
    first = _traceback(_lines(fixtures_dir, "026.log"), MOONCAKE)
    second = _traceback(_lines(fixtures_dir, "010.log"), NCCL)
    sigquit = next(line for line in _lines(fixtures_dir, "010.log") if "Received sigquit" in line)
    bare_second = ["Traceback (most recent call last):", *second[1:]]
    return [*first, "", SEPARATORS[link], "", *bare_second, "", sigquit]


@pytest.mark.parametrize("link", sorted(SEPARATORS))
@pytest.mark.parametrize("prefix", ["", JOURNAL])
def test_the_headline_of_a_real_chain_is_its_last_exception(
    fixtures_dir: Path, link: str, prefix: str
) -> None:
    lines = [prefix + line for line in _chain(fixtures_dir, link)]
    report = parse_log_text("\n".join(lines) + "\n")
    assert report.startup_error == NCCL
    chain = report.current.startup_error_chain
    assert [entry["text"] for entry in chain] == [MOONCAKE, NCCL]
    assert chain[1]["follows"] == {"line": chain[0]["line"], "link": link}
    assert "Received sigquit" not in str(report.current.startup_error_chain)
    assert f"FAILED: {NCCL}" in report.summary()
    whole = chain_text(chain)
    assert MOONCAKE in whole and NCCL in whole


@pytest.mark.parametrize(("name", "fatal"), [("026.log", MOONCAKE), ("010.log", NCCL)])
def test_a_real_single_traceback_is_a_chain_of_one(fixtures_dir: Path, name: str, fatal: str) -> None:
    report = parse_log_text((fixtures_dir / "corpus" / "sglang-logs" / name).read_text())
    assert [entry["text"] for entry in report.current.startup_error_chain] == [fatal]
    assert report.startup_error == fatal
