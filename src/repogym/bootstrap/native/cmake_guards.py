"""Which CMake calls a configuration reaches: the ``if()`` blocks around each call (and around
the ``add_subdirectory`` that pulls its file in), judged under known option values.

Conditions are evaluated in three values (true, false, unknown): option names, ``NOT``,
``AND``, ``OR``, parentheses and boolean constants are understood; anything else (comparisons,
``DEFINED``, ``TARGET``, variables that are not options) is unknown. A call counts as unreached
only when its guards are certainly false, so what this module cannot read stays reached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from repogym.bootstrap.native.cmake_scan import CMakeFiles

Guard = tuple[str, bool]
"""An enclosing condition and the truth the call needs (False inside ``else()``)."""

_TRUE = {"ON", "TRUE", "YES", "Y"}
_FALSE = {"OFF", "FALSE", "NO", "N", "IGNORE", "NOTFOUND", ""}
_BINARY = re.compile(
    r"^(STREQUAL|STRLESS|STRGREATER|EQUAL|LESS|GREATER|LESS_EQUAL|GREATER_EQUAL|MATCHES|"
    r"VERSION_\w+|STRLESS_EQUAL|STRGREATER_EQUAL|IN_LIST|IS_NEWER_THAN|PATH_EQUAL)$",
    re.I,
)
_UNARY = re.compile(
    r"^(DEFINED|TARGET|EXISTS|COMMAND|POLICY|TEST|IS_DIRECTORY|IS_ABSOLUTE|IS_SYMLINK)$", re.I
)
_CALL = re.compile(r"(?<![\w$])([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class Guarded:
    """One call with the conditions that must hold for CMake to reach it."""

    file: str
    args: str
    guards: tuple[Guard, ...]


def _calls_in(text: str) -> list[tuple[str, str]]:
    """``(command, arguments)`` of every call in the text, in order (balanced parentheses,
    quoted strings skipped)."""
    found: list[tuple[str, str]] = []
    pos = 0
    while True:
        m = _CALL.search(text, pos)
        if m is None:
            return found
        depth, i, quoted = 1, m.end(), False
        while i < len(text) and depth:
            ch = text[i]
            if ch == "\\" and quoted:
                i += 1
            elif ch == '"':
                quoted = not quoted
            elif not quoted and ch in "()":
                depth += 1 if ch == "(" else -1
            i += 1
        found.append((m.group(1).lower(), text[m.end() : i - 1]))
        pos = i


def _guarded_in(text: str) -> list[tuple[str, str, tuple[Guard, ...]]]:
    """Every call of the text with its enclosing ``if``/``elseif``/``else`` conditions."""
    stack: list[list[Guard]] = []
    out = []
    for name, args in _calls_in(text):
        if name == "if":
            stack.append([(args, True)])
        elif name == "elseif" and stack:
            stack[-1] = [(c, False) for c, _ in stack[-1]] + [(args, True)]
        elif name == "else" and stack:
            stack[-1] = [(c, False) for c, _ in stack[-1]]
        elif name == "endif" and stack:
            stack.pop()
        else:
            out.append((name, args, tuple(g for level in stack for g in level)))
    return out


class GuardedFiles:
    """The calls of a project's CMake files with their guards (file guards included)."""

    def __init__(self, files: CMakeFiles) -> None:
        self._texts = {**files.texts, **files.foreign}
        self._calls = {path: _guarded_in(text) for path, text in self._texts.items()}
        self._own = set(files.texts)
        self._dir_guards: dict[str, tuple[Guard, ...]] = {}
        self._entered: dict[str, tuple[str, tuple[Guard, ...]]] = {}
        for path, calls in self._calls.items():
            for name, args, guards in calls:
                words = args.split()
                if name != "add_subdirectory" or not words or "$" in words[0]:
                    continue
                target = (Path(path).parent / words[0].strip('"')).as_posix()
                self._entered.setdefault(target.removeprefix("./"), (path, guards))

    def _file_guards(self, path: str, seen: frozenset[str] = frozenset()) -> tuple[Guard, ...]:
        folder = Path(path).parent.as_posix()
        if folder == "." or folder in seen:
            return ()
        if folder not in self._dir_guards:
            entry = self._entered.get(folder)
            if entry is None:
                self._dir_guards[folder] = ()
            else:
                parent, guards = entry
                self._dir_guards[folder] = self._file_guards(parent, seen | {folder}) + guards
        return self._dir_guards[folder]

    def calls(self, name: str, *, foreign: bool = False) -> list[Guarded]:
        """Every call of ``name`` (lower case) with all its guards."""
        found = []
        for path, calls in self._calls.items():
            if not foreign and path not in self._own:
                continue
            for command, args, guards in calls:
                if command == name:
                    found.append(Guarded(path, args, self._file_guards(path) + guards))
        return found

    def calls_in(self, name: str, folder: str) -> list[Guarded]:
        """The ``add_subdirectory``-style calls of ``name`` whose first argument resolves to
        ``folder`` or below it."""
        found = []
        for call in self.calls(name, foreign=True):
            words = call.args.split()
            if not words or "$" in words[0]:
                continue
            target = (Path(call.file).parent / words[0].strip('"')).as_posix().removeprefix("./")
            if target == folder or target.startswith(folder + "/"):
                found.append(call)
        return found


