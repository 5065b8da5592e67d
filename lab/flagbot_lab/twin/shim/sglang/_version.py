"""The SGLang release this twin node is; `install.py` rewrites it with the scenario's `sglang_version`."""

__version__ = "0.5.10"
