"""The SGLang twin: a stand-in for an SGLang 0.5.10 server on a GPU host that has no GPU.

`engine/` and `shim/` run on the test node under Debian's `/usr/bin/python3` with the standard
library only (the testbed copies them there as the top-level packages `sglang_twin` and
`sglang`); `schema.py` and `install.py` run on the host and may use the project's dependencies.
See docs/twin.md.
"""
