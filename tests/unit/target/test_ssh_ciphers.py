"""The ciphers a node connection offers: asyncssh's own, AES-GCM first (`bot.target.ssh`).

The order only changes which cipher a connection settles on: a node whose sshd allows only
ChaCha20-Poly1305 (or only AES-CTR) is reached as before.
"""

from __future__ import annotations

from pathlib import Path

import asyncssh
import pytest

from bot.target.session import TargetSession
from bot.target.ssh import ENCRYPTION_ALGS
from tests.support.fake_node import FakeNode, FakeSystemd
from tests.unit.target.conftest import serving


def test_the_offered_ciphers_are_asyncssh_defaults_with_aes_gcm_first() -> None:
    defaults = [name.decode() for name in asyncssh.encryption.get_default_encryption_algs()]
    assert sorted(ENCRYPTION_ALGS) == sorted(defaults)
    assert ENCRYPTION_ALGS[:2] == ["aes256-gcm@openssh.com", "aes128-gcm@openssh.com"]


@pytest.mark.parametrize(
    ("allowed", "settled"),
    [
        (None, "aes256-gcm@openssh.com"),
        (["chacha20-poly1305@openssh.com"], "chacha20-poly1305@openssh.com"),
        (["aes128-ctr"], "aes128-ctr"),
    ],
)
async def test_a_node_is_reached_with_the_first_cipher_both_sides_allow(
    tmp_path: Path, allowed: list[str] | None, settled: str
) -> None:
    node = FakeNode(FakeSystemd(), encryption_algs=allowed)
    async with serving(tmp_path, [node]) as fake, TargetSession.open("fake", fake.target) as ts:
        result = await ts.node0.run("show", properties=["ActiveState"])
        conn = await ts.node0.connection()
        assert conn.get_extra_info("send_cipher") == settled
    assert result.text == "ActiveState=active\n"
