"""Benchmark profiles: the shipped `quick` and `full`, how a file adds to them, and their checks."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.config import ConfigError, load_settings
from bot.config.schema import BenchProfile, Settings

ROOT = Path(__file__).parents[3]


def test_quick_and_full_are_shipped() -> None:
    bench = Settings().bench
    assert bench["quick"].concurrency == [1, 64]
    assert bench["full"].concurrency == [1, 2, 4, 8, 16, 32, 64, 128]
    assert bench["quick"].request_timeout == timedelta(minutes=10)
    assert bench["quick"].backend == "builtin"


def test_a_file_adds_profiles_and_may_replace_a_shipped_one(tmp_path: Path) -> None:
    path = tmp_path / "flagbot.toml"
    path.write_text(
        "[bench.soak]\nconcurrency = [32]\nduration = '10m'\n[bench.quick]\nconcurrency = [1, 8]\n"
    )
    bench = load_settings(path).bench
    assert set(bench) == {"quick", "full", "soak"}
    assert bench["quick"].concurrency == [1, 8]
    assert bench["soak"].duration == timedelta(minutes=10)


def test_the_example_defines_both_profiles_and_the_bench_serving_command() -> None:
    settings = load_settings(ROOT / "flagbot.example.toml")
    assert settings.bench["full"].concurrency[-1] == 128
    command = settings.targets["sglang-qwen"].bench_serving
    assert command.python == "/usr/bin/python3"
    assert command.module is None  # the host's release decides (bot.bench.remote.resolve_command)


def test_requests_per_level_refill_every_slot() -> None:
    profile = BenchProfile(num_requests=16, rounds=2)
    assert profile.requests_at(1) == 16
    assert profile.requests_at(64) == 128


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[bench.x]\nconcurrency = []\n", "bench.x.concurrency"),
        ("[bench.x]\nconcurrency = [0]\n", "bench.x.concurrency"),
        ("[bench.x]\nbackend = 'vllm'\n", "bench.x.backend"),
        ("[bench.x]\nrequest_timeout = 'soon'\n", "not a duration"),
        ("[bench.x]\nwarmup = 3\n", "bench.x.warmup: unknown key"),
    ],
)
def test_bad_profiles_are_refused_with_the_key(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "flagbot.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=says):
        load_settings(path)
