"""The redaction rules (bot/redaction.py) and the `[redaction]` settings that configure them."""

from __future__ import annotations

import collections
import io
import logging
from typing import Any

import pytest

from bot import redaction
from bot.config import ConfigError, Settings, settings_from_mapping
from bot.redaction import MASK, RedactingStream, Redactor, install_log_redaction, redact, redactor


@pytest.fixture
def names() -> Redactor:
    return Redactor()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("python3 -m sglang.launch_server --api-key sk-abc123 --port 1", f"--api-key {MASK} --port 1"),
        ("--api-key=sk-abc123 --tp 2", f"--api-key={MASK} --tp 2"),
        ('ExecStart=/p --admin-api-key "s k 1" --x', f'--admin-api-key "{MASK}" --x'),
        ("['--api-key', 'sk-abc123', '--tp', '2']", f"['--api-key', '{MASK}', '--tp', '2']"),
        ('[{"flag": "--api-key", "value": "sk-abc123"}]', f'[{{"flag": "--api-key", "value": "{MASK}"}}]'),
        ("{'op': 'add', 'flag': '--api-key', 'value': 'sk-abc123'}", f"'value': '{MASK}'"),
        ("ServerArgs(model_path='/m', api_key='sk-abc123', tp_size=2)", f"api_key='{MASK}', tp_size=2"),
        ('Environment="HF_TOKEN=hf_abcdef" "A=1"', f'Environment="HF_TOKEN={MASK}" "A=1"'),
        ('{"DB_PASSWORD": "pw123456"}', f'{{"DB_PASSWORD": "{MASK}"}}'),
        ("--enable-metrics --api-key sk-abc123", f"--enable-metrics --api-key {MASK}"),
        ("--hf-token hf_abcdef", f"--hf-token {MASK}"),
        ("MY_SECRET_THING=x1", f"MY_SECRET_THING={MASK}"),
        ("HF_TOKEN: 'hf_abcdef'", f"HF_TOKEN: '{MASK}'"),
        ('"--api-key": "sk-abc123"', f'"--api-key": "{MASK}"'),
    ],
)
def test_secret_values_are_masked_in_every_written_form(names: Redactor, text: str, expected: str) -> None:
    out = names.redact(text)
    assert expected in out
    assert "abc123" not in out and "abcdef" not in out and "pw123456" not in out


@pytest.mark.parametrize(
    "text",
    [
        "--api-key ${SGLANG_API_KEY} --port 30000",
        "--api-key=${SGLANG_API_KEY}",
        "api_key='${SGLANG_API_KEY}'",
        "max_total_tokens=1833679, max_prefill_tokens=16384, tokenizer_path='/m'",  # not secret names
        "--max-total-tokens 100 --tokenizer-path /m --kv-cache-dtype fp8",
        "--api-key --port 30000",  # no value to mask
        "api_key=None",
        "`--api-key` is a secret flag; write `--api-key=${SGLANG_API_KEY}`",  # prose names flags in backticks
        "SLACK_BOT_TOKEN: set\nSLACK_APP_TOKEN: not set",  # a ':' counts only next to a quote
    ],
)
def test_references_and_other_names_are_shown_as_written(names: Redactor, text: str) -> None:
    assert names.redact(text) == text


def test_the_dict_form_of_0_5_19_and_later_is_masked_too(names: Redactor) -> None:
    line = "server_args={'model_path': '/m', 'api_key': 'sk-dictform1', 'admin_api_key': None}"
    assert (
        names.redact(line)
        == f"server_args={{'model_path': '/m', 'api_key': '{MASK}', 'admin_api_key': None}}"
    )
    assert names.redact("echo sk-dictform1") == f"echo {MASK}"


def test_a_value_once_seen_is_masked_wherever_it_appears(names: Redactor) -> None:
    assert names.redact("a line with sk-echoed99 alone") == "a line with sk-echoed99 alone"
    names.redact("server_args=ServerArgs(api_key='sk-echoed99')")
    assert names.redact("a line with sk-echoed99 alone") == f"a line with {MASK} alone"
    names.remember_launch(
        ["/p", "--admin-api-key", "adminsecret", "--api-key=${K}"], {"HF_TOKEN": "hf_tok123"}
    )
    assert names.redact("adminsecret hf_tok123 ${K}") == f"{MASK} {MASK} ${{K}}"
    names.remember(["abc"])  # too short to mask everywhere: would mask every 'abc'
    assert names.redact("abc") == "abc"
    names.remember_launch([], {"SGLANG_MAX_TOKENS": "1833679", "MODEL_KEY": "/models/qwen"})  # *TOKEN*, *_KEY
    assert names.redact("max_total_num_tokens=1833679 --model-path /models/qwen") == (
        "max_total_num_tokens=1833679 --model-path /models/qwen"  # numbers and paths: only where assigned
    )
    assert names.redact("SGLANG_MAX_TOKENS=1833679") == f"SGLANG_MAX_TOKENS={MASK}"


