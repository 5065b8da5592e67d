"""flagbot's hands on a target: the commands it may run on a node (see `privileged`)."""

from bot.target.privileged import (
    COMMANDS,
    PROGRAMS,
    NodeCommand,
    ParamError,
    Rendered,
    dropin_backup_path,
    dropin_path,
    render,
)
from bot.target.sudoers import sudoers_text, validate_sudoers

__all__ = [
    "COMMANDS",
    "PROGRAMS",
    "NodeCommand",
    "ParamError",
    "Rendered",
    "dropin_backup_path",
    "dropin_path",
    "render",
    "sudoers_text",
    "validate_sudoers",
]
