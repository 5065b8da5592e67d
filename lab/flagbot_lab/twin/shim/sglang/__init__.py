"""The SGLang twin's stand-in for the `sglang` package on a test node (flagbot docs/twin.md).

Installed as the top-level package `sglang` in the node's dist-packages, next to the twin's
engine `sglang_twin`. Importing it is cheap on purpose: `python -c 'import sglang;
print(sglang.__version__)'` is how tools ask a host which SGLang it runs; the version is the
scenario's release (`_version.py`, written by `install.py`).
"""

from ._version import __version__

__all__ = ["__version__"]
