"""flagbot's configuration: one TOML file for settings, the environment for secrets."""

from bot.config.loader import CONFIG_ENV, ConfigError, config_path, load_settings, settings_from_mapping
from bot.config.schema import BenchProfile, Node, Settings, Target
from bot.config.secrets import SECRET_ENV_NAMES, Secrets

__all__ = [
    "CONFIG_ENV",
    "SECRET_ENV_NAMES",
    "BenchProfile",
    "ConfigError",
    "Node",
    "Secrets",
    "Settings",
    "Target",
    "config_path",
    "load_settings",
    "settings_from_mapping",
]
