"""`python -m sglang.dry_run <flags>`: print the `server_args=` a start would log, load nothing.

Why: flagbot's preflight asks "what would SGLang make of these flags?" before restarting a
server. On a real host it runs `sglang.srt.server_args.prepare_server_args` in a Python one-liner;
on a twin node that works too (see `sglang.srt.server_args`), and this module is the same call
as a command: bare post-init WARNINGs on stderr, then one line `server_args=ServerArgs(...)` on
stdout (from 0.5.23 the resolved dict, `server_args={...}`, as the startup line prints it), exit 0; a bad command line exits 2 with argparse's message (`sglang serve: error: ...`); a
line post-init refuses raises SGLang's ValueError (traceback, exit 1), as the real function does.
This entry point is the twin's own; real SGLang has no `sglang.dry_run`.
"""

from __future__ import annotations

import sys

from .srt.server_args import prepare_server_args


def main(argv: list[str]) -> int:
    server_args = prepare_server_args(argv)
    if hasattr(server_args, "resolve_once"):  # 0.5.23: resolution runs later
        print(f"server_args={server_args.resolved_dict()!r}", flush=True)
    else:
        print(f"{server_args=}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
