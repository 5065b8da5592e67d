"""The SGLang twin: a stand-in for an SGLang server (0.5.9, 0.5.10 or 0.5.23, the scenario's
`sglang_version`) on a GPU host that has no GPU.

`engine/` and `shim/` run on the test node under Debian's `/usr/bin/python3` with the standard
library only (the testbed copies them there as the top-level packages `sglang_twin` and
`sglang`); `schema.py` and `install.py` run on the host and may use the project's dependencies.
See docs/twin.md.
"""
