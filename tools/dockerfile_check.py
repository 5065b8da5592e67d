"""A small reader of the repository's Dockerfile and .dockerignore, for checks without a Docker engine.

Why: no Docker engine runs on the machines that test flagbot, yet a broken image (a COPY of a
file the build context does not carry, an entrypoint outside the venv the builder made, a secret
in an ENV) must still fail a test. This reads the instructions the way Docker does for the parts
the tests need: continuation lines, stages (`FROM ... AS name`), exec-form JSON arguments, and
.dockerignore's last-match-wins patterns. It is not a full Dockerfile parser (no heredocs, no
variable expansion beyond `ARG` defaults used in `FROM`).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Instruction:
    keyword: str
    """Upper case: `COPY`, `RUN`, ..."""
    text: str
    """The arguments, continuation lines joined."""
    line: int

    def exec_form(self) -> list[str] | None:
        """`["a", "b"]` arguments as a list; None for the shell form."""
        text = self.text.strip()
        if not text.startswith("["):
            return None
        value = json.loads(text)
        return [str(word) for word in value]

    def words(self) -> list[str]:
        return shlex.split(self.text)


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None

    def env(self) -> dict[str, str]:
        """Every `ENV key=value` of the stage (later wins); the legacy `ENV key value` form too."""
        values: dict[str, str] = {}
        for instruction in self.all("ENV"):
            words = instruction.words()
            if words and "=" not in words[0]:
                values[words[0]] = " ".join(words[1:])
                continue
            for word in words:
                key, _, value = word.partition("=")
                values[key] = value
        return values


@dataclass(frozen=True)
class Copy:
    sources: list[str]
    dest: str
    from_stage: str | None
    line: int


def instructions(text: str) -> list[Instruction]:
    """Instructions in order; comments and blank lines dropped, `\\` continuations joined."""
    found: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment line inside a continued instruction is skipped by Docker too
        if not pending:
            start = number
        continued = stripped.endswith("\\")
        pending.append(stripped[:-1].strip() if continued else stripped)
        if not continued:
            joined = " ".join(part for part in pending if part)
            keyword, _, rest = joined.partition(" ")
            found.append(Instruction(keyword.upper(), rest.strip(), start))
            pending = []
    return found


def _arg_defaults(found: list[Instruction]) -> dict[str, str]:
    defaults: dict[str, str] = {}
    for instruction in found:
        if instruction.keyword == "FROM":
            break
        if instruction.keyword == "ARG":
            key, _, value = instruction.text.partition("=")
            defaults[key.strip()] = value.strip()
    return defaults


def stages(text: str) -> list[Stage]:
    """The build stages, each with its base image (global `ARG` defaults expanded) and name."""
    found = instructions(text)
    args = _arg_defaults(found)
    result: list[Stage] = []
    for instruction in found:
        if instruction.keyword == "FROM":
            words = instruction.words()
            base = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), words[0])
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            result.append(Stage(base, name))
        elif result:
            result[-1].instructions.append(instruction)
    return result


def copies(stage: Stage) -> list[Copy]:
    """The stage's COPY (and ADD) instructions with their `--from=` stage, sources and destination."""
    found = []
    for instruction in stage.instructions:
        if instruction.keyword not in ("COPY", "ADD"):
            continue
        words = instruction.exec_form() or instruction.words()
        options = [w for w in words if w.startswith("--")]
        paths = [w for w in words if not w.startswith("--")]
        from_stage = next((o.split("=", 1)[1] for o in options if o.startswith("--from=")), None)
        found.append(Copy(paths[:-1], paths[-1], from_stage, instruction.line))
    return found


# --- .dockerignore ----------------------------------------------------------------------------------


def _pattern(text: str) -> re.Pattern[str]:
    parts = []
    index = 0
    while index < len(text):
        if text.startswith("**/", index):
            parts.append("(?:.*/)?")
            index += 3
        elif text.startswith("**", index):
            parts.append(".*")
            index += 2
        elif text[index] == "*":
            parts.append("[^/]*")
            index += 1
        elif text[index] == "?":
            parts.append("[^/]")
            index += 1
        else:
            parts.append(re.escape(text[index]))
            index += 1
    return re.compile("".join(parts) + r"\Z")


def ignore_rules(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    """(excluded?, pattern) per line; `!` lines re-include. Paths are cleaned as Docker does."""
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        body = line[1:].strip() if negate else line
        body = body.strip("/").removeprefix("./") or "."
        rules.append((not negate, _pattern(body)))
    return rules


def ignored(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last pattern matching the path, or any directory above it, decides."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    decision = False
    for excluded, pattern in rules:
        if any(pattern.match(prefix) for prefix in prefixes):
            decision = excluded
    return decision
