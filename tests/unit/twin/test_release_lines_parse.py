"""The twin's startup lines of each release, read by the product's parser (issue 19, item 4).

The twin prints each release's lines from that release's sources (tests/unit/twin/test_releases.py
checks them against the format strings); the parser was written from the same sources
(tests/unit/sglang/ checks it against hand-copied lines). This joins the two: a whole start of
the seed deployment on 0.5.9, 0.5.10 and 0.5.23, rendered with its `[time TPn]` prefixes, read
by `bot.sglang.log.parse_log_lines`, must give what the twin computed, with nothing left unread.
"""

from __future__ import annotations

import pytest

from bot.sglang.log import parse_log_lines
from bot.sglang.log_report import StartReport
from tests.unit.twin.test_releases import _start

FORM = {"0.5.9": "repr", "0.5.10": "repr", "0.5.23": "dict"}


def _read(version: str, *extra: str) -> tuple[StartReport, dict[str, object]]:
    resolved = _start(version, *extra)
    now, lines = 1_764_000_000.0, []
    for step in resolved.steps:
        now += step.delay_s
        lines.append(step.render(now))
    return parse_log_lines(lines).current, resolved.effective


@pytest.mark.parametrize("version", sorted(FORM))
def test_a_whole_start_of_each_release_reads_as_the_twin_computed_it(version: str) -> None:
    start, effective = _read(version)
    assert start.server_args_form == FORM[version]
    assert start.unparsed == {}
    assert start.parsed["max_running_requests"] == 48
    assert start.parsed["cuda_graph_max_bs"] == 256  # flat on 0.5.9/0.5.10, nested on 0.5.23
    for key in ("max_running_requests", "max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens"):
        assert start.effective[key] == effective[key], key
    kv = start.kv_cache[0]
    assert kv["tokens"] == effective["max_total_num_tokens"]
    assert ("dtype" in kv) == (version == "0.5.23")  # the KV line gains `dtype:` in 0.5.13


@pytest.mark.parametrize(("version", "cut"), [("0.5.10", 26), ("0.5.23", 24)])
def test_the_seed_regression_reads_parsed_48_and_the_effective_cut_on_both_releases(
    version: str, cut: int
) -> None:
    start, effective = _read(version, "--enable-fused-moe-sum-all-reduce")
    assert start.parsed["max_running_requests"] == 48
    assert start.effective["max_running_requests"] == effective["max_running_requests"] == cut
