"""Secrets stay on the node: the one redaction every output of flagbot goes through.

Why one function in a low layer: a secret reaches flagbot from a unit's `ExecStart=` (a flag such
as `--api-key`), its `Environment=` (a name such as `HF_TOKEN`) or a journal line that echoes
either (SGLang's `server_args=ServerArgs(..., api_key='...')`), and leaves it through Slack, the
console, the log, the store and the digest. Each of those boundaries calls `redact` (text) or
`redact_data` (JSON-like values), so the rules live here once:

* a secret flag's value in a command line: `--api-key VALUE`, `--api-key=VALUE`, quoted or in a
  Python list (`'--api-key', 'VALUE'`); a flag is secret when its name matches
  `[redaction] secret_flags` (and `api_key=...`, the flag's Python spelling, counts as the flag);
* a secret name's value in an assignment: `NAME=VALUE`, `NAME: VALUE`, `"NAME": "VALUE"`, for
  names matching `[redaction] secret_names` (case-sensitive, as environment names are);
* every value so redacted, and every value `remember` was told (the target's secret flags and
  environment as read from the unit), wherever it appears afterwards: a journal line that echoes
  the key alone is masked too.

A value written exactly as a reference, `${NAME}`, is not a secret (systemd expands it from an
`EnvironmentFile=` when the unit starts) and is shown as written.

The redaction is process-wide: the settings last validated configure it (`configure`), and the
values it has seen are kept for the life of the process (`remember`).
"""

from __future__ import annotations

import fnmatch
import io
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TextIO, TypeVar, cast

_T = TypeVar("_T")

MASK = "********"
"""What a secret value is replaced by (as pydantic's `SecretStr` shows one)."""

DEFAULT_SECRET_NAMES: tuple[str, ...] = ("*TOKEN*", "*SECRET*", "*PASSWORD*", "*_KEY")
DEFAULT_SECRET_FLAGS: tuple[str, ...] = (
    "--api-key",
    "--admin-api-key",
    "--*-api-key",
    "--*-token",
    "--*secret*",
    "--*password*",
)
MIN_REMEMBERED = 6
"""Shorter values are not replaced wherever they appear (a key of `1` would mask every digit)."""
_PLAIN = re.compile(r"[0-9.eE+-]+|true|false|True|False|/\S*")
"""Nor numbers, booleans and paths: `SGLANG_MAX_TOKENS=1833679` matches `*TOKEN*`, and masking
1833679 everywhere would hide the capacity tables; such a value is masked where it is assigned."""

REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
"""`${NAME}`: a reference systemd expands at start (from `Environment=` or `EnvironmentFile=`)."""

_VALUE = r"""(?P<val>(?>\$\{[A-Za-z_][A-Za-z0-9_]*\}|(?<=")(?:[^"\\\n]|\\.)*|(?<=')[^'\n]*|[^\s'",\]\)}]+)(?!['"]?[ \t]*:))"""
_FLAG_VALUE = re.compile(
    r"(?P<flag>--[A-Za-z0-9][A-Za-z0-9_.-]*)"
    r"(?P<sep>['\"][ \t]*[=,:][ \t]*['\"]?|=['\"]?|[ \t]+['\"]?)" + _VALUE
)
"""`--flag VALUE`, `--flag=VALUE`, `'--flag', 'VALUE'`, `"--flag": "VALUE"` (a `,` or `:` only after a quote)."""
_ITEM_VALUE = re.compile(
    r"""(?P<q>['"])flag(?P=q)[ \t]*:[ \t]*['"](?P<flag>--[A-Za-z0-9][A-Za-z0-9_.-]*)['"][ \t]*,[ \t]*"""
    r"""['"]value['"][ \t]*:[ \t]*['"]""" + _VALUE
)
"""A flag item as JSON or a Python dict: `{"flag": "--api-key", "value": "..."}`."""
_NAME_VALUE = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?P<sep>['\"][ \t]*[=:][ \t]*['\"]?|[ \t]*:[ \t]*['\"]|[ \t]*=[ \t]*['\"]?)" + _VALUE
)
"""`NAME=VALUE`, `"NAME": "VALUE"`, `NAME: 'VALUE'`: a `:` only next to a quote, so prose such as
`SLACK_BOT_TOKEN: set` is left alone."""