def reached(guards: tuple[Guard, ...], values: dict[str, str]) -> bool | None:
    """Whether the guards hold under ``values`` (option name → value): None when unknown."""
    result: bool | None = True
    for condition, wanted in guards:
        truth = evaluate(condition, values)
        if truth is None:
            result = None
        elif truth != wanted:
            return False
    return result


def switches(
    guards: tuple[Guard, ...], values: dict[str, str], options: set[str]
) -> list[tuple[str, str]]:
    """``(option, value)`` settings, one option each, that make the guards certainly false."""
    found = []
    names = {w for c, _ in guards for w in re.findall(r"[A-Za-z_][\w-]*", c)} & options
    for name in sorted(names):
        for value in ("OFF", "ON"):
            if values.get(name, "").upper() == value:
                continue
            if reached(guards, {**values, name: value}) is False:
                found.append((name, value))
                break
    return found


def evaluate(condition: str, values: dict[str, str]) -> bool | None:
    """A condition's truth in three values (None: this reading cannot tell)."""
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|\(|\)|[^\s()]+', condition)
    try:
        value, rest = _or(tokens, values)
    except IndexError:
        return None
    return value if not rest else None


_Result = tuple[bool | None, list[str]]


def _or(tokens: list[str], values: dict[str, str]) -> _Result:
    left, tokens = _and(tokens, values)
    while tokens and tokens[0].upper() == "OR":
        right, tokens = _and(tokens[1:], values)
        left = True if True in (left, right) else (None if None in (left, right) else False)
    return left, tokens


def _and(tokens: list[str], values: dict[str, str]) -> _Result:
    left, tokens = _not(tokens, values)
    while tokens and tokens[0].upper() == "AND":
        right, tokens = _not(tokens[1:], values)
        left = False if False in (left, right) else (None if None in (left, right) else True)
    return left, tokens


def _not(tokens: list[str], values: dict[str, str]) -> _Result:
    if tokens[0].upper() == "NOT":
        value, rest = _not(tokens[1:], values)
        return (None if value is None else not value), rest
    if tokens[0] == "(":
        value, rest = _or(tokens[1:], values)
        if not rest or rest[0] != ")":
            raise IndexError("unbalanced")
        return value, rest[1:]
    if _UNARY.match(tokens[0]):
        return None, tokens[2:]
    if len(tokens) > 2 and _BINARY.match(tokens[1]):
        return None, tokens[3:]
    return _atom(tokens[0], values), tokens[1:]


def _atom(token: str, values: dict[str, str]) -> bool | None:
    word = token.strip('"')
    m = re.fullmatch(r"\$\{(\w+)\}", word)
    name = m.group(1) if m else word
    if name in values:
        return _constant(values[name])
    if m is None:
        return _constant(word) if word.upper() in _TRUE | _FALSE or word.isdigit() else None
    return None


def _constant(value: str) -> bool | None:
    upper = value.strip('"').upper()
    if upper in _TRUE or (upper.isdigit() and upper != "0"):
        return True
    if upper in _FALSE or upper == "0" or upper.endswith("-NOTFOUND"):
        return False
    return None
