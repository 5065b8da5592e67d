"""Reading Web API arguments the way Slack does, whatever way slack_sdk sent them.

slack_sdk sends some methods as JSON (chat.*), others as query parameters even on POST
(files.*, auth.test) or as GET; booleans become "1"/"0" and objects JSON strings. One reader
hides that, so each method is written once against plain values.
"""

from __future__ import annotations

import json
from typing import Any

from flagbot_lab.standin.workspace import SlackError


class Params:
    """A method's arguments merged from the query string, a form body and a JSON body."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def required(self, name: str, *, error: str = "invalid_arguments") -> str:
        """A required string; a missing one is answered with `error`."""
        value = self.values.get(name)
        if value is None or value == "":
            raise SlackError(error)
        return str(value)

    def opt(self, name: str) -> str | None:
        """An optional string ("" counts as absent, as slack_sdk drops None)."""
        value = self.values.get(name)
        return None if value is None or value == "" else str(value)

    def flag(self, name: str, default: bool = False) -> bool:
        """A boolean sent as true/false, "1"/"0" or "true"/"false"."""
        value = self.values.get(name)
        if value is None or value == "":
            return default
        if isinstance(value, bool):
            return value
        return str(value).lower() in ("1", "true", "yes")

    def number(self, name: str, default: int) -> int:
        """An integer argument such as `limit`."""
        value = self.values.get(name)
        if value is None or value == "":
            return default
        try:
            return int(value)
        except (TypeError, ValueError):
            raise SlackError("invalid_arguments") from None

    def obj(self, name: str) -> Any:
        """An object or list sent either as JSON or as a JSON-encoded string (form bodies)."""
        value = self.values.get(name)
        if isinstance(value, str):
            if value == "":
                return None
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                raise SlackError("invalid_arguments") from None
        return value
