"""SGLang's argparse `type=` callables, re-implemented: importing SGLang itself needs torch.

argparse names a type in its error message by `__name__` ("invalid int value"), so each
function carries SGLang's name and the catalog's messages read like SGLang's own.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from decimal import Decimal

from bot.sglang.json_value import JsonValue


def _json_loads(value: str) -> JsonValue:
    """`type=json.loads`: any JSON text."""
    loaded: JsonValue = json.loads(value)
    return loaded


def _json_list_type(value: str) -> JsonValue:
    """SGLang's `json_list_type`: any JSON text (despite the name), with its own message."""
    try:
        loaded: JsonValue = json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list."
        ) from None
    return loaded


def _nullable_str(value: str) -> str | None:
    """SGLang's `nullable_str`: "" and "None" mean None; never fails."""
    return None if not value or value == "None" else value


_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")


def _human_readable_int(value: str) -> int:
    """SGLang's `human_readable_int`: an int, or a number with an SI (1k, 25.6k) or IEC (1Ki)
    suffix; IEC suffixes take integers only."""
    text = value.strip()
    match = _HUMAN_INT.fullmatch(text)
    if match:
        number, suffix = match.groups()
        if suffix in _IEC:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'; use an integer "
                    f"such as '{int(Decimal(number))}{suffix}' or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * _IEC[suffix]
        return int(Decimal(number) * _SI[suffix])
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. Use a plain integer, SI suffixes (1k, 1M), "
            "or IEC suffixes (1Ki, 1Mi)."
        ) from None


_json_loads.__name__ = "loads"
_json_list_type.__name__ = "json_list_type"
_nullable_str.__name__ = "nullable_str"
_human_readable_int.__name__ = "human_readable_int"

Converter = Callable[[str], JsonValue]
"""A flag's `type=`: the text given on the command line to the value SGLang sees."""

CONVERTERS: dict[str, Converter] = {
    "str": str,
    "int": int,
    "float": float,
    "json.loads": _json_loads,
    "json_list_type": _json_list_type,
    "nullable_str": _nullable_str,
    "human_readable_int": _human_readable_int,
}
"""Type names the shipped catalogs use; any other name is checked as plain text."""