def test_argv_and_json_values(names: Redactor) -> None:
    assert names.redact_argv(["/p", "--api-key", "k1234567", "--admin-api-key=k7654321", "--tp", "2"]) == [
        "/p",
        "--api-key",
        MASK,
        f"--admin-api-key={MASK}",
        "--tp",
        "2",
    ]
    data = {
        "requested_flags": [{"flag": "--api-key", "value": "k1"}, {"flag": "--tp", "value": "2"}],
        "environment": {"HF_TOKEN": "t", "NCCL_DEBUG": "INFO"},
        "server_args": {"api_key": "k2", "max_total_tokens": 5, "admin_api_key": None},
        "reference": {"flag": "--api-key", "value": "${SGLANG_API_KEY}"},
    }
    assert names.redact_data(data) == {
        "requested_flags": [{"flag": "--api-key", "value": MASK}, {"flag": "--tp", "value": "2"}],
        "environment": {"HF_TOKEN": MASK, "NCCL_DEBUG": "INFO"},
        "server_args": {"api_key": MASK, "max_total_tokens": 5, "admin_api_key": None},
        "reference": {"flag": "--api-key", "value": "${SGLANG_API_KEY}"},
    }


def test_the_settings_choose_the_names_and_flags() -> None:
    try:
        Settings.model_validate(
            {"redaction": {"secret_names": ["WANDB_*"], "secret_flags": ["--my-credential"]}}
        )
        assert redactor().is_secret_name("WANDB_API") and not redactor().is_secret_name("HF_TOKEN")
        assert redactor().is_secret_flag("--my-credential") and not redactor().is_secret_flag("--api-key")
        assert redact("--my-credential c123456 --api-key k") == f"--my-credential {MASK} --api-key k"
    finally:
        Settings()  # the defaults again for the rest of the process
    assert redactor().is_secret_flag("--api-key") and redactor().is_secret_name("HF_TOKEN")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"secret_flags": ["api-key"]}, "a flag starts with '--'"),
        ({"secret_names": ["HF TOKEN"]}, "without spaces"),
        ({"secret_names": [""]}, "without spaces"),
        ({"secret_values": ["x"]}, "unknown key"),
    ],
)
def test_bad_redaction_settings_are_refused_by_name(table: dict[str, list[str]], message: str) -> None:
    with pytest.raises(ConfigError, match="redaction") as caught:
        settings_from_mapping({"redaction": table}, source="flagbot.toml")
    assert message in str(caught.value)


def test_log_records_and_tracebacks_are_masked(caplog: pytest.LogCaptureFixture) -> None:
    install_log_redaction()
    log = logging.getLogger("flagbot.test.redaction")
    with caplog.at_level(logging.INFO):
        log.info("ExecStart=%s", "/p --api-key sk-logged12")
        try:
            raise ValueError("HF_TOKEN=hf_raised99")
        except ValueError:
            log.exception("failed")
    first, second = caplog.records
    assert first.getMessage() == f"ExecStart=/p --api-key {MASK}"
    assert second.exc_text is not None and "hf_raised99" not in second.exc_text and MASK in second.exc_text
    assert "sk-logged12" not in caplog.text and "hf_raised99" not in caplog.text


def test_the_console_stream_masks_a_secret_written_in_pieces() -> None:
    inner = io.StringIO()
    stream = RedactingStream(inner)
    stream.write("flags: --api-key sk-pie")
    stream.write("ces123 --tp 2\nrest")
    assert inner.getvalue() == f"flags: --api-key {MASK} --tp 2\n"
    stream.flush()
    assert inner.getvalue().endswith("rest")


def test_the_answers_kept_per_name_are_bounded_and_stay_right() -> None:
    """Every key of every stored row is asked whether it is secret; the answers are kept, but a
    flood of distinct names cannot grow the process, and a kept answer is the same as a fresh one."""
    fresh = Redactor()
    names = [f"NAME_{i}_TOKEN" if i % 2 else f"NAME_{i}" for i in range(10_000)]
    assert [fresh.is_secret_name(n) for n in names] == [bool(i % 2) for i in range(10_000)]
    assert [fresh.is_secret_name(n) for n in names[-50:]] == [bool(i % 2) for i in range(9_950, 10_000)]
    assert len(fresh._name_verdicts) <= redaction._VERDICTS_KEPT
    assert (
        fresh.is_secret_flag("--api-key")
        and fresh.is_secret_flag("--api-key")
        and not fresh.is_secret_flag("--tp")
    )


