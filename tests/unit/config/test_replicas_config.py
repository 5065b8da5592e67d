"""`[replicas]` (bot/config/replicas.py): defaults, and hostile values refused when the file is read."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from bot.config import Settings


def test_defaults_listen_on_loopback_and_elect_every_five_seconds() -> None:
    replicas = Settings().replicas
    assert (replicas.health_host, replicas.health_port) == ("127.0.0.1", 8686)
    assert replicas.election_interval == timedelta(seconds=5)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"health_host": "127.0.0.1; rm -rf /"}, "give an address"),
        ({"health_host": "http://x/"}, "give an address"),
        ({"health_port": 70000}, "less than or equal to 65535"),
        ({"election_interval": "30s"}, "between 1s and 20s"),
        ({"election_interval": "500ms"}, "between 1s and 20s"),
        ({"elected": True}, "Extra inputs are not permitted"),
    ],
)
def test_bad_values_are_refused_with_what_is_wrong(values: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings.model_validate({"replicas": values})
