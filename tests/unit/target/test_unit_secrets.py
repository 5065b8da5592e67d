"""`${VAR}` references to an `EnvironmentFile=` are kept as written; masked secrets are never written.

Two fake nodes whose unit takes `--api-key ${SGLANG_API_KEY}` from an `EnvironmentFile=` (which
the fake node does not let flagbot's login read), and a literal `--admin-api-key`: the unit reads (it was refused before),
a change writes the reference back unescaped and verifies by round trip, and flags read back
from the store (where secrets are masked) restore the literal value the unit has, not the mask.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app.unit_secrets import literal_secrets, unit_findings
from bot.config import Settings
from bot.redaction import MASK, redact
from bot.sglang.flagset import FlagItem, FlagSet
from bot.target.restart import apply_and_restart, flags_for_nodes
from bot.target.systemd_quote import is_reference_word, quote_exec_word, render_exec
from bot.target.unit import UnitReadError, read_unit, unmask_flags
from tests.support.fake_node import FakeNode, FakeSystemd
from tests.unit.target.conftest import serving

UNIT = "sglang-qwen.service"
LITERAL = "adminLiteralKey5678"


def _unit(rank: int, api_key_word: str = "${SGLANG_API_KEY}") -> str:
    return f"""[Service]
EnvironmentFile=/etc/sglang/secrets.env
Environment=HF_TOKEN=hf_environmentToken9012
ExecStart=/usr/bin/python3 -m sglang.launch_server \\
    --model-path /models/qwen \\
    --tp 2 \\
    --nnodes 2 \\
    --node-rank {rank} \\
    --api-key {api_key_word} \\
    --admin-api-key {LITERAL} \\
    --port 30000
"""


def _nodes(api_key_word: str = "${SGLANG_API_KEY}") -> list[FakeNode]:
    return [
        FakeNode(FakeSystemd(rank=k, files={f"/etc/systemd/system/{UNIT}": _unit(k, api_key_word)}))
        for k in range(2)
    ]


def test_only_a_whole_reference_word_is_kept_unescaped() -> None:
    assert is_reference_word("${SGLANG_API_KEY}") and is_reference_word("--api-key=${K}")
    for word in ("$K", "x${K}", "${K}x", "${1K}", "$${K}", "${K", "--api-key=$K"):
        assert not is_reference_word(word), word
    assert quote_exec_word("${K}") == "${K}"
    assert render_exec(["/p", "--api-key", "${K}", "a$b", "${K}x"]) == '/p --api-key ${K} "a$$b" "$${K}x"'


async def test_a_reference_to_an_environment_file_reads_and_is_written_back_as_written(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, _nodes()) as fake:
        async with fake.open() as ts:
            view = await read_unit(ts.node0)
            assert ("--api-key", "${SGLANG_API_KEY}") in [(i.flag, i.value) for i in view.flags.items]
            new = flags_for_nodes(FlagSet((*view.flags.items, FlagItem("--enable-metrics"))), 2)
            report = await apply_and_restart(ts, new)
            after = await read_unit(ts.node0)
        assert report.ok  # the round trip check held: systemd loaded the reference as written
        dropin = fake.nodes[0].systemd.files[fake.nodes[0].systemd.dropin]
        assert " --api-key ${SGLANG_API_KEY} " in dropin and "$${" not in dropin
        assert after.flags == new[0]
        # what flagbot saw of the literal secrets is masked wherever it shows up
        assert redact(f"echo {LITERAL} hf_environmentToken9012") == f"echo {MASK} {MASK}"


@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("$SGLANG_API_KEY", "keeps a reference only as a whole word"),
        ("prefix${SGLANG_API_KEY}", "keeps a reference only as a whole word"),
        ("$${SGLANG_API_KEY}", "would write back as a reference"),
    ],
)
async def test_other_references_are_refused_with_the_rule(tmp_path: Path, word: str, message: str) -> None:
    async with serving(tmp_path, _nodes(word)) as fake, fake.open() as ts:
        with pytest.raises(UnitReadError, match=message):
            await read_unit(ts.node0)


async def test_masked_flags_from_the_store_restore_the_units_value(tmp_path: Path) -> None:
    async with serving(tmp_path, _nodes()) as fake:
        async with fake.open() as ts:
            view = await read_unit(ts.node0)
            masked = FlagSet(
                tuple(FlagItem(i.flag, MASK) if i.flag == "--admin-api-key" else i for i in view.flags.items)
            )
            report = await apply_and_restart(ts, flags_for_nodes(masked, 2), {"HF_TOKEN": MASK, "X": "1"})
        assert report.ok
        dropin = fake.nodes[0].systemd.files[fake.nodes[0].systemd.dropin]
        assert MASK not in dropin
        assert f"--admin-api-key {LITERAL}" in dropin and "HF_TOKEN=hf_environmentToken9012" in dropin
    gone = FlagSet((FlagItem("--admin-api-key", MASK),))
    with pytest.raises(UnitReadError, match="redacted in flagbot's records and the unit no longer has it"):
        unmask_flags(gone, FlagSet(()), "n0")


async def test_config_check_units_warns_about_literal_secrets_only(tmp_path: Path) -> None:
    async with serving(tmp_path, _nodes()) as fake:
        async with fake.open() as ts:
            view = await read_unit(ts.node0)
        warnings = literal_secrets(view)
        settings = Settings.model_validate({"targets": {"lab": fake.target.model_dump()}})
        findings = await unit_findings(settings)
    assert len(warnings) == 2
    assert (
        warnings[0].startswith("`--admin-api-key` has a literal value") and "${ADMIN_API_KEY}" in warnings[0]
    )
    assert warnings[1].startswith("the environment variable HF_TOKEN is a secret")
    assert not any("`--api-key` has" in text for text in warnings)  # the reference is what is wanted
    assert [f.kind for f in findings] == ["warning", "warning"]
    assert all(LITERAL not in f.render() for f in findings)


async def test_config_check_units_notes_an_unreadable_unit(tmp_path: Path) -> None:
    async with serving(tmp_path, [FakeNode(FakeSystemd())]) as fake:
        fake.nodes[0].fail["cat"] = "boom"
        settings = Settings.model_validate({"targets": {"lab": fake.target.model_dump()}})
        [finding] = await unit_findings(settings)
    assert finding.kind == "note" and finding.render().startswith("note: lab (127.0.0.1): unit not read")
