"""The twin's small state file, `/run/sglang-twin/state.json` (dir: env `SGLANG_TWIN_RUN_DIR`).

Why: the node's fake `nvidia-smi` must report `memory.used` as a real GPU would while the
server holds memory (weights, KV pool, graphs), and nothing while it is stopped. The runtime
writes its pid, phase and per-GPU memory here at each phase change; `nvidia-smi` reads it and
ignores a file whose pid is no longer alive (a SIGKILLed twin cannot clean up). The file is
replaced atomically (write to a temp file, then rename), so a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

__all__ = ["STATE_FILE", "StateFile", "state_path"]

STATE_FILE = "state.json"
DEFAULT_DIR = "/run/sglang-twin"


def state_path() -> str:
    return os.path.join(os.environ.get("SGLANG_TWIN_RUN_DIR") or DEFAULT_DIR, STATE_FILE)


class StateFile:
    """Best effort: a read-only /run must not stop the twin from serving."""

    def __init__(self, path: str | None = None, **fixed: Any) -> None:
        self.path = path or state_path()
        self.fixed = fixed
        self.pid = os.getpid()

    def update(self, phase: str, gpu_memory_used_mib: list[int], **extra: Any) -> None:
        doc = {
            "pid": self.pid,
            "phase": phase,
            "gpu_memory_used_mib": gpu_memory_used_mib,
            "updated_unix": round(time.time(), 3),
            **self.fixed,
            **extra,
        }
        tmp = f"{self.path}.{self.pid}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(doc, fh)
            os.replace(tmp, self.path)
        except OSError:
            pass

    def remove(self) -> None:
        """Delete the file if it is still ours (a newer twin may have replaced it)."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                doc = json.load(fh)
            if doc.get("pid") == self.pid:
                os.unlink(self.path)
        except (OSError, ValueError):
            pass
