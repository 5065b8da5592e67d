"""The command grammar and registry shared by the CLI and Slack."""

from bot.commands.grammar import Invocation, command_words, normalize_words, parse_command
from bot.commands.help import describe_invocation, help_text
from bot.commands.registry import COMMANDS, CommandSpec, Tier, get_command
from bot.commands.tokens import CommandError, tokenize

__all__ = [
    "COMMANDS",
    "CommandError",
    "CommandSpec",
    "Invocation",
    "Tier",
    "command_words",
    "describe_invocation",
    "get_command",
    "help_text",
    "normalize_words",
    "parse_command",
    "tokenize",
]
