"""Data files shipped with flagbot: SGLang flag catalogs (`sglang-<version>-flags.json`).

A package, not a plain folder, so `importlib.resources` finds the files in an installed wheel.
Regenerate the catalogs with `tools/gen_flag_catalog.py`; never edit them by hand.
"""
