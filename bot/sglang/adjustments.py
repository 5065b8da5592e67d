"""Which flag an SGLang adjustment warning bears on.

SGLang changes flags behind the operator's back and says so in a WARNING (mostly
`ServerArgs.__post_init__` in server_args.py up to 0.5.10, the `arg_groups/*_hook.py` modules
from about 0.5.2x). `flag_of` maps one warning's text to the `server_args` field it bears on, in
this order:

1. `KNOWN`: texts that do not name their flag, or name a remedy flag first, each checked against
   the released sources (the file and function are in the comment); a test per text
   (tests/unit/sglang/test_adjustments.py);
2. a field the text says it sets (`forcing tokenizer_worker_num=1`, `Setting hicache_io_backend to`);
3. else whichever comes first in the text (the sentence's subject; a flag named later is usually
   the remedy): a `--flag-name` (`Automatically reduce --mem-fraction-static ...` ->
   `mem_fraction_static`), a wording of `PHRASES` shared by many warnings (`... change page_size
   to 64`, `Cuda graph is disabled ...`), or a `server_args` field name of any packaged flag list
   (`speculative_num_draft_tokens is adjusted ...`).

None when the text names no flag (a warning about the platform, a library, an environment variable).
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources

from . import data as _data

KNOWN: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), flag)
    for pattern, flag in (
        # 0.5.23 mem_cache/kv_cache_configurator.py `_resolve_max_num_reqs`
        (r"^max_running_requests is capped to \d+ by the mamba state cache", "max_running_requests"),
        (r"^max_running_requests was reduced from the requested \d+ to", "max_running_requests"),
        # 0.5.9 / 0.5.10 server_args.py `_handle_mamba_radix_cache` (hybrid model, no_buffer)
        (r"^Disabling overlap schedule since mamba no_buffer", "disable_overlap_schedule"),
        # 0.5.9 / 0.5.10 server_args.py `_handle_speculative_decoding`
        (r"^Overlap scheduler is disabled when spec v2 is off", "disable_overlap_schedule"),
        # 0.5.9 / 0.5.10 / 0.5.23 distributed/parallel_state.py `GroupCoordinator.__init__`
        (r"^Setup Custom allreduce failed with ", "disable_custom_all_reduce"),
        # 0.5.9 / 0.5.10 server_args.py `_handle_mamba_radix_cache` (speculative hybrid models)
        (r"^Disabling [Rr]adix [Cc]ache\b", "disable_radix_cache"),
        # 0.5.10 server_args.py `_handle_speculative_decoding`
        (
            r"^Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap",
            "disable_overlap_schedule",
        ),
        # 0.5.9 / 0.5.10 server_args.py `_handle_model_specific_adjustments`, `_handle_deterministic`
        (r"custom (?:and symmetric-memory )?all reduce (?:is|are) disabled", "disable_custom_all_reduce"),
        # 0.5.9 / 0.5.10 server_args.py `_handle_data_parallelism` ("DP attention is enabled. ...")
        (r"[Cc]hunked prefill size is adjusted", "chunked_prefill_size"),
        # 0.5.9 / 0.5.10 server_args.py `_handle_moe_kernel_config` and friends
        (r"expert parallel size is adjusted", "ep_size"),
        # 0.5.9 / 0.5.10 server_args.py `_handle_pd_disaggregation`, `_handle_hicache`
        (r"KV cache is forced as chunk cache", "disable_radix_cache"),
        # post-init `Max running requests is reset to 48 ...` (speculative decoding)
        (r"^Max running requests is reset to", "max_running_requests"),
        # 0.5.9 / 0.5.10 server_args.py `_handle_gpu_memory_settings` (older releases print it too)
        # 0.5.9 / 0.5.10 server_args.py `_handle_hicache` (0.5.23 arg_groups/hicache_hook.py)
        (r"layout, switching to \S+ layout", "hicache_mem_layout"),
        (r"^Page first layout is not supported with direct IO backend", "hicache_mem_layout"),
        (r"^Kernel io backend does not support page first direct layout", "hicache_io_backend"),
        # 0.5.9 / 0.5.10 server_args.py `_handle_pipeline_parallelism` (sets disable_overlap_schedule)
        (r"^Pipeline parallelism is incompatible with overlap schedule", "disable_overlap_schedule"),
        # configs/model_config.py `_get_and_verify_dtype`
        (r"^Casting torch\.\w+ to torch\.\w+", "dtype"),
        # model_runner.py `ModelRunner.__init__` of the 0.4 releases (an INFO line, multimodal models)
        (r"^Automatically reduce --mem-fraction-static", "mem_fraction_static"),
        (r"^Automatically turn of{1,2} --chunked-prefill-size", "chunked_prefill_size"),
    )
)
"""Warnings whose flag is not named in the text, or is named after another one."""

PHRASES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), flag)
    for pattern, flag in (
        (r"\bpage[_ ]size\b", "page_size"),
        (r"\bpiecewise cuda graph\b", "disable_piecewise_cuda_graph"),
        (r"\bcuda graph\b.{0,40}\bdisabled\b|\bdisabl\w* (?:prefill )?cuda graph", "disable_cuda_graph"),
        (r"\boverlap schedul", "disable_overlap_schedule"),
        (r"\bmixed chunk", "enable_mixed_chunk"),
        (r"\bradix cache\b", "disable_radix_cache"),
        (r"\bhybrid SWA memory\b", "disable_hybrid_swa_memory"),
        (r"\bKV cache dtype\b", "kv_cache_dtype"),
        (r"\battention backend\b", "attention_backend"),
        (r"\bMOE kernel\b", "moe_runner_backend"),
        (r"\bshared experts? fusion\b", "disable_shared_experts_fusion"),
        (r"\bhierarchical cache\b", "enable_hierarchical_cache"),
        (r"\bPipeline parallelism\b", "pp_size"),
        (r"\bSampling backend\b", "sampling_backend"),
        (r"\bcustom all ?reduce\b", "disable_custom_all_reduce"),
        (r"\bmax running requests\b", "max_running_requests"),
        (r"\bdeterministic inference\b", "enable_deterministic_inference"),
    )
)
"""Wordings many warnings share, tried after the named `--flag`."""

ADJUSTING = re.compile(
    r"\b(?:[Dd]isabl|[Ee]nabl|[Cc]hang|[Ss]witch|[Ss]et(?:ting)? |[Oo]verrid|[Ff]all(?:s|ing)? ?back|"
    r"[Ff]orc|[Aa]djust|[Rr]eset|[Rr]educ|[Ii]gnor|[Dd]eprecat|[Tt]urn|[Ii]ncompatible)"
)
"""A verb of adjustment: with a flag named, a bare post-init line is one of SGLang's adjustments."""

