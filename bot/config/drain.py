"""`[targets.X.drain]`: the drain policy and the hooks that take a target out of service around a
restart and let work back in afterwards (run by `bot.target.drain`).

Its own module because the hooks are a self-contained part of the schema (an HTTP call or a command on
a node, told apart by their keys); `bot.config.schema` places `DrainPolicy` on a target and checks that
a command hook's node is one of the target's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag, field_validator

from bot.config.hook_command import check_hook_command
from bot.config.section_base import Duration, Strict


class HttpHook(Strict):
    """One HTTP call flagbot makes around a restart, e.g. SGLang router's `POST /remove_worker?url=…`
    before it and `POST /add_worker?url=…` after it, or a load balancer's drain API. Written by
    whoever writes this file (never by chat input); any 2xx answer is success."""

    url: str = Field(pattern=r"^https?://[^\s]+$")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    body: str | None = None
    """Sent as is, with `content_type`."""
    content_type: str = "application/json"
    timeout: Duration = timedelta(seconds=10)

    def shown(self) -> str:
        """The call as evidence shows it: method and URL without its query string or userinfo
        (either may carry a token)."""
        base = self.url.split("?", 1)[0].split("#", 1)[0]
        scheme, _, rest = base.partition("://")
        host, slash, path = rest.partition("/")
        return f"{self.method} {scheme}://{host.rpartition('@')[2]}{slash}{path}"


class CommandHook(Strict):
    """One command flagbot runs on a node of the target around a restart, as its login (never
    through sudo), e.g. a script that takes the node out of a load balancer. Written by whoever
    writes this file (never by chat input); exit status 0 is success."""

    command: list[str]
    """The program by absolute path, then its arguments; each element is one argv word."""
    node: int = Field(default=0, ge=0)
    """Which node runs it (its index in `nodes`)."""
    timeout: Duration = timedelta(seconds=30)

    @field_validator("command", mode="before")
    @classmethod
    def _runnable(cls, value: object) -> list[str]:
        return check_hook_command(value)

    def shown(self) -> str:
        """The command as evidence shows it: the program and how many arguments it was given
        (an argument may carry a token, and the evidence is posted to Slack)."""
        extra = len(self.command) - 1
        return f"node {self.node}: {self.command[0]}" + (f" (+{extra} argument(s))" if extra else "")


def _hook_kind(value: object) -> str:
    """Which hook a table is, by its keys: `command` makes a command hook, anything else is read
    as an HTTP hook (so a mistake is reported against one model, not both)."""
    if isinstance(value, dict):
        return "command" if "command" in value else "http"
    return "command" if isinstance(value, CommandHook) else "http"


Hook = Annotated[
    Annotated[HttpHook, Tag("http")] | Annotated[CommandHook, Tag("command")], Discriminator(_hook_kind)
]
"""A drain hook: an HTTP call from the bot host (`url = …`) or a command on a node (`command = […]`)."""


class DrainPolicy(Strict):
    """`[targets.X.drain]`: before any restart of the target (try, revert, restart, rollback,
    reconcile), stop new work reaching it (`stop_hook`), wait until node 0 has no running or
    queued request (at most `grace`), then restart; once the server is healthy again,
    `resume_hook` lets work back in (`bot.target.drain`)."""

    grace: Duration = timedelta(minutes=2)
    """The longest wait for the requests in flight to finish."""
    quiet: Duration = timedelta(seconds=5)
    """Without `--enable-metrics`: a journal window with no batch line counts as idle."""
    on_timeout: Literal["restart", "abort"] = "restart"
    """After `grace` with requests still in flight: restart anyway (they are dropped), or abort
    (the stop hook is undone, nothing changes, the command fails saying how many were left)."""
    stop_hook: Hook | None = None
    resume_hook: Hook | None = None

    @field_validator("grace")
    @classmethod
    def _bounded_grace(cls, value: timedelta) -> timedelta:
        if not timedelta(0) <= value <= timedelta(hours=2):
            raise ValueError("drain grace must be between 0s and 2h")
        return value
