"""String constants and message templates of source files, and the literal fragments of an
asserted (possibly regex) error message, to tell whether a snapshot can produce it.
"""

from __future__ import annotations

import ast
import re

from repogym.pipelines._instructions.interface.pyast import str_const

JS_TEMPLATE = re.compile(r"`((?:\\.|[^`\\])*)`")


_PLACEHOLDER = re.compile(
    r"%[-#0 +]*(?:\d+|\*)?(?:\.\d+)?[sdrifxXeEgGcoa]|%\([^)]*\)[sdrif]|\{[^{}]*\}"
)


def python_strings(tree: ast.Module, strings: list[str], templates: list[tuple[str, ...]]) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = tuple(
                v.value
                for v in node.values
                if isinstance(v, ast.Constant) and isinstance(v.value, str)
            )
            templates.append(tuple(p for p in parts if p))
            strings.extend(p for p in parts if p)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            pieces: list[str] = []
            _flatten_concat(node, pieces)
            if len(pieces) > 1:
                templates.append(tuple(pieces))
        else:
            text = str_const(node)
            if text is not None and len(text) >= 3:
                strings.append(text)
                parts = tuple(p for p in _PLACEHOLDER.split(text) if p)
                if len(parts) > 1 or (parts and _PLACEHOLDER.search(text)):
                    templates.append(parts)


def _flatten_concat(node: ast.AST, out: list[str]) -> None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        _flatten_concat(node.left, out)
        _flatten_concat(node.right, out)
    else:
        text = str_const(node)
        if text:
            out.append(text)


def template_matches(fragment: str, pieces: tuple[str, ...]) -> bool:
    total = sum(len(p) for p in pieces)
    if total < max(4, len(fragment) // 2):
        return False
    pos = 0
    for piece in pieces:
        i = fragment.find(piece, pos)
        if i < 0:
            return False
        pos = i + len(piece)
    return True


def regex_fragments(text: str, regex: bool) -> list[str]:
    """The literal stretches of a message (split at regex syntax when it is a pattern)."""
    if not regex:
        return [text]
    frags: list[str] = []
    cur: list[str] = []

    def flush() -> None:
        if cur:
            frags.append("".join(cur))
            cur.clear()

    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt.isalnum():
                flush()
            else:
                cur.append(nxt)
            i += 2
        elif c == "[":
            flush()
            j = text.find("]", i + 2)
            i = n if j < 0 else j + 1
        elif c == "{":
            flush()
            j = text.find("}", i)
            i = n if j < 0 else j + 1
        elif c == "(":
            flush()
            if text.startswith("(?", i):
                j = text.find(":", i) if text.startswith("(?:", i) else text.find(")", i)
                if text[i + 2 : i + 3] in ("=", "!") or text.startswith("(?<", i):
                    j = i + (3 if text[i + 2] in "=!" else 4)
                i = n if j < 0 else j + 1
            else:
                i += 1
        elif c in "?*":
            if cur:
                cur.pop()
            flush()
            i += 1
        elif c in ".^$|)+":
            flush()
            i += 1
        else:
            cur.append(c)
            i += 1
    flush()
    return frags


def display_regex(text: str) -> str:
    return re.sub(r"\\([^A-Za-z0-9])", r"\1", text)