def test_a_stored_row_of_subclasses_and_tuples_is_masked_as_plain_json_is() -> None:
    """The plain-JSON fast path (`type(value) is dict`...) and the general one agree: a dict
    subclass, a tuple, a str subclass and an OrderedDict are masked exactly as their plain forms."""

    class Text(str):
        pass

    class Row(dict[str, object]):
        pass

    plain = {
        "environment": {"HF_TOKEN": "t", "NCCL_DEBUG": "INFO"},
        "flags": [{"flag": "--api-key", "value": "k1234567"}, {"flag": "--tp", "value": "2"}],
        "line": "--api-key sk-abc123 --tp 2",
        "numbers": [1, 2.5, True, None],
    }
    odd = Row(
        environment=collections.OrderedDict([("HF_TOKEN", "t"), ("NCCL_DEBUG", "INFO")]),
        flags=({"flag": "--api-key", "value": "k1234567"}, Row(flag="--tp", value="2")),
        line=Text("--api-key sk-abc123 --tp 2"),
        numbers=[1, 2.5, True, None],
    )
    masked = Redactor().redact_data(plain)
    assert masked["environment"] == {"HF_TOKEN": MASK, "NCCL_DEBUG": "INFO"}
    assert masked["line"] == f"--api-key {MASK} --tp 2"
    odd_masked = Redactor().redact_data(odd)
    assert odd_masked == {**masked, "flags": tuple(masked["flags"])}  # type: ignore[dict-item]
    assert isinstance(odd_masked["flags"], tuple)


def test_a_row_written_again_asks_no_name_again() -> None:
    """A run's state is redacted at every step's write with the same keys: each key's verdict is
    worked out once (bench/experiment_counts.py counts the calls; a regression here multiplies them)."""
    asked: list[str] = []

    class Counting(Redactor):
        def is_secret_name(self, name: str) -> bool:
            asked.append(name)
            return super().is_secret_name(name)

    names = Counting()
    row = {
        "plan": {"flags": [{"flag": "--tp", "value": "2"}], "env": {"NCCL_DEBUG": "INFO"}},
        "step": "apply",
    }
    first = names.redact_data(row)
    once = len(asked)
    assert names.redact_data(row) == first == row
    assert once == len(set(asked)) and len(asked) == once  # no key asked twice, nothing asked the second time


def test_a_part_written_again_unchanged_is_not_walked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's state is written whole at every step (issue 16 item 9): its unchanged parts are
    answered from the last write, the changed ones walked; the result is the same."""
    redactor = Redactor()
    state = {"preflight": {"report": {"HF_TOKEN": "hf_partValue1", "n": [1, 2]}}, "cursor": 3, "log": ["a"]}
    first: dict[str, Any] = redactor.redact_data(
        state
    )  # learns the token: nothing is kept while a secret is learned
    assert redactor.redact_data(state) == first  # kept now
    walked: list[object] = []
    inner = redactor._data

    def counted(value: object) -> object:
        walked.append(value)
        return inner(value)

    monkeypatch.setattr(redactor, "_data", counted)
    again = redactor.redact_data({**state, "log": ["a", "b"]})
    assert again == {**first, "log": ["a", "b"]} and first["preflight"]["report"]["HF_TOKEN"] == MASK
    assert walked == [3, ["a", "b"], "a", "b"]  # the preflight part was not walked again


def test_a_kept_part_is_masked_again_once_a_secret_is_learned_and_is_a_fresh_copy() -> None:
    redactor = Redactor()
    part = {"journal": {"line": "loaded the-later-secret1 from disk"}}
    assert redactor.redact_data(part) == part
    redactor.remember(["the-later-secret1"])
    masked = redactor.redact_data(part)
    assert masked == {"journal": {"line": f"loaded {MASK} from disk"}}
    masked["journal"]["line"] = "changed by the caller"
    assert redactor.redact_data(part) == {"journal": {"line": f"loaded {MASK} from disk"}}


def test_parts_json_would_change_keep_their_types() -> None:
    """A tuple stays a tuple, a number as a key stays a number, even after the JSON-equal part
    was kept: only plain JSON is answered from what was kept."""
    redactor = Redactor()
    assert redactor.redact_data({"a": {"1": ["x"]}, "b": [1, 2]}) == {"a": {"1": ["x"]}, "b": [1, 2]}
    again = redactor.redact_data({"a": {1: ("x",)}, "b": (1, 2)})
    assert again == {"a": {1: ("x",)}, "b": (1, 2)}
    assert isinstance(again["b"], tuple) and list(again["a"]) == [1]


def test_what_is_kept_of_parts_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slack's payloads are redacted too: the parts kept never pass the bound on characters."""
    monkeypatch.setattr(redaction, "_PARTS_CHARS", 100)
    redactor = Redactor()
    for n in range(10):
        assert redactor.redact_data({"part": {"text": f"{n}" * 30}}) == {"part": {"text": f"{n}" * 30}}
        assert redactor._redacted_chars <= 100 and len(redactor._redacted_parts) <= 2
    assert redactor.redact_data({"big": ["x" * 200]}) == {"big": ["x" * 200]}
    assert all(len(text) < 200 for text in redactor._redacted_parts)
