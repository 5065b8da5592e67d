"""flagbot: run the SGLang flag-tuning loop (try, revert, verify, isolate) from Slack and the CLI."""

import warnings

__version__ = "0.1.0"

# cryptography 51 deprecates DSA, and asyncssh names DSA key types in module-level annotations,
# so every `import asyncssh` printed four CryptographyDeprecationWarnings to stderr: noise before
# each command's own output and error line, about a key type flagbot never uses (OpenSSH has
# disabled DSA by default since 7.0). Only that warning, only from asyncssh's modules, is
# silenced; anything else asyncssh or cryptography warns about still shows
# (tests/unit/test_package_warnings.py).
warnings.filterwarnings("ignore", message=r"DSA is deprecated", module=r"asyncssh(\.|$)")
