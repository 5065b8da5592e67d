"""Secrets come from the environment only, never from `flagbot.toml`, so a config file can be shared."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

SECRET_ENV_NAMES = ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "FLAGBOT_DATABASE_URL")


class Secrets(BaseSettings):
    """Slack tokens and the database URL, read from the process environment."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore", frozen=True)

    slack_bot_token: SecretStr | None = Field(None, alias="SLACK_BOT_TOKEN")
    slack_app_token: SecretStr | None = Field(None, alias="SLACK_APP_TOKEN")
    slack_signing_secret: SecretStr | None = Field(None, alias="SLACK_SIGNING_SECRET")
    database_url: SecretStr | None = Field(None, alias="FLAGBOT_DATABASE_URL")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings)
