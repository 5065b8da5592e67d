"""The benchmark client's module path per release: `sglang.benchmark.serving` from 0.5.15."""

from __future__ import annotations

import pytest

from bot.sglang.bench_module import bench_module_for, release_tuple


@pytest.mark.parametrize(
    ("version", "module"),
    [
        ("0.5.9", "sglang.bench_serving"),
        ("0.5.10", "sglang.bench_serving"),
        ("0.5.14", "sglang.bench_serving"),
        ("0.5.15", "sglang.benchmark.serving"),
        ("0.5.23", "sglang.benchmark.serving"),
        ("0.6.0rc1", "sglang.benchmark.serving"),
        ("0.5.10.post1", "sglang.bench_serving"),
        (None, "sglang.bench_serving"),
        ("", "sglang.bench_serving"),
        ("main", "sglang.bench_serving"),
    ],
)
def test_the_module_follows_the_release(version: str | None, module: str) -> None:
    assert bench_module_for(version) == module


def test_release_tuples() -> None:
    assert release_tuple("0.5.23") == (0, 5, 23)
    assert release_tuple("1.0") == (1, 0, 0)
    assert release_tuple("v0.5") is None
