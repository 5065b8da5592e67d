"""Find, read and validate `flagbot.toml`, turning every problem into one readable line.

A malformed config must name the file, the key and what is wrong: operators edit this file
by hand on a server, and a pydantic traceback helps nobody there.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import TomlConfigSettingsSource

from bot.config.schema import Settings
from bot.config.secrets import SECRET_ENV_NAMES

CONFIG_ENV = "FLAGBOT_CONFIG"
DEFAULT_PATH = Path("flagbot.toml")

_SECRET_KEYS = {name.lower(): name for name in SECRET_ENV_NAMES} | {
    "bot_token": "SLACK_BOT_TOKEN",
    "app_token": "SLACK_APP_TOKEN",
    "signing_secret": "SLACK_SIGNING_SECRET",
    "database_url": "FLAGBOT_DATABASE_URL",
    "url": "FLAGBOT_DATABASE_URL",
    "token": "SLACK_BOT_TOKEN",
}


class ConfigError(Exception):
    """A configuration problem, already phrased for the operator."""


def config_path(explicit: Path | None = None) -> Path:
    """`--config` wins, then `FLAGBOT_CONFIG`, then `./flagbot.toml`."""
    if explicit is not None:
        return explicit
    from_env = os.environ.get(CONFIG_ENV)
    return Path(from_env) if from_env else DEFAULT_PATH


def load_settings(path: Path | None = None, *, required: bool = False) -> Settings:
    """Read the config. A missing default file gives empty settings unless `required`."""
    chosen = config_path(path)
    explicit = path is not None or CONFIG_ENV in os.environ
    if not chosen.is_file():
        if required or explicit:
            raise ConfigError(f"{chosen}: config file not found")
        return Settings()
    try:
        with chosen.open("rb") as handle:
            tomllib.load(handle)  # for the syntax error's line and column
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{chosen}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{chosen}: not UTF-8 text (byte {exc.start}); TOML files are UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{chosen}: cannot read: {exc.strerror}") from None
    data = TomlConfigSettingsSource(Settings, toml_file=chosen)()
    return settings_from_mapping(data, source=str(chosen))


def settings_from_mapping(data: Mapping[str, Any], *, source: str) -> Settings:
    """Validate already-read tables; `source` names the file in messages."""
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None


def _describe(exc: ValidationError, source: str) -> str:
    lines = []
    for error in exc.errors():
        location = ".".join(str(part) for part in error["loc"])
        lines.append(f"{source}: {location or '(top level)'}: {_explain(error)}")
    return "\n".join(lines)


def _explain(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    key = str(error["loc"][-1]) if error["loc"] else ""
    if kind == "extra_forbidden":
        secret = _SECRET_KEYS.get(key.lower())
        if secret:
            return f"secrets are read only from the environment: set {secret} instead"
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    message = str(error["msg"])
    message = message.removeprefix("Value error, ")
    if not error["loc"]:
        return message  # a check across keys: its message names them; the input is the whole file
    if "input" in error and kind not in ("model_type", "dict_type"):
        return f"{message} (got {error['input']!r})"
    return message
