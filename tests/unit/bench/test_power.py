"""A try's sizing and sequential after side, on fixed samples (`bot.bench.power`, `compare(looks_on=...)`)."""

from __future__ import annotations

import math

import pytest

from bot.bench.power import cell_noise, power, power_reached, size_reference
from bot.bench.verdict import Side, VerdictSettings, compare
from bot.config.verdicts import Verdicts

ONE = VerdictSettings(guarded={"output_throughput": "higher"})


def side(*values: float, level: str = "c=64", bound: bool = False) -> Side:
    return Side(
        {level: [{"output_throughput": v} for v in values]},
        client_bound_levels=frozenset({level}) if bound else frozenset(),
    )


def noisy(n: int, cv: float, *, scale: float = 1.0) -> list[float]:
    """n values whose log sample sd is exactly `cv` (a fixed pattern, not random)."""
    pattern = [(-1.0) ** i * (1 + i // 2) for i in range(n)]
    mean = sum(pattern) / n
    centred = [p - mean for p in pattern]
    sd = math.sqrt(sum(c * c for c in centred) / (n - 1))
    return [1000.0 * scale * math.exp(cv * c / sd) for c in centred]


def test_cell_noise_is_the_log_sd_and_skips_client_bound_levels() -> None:
    (metric, sd, n) = cell_noise(side(*noisy(3, 0.02)), ONE)["output_throughput@c=64"]
    assert (metric, n) == ("output_throughput", 3) and sd == pytest.approx(0.02)
    assert cell_noise(side(*noisy(3, 0.02), bound=True), ONE) == {}


def test_power_grows_with_repeats_and_a_change_within_the_margin_is_never_called() -> None:
    def at(n: int) -> float:
        return power(0.03, n, n, effect=0.05, min_effect=0.03, alpha=0.05, better="higher")

    assert at(3) < at(6) < at(10)
    assert at(10) > 0.9
    assert power(0.03, 10, 10, effect=0.03, min_effect=0.03, alpha=0.05, better="higher") <= 0.5
    assert power(0.03, 10, 10, effect=0.05, min_effect=0.03, alpha=0.05, better="lower") > 0.9
    assert power(0.0, 3, 3, effect=0.05, min_effect=0.03, alpha=0.05, better="higher") == 1.0


def test_a_quiet_before_side_needs_no_more_repeats() -> None:
    sizing = size_reference(side(*noisy(3, 0.005)), ONE)
    assert (sizing.repeats, sizing.more) == (3, 0)
    assert sizing.cell == "output_throughput@c=64"
    assert sizing.planned_power is not None and sizing.planned_power >= 0.9
    assert "reaches 90% power against a 5% change" in sizing.reason


def test_a_noisier_before_side_is_sized_up_and_capped() -> None:
    middling = size_reference(side(*noisy(3, 0.01)), ONE)
    noisy_side = size_reference(side(*noisy(3, 0.03)), ONE)
    assert 3 < middling.repeats < ONE.max_repeats
    assert middling.more == middling.repeats - 3
    assert noisy_side.repeats == ONE.max_repeats
    very = size_reference(side(*noisy(3, 0.2)), ONE)
    assert very.repeats == ONE.max_repeats and "falls short of 90%" in very.reason


def test_the_noisiest_cell_sizes_the_side() -> None:
    two = Side(
        {
            "c=1": [{"output_throughput": v} for v in noisy(3, 0.004)],
            "c=64": [{"output_throughput": v} for v in noisy(3, 0.012)],
        }
    )
    sizing = size_reference(two, ONE)
    assert sizing.cell == "output_throughput@c=64"
    assert sizing.repeats >= size_reference(side(*noisy(3, 0.012)), ONE).repeats > 3  # two cells split alpha


def test_without_anything_to_size_from_the_side_keeps_min_repeats() -> None:
    sizing = size_reference(side(1000.0, 1010.0, 990.0, bound=True), ONE)
    assert sizing.repeats == 3 and sizing.cell is None and "no guarded metric" in sizing.reason


def test_the_after_side_is_extended_look_by_look_on_its_own_repeats() -> None:
    before = side(*noisy(10, 0.03))
    after3 = side(*noisy(3, 0.03, scale=0.97))
    first = compare(before, after3, ONE, looks_on="candidate")
    assert first.verdict == "undecided" and (first.repeats, first.look) == (3, 1)
    assert first.more_repeats == 3 and first.next_action is not None
    assert "repeats of the candidate" in first.next_action
    second = compare(before, side(*noisy(6, 0.03, scale=0.97)), ONE, looks_on="candidate")
    assert (second.repeats, second.look) == (6, 2) and second.more_repeats == 4
    last = compare(before, side(*noisy(10, 0.03, scale=0.97)), ONE, looks_on="candidate")
    assert last.look == 3 and last.more_repeats is None


def test_a_clear_regression_is_decided_at_an_early_look_without_more_repeats() -> None:
    result = compare(side(*noisy(4, 0.005)), side(*noisy(6, 0.005, scale=0.8)), ONE, looks_on="candidate")
    assert result.verdict == "regressed" and result.more_repeats is None


def test_looks_on_both_sides_is_unchanged() -> None:
    both = compare(side(*noisy(10, 0.03)), side(*noisy(3, 0.03)), ONE)
    assert both.repeats == 3 and "repeats a side" in (both.next_action or "")


def test_the_power_reached_names_both_sides_repeats_and_the_weakest_cell() -> None:
    before, after = side(*noisy(8, 0.03)), side(*noisy(10, 0.03, scale=0.99))
    result = compare(before, after, ONE, looks_on="candidate")
    reached = power_reached(before, after, result, ONE)
    assert (reached.reference_repeats, reached.candidate_repeats) == (8, 10)
    assert reached.power is not None and 0.8 < reached.power < 1.0
    text = reached.describe()
    assert text.startswith(f"power against a 5% change: {reached.power:.0%} (before 8 repeats, after 10")
    assert "output_throughput@c=64" in text


def test_no_judged_cell_means_no_power_figure() -> None:
    before, after = side(1.0, 1.0, 1.0, bound=True), side(1.0, 1.0, 1.0)
    result = compare(before, after, ONE, looks_on="candidate")
    assert "not measurable" in power_reached(before, after, result, ONE).describe()


def test_power_settings_are_read_and_checked() -> None:
    settings = VerdictSettings.from_config(Verdicts.model_validate({"power": "80%", "power_against": 8}))
    assert (settings.power, settings.power_against) == (pytest.approx(0.8), pytest.approx(0.08))
    unreachable = VerdictSettings.from_config(Verdicts.model_validate({"min_effect": 5}))
    sizing = size_reference(side(*noisy(3, 0.005)), unreachable)  # 5% against a 5% margin: at most half
    assert sizing.repeats == 10 and "falls short of 90%" in sizing.reason
    with pytest.raises(ValueError, match="power"):
        Verdicts.model_validate({"power": 40})
