"""`[targets.X.drain]` as the config reads it (`bot/config/drain.py`): what a hook shows in evidence
and which values are refused. What the drain does around a restart: tests/unit/target/test_drain.py."""

from __future__ import annotations

import pytest

from bot.config.drain import DrainPolicy, HttpHook


def test_a_hook_is_shown_without_its_query_or_credentials() -> None:
    hook = HttpHook(url="https://ops:pw@lb.example:8443/pool/drain?node=a&token=s3cret", method="PUT")
    assert hook.shown() == "PUT https://lb.example:8443/pool/drain"
    with pytest.raises(ValueError, match="grace"):
        DrainPolicy.model_validate({"grace": "3h"})
    with pytest.raises(ValueError, match="url"):
        HttpHook.model_validate({"url": "file:///etc/passwd"})
