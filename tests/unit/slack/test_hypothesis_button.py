"""The "Run this experiment" button's value: the experiment, the rank of the proposal, one key each."""

from __future__ import annotations

import pytest

from bot.slack.render import action_value, hypothesis_button, parse_action_value


def test_the_rank_travels_in_the_value_and_each_proposal_has_its_own_key() -> None:
    first, second = hypothesis_button(7, 1, "try remove --x"), hypothesis_button(7, 2, "isolate m>=1")
    values = [parse_action_value(block["elements"][0]["value"]) for block in (first, second)]
    assert [(v.experiment_id, v.action, v.item) for v in values] == [
        (7, "test_hypothesis", 1),
        (7, "test_hypothesis", 2),
    ]
    assert values[0].nonce != values[1].nonce  # clicking one does not use up the other
    assert values[0].nonce == parse_action_value(hypothesis_button(7, 1, "x")["elements"][0]["value"]).nonce
    assert "/flagbot try remove --x" in str(first["elements"][0]["confirm"])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"experiment_id":1,"action":"test_hypothesis","nonce":"n"}', "needs item"),
        ('{"experiment_id":1,"action":"keep","nonce":"n","item":2}', "takes no item"),
        ('{"experiment_id":1,"action":"test_hypothesis","nonce":"n","item":0}', "item must be a positive"),
    ],
)
def test_an_item_where_it_does_not_belong_is_refused(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_action_value(value)
    with pytest.raises(ValueError, match="needs item"):
        action_value(1, "test_hypothesis", "n")
