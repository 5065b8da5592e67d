"""Secrets stay on the node (issue 17 item 6): planted in the unit, its environment and the
journal, they appear in nothing flagbot posts, prints, logs or stores.

The real Slack app runs on the stand-in against one target, `lab`, whose node is a fake systemd
host behind an in-process SSH server (`tests/support/fake_node.py`): `status`, `observe`
and `grep` read its unit and journal through the real target layer. The `try` runs the real
engine and steps with the target layer's functions swapped (`tests/support/loop_fake_target.py`,
the component tier's way to run a playbook without a testbed), its node's flags carrying the
secrets and its observation a journal excerpt that echoes them. Then `digest` posts the week.
The CLI's `status` and `log` run as the console script against the same node and store.

Planted:
* `--api-key ${SGLANG_API_KEY}`: a reference to a variable of an `EnvironmentFile=` (the value
  only on the node; SGLang's `server_args` journal line shows it expanded);
* `--admin-api-key LITERAL`: a literal secret flag in `ExecStart=`;
* `Environment=HF_TOKEN=...`: a secret name in the unit's environment;
* a journal line `DB_PASSWORD=...` and one that echoes the expanded key by itself.

Scanned: every Web API call's arguments and every answer the stand-in got (messages, blocks,
files), every log record (DEBUG), every row of every table, every file under the state
directory (cache, evidence), and the CLI's stdout and stderr. One column is kept as written and
left out of the scan by name: `dropin_backup.content` (none is written here: the try's target
layer is swapped).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy import MetaData, select

from bot.config import Settings, load_settings
from bot.loop.steps import measure_steps
from bot.redaction import MASK
from bot.sglang.flagset import FlagItem, FlagSet
from bot.store import AsyncStore, Store
from bot.store.redacted_rows import KEPT_AS_WRITTEN
from bot.target.evidence import JournalExcerpt
from tests.support.fake_node import FakeNode, FakeSystemd, Keys
from tests.support.loop_fake_target import START_FLAGS, TARGET, faked_target
from tests.support.slack_bot import running_bot

FILE_KEY = "sk-fileOnlyExpandedKey1234"
LITERAL_ADMIN = "adminLiteralKey5678"
ENV_TOKEN = "hf_environmentToken9012"
JOURNAL_PASSWORD = "journalOnlyPassword3456"
SECRETS = {
    "the EnvironmentFile key": FILE_KEY,
    "the literal --admin-api-key": LITERAL_ADMIN,
    "the Environment= token": ENV_TOKEN,
    "the journal's password": JOURNAL_PASSWORD,
}
CHANNEL = "C0FLAGBOT"
INV = "a" * 32
UNIT = "sglang-qwen.service"
UNIT_TEXT = f"""[Unit]
Description=SGLang with secrets

[Service]
EnvironmentFile=/etc/sglang/secrets.env
Environment=PYTHONUNBUFFERED=1
Environment=HF_TOKEN={ENV_TOKEN}
ExecStart=/usr/bin/python3 -m sglang.launch_server \\
    --model-path /models/qwen \\
    --tp 2 \\
    --api-key ${{SGLANG_API_KEY}} \\
    --admin-api-key {LITERAL_ADMIN} \\
    --port 30000
