"""Why a hybrid (Mamba / linear-attention) model serves fewer requests than asked: SGLang's arithmetic.

A hybrid model keeps a fixed-size state per request in a pool of `max_mamba_cache_size` slots
(memory_pool.py `MambaPool`, which prints `Mamba Cache is allocated. max_mamba_cache_size: N, ...`).
The scheduler then caps `max_running_requests` at `max_mamba_cache_size // ratio`, the ratio being
the state slots one request may hold:

* 0.5.9 (model_executor/model_runner_kv_cache_mixin.py `init_memory_pool`): 1 with
  `--disable-radix-cache`, else 3 (`MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`), plus, with
  `--mamba-scheduler-strategy extra_buffer`, 1 under speculative decoding and 2 without
  (`MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP` / `_OVERLAP`);
* 0.5.10 (the same file, `_calculate_mamba_ratio`, used by `_resolve_max_num_reqs`): 1 with
  `--disable-radix-cache`, else 3, plus, with the extra buffer, 2 when the overlap schedule is on
  and 1 when it is off;
* 0.5.23 (mem_cache/kv_cache_configurator.py `_calculate_mamba_ratio`): as 0.5.10, but the base
  drops to 2 under `SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK` and the lazy extra buffer adds 1; it
  prints `max_running_requests is capped to N by the mamba state cache (max_mamba_cache_size=M,
  R state slots per request)` when the cap binds, and that line's numbers are taken as they are.

`explain` turns these into the sentence observe's evidence shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.sglang.catalog import version_key

BASE_RATIO = 3
"""`MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO` in every release read (0.5.9, 0.5.10, 0.5.23)."""


def _on(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))


def _before_0_5_10(version: str | None) -> bool:
    try:
        return version is not None and version_key(version) < version_key("0.5.10")
    except ValueError:  # not a release number: the newer rule
        return False


def slots_per_request(server_args: Mapping[str, Any], version: str | None) -> tuple[int, str]:
    """(ratio, why) for a start's printed `server_args` and SGLang version (module doc)."""
    if _on(server_args.get("disable_radix_cache")):
        return 1, "radix cache off: 1 state slot per request"
    if server_args.get("mamba_scheduler_strategy") != "extra_buffer":
        return BASE_RATIO, f"{BASE_RATIO} state slots per request"
    spec = server_args.get("speculative_algorithm") not in (None, "", "None")
    if _before_0_5_10(version):
        extra, why = (1, "speculative decoding") if spec else (2, "no speculative decoding")
    elif _on(server_args.get("disable_overlap_schedule")):
        extra, why = 1, "overlap schedule off"
    else:
        extra, why = 2, "overlap schedule on"
    return BASE_RATIO + extra, f"{BASE_RATIO} + {extra} extra-buffer state slots per request ({why})"


def explain(
    effective: int | None,
    parsed: int | None,
    state: Mapping[str, Any] | None,
    cap_line: Mapping[str, Any] | None,
    server_args: Mapping[str, Any] | None,
    version: str | None,
) -> str | None:
    """ "26 = max_mamba_cache_size 79 // 3: the hybrid state cache, not KV memory" when the
    effective `max_running_requests` is what the state cache allows and less than was asked
    (None otherwise: no state cache, or another limit binds)."""
    if effective is None:
        return None
    if cap_line is not None and cap_line.get("max_running_requests") == effective:
        size, ratio = cap_line["max_mamba_cache_size"], cap_line["ratio"]
        why = f"{ratio} state slots per request, SGLang's own cap warning"
    elif state is not None and isinstance(state.get("max_mamba_cache_size"), int):
        size = state["max_mamba_cache_size"]
        ratio, why = slots_per_request(server_args or {}, version)
        if size // ratio != effective:
            return None
    else:
        return None
    if parsed is not None and effective >= parsed:
        return None
    return (
        f"{effective} = max_mamba_cache_size {size} // {ratio}: the hybrid state cache, not KV memory ({why})"
    )
