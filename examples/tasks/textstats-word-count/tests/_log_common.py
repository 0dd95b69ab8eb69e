#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""The parsers' shared ground: statuses, ``ParseResult``, what one parser found (``Out``),
the worst-of merge, the cleaning of log text, ids qualified where names repeat.

Part of the log parsers (see ``parsers/__init__.py``, shipped into tasks as ``parsers.py``):
standard library only, Python 3.6+ syntax, copied beside it into each generated task's ``tests/``.
"""

import re

# Some typing names appear only in type comments, which ruff does not read (hence F401).
from typing import Dict, List, Optional, Tuple  # noqa: F401

PASSED = "PASSED"
FAILED = "FAILED"
SKIPPED = "SKIPPED"
ERROR = "ERROR"

RUNNERS = (
    "pytest",
    "unittest",
    "jest",
    "vitest",
    "mocha",
    "node",
    "go",
    "cargo",
    "nextest",
    "ctest",
    "maven",
)

RANK = {SKIPPED: 0, PASSED: 1, ERROR: 2, FAILED: 3}
MAX_MESSAGE = 300
"""Longest failure message kept (characters)."""
MAX_FAILURES = 2000
"""Most failure messages kept per log."""


class ParseResult:
    """Outcome of parsing one log: runner, ``tests`` (id -> status), status and warnings.

    ``status`` is ``ok`` (at least one test), ``empty`` (runner recognised, no tests) or
    ``unparsed`` (no parser understood the log).  ``failures`` maps FAILED/ERROR ids to the
    short failure message the log gives for them (only where one was found).
    """

    def __init__(
        self,
        runner: Optional[str] = None,
        tests: Optional[Dict[str, str]] = None,
        status: str = "unparsed",
        warnings: Optional[List[str]] = None,
        failures: Optional[Dict[str, str]] = None,
    ) -> None:
        self.runner = runner
        self.tests = tests if tests is not None else {}
        self.status = status
        self.warnings = warnings if warnings is not None else []
        self.failures = failures if failures is not None else {}

    def to_dict(self) -> dict:
        """Plain-data form (what the CLI prints)."""
        return {
            "runner": self.runner,
            "status": self.status,
            "tests": dict(self.tests),
            "warnings": list(self.warnings),
            "failures": dict(self.failures),
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParseResult) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return (
            f"ParseResult(runner={self.runner!r}, status={self.status!r}, "
            f"tests={len(self.tests)} ids, warnings={self.warnings!r})"
        )


class Out:
    """What one parser found."""

    def __init__(self) -> None:
        self.tests = {}  # type: Dict[str, str]
        self.recognised = False
        self.warnings = []  # type: List[str]
        self.failures = {}  # type: Dict[str, str]  # id -> failure message

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)


def worst(tests: Dict[str, str], tid: str, status: str) -> None:
    old = tests.get(tid)
    if old is None or RANK[status] > RANK[old]:
        tests[tid] = status


def override(into: Dict[str, str], new: Dict[str, str]) -> None:
    for tid, status in new.items():
        into[tid] = status


TRUNCATED = "log looks truncated: no end-of-run summary after the last results"
CUT_SHORT = "log cut short"
"""Prefix of the warning that says why a JavaScript runner's log ends early (results up to the
cut are kept): ``log cut short: process.exit called with "1" (jest stops the whole run)``."""


# Cleaning


_SGR = re.compile(r"\x1b\[[0-9;]*m")
_MOVE = r"\[[0-9;]*[ABEFGHf]|\[2K|\[[23]J"  # cursor movements and line/screen erases
_ESCAPES = re.compile(
    r"\x1b(?!" + _MOVE + r")(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])?"
)
_MOVES = r"(?:\x1b(?:" + _MOVE + r"))+"
_MOVE_AT_EDGE = re.compile(r"(^|\n)" + _MOVES + r"|" + _MOVES + r"(?=\n|$)")
_MOVE_INSIDE = re.compile(_MOVES)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_text(text: str) -> str:
    """Strip ANSI colour/cursor codes and control characters; normalise line endings.

    A cursor movement inside a line (back to column 1, erase line, up a line, ...) means the
    text after it was drawn over a fresh line, so it becomes a line break; at either end of a
    line it is dropped.  Lone carriage returns (progress bars) also become line breaks.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if "\x1b" in text:
        text = _SGR.sub("", text)  # colours: by far the most common, so strip them cheaply first
    if "\x1b" in text:
        text = _ESCAPES.sub("", text)
        if "\x1b" in text:
            text = _MOVE_AT_EDGE.sub(r"\1", text)
            text = _MOVE_INSIDE.sub("\n", text)
    if "\r" in text:
        text = text.replace("\r", "\n")
    return _CONTROL.sub("", text)


def short_message(text: object) -> Optional[str]:
    """The first non-blank line of ``text`` without ANSI codes or control characters, cut to
    MAX_MESSAGE characters; None when nothing is left (or ``text`` is not a string)."""
    if not isinstance(text, str):
        return None
    for line in clean_text(text[: 64 * MAX_MESSAGE]).split("\n"):
        line = line.replace("\t", " ").strip()
        if line:
            if len(line) > MAX_MESSAGE:
                line = line[: MAX_MESSAGE - 3] + "..."
            return line
    return None


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def qualified_ids(entries: List[Tuple[Optional[str], str, str]], sep: str) -> List[str]:
    """The id of each (qualifier, name, status) entry: names that collide are qualified."""
    first = {}  # type: Dict[str, str]
    shared = set()
    for q, name, _ in entries:
        if q is not None and first.setdefault(name, q) != q:
            shared.add(name)
    return [q + sep + name if q is not None and name in shared else name for q, name, _ in entries]


def qualify(entries: List[Tuple[Optional[str], str, str]], sep: str) -> Dict[str, str]:
    """Turn (qualifier, name, status) entries into ids, qualifying names that collide."""
    tests = {}  # type: Dict[str, str]
    for i, tid in enumerate(qualified_ids(entries, sep)):
        tests[tid] = entries[i][2]
    return tests
