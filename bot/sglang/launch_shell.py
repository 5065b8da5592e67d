"""Shell-side helpers of the launch-line parser: a POSIX-shell word splitter and script
environment tracking. Public entry points live in `bot.sglang.launch`.

The splitter follows shlex's POSIX quoting (single quotes literal, double quotes with `\\$ \\` \\"
\\\\` escapes, backslash-newline continuation) but also knows what shlex does not: where one
command ends (newline, `;`, `&&`, `||`, `|`, `&`), that `#` starts a comment only at the start of a
word, that `> file` / `2>&1` are redirections rather than arguments, and that `$(...)` is one
word. Variable references such as `$PATH` are kept exactly as written: flagbot cannot know the
values, and the writer must be able to put them back unchanged.

The error classes are defined here, the lowest layer, so both helper modules can raise them
without an import cycle; import them from `bot.sglang.launch`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_OPERATORS = ";&|()"
_RESERVED_PREFIX = frozenset({"then", "do", "else", "{", "!", "time"})
_REDIRECT = re.compile(r"&>>?|[<>]{1,3}[&|]?")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# A pasted interactive prompt: `(venv) ((env) ) [user@host dir]$ `, `user@host:~/x$ `, `$ `.
_PROMPT = re.compile(
    r"[ \t]*(?:\([^\n]*?\)[ \t]*)*"
    r"(?:(?:\[[^\]\n]*\]|[\w.-]+@[\w.-]+(?::[^\s$#%]*)?)[ \t]*[$#%]|[$%])[ \t]+(?=\S)"
)


class LaunchParseError(ValueError):
    """The text holds no launch line flagbot can read; the message names the problem and line."""


class LaunchInScriptError(LaunchParseError):
    """The unit (or container) runs a script, not SGLang: its flags live where flagbot cannot edit."""


@dataclass
class ShellCommand:
    """One simple command: its words after quote removal, redirections dropped."""

    words: list[str]
    line: int
    raw: list[str] = field(default_factory=list)
    """Each word as written, quotes included: `'$@'` is a literal, `"$@"` the script's arguments."""


@dataclass
class _Lexer:
    text: str
    pos: int = 0
    line: int = 1
    commands: list[ShellCommand] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    word: list[str] = field(default_factory=list)
    in_word: bool = False
    word_start: int = 0
    start_line: int = 1
    skip_next_word: bool = False

    def error(self, what: str, line: int) -> LaunchParseError:
        return LaunchParseError(f"line {line}: {what}")

    def end_word(self) -> None:
        if self.in_word:
            if self.skip_next_word:
                self.skip_next_word = False
            else:
                self.words.append("".join(self.word))
                self.raw.append(self.text[self.word_start : self.pos])
        self.word, self.in_word = [], False

    def end_command(self) -> None:
        self.end_word()
        self.skip_next_word = False
        if self.words:
            self.commands.append(ShellCommand(self.words, self.start_line, self.raw))
        self.words, self.raw = [], []

    def add(self, text: str) -> None:
        if not self.in_word and not self.words:
            self.start_line = self.line
        self.word.append(text)
        self.in_word = True

    def run(self) -> list[ShellCommand]:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if not self.in_word:
                self.word_start = self.pos
            at_line_start = self.pos == 0 or text[self.pos - 1] == "\n"
            if at_line_start and not self.words and not self.in_word:
                prompt = _PROMPT.match(text, self.pos)
                if prompt:
                    self.pos = prompt.end()
                    continue
            if char in " \t\r\f\v":
                self.end_word()
                self.pos += 1
            elif char == "\n":
                self.end_command()
                self.line += 1
                self.pos += 1
            elif char == "#" and not self.in_word:
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif char == "\\":
                self.backslash()
            elif char == "'":
                self.single_quote()
            elif char == '"':
                self.double_quote()
            elif char == "$" and text[self.pos + 1 : self.pos + 2] in ("(", "{"):
                self.add(self.balanced(self.pos + 1))
            elif char == "`":
                self.add(self.backtick())
            elif char in "<>" or (char == "&" and text[self.pos + 1 : self.pos + 2] == ">"):
                self.redirection()
            elif char in _OPERATORS:
                self.end_command()
                self.pos += 1
            else:
                self.add(char)
                self.pos += 1
        self.end_command()
        return self.commands

    def backslash(self) -> None:
        text, pos = self.text, self.pos
        following = text[pos + 1 : pos + 3]
        if following.startswith("\n") or following == "\r\n":
            self.pos += 1 + (2 if following == "\r\n" else 1)
            self.line += 1
        elif following:
            self.add(following[0])
            self.pos += 2
        else:
            self.add("\\")
            self.pos += 1

    def single_quote(self) -> None:
        end = self.text.find("'", self.pos + 1)
        if end < 0:
            raise self.error("unterminated single quote", self.line)
        body = self.text[self.pos + 1 : end]
        self.add(body)
        self.line += body.count("\n")
        self.pos = end + 1

    def double_quote(self) -> None:
        text, start_line = self.text, self.line
        self.add("")  # `""` is an empty word, not nothing
        pos = self.pos + 1
        while pos < len(text):
            char = text[pos]
            if char == '"':
                self.pos = pos + 1
                return
            if char == "\\" and pos + 1 < len(text) and text[pos + 1] in '$`"\\\n':
                if text[pos + 1] == "\n":
                    self.line += 1
                else:
                    self.word.append(text[pos + 1])
                pos += 2
            elif char == "$" and text[pos + 1 : pos + 2] in ("(", "{"):
                self.pos = pos
                chunk = self.balanced(pos + 1)
                self.word.append(chunk)
                pos = self.pos
            elif char == "`":
                self.pos = pos
                self.word.append(self.backtick())
                pos = self.pos
            else:
                if char == "\n":
                    self.line += 1
                self.word.append(char)
                pos += 1
        raise self.error("unterminated double quote", start_line)

    def balanced(self, open_at: int) -> str:
        """`$(...)` or `${...}` kept verbatim, nesting and quotes inside respected."""
        text = self.text
        opener = text[open_at]
        closer = ")" if opener == "(" else "}"
        depth, pos, quote = 0, open_at, ""
        while pos < len(text):
            char = text[pos]
            if quote:
                if char == quote:
                    quote = ""
                elif char == "\\" and quote == '"':
                    pos += 1
            elif char in "'\"":
                quote = char
            elif char == "\\":
                pos += 1
            elif char == opener:
                depth += 1
            elif char == closer:
                depth -= 1
                if depth == 0:
                    chunk = text[self.pos : pos + 1]
                    self.line += chunk.count("\n")
                    self.pos = pos + 1
                    return chunk
            pos += 1
        raise self.error(f"unterminated ${opener}", self.line)

    def backtick(self) -> str:
        pos = self.pos + 1
        while pos < len(self.text):
            if self.text[pos] == "\\":
                pos += 2
                continue
            if self.text[pos] == "`":
                chunk = self.text[self.pos : pos + 1]
                self.line += chunk.count("\n")
                self.pos = pos + 1
                return chunk
            pos += 1
        raise self.error("unterminated backtick", self.line)

    def redirection(self) -> None:
        """Drop `N>file`, `>>file`, `2>&1`, `&>file`, `<file`: they are not arguments."""
        if self.in_word and "".join(self.word).isdigit():
            self.word, self.in_word = [], False  # the fd number belongs to the redirection
        else:
            self.end_word()
        match = _REDIRECT.match(self.text, self.pos)
        self.pos = match.end() if match else self.pos + 1
        self.skip_next_word = True


