"""The shape of a JSON document, for values flagbot reads from or writes as JSON.

Why in `bot.sglang`: the parsers of SGLang's output are its first users (server_args values, flag
converters), and this package sits below every other, so every layer may use it.

`JsonValue` is what `json.loads` returns and `json.dumps` takes without a `default`: nested
lists and string-keyed dicts of strings, numbers, booleans and null. A function that accepts
any value and only passes it on (formats it, compares it) takes `object` instead.
"""

from __future__ import annotations

from typing import TypeAlias

JsonValue: TypeAlias = str | int | float | bool | list["JsonValue"] | dict[str, "JsonValue"] | None
"""One JSON value (recursive)."""
JsonObject: TypeAlias = dict[str, JsonValue]
"""A JSON object: the usual top level of a stored document."""
