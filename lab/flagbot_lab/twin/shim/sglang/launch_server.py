"""`python -m sglang.launch_server <flags>`: the twin starts where SGLang 0.5.10 starts.

On a test node this file is `sglang/launch_server.py` next to the twin's engine package
`sglang_twin`, so a unit's `ExecStart=/usr/bin/python3 -m sglang.launch_server ...` runs the
twin. Like the real module (0.5.10 and later; 0.5.9 has no such warning) it first emits the UserWarning through `warnings.warn` (so the
usual warning filters apply and the text, file:line and source line print as Python prints
them), then hands the arguments over. The engine is imported by name at run time because on
the host (where this file is `flagbot_lab.twin.shim.sglang.launch_server`) there is no `sglang_twin`.
"""

from __future__ import annotations

import importlib
import sys
import warnings

from ._version import __version__


def main() -> None:
    if importlib.import_module("sglang_twin.releases").release(__version__).launch_server_warning:
        warnings.warn(
            "'python -m sglang.launch_server' is still supported, but "
            "'sglang serve' is the recommended entrypoint.\n"
            "  Example: sglang serve --model-path <model> [options]",
            UserWarning,
            stacklevel=1,
        )
    runtime = importlib.import_module("sglang_twin.runtime")
    sys.exit(runtime.main(sys.argv[1:]))


if __name__ == "__main__":
    main()
