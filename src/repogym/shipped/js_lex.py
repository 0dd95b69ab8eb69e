#!/usr/bin/env python3
# ruff: noqa: UP006, UP035, UP045
"""A JavaScript / TypeScript lexer: source split into code and string literals.

Comments are blanked, and the contents of string, template and regex literals (delimiters and
``${...}`` code kept; newlines kept, so offsets and lines match the original); the literals come
back decoded with their offsets.  Regular-expression literals are guessed from the token before
the ``/``, as editors do.

This file is self-contained (standard library only, Python 3.6 to 3.13 syntax, no repogym
imports): pipelines copy it into each generated task's ``tests/`` folder beside ``tamper.py``,
which loads it from there.
"""

import re
from typing import Any, List, Optional, Tuple

__all__ = ["js_lex"]

_JS_CODE_STOP = re.compile(r"[/'\"`{}]")
_JS_TPL_STOP = re.compile(r"\\|`|\$\{")
_JS_REGEX_PREV = frozenset("(,=:[!&|?{};+-*%<>~^")
_JS_REGEX_WORDS = frozenset(
    [
        "return",
        "typeof",
        "case",
        "do",
        "else",
        "in",
        "of",
        "new",
        "delete",
        "void",
        "throw",
        "instanceof",
        "yield",
        "await",
    ]
)
_JS_ESC_RE = re.compile(r"\\(u\{[0-9a-fA-F]{1,6}\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|\r\n|[\s\S])")
_JS_SIMPLE_ESC = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


def _js_unescape(s: str) -> str:
    if "\\" not in s:
        return s

    def rep(m: Any) -> str:
        e = m.group(1)  # type: str
        if len(e) > 1 and e[0] == "u":
            code = int(e[2:-1] if e[1] == "{" else e[1:], 16)
            return chr(code) if code <= 0x10FFFF else ""
        if len(e) == 3 and e[0] == "x":
            return chr(int(e[1:], 16))
        if e in ("\n", "\r\n", "\r", "\u2028", "\u2029"):
            return ""
        return _JS_SIMPLE_ESC.get(e, e)

    return _JS_ESC_RE.sub(rep, s)


def _blank(out: List[str], start: int, end: int) -> None:
    for k in range(start, min(end, len(out))):
        if out[k] != "\n":
            out[k] = " "


def _js_regex_allowed(out: List[str], j: int) -> bool:
    """Whether a ``/`` at ``j`` starts a regular-expression literal (a guess, as editors make)."""
    k = j - 1
    while k >= 0 and out[k] in " \t\r\n":
        k -= 1
    if k < 0:
        return True
    ch = out[k]
    if ch in _JS_REGEX_PREV:
        return True
    if ch.isalnum() or ch in "_$":
        s = k
        while s >= 0 and (out[s].isalnum() or out[s] in "_$"):
            s -= 1
        return "".join(out[s + 1 : k + 1]) in _JS_REGEX_WORDS
    return False


def _js_regex_end(text: str, j: int) -> Optional[Tuple[int, int]]:
    """``(closing slash, end after flags)`` of a regex literal starting at ``j``, or None."""
    n = len(text)
    k = j + 1
    in_class = False
    while k < n:
        ch = text[k]
        if ch == "\\":
            k += 2
            continue
        if ch == "\n":
            return None
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
        elif ch == "/":
            close = k
            k += 1
            while k < n and (text[k].isalnum() or text[k] in "_$"):
                k += 1
            return close, k
        k += 1
    return None


def js_lex(text: str) -> Tuple[str, List[Tuple[int, int, str]]]:
    """Split JS/TS source into code and string literals.

    Returns the text with comments blanked and the contents of string, template and regex
    literals blanked (delimiters and ``${...}`` code kept; newlines kept, so offsets and lines
    match the original), and the literals as ``(start offset, end offset, decoded value)``.
    """
    n = len(text)
    out = list(text)
    strings = []  # type: List[Tuple[int, int, str]]
    frames = [["code", 0]]  # type: List[List[Any]]
    i = 0
    while i < n:
        top = frames[-1]
        if top[0] == "tpl":
            m = _JS_TPL_STOP.search(text, i)
            j = n if m is None else m.start()
            top[2].append(text[i:j])
            _blank(out, i, j)
            if m is None:
                strings.append((top[1], n, _js_unescape("".join(top[2]))))
                break
            tok = m.group(0)
            if tok == "\\":
                top[2].append(text[j : j + 2])
                _blank(out, j, j + 2)
                i = j + 2
            elif tok == "`":
                frames.pop()
                strings.append((top[1], j + 1, _js_unescape("".join(top[2]))))
                i = j + 1
            else:
                top[2].append("{}")
                frames.append(["code", 0])
                i = j + 2
            continue
        m = _JS_CODE_STOP.search(text, i)
        if m is None:
            break
        j = m.start()
        c = text[j]
        i = j + 1
        if c == "{":
            top[1] += 1
        elif c == "}":
            if top[1] == 0 and len(frames) > 1:
                frames.pop()
            else:
                top[1] = max(0, top[1] - 1)
        elif c == "/":
            nxt = text[j + 1 : j + 2]
            if nxt == "/":
                end = text.find("\n", j)
                i = n if end < 0 else end
                _blank(out, j, i)
            elif nxt == "*":
                end = text.find("*/", j + 2)
                i = n if end < 0 else end + 2
                _blank(out, j, i)
            elif _js_regex_allowed(out, j):
                span = _js_regex_end(text, j)
                if span is not None:
                    _blank(out, j + 1, span[0])
                    i = span[1]
        elif c in "'\"":
            k = j + 1
            while k < n:
                ch = text[k]
                if ch == "\\":
                    k += 2
                    continue
                if ch == c or ch == "\n":
                    break
                k += 1
            k = min(k, n)
            strings.append((j, k + 1, _js_unescape(text[j + 1 : k])))
            _blank(out, j + 1, k)
            i = k + 1
        else:
            frames.append(["tpl", j, []])
    return "".join(out), strings
