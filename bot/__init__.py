"""flagbot: run the SGLang flag-tuning loop (try, revert, verify, isolate) from Slack and the CLI."""

__version__ = "0.1.0"