_SCALARS = frozenset({int, float, bool})
"""The JSON scalars a stored row holds besides strings and None: nothing in them to mask."""


class Redactor:
    """The secret names and flags of the settings, and the secret values seen so far."""

    def __init__(
        self,
        secret_names: Sequence[str] = DEFAULT_SECRET_NAMES,
        secret_flags: Sequence[str] = DEFAULT_SECRET_FLAGS,
    ) -> None:
        self.secret_names = tuple(secret_names)
        self.secret_flags = tuple(flag.lower() for flag in secret_flags)
        self._known: set[str] = set()
        self._lock = threading.Lock()
        self._known_pattern: re.Pattern[str] | None = None
        self._name_verdicts: dict[str, bool] = {}
        self._flag_verdicts: dict[str, bool] = {}
        self._key_verdicts: dict[str, bool] = {}
        self._redacted_parts: dict[str, tuple[re.Pattern[str] | None, str]] = {}
        self._redacted_chars = 0

    # --- what is secret ------------------------------------------------------------------

    def is_secret_name(self, name: str) -> bool:
        """An environment-style name (`HF_TOKEN`) matching `secret_names`, or a secret flag's
        Python spelling (`api_key` for `--api-key`). Kept per name: every key of every stored row is asked."""
        verdict = self._name_verdicts.get(name)
        if verdict is None:
            verdict = any(fnmatch.fnmatchcase(name, pattern) for pattern in self.secret_names) or (
                not name.startswith("-") and self.is_secret_flag("--" + name.replace("_", "-"))
            )
            _bounded_put(self._name_verdicts, name, verdict)
        return verdict

    def is_secret_flag(self, flag: str) -> bool:
        """A command-line flag (`--api-key`; `--api-key=...` is judged by its name) matching `secret_flags`."""
        verdict = self._flag_verdicts.get(flag)
        if verdict is None:
            name = flag.partition("=")[0].lower()
            verdict = any(fnmatch.fnmatchcase(name, pattern) for pattern in self.secret_flags)
            _bounded_put(self._flag_verdicts, flag, verdict)
        return verdict

    # --- values seen ---------------------------------------------------------------------

    def remember(self, values: Iterable[str]) -> None:
        """Mask these values wherever they appear from now on (references, short values, numbers,
        booleans and absolute paths are skipped: see `_PLAIN`)."""
        fresh = {
            value
            for value in values
            if isinstance(value, str)
            and len(value) >= MIN_REMEMBERED
            and value != MASK
            and not REFERENCE.fullmatch(value)
            and not _PLAIN.fullmatch(value)
        }
        with self._lock:
            if fresh - self._known:
                self._known |= fresh
                ordered = sorted(self._known, key=len, reverse=True)  # the longest first
                self._known_pattern = re.compile("|".join(re.escape(value) for value in ordered))

    def remember_launch(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        """The secret values of a launch line: secret flags' values in `argv`, secret names in `env`."""
        values = [value for name, value in env.items() if self.is_secret_name(name)]
        for index, word in enumerate(argv):
            flag, eq, value = word.partition("=")
            if not flag.startswith("--") or not self.is_secret_flag(flag):
                continue
            if eq:
                values.append(value)
            elif index + 1 < len(argv) and not argv[index + 1].startswith("--"):
                values.append(argv[index + 1])
        self.remember(values)

    def remember_mapping(self, mapping: Mapping[str, object]) -> None:
        """The values under secret names (`api_key` of SGLang's printed `server_args`, `HF_TOKEN`)."""
        self.remember(
            str(value) for key, value in mapping.items() if value is not None and self.is_secret_name(key)
        )

    # --- redaction -----------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """`text` with every secret value masked (see the module's rules)."""
        if not text:
            return text
        learned: list[str] = []
        out = text
        # Each pattern needs a literal of its own; most stored strings (step names, numbers' text,
        # prose) have none and skip the regex scan.
        if "--" in out:
            out = _scan(_FLAG_VALUE, out, "flag", self.is_secret_flag, learned)
        if "flag" in out:
            out = _scan(_ITEM_VALUE, out, "flag", self.is_secret_flag, learned)
        if "=" in out or ":" in out:
            out = _scan(_NAME_VALUE, out, "name", self.is_secret_name, learned)
        if learned:
            self.remember(learned)
        pattern = self._known_pattern
        return pattern.sub(MASK, out) if pattern is not None else out

    def redact_argv(self, argv: Sequence[str]) -> list[str]:
        """An argv with the values of secret flags masked (`--api-key X` and `--api-key=X`)."""
        out: list[str] = []
        secret_next = False
        for word in argv:
            if secret_next and not word.startswith("--") and not _shown(word):
                self.remember([word])
                out.append(MASK)
            else:
                out.append(self.redact(word))
            flag, eq, _ = word.partition("=")
            secret_next = not eq and flag.startswith("--") and self.is_secret_flag(flag)
        return out

    def redact_data(self, value: _T) -> _T:
        """A JSON-like value with secrets masked: values under secret names or flags, a flag
        item `{"flag": "--api-key", "value": ...}`, and every string by `redact`."""
        if type(value) is dict:
            return cast(_T, self._mapping(cast(dict[object, object], value), self._part))
        return cast(_T, self._data(value))

    def _part(self, value: object) -> object:
        """`_data` of one top-level part of a mapping, answered from the last time the same part
        was redacted while no new secret was learned. A run's state is written whole at every
        step and most of its parts (the preflight's report, the starts' `server_args`) have not
        changed since the step before: walking them again was most of a checkpoint's cost
        (issue 16 item 9). Only plain JSON is kept (its text read back equals it), and the
        answer is a fresh copy (`json.loads`), so a caller may change what it gets."""
        if type(value) is not dict and type(value) is not list:
            return self._data(value)
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):  # not JSON (a set, an object): the long way
            return self._data(value)
        if json.loads(text) != value:  # a tuple, a number as a key: JSON would change it
            return self._data(value)
        pattern = self._known_pattern
        kept = self._redacted_parts.get(text)
        if kept is not None and kept[0] is pattern:
            return json.loads(kept[1])
        redacted = self._data(value)
        if self._known_pattern is pattern:  # nothing learned meanwhile
            redacted_text = json.dumps(redacted)
            size = len(text) + len(redacted_text)
            if len(self._redacted_parts) >= _PARTS_KEPT or self._redacted_chars + size > _PARTS_CHARS:
                self._redacted_parts.clear()
                self._redacted_chars = 0
            if size <= _PARTS_CHARS:
                self._redacted_parts[text] = (pattern, redacted_text)
                self._redacted_chars += size
        return redacted

    def is_secret_key(self, key: str) -> bool:
        """A mapping key under which a value is masked: a secret name or a secret flag. Kept per
        key, like the two verdicts it joins: a stored row's keys are asked at every write."""
        verdict = self._key_verdicts.get(key)
        if verdict is None:
            verdict = self.is_secret_name(key) or self.is_secret_flag(key)
            _bounded_put(self._key_verdicts, key, verdict)
        return verdict

    def _data(self, value: object) -> object:
        # Exact types first: a stored row is plain JSON (dict, list, str, numbers), and the
        # `Mapping` ABC check below costs several calls per value; subclasses take the long way.
        if type(value) is str:
            return self.redact(value)
        if type(value) is dict:
            return self._mapping(value)
        if type(value) is list:
            return [self._data(item) for item in value]
        if value is None or type(value) in _SCALARS:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, Mapping):
            return self._mapping(value)
        if isinstance(value, list | tuple):
            items = [self._data(item) for item in value]
            return items if isinstance(value, list) else tuple(items)
        return value

    def _mapping(
        self, value: Mapping[object, object], inner: Callable[[object], object] | None = None
    ) -> dict[object, object]:
        data = inner or self._data
        flag = value.get("flag")
        secret_item = isinstance(flag, str) and self.is_secret_flag(flag)
        verdicts = self._key_verdicts
        out: dict[object, object] = {}
        for key, item in value.items():
            if type(key) is str:
                secret = verdicts.get(key)
                if secret is None:
                    secret = self.is_secret_key(key)
            else:
                secret = isinstance(key, str) and self.is_secret_key(key)
            secret = secret or (secret_item and key == "value")
            out[key] = self._mask_value(item) if secret else data(item)
        return out

    def _mask_value(self, value: object) -> object:
        if value is None or isinstance(value, bool) or (isinstance(value, str) and _shown(value)):
            return value
        if isinstance(value, list | tuple):
            return [self._mask_value(item) for item in value]
        if isinstance(value, Mapping):
            return self._data(value)
        self.remember([str(value)])
        return MASK


