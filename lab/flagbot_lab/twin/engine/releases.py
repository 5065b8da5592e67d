"""The SGLang releases the twin can be, and what differs between them.

Why one table: a scenario's `sglang_version` picks the flag list, the argument surface, the
post-init rules, the startup lines and the benchmark client's module path; each difference is
a fact of that release's sources, and keeping them here names every one in one place (each
cited, with the file and function it was read from, in docs/twin.md "Releases").

The engine asks `release(version)` and reads the switches; nothing else compares version
strings.
"""

from __future__ import annotations

from dataclasses import dataclass

RELEASES = ("0.5.9", "0.5.10", "0.5.23")
"""The releases the twin models, oldest first."""
DEFAULT_RELEASE = "0.5.10"


def version_tuple(version: str) -> tuple[int, ...]:
    """`"0.5.10"` -> `(0, 5, 10)`; a non-numeric part ends the tuple."""
    parts: list[int] = []
    for piece in version.split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


@dataclass(frozen=True)
class Release:
    """What one release does differently (names read as "this release ...")."""

    version: str
    server_args_dict: bool
    """Logs `server_args={...}` (the resolved record as a dict, 0.5.19+:
    `entrypoints/engine.py` `_server_args_for_logging` -> `ServerArgs.resolved_dict`) instead of
    `server_args=ServerArgs(...)` (the dataclass repr, `logger.info(f"{server_args=}")`)."""
    kv_line_dtype: bool
    """`KV Cache is allocated. dtype: torch.bfloat16, #tokens: ...` (0.5.13+,
    `mem_cache/memory_pool.py` `_finalize_allocation_log`)."""
    nested_graph_config: bool
    """CUDA-graph settings live in `cuda_graph_config` = `{'decode': {...}, 'prefill': {...}}`
    (0.5.14+, `model_executor/cuda_graph_config.py` `CudaGraphConfig`) instead of the flat
    `cuda_graph_max_bs` / `cuda_graph_bs` / `piecewise_cuda_graph_*` fields."""
    load_weight_dtype: bool
    """`Load weight end. ... type=X, dtype=torch.bfloat16, avail mem=...` (0.5.9
    `model_runner.py` `load_model`); 0.5.10+ prints `quant=..., ` instead, when quantized."""
    launch_server_warning: bool
    """`python -m sglang.launch_server` warns that `sglang serve` is the recommended entrypoint
    (0.5.10+ `launch_server.py`; 0.5.9 has no such warning)."""
    piecewise_default_on: bool
    """Piecewise CUDA graph is on unless disabled (0.5.10 `--disable-piecewise-cuda-graph`,
    `_handle_piecewise_cuda_graph`); 0.5.9 has it off unless `--enable-piecewise-cuda-graph`."""
    cli_max_running_capped: bool
    """A `--max-running-requests` from the command line is capped by the pool estimate
    (`min(mrr // dp, max(min(estimate, 4096), 2048))`, 0.5.10 `_resolve_max_num_reqs`); 0.5.9
    keeps it as given, 0.5.23 caps it only by `token_capacity // 2`."""
    benchmark_package: bool
    """The wheel has a `sglang/benchmark/` package (0.5.10+; 0.5.9 has none)."""
    bench_modules: tuple[str, ...]
    """Modules `python -m` can run as the benchmark client; the first is the one to use
    (0.5.15+ moved it to `sglang.benchmark.serving`, `sglang.bench_serving` warns)."""
    mamba_refuses_spec_radix: bool = True
    """A hybrid model with speculative decoding, the radix cache on and `no_buffer` is refused
    with a ValueError (0.5.10 `_handle_mamba_radix_cache`); 0.5.9 turns the radix cache off."""
    mamba_extra_ratio_by_overlap: bool = True
    """The extra buffer's state slots follow the overlap scheduler (0.5.10
    `_calculate_mamba_ratio`); 0.5.9 `init_memory_pool` follows speculative decoding instead."""
    mamba_configurator: bool = False
    """Hybrid models follow 0.5.23's moved code: the strategy resolves from `auto`
    (`srt/arg_groups/overrides.py` `_mamba_radix_cache_resolution`), the state cache is sized by
    `srt/mem_cache/kv_cache_configurator.py` `_handle_max_mamba_cache` (padding slot, joint
    speculative solve) and its `_calculate_mamba_ratio`; a multimodal model reserves its
    embedding cache first (`mm_runtime_reservation_gb`)."""
    mamba_spec_dp_cap: bool = False
    """Speculative hybrid models under DP attention are also capped at `max_running_requests //
    dp_size` (0.5.9 `init_memory_pool`)."""
    retract_mamba_gained: bool = False
    """A hybrid model's retraction line adds `, #mamba_num_gained: N` after the tokens gained
    (0.5.23 `scheduler.py` `update_running_batch`; 0.5.9 and 0.5.10 have no such field)."""

    @property
    def bench_module(self) -> str:
        return self.bench_modules[0]

    @property
    def deferred_resolution(self) -> bool:
        """`prepare_server_args` returns the raw input; resolution runs later in
        `ServerArgs.resolve_once` (0.5.23 `srt/server_args.py`: `__post_init__` does nothing)."""
        return self.nested_graph_config and self.server_args_dict


_TABLE = {
    "0.5.9": Release(
        version="0.5.9",
        server_args_dict=False,
        kv_line_dtype=False,
        nested_graph_config=False,
        load_weight_dtype=True,
        launch_server_warning=False,
        piecewise_default_on=False,
        cli_max_running_capped=False,
        benchmark_package=False,
        bench_modules=("sglang.bench_serving",),
        mamba_refuses_spec_radix=False,
        mamba_extra_ratio_by_overlap=False,
        mamba_spec_dp_cap=True,
    ),
    "0.5.10": Release(
        version="0.5.10",
        server_args_dict=False,
        kv_line_dtype=False,
        nested_graph_config=False,
        load_weight_dtype=False,
        launch_server_warning=True,
        piecewise_default_on=True,
        cli_max_running_capped=True,
        benchmark_package=True,
        bench_modules=("sglang.bench_serving",),
    ),
    "0.5.23": Release(
        version="0.5.23",
        server_args_dict=True,
        kv_line_dtype=True,
        nested_graph_config=True,
        load_weight_dtype=False,
        launch_server_warning=True,
        piecewise_default_on=False,
        cli_max_running_capped=False,
        benchmark_package=True,
        bench_modules=("sglang.benchmark.serving", "sglang.bench_serving"),
        retract_mamba_gained=True,
        mamba_configurator=True,
    ),
}


def release(version: str) -> Release:
    """The release table entry; ValueError naming the releases the twin has."""
    try:
        return _TABLE[version]
    except KeyError:
        raise ValueError(f"the twin has no SGLang {version}; it models {', '.join(RELEASES)}") from None