_SETS_RE = re.compile(
    r"\b(?:[Ff]orcing|[Oo]verriding|[Ss]etting|[Rr]eset) ([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?:=| to\b)"
)
_DASHED_RE = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)+|[a-z][a-z0-9]{2,})\b")
_SNAKE_RE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


@functools.cache
def _fields() -> frozenset[str]:
    """Every `server_args` field of every packaged flag list (read once)."""
    names: set[str] = set()
    for entry in resources.files(_data).iterdir():
        if entry.name.startswith("sglang-") and entry.name.endswith("-flags.json"):
            flags = json.loads(entry.read_text(encoding="utf-8")).get("flags") or []
            names.update(str(flag["field"]) for flag in flags if isinstance(flag, dict) and flag.get("field"))
    return frozenset(names)


@functools.lru_cache(maxsize=4096)
def flag_of(text: str) -> str | None:
    """The `server_args` field an adjustment warning bears on (module doc), or None."""
    for pattern, flag in KNOWN:
        if pattern.search(text):
            return flag
    fields = _fields()
    for match in _SETS_RE.finditer(text):  # "forcing tokenizer_worker_num=1": the field it sets
        if match.group(1) in fields:
            return match.group(1)
    found: list[tuple[int, str]] = []
    for match in _DASHED_RE.finditer(text):
        name = match.group(1).replace("-", "_")
        if name in fields:
            found.append((match.start(), name))
            break
    for pattern, flag in PHRASES:
        if (hit := pattern.search(text)) is not None:
            found.append((hit.start(), flag))
    for match in _SNAKE_RE.finditer(text):
        if match.group(0) in fields:
            found.append((match.start(), match.group(0)))
            break
    # the subject of the sentence comes first; a flag named later is usually the remedy
    return min(found)[1] if found else None
