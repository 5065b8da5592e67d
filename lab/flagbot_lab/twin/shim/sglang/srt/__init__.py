"""`sglang.srt` of the twin: only `server_args` (argument resolution without loading)."""
