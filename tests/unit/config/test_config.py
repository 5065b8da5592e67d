"""flagbot.toml: the example is valid, unknown keys and secrets are refused with file and key named."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.config import CONFIG_ENV, ConfigError, Secrets, load_settings

ROOT = Path(__file__).parents[3]
MINIMAL = """
default_target = "q"
[targets.q]
unit = "sglang-qwen.service"
nodes = [{ host = "10.200.0.2" }]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "flagbot.toml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


def test_the_published_example_is_valid_and_complete() -> None:
    settings = load_settings(ROOT / "flagbot.example.toml")
    target = settings.targets["sglang-qwen"]
    assert settings.default_target == "sglang-qwen"
    assert [node.host for node in target.nodes] == ["10.1.230.174", "10.1.230.175"]
    assert target.timeouts.ready == timedelta(minutes=30)
    assert settings.schedules.check_after == [timedelta(minutes=10), timedelta(hours=24)]
    assert settings.bench["quick"].concurrency == [1, 64]


def test_every_section_of_the_example_is_documented() -> None:
    doc = (ROOT / "docs" / "config.md").read_text()
    for section in (
        "[targets.NAME]",
        "[bench.NAME]",
        "[slack]",
        "[schedules]",
        "[database]",
        "default_target",
    ):
        assert section in doc


def test_minimal_config_and_defaults(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, MINIMAL))
    target = settings.targets["q"]
    assert target.http_base() == "http://10.200.0.2:30000"
    assert target.ssh.sudo is True
    assert target.nodes[0].port == 22


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (MINIMAL + "colour = 'red'\n", "targets.q.colour: unknown key"),
        ("bogus = 1\n", "bogus: unknown key"),
        (
            MINIMAL + "[slack]\nbot_token = 'xoxb-1'\n",
            "slack.bot_token: secrets are read only from the environment: set SLACK_BOT_TOKEN",
        ),
        ("[database]\nurl = 'postgresql://x'\n", "set FLAGBOT_DATABASE_URL"),
        (MINIMAL.replace('host = "10.200.0.2"', 'host = "h", port = "ssh"'), "targets.q.nodes.0.port:"),
        (MINIMAL.replace('host = "10.200.0.2"', 'host = "h", port = 70000'), "less than or equal to 65535"),
        (MINIMAL.replace("sglang-qwen.service", "sglang qwen"), "targets.q.unit:"),
        ('default_target = "nope"\n', "default_target 'nope' is not a target"),
        ("[schedules]\ntimezone = 'Mars/Olympus'\n", "unknown time zone 'Mars/Olympus'"),
        ("[schedules]\ndigest_cron = '0 9 * *'\n", "schedules.digest_cron"),
        ("[schedules]\ncheck_after = ['10 minutes']\n", "is not a duration"),
        ("[targets.q]\nunit = 'a.service'\n", "targets.q.nodes: required key is missing"),
        ("[targets.'a b']\nunit = 'a.service'\nnodes = [{host='h'}]\n", "target name 'a b'"),
        (MINIMAL + "[targets.q.bench]\ntokenizer = 'tok.json'\n", "give an absolute path to the tokenizer"),
        ("x = [", "not valid TOML"),
        ("x = '\udcff'", "not UTF-8"),
    ],
)
def test_malformed_config_names_file_key_and_problem(tmp_path: Path, text: str, says: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    message = str(caught.value)
    assert message.startswith(str(path))
    assert says in message
    assert "Traceback" not in message
    assert "{" not in message  # never the whole parsed file echoed back


def test_path_from_environment_and_missing_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, MINIMAL)
    monkeypatch.setenv(CONFIG_ENV, str(path))
    assert "q" in load_settings().targets
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings()
    monkeypatch.delenv(CONFIG_ENV)
    monkeypatch.chdir(tmp_path / "..")
    assert load_settings().targets == {}  # no ./flagbot.toml and none named: defaults


def test_environment_cannot_override_file_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFAULT_TARGET", "other")
    monkeypatch.setenv("default_target", "other")
    assert load_settings(write(tmp_path, MINIMAL)).default_target == "q"


def test_secrets_come_from_the_environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    secrets = Secrets()
    assert secrets.slack_bot_token is not None
    assert secrets.slack_bot_token.get_secret_value() == "xoxb-test"
    assert "xoxb-test" not in repr(secrets)
    assert secrets.database_url is None


def test_verdicts_section_defaults_example_and_docs(tmp_path: Path) -> None:
    example = load_settings(ROOT / "flagbot.example.toml").verdicts
    default = load_settings(write(tmp_path, MINIMAL)).verdicts
    assert example == default
    assert (default.min_effect, default.confidence, default.max_repeats) == (3.0, 95.0, 10)
    assert default.guarded["output_throughput"] == "higher"
    assert default.capacity == {
        "max_running_requests": "exact",
        "max_total_num_tokens": "2%",
        "available_gpu_mem_gb": "0.5",
    }
    assert "[verdicts]" in (ROOT / "docs" / "config.md").read_text()
    custom = load_settings(
        write(
            tmp_path,
            '[verdicts]\nmin_effect = 5\nconfidence = "90%"\n[verdicts.capacity]\nmax_running_requests = 0\n',
        )
    ).verdicts
    assert (custom.min_effect, custom.confidence, custom.capacity) == (
        5.0,
        90.0,
        {"max_running_requests": "exact"},
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[verdicts]\nmin_effect = 'lots'\n", "verdicts.min_effect"),
        ("[verdicts]\nconfidence = 100\n", "verdicts.confidence"),
        ("[verdicts]\nmin_repeats = 5\nmax_repeats = 4\n", "max_repeats 4 is below min_repeats 5"),
        ("[verdicts.guarded]\noutput_thruput = 'higher'\n", "'output_thruput' is not a bench_serving metric"),
        ("[verdicts.guarded]\noutput_throughput = 'up'\n", "verdicts.guarded.output_throughput"),
        ("[verdicts.min_effect_for]\np99_itl_ms = 10\n", "min_effect_for.p99_itl_ms: not a guarded metric"),
        ("[verdicts.capacity]\nmax_running_requests = 'close'\n", "is not a tolerance"),
        ("[verdicts.capacity]\ncontext_length = 'exact'\n", "'context_length' is not one of"),
        ("[verdicts]\nspending = 'haybittle'\n", "verdicts.spending"),
    ],
)
def test_malformed_verdicts_are_refused(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, text))
    assert says in str(caught.value)