def _scan(
    pattern: re.Pattern[str], text: str, key: str, secret: Callable[[str], bool], learned: list[str]
) -> str:
    """Mask the value of each match of `pattern` whose `key` group is secret. A match that is not
    secret consumes only its key and separator, so its value is scanned in turn (the value of
    `Environment="HF_TOKEN=..."` or of `--flag --api-key ...` may itself hold a secret)."""
    parts: list[str] = []
    pos = 0
    while (match := pattern.search(text, pos)) is not None:
        value = match["val"]
        if secret(match[key]) and not value.startswith("--") and not _shown(value):
            parts += [text[pos : match.start("val")], MASK]
            learned.append(value)
            pos = match.end()
        else:
            parts.append(text[pos : match.start("val")])
            pos = match.start("val")
            if pos == match.start():  # nothing consumed (cannot happen: the key is never empty)
                parts.append(text[pos])
                pos += 1
    parts.append(text[pos:])
    return "".join(parts)


_VERDICTS_KEPT = 4096
"""How many names' secret-or-not answers a redactor keeps (the keys of stored rows repeat; a flood
of distinct names must not grow the process without bound)."""


_PARTS_KEPT = 256
"""How many redacted parts of rows a redactor keeps (a run's state has about twenty)."""
_PARTS_CHARS = 8_000_000
"""How many characters of parts and their redactions a redactor keeps at most (a run's state is
tens of kilobytes; Slack's payloads pass here too, and must not grow the process without bound)."""