def split_commands(text: str) -> list[ShellCommand]:
    """Split shell text into simple commands, in order. Raises LaunchParseError on bad quoting."""
    return _Lexer(text).run()


_PASSTHROUGH = frozenset({"$@", '"$@"', "${@}", '"${@}"', "$*", '"$*"', "${*}", '"${*}"'})


def drop_passthrough(command: ShellCommand) -> list[str]:
    """The words without a trailing `"$@"`: a wrapper script passing its own arguments on adds no flag."""
    count = len(command.words)
    while count and command.raw[count - 1] in _PASSTHROUGH:
        count -= 1
    return command.words[:count]


def strip_reserved(words: list[str]) -> list[str]:
    """`then python ...` -> `python ...`: shell keywords in front of a command are not the command."""
    start = 0
    while start < len(words) and words[start] in _RESERVED_PREFIX:
        start += 1
    return words[start:]


def is_assignment(word: str) -> bool:
    return _ASSIGNMENT.match(word) is not None


@dataclass
class ShellEnv:
    """What a script has exported by a given point: `export`, `set -a`, `unset`, `VAR=x; export VAR`."""

    exported: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    allexport: bool = False

    def apply(self, words: list[str]) -> bool:
        """Update from one command; True when the command only changed the environment."""
        head = words[0]
        if all(is_assignment(word) for word in words):
            for word in words:
                name, _, value = word.partition("=")
                self.variables[name] = value
                if self.allexport:
                    self.exported[name] = value
            return True
        if head in ("export", "declare", "typeset") and (head == "export" or "-x" in words[1:]):
            for word in words[1:]:
                name, eq, value = word.partition("=")
                if eq and is_assignment(word):
                    self.variables[name] = self.exported[name] = value
                elif name in self.variables:
                    self.exported[name] = self.variables[name]
            return True
        if head == "unset":
            for name in words[1:]:
                self.exported.pop(name, None)
                self.variables.pop(name, None)
            return True
        if head == "set":
            for option in words[1:]:
                if option[:1] in "-+" and "a" in option[1:] and not option.startswith("--"):
                    self.allexport = option.startswith("-")
            if "allexport" in words:
                self.allexport = words[words.index("allexport") - 1] == "-o"
            return True
        return False


def basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]