"""
JOURNAL = [
    "[2026-11-29 20:14:39] server_args=ServerArgs(model_path='/models/qwen', tp_size=2, "
    f"api_key='{FILE_KEY}', admin_api_key='{LITERAL_ADMIN}', max_running_requests=48)",
    f"[2026-11-29 20:14:40] loading with DB_PASSWORD={JOURNAL_PASSWORD} from the environment",
    f"[2026-11-29 20:14:41] WARNING: a request came with a wrong key; expected {FILE_KEY}",
    "[2026-11-29 20:14:48] The server is fired up and ready to roll!",
]
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)
RBAC = {"admins": ["U0ADMIN"], "operators": ["U0OPER"], "viewers": ["*"]}


def _journal_json(message: str, at: float) -> str:
    return json.dumps(
        {
            "__REALTIME_TIMESTAMP": str(int(at * 1e6)),
            "__CURSOR": f"c-{at}",
            "_SYSTEMD_INVOCATION_ID": INV,
            "MESSAGE": message,
            "_PID": "42",
        }
    )


def _blank_chart(rows: object, path: Path, **_: object) -> None:
    path.write_bytes(PNG)


def _leaks(where: str, text: str) -> list[str]:
    return [f"{name} in {where}" for name, secret in SECRETS.items() if secret in text]


@asynccontextmanager
async def _node(tmp_path: Path) -> AsyncIterator[tuple[FakeNode, Keys]]:
    systemd = FakeSystemd(unit=UNIT, files={f"/etc/systemd/system/{UNIT}": UNIT_TEXT}, invocation=INV)
    start = time.time() - 60
    systemd.journal = [_journal_json(line, start + index) for index, line in enumerate(JOURNAL)]
    node = FakeNode(systemd)
    keys = Keys.make(tmp_path, 1)
    await node.start(keys.host_keys[0], keys.client_public)
    try:
        yield node, keys
    finally:
        await node.stop()


def _config(tmp_path: Path, node: FakeNode, keys: Keys) -> Path:
    path = tmp_path / "flagbot.toml"
    path.write_text(
        f'default_target = "{TARGET}"\n'
        f'[database]\nsqlite_path = "{tmp_path / "state" / "flagbot.db"}"\n'
        f"[slack.rbac]\n"
        + "".join(f"{k} = {json.dumps(v)}\n" for k, v in RBAC.items())
        + f"[targets.{TARGET}]\n"
        f'unit = "{UNIT}"\nbase_url = "http://127.0.0.1:9"\n'
        f'nodes = [{{ host = "127.0.0.1", port = {node.port}, user = "ops" }}]\n'
        f"[targets.{TARGET}.ssh]\n"
        f'key_path = "{keys.client_key}"\nknown_hosts = "{keys.known_hosts([node.port])}"\n'
        "connect_timeout = 2\ncommand_timeout = 5\n"
    )
    return path


async def _cli(config: Path, *words: str) -> str:
    """The console script, awaited without blocking the loop that serves the fake node."""
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "flagbot"),
        "--config",
        str(config),
        *words,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return out.decode() + err.decode()


async def test_secrets_planted_in_unit_environment_and_journal_are_never_posted_or_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with _node(tmp_path) as (node, keys):
        config = _config(tmp_path, node, keys)
        settings: Settings = load_settings(config, required=True)
        store = Store.open(None, sqlite_path=settings.database.sqlite_path)
        store.upgrade()
        astore = AsyncStore(store)
        try:
            async with running_bot(settings, astore) as running:
                standin = running.standin
                for text in ("status", "observe", "grep api_key", "grep key"):
                    await standin.slash(text, user="U0OPER", channel=CHANNEL)
                    await running.services.drain()
                with faked_target(store) as fake:
                    fake.flags = FlagSet(
                        (
                            *START_FLAGS.items,
                            FlagItem("--api-key", "${SGLANG_API_KEY}"),
                            FlagItem("--admin-api-key", LITERAL_ADMIN),
                        )
                    )
                    plain = fake.observation

                    def observation() -> object:
                        seen = plain()
                        seen.evidence = [
                            JournalExcerpt("the start", "node0", "journalctl -u sglang", tuple(JOURNAL))
                        ]
                        return seen

                    fake.observation = observation  # type: ignore[method-assign]
                    measure_steps.render_chart = _blank_chart  # the fake sets have no measurements to draw
                    await standin.slash("try --enable-metrics", user="U0OPER", channel=CHANNEL)
                    await running.services.drain()
                await standin.slash("digest", user="U0OPER", channel=CHANNEL)
                await running.services.drain()
                calls = [
                    json.dumps(call.params, default=str) + json.dumps(call.response, default=str)
                    for call in standin.calls()
                ]
                answers = [json.dumps(post.body, default=str) for post in standin.responses()]
                files = [json.dumps(vars(item), default=str) for item in standin.files()]
                posted = "\n".join(calls)
            cli = [await _cli(config, "status"), await _cli(config, "log")]
        finally:
            await astore.aclose()

    # what ran: the commands were answered, the try ran, the journal and the unit were read
    assert standin.calls("chat.postMessage")
    assert fake.restarts, "the try restarted the (fake) target"
    assert "${SGLANG_API_KEY}" in posted, "the reference is shown as written"
    assert MASK in posted and MASK in cli[0], "secrets were there to mask, in Slack and on the console"
    assert "--admin-api-key ********" in cli[0] and "regressed" in cli[1]
    # the journal's lines reached Slack, masked (grep and the try's excerpt)
    assert f"DB_PASSWORD={MASK}" in posted and f"api_key='{MASK}'" in posted

    leaks: list[str] = []
    for record in caplog.records:
        leaks += _leaks(f"log {record.name}", record.getMessage() + (record.exc_text or ""))
    for text in calls:
        leaks += _leaks("a Web API call", text)
    for text in answers:
        leaks += _leaks("an answer", text)
    for text in files:
        leaks += _leaks("a file posted", text)
    for index, text in enumerate(cli):
        leaks += _leaks(f"CLI output {index}", text)
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file() and path.suffix != ".db":
            leaks += _leaks(f"file {path}", path.read_bytes().decode(errors="replace"))
    store = Store.open(None, sqlite_path=settings.database.sqlite_path)
    rows = 0
    try:
        meta = MetaData()
        meta.reflect(store.engine)
        with store.engine.connect() as connection:
            for table in meta.sorted_tables:
                for row in connection.execute(select(table)):
                    rows += 1
                    values = {
                        k: v for k, v in dict(row._mapping).items() if (table.name, k) not in KEPT_AS_WRITTEN
                    }
                    leaks += _leaks(f"table {table.name}", json.dumps(values, default=str))
    finally:
        store.close()
    assert leaks == []
    assert rows > 10, "the scan saw the store's rows"


async def test_config_check_units_warns_about_the_literal_secrets_without_showing_them(
    tmp_path: Path,
) -> None:
    async with _node(tmp_path) as (node, keys):
        config = _config(tmp_path, node, keys)
        plain = await _cli(config, "config", "check")
        checked = await _cli(config, "config", "check", "--units")
    assert "warning:" not in plain  # the file alone: no unit read
    warnings = [line for line in checked.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2, checked
    assert "`--admin-api-key` has a literal value" in warnings[0] and "${ADMIN_API_KEY}" in warnings[0]
    assert "the environment variable HF_TOKEN is a secret" in warnings[1]
    assert _leaks("config check --units", checked) == []