def _bounded_put(verdicts: dict[str, bool], name: str, verdict: bool) -> None:
    if len(verdicts) >= _VERDICTS_KEPT:
        verdicts.clear()
    verdicts[name] = verdict


def _shown(value: str) -> bool:
    """A value shown as it is: empty, unset (`None`, `null`), already masked, or a `${NAME}` reference."""
    return not value or value in (MASK, "None", "null") or REFERENCE.fullmatch(value) is not None


_redactor = Redactor()


def redactor() -> Redactor:
    """The process's redaction (configured by the settings last validated)."""
    return _redactor


def configure(secret_names: Sequence[str], secret_flags: Sequence[str]) -> None:
    """Use these names and flags from now on (the values already seen stay masked)."""
    global _redactor
    if (
        tuple(secret_names) == _redactor.secret_names
        and tuple(f.lower() for f in secret_flags) == _redactor.secret_flags
    ):
        return
    fresh = Redactor(secret_names, secret_flags)
    fresh.remember(_redactor._known)
    _redactor = fresh


def redact(text: str) -> str:
    return _redactor.redact(text)


def redact_data(value: _T) -> _T:
    return _redactor.redact_data(value)


def redact_argv(argv: Sequence[str]) -> list[str]:
    return _redactor.redact_argv(argv)


def remember(values: Iterable[str]) -> None:
    _redactor.remember(values)


def remember_launch(argv: Sequence[str], env: Mapping[str, str]) -> None:
    _redactor.remember_launch(argv, env)


# --- the log -------------------------------------------------------------------------------


class _RedactingFactory:
    """A log record factory: each record's message (and its traceback) is redacted as it is made,
    so every handler, the test's caplog included, sees only the redacted text."""

    def __init__(self, inner: Callable[..., logging.LogRecord]) -> None:
        self.inner = inner

    def __call__(self, *args: object, **kwargs: object) -> logging.LogRecord:
        record: logging.LogRecord = self.inner(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it itself when it formats
            return record
        record.msg, record.args = redact(message), ()
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return record


def install_log_redaction() -> None:
    """Redact every log record of the process from now on (idempotent)."""
    current = logging.getLogRecordFactory()
    if not isinstance(current, _RedactingFactory):
        logging.setLogRecordFactory(_RedactingFactory(current))


# --- the console ---------------------------------------------------------------------------


class RedactingStream(io.TextIOBase):
    """A text stream that redacts what is written to `inner`, a line at a time (so a secret
    written in two pieces is still seen whole)."""

    def __init__(self, inner: TextIO) -> None:
        super().__init__()
        self.inner = inner
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        head, newline, tail = self._pending.rpartition("\n")
        if newline:
            self.inner.write(redact(head + newline))
            self._pending = tail
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.inner.write(redact(self._pending))
            self._pending = ""
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")

    def writable(self) -> bool:
        return True
