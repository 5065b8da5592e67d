"""What flagbot knows of SGLang, as pure functions: log, bench_serving and launch-line parsers.

This package imports nothing else of flagbot's, so every other layer can depend on it.
"""
