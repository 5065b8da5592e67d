"""Which CUDA graphs a start captures, read from post-init arguments of any release.

Why: 0.5.9 and 0.5.10 keep graph settings in flat fields (`disable_cuda_graph`,
`cuda_graph_bs`, `piecewise_cuda_graph_tokens` with 0.5.10's `--disable-piecewise-cuda-graph`
or 0.5.9's `--enable-piecewise-cuda-graph`); 0.5.23 nests them per phase in
`cuda_graph_config` (`decode`: the batch sizes; `prefill`: token counts, the successor of
piecewise graphs). The memory model and the startup lines ask here instead of reading fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .releases import release


def decode_batch_sizes(server_args: Mapping[str, Any], version: str) -> list[int] | None:
    """The decode capture list, or None when decode graphs are disabled."""
    if release(version).nested_graph_config:
        decode = (server_args.get("cuda_graph_config") or {}).get("decode") or {}
        return None if decode.get("backend") == "disabled" else list(decode.get("bs") or [])
    if server_args.get("disable_cuda_graph"):
        return None
    return list(server_args.get("cuda_graph_bs") or [])


def prefill_token_sizes(server_args: Mapping[str, Any], version: str) -> list[int] | None:
    """Prefill (piecewise / breakable) capture token counts, or None when disabled."""
    r = release(version)
    if r.nested_graph_config:
        prefill = (server_args.get("cuda_graph_config") or {}).get("prefill") or {}
        return None if prefill.get("backend") == "disabled" else list(prefill.get("bs") or [])
    enabled = (
        not server_args.get("disable_piecewise_cuda_graph")
        if r.piecewise_default_on
        else bool(server_args.get("enable_piecewise_cuda_graph"))
    )
    return list(server_args.get("piecewise_cuda_graph_tokens") or []) if enabled else None
