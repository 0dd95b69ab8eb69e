"""Tokens and function bodies of brace-language source files: Go, Rust, Java, C and C++.

No compiler or parser is run: a lexer that knows each language's comments and literals (Go's
back-quoted strings, Rust's raw strings, nested comments, character literals and lifetimes,
Java's text blocks, C++'s raw strings), then a scan for function bodies outside any other
function — ``func`` (Go) and ``fn`` (Rust) declarations, and in Java, C and C++ a block opened
right after a parameter list (``name(…) {``, ``name(…) const noexcept {``, ``name(…) throws
E {``, constructor initializer lists) whose name is not a control keyword. Used by
``bug_synth``'s mutants (:mod:`repogym.pipelines._synthesis.braced_mutants`) and the red-team
candidates (:mod:`.redteam_braced`); whatever the scan gets wrong costs a candidate, never a
task: each is compiled by the language's own compiler before its tests count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Token = tuple[str, str, int, int]
"""``(kind, text, start, end)``; kind: ``ident``, ``number``, ``string``, ``char``,
``lifetime`` or ``punct`` (an operator, maximal munch)."""

LANGUAGES = {
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
}
"""File extension → the language :func:`tokens` reads it as (headers as C: the same tokens)."""

_IDENT = re.compile(r"[A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_\u0080-\U0010ffff]*")
_NUMBER = re.compile(
    r"(?:0[xXbBoO][0-9A-Fa-f_]+|[0-9][0-9_]*(?:\.[0-9][0-9_]*)?(?:[eE][+-]?\d+)?)\w*"
)
_OPERATORS = sorted(
    (
        "<<=", ">>=", "...", "&&", "||", "==", "!=", "<=", ">=", "<<", ">>", "->", "=>", "::",
        "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "++", "--", ":=", "..",
    ),
    key=len,
    reverse=True,
)  # fmt: skip
_CPP_NUMBER = re.compile(r"[0-9](?:'?[0-9A-Za-z_.])*")
"""A C or C++ number, with C++14's digit separators (``100'000``)."""
_CPP_RAW = re.compile(r'(?:u8|[uUL])?R"([^()\\\s]{0,16})\(')
_RUST_RAW = re.compile(r'[bc]?r(#*)"')
_CONTROL = frozenset(
    {"if", "for", "while", "switch", "catch", "synchronized", "return", "sizeof", "alignof"}
    | {"decltype", "typeof", "new", "throw", "else", "do", "try", "case", "assert", "super"}
    | {"this", "defined", "__attribute__", "static_assert", "alignas", "noexcept", "requires"}
    | {"foreach", "using", "co_return", "co_await"}
)
_TAIL_WORDS = frozenset(
    {"const", "noexcept", "override", "final", "volatile", "mutable", "throws", "try"}
)


class LexError(ValueError):
    """A literal or comment that never ends, or brackets that do not match."""


def _string_end(text: str, i: int, quote: str) -> int:
    """The index after the literal whose opening ``quote`` is at ``i`` (escapes honoured)."""
    n = len(text)
    j = i + 1
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            return j + 1
        j += 1
    raise LexError(f"unterminated literal at offset {i}")


def _find(text: str, needle: str, start: int, what: str) -> int:
    end = text.find(needle, start)
    if end == -1:
        raise LexError(f"unterminated {what} at offset {start}")
    return end + len(needle)


def _block_comment_end(text: str, i: int, nested: bool) -> int:
    if not nested:
        return _find(text, "*/", i + 2, "comment")
    depth, j, n = 0, i, len(text)
    while j < n:
        if text.startswith("/*", j):
            depth, j = depth + 1, j + 2
        elif text.startswith("*/", j):
            depth, j = depth - 1, j + 2
            if depth == 0:
                return j
        else:
            j += 1
    raise LexError(f"unterminated comment at offset {i}")


def _quote_end(text: str, i: int, lang: str) -> tuple[str, int]:
    """A ``'`` at ``i``: ``("char", end)``, or in Rust ``("lifetime", end)`` (``'a``)."""
    n = len(text)
    if i + 1 < n and text[i + 1] == "\\":
        return "char", _string_end(text, i, "'")
    if i + 2 < n and text[i + 2] == "'" and text[i + 1] != "'":
        return "char", i + 3
    if lang == "rust":
        m = _IDENT.match(text, i + 1)
        return "lifetime", m.end() if m else i + 1
    return "char", _string_end(text, i, "'")


def _literal(text: str, i: int, lang: str) -> tuple[str, int] | None:
    """A string literal starting at ``i`` with a prefix (raw strings), or None."""
    if lang == "rust" and (m := _RUST_RAW.match(text, i)):
        return "string", _find(text, '"' + m.group(1), m.end(), "raw string")
    if lang == "cpp" and (m := _CPP_RAW.match(text, i)):
        return "string", _find(text, ")" + m.group(1) + '"', m.end(), "raw string")
    if lang == "rust" and text.startswith(("b'", 'b"'), i):
        if text[i + 1] == "'":
            return _quote_end(text, i + 1, lang)
        return "string", _string_end(text, i + 1, '"')
    return None


def tokens(text: str, lang: str) -> list[Token]:
    """The tokens of ``text`` read as ``lang`` (a value of :data:`LANGUAGES`); comments,
    whitespace and preprocessor lines (C, C++) left out. Raises :class:`LexError`."""
    out: list[Token] = []
    i, n = 0, len(text)
    line_start = True
    number = _CPP_NUMBER if lang in ("c", "cpp") else _NUMBER
    while i < n:
        c = text[i]
        if c == "\n":
            i, line_start = i + 1, True
            continue
        if c.isspace():
            i += 1
            continue
        if c == "#" and line_start and lang in ("c", "cpp"):
            while True:  # a directive, with its continuation lines
                end = text.find("\n", i)
                if end == -1:
                    i = n
                    break
                i = end + 1
                if not text[:end].endswith("\\"):
                    break
            continue
        line_start = False
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end == -1 else end
        elif text.startswith("/*", i):
            i = _block_comment_end(text, i, nested=lang == "rust")
        elif (lit := _literal(text, i, lang)) is not None:
            out.append((lit[0], text[i : lit[1]], i, lit[1]))
            i = lit[1]
        elif c == '"':
            end = (
                _find(text, '"""', i + 3, "text block")
                if lang == "java" and text.startswith('"""', i)
                else _string_end(text, i, '"')
            )
            out.append(("string", text[i:end], i, end))
            i = end
        elif c == "`" and lang == "go":
            end = _find(text, "`", i + 1, "raw string")
            out.append(("string", text[i:end], i, end))
            i = end
        elif c == "'":
            kind, end = _quote_end(text, i, lang)
            out.append((kind, text[i:end], i, end))
            i = end
        elif (m := _IDENT.match(text, i)) is not None:
            out.append(("ident", m.group(), i, m.end()))
            i = m.end()
        elif c.isdigit() and (m := number.match(text, i)) is not None:
            out.append(("number", m.group(), i, m.end()))
            i = m.end()
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), c)
            out.append(("punct", op, i, i + len(op)))
            i += len(op)
    return out


_PAIRS = {"(": ")", "[": "]", "{": "}"}


def match_brackets(toks: list[Token]) -> dict[int, int]:
    """Token index of every ``(``/``[``/``{`` → the index of its closing bracket. Raises
    :class:`LexError` when they do not match."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for k, (kind, t, start, _end) in enumerate(toks):
        if kind != "punct":
            continue
        if t in _PAIRS:
            stack.append(k)
        elif t in (")", "]", "}"):
            if not stack or _PAIRS[toks[stack[-1]][1]] != t:
                raise LexError(f"unbalanced {t!r} at offset {start}")
            pairs[stack.pop()] = k
    if stack:
        raise LexError(f"unclosed {toks[stack[-1]][1]!r} at offset {toks[stack[-1]][2]}")
    return pairs


@dataclass(frozen=True)
class Function:
    """One function (or method) body of a file: ``toks[open]`` is its ``{``, ``toks[close]``
    its ``}``."""

    name: str
    line: int
    """The line of the name."""
    open: int
    close: int


def functions(text: str, lang: str) -> tuple[list[Token], list[Function]]:
    """The tokens of ``text`` and its function bodies, outermost only (a closure or local
    class inside a body belongs to that body). Raises :class:`LexError`."""
    toks = tokens(text, lang)
    pairs = match_brackets(toks)
    found: list[Function] = []
    k = 0
    while k < len(toks):
        kind, t = toks[k][0], toks[k][1]
        if kind == "punct" and t == "{":
            name_at = _named_body(toks, pairs, k, lang)
            if name_at is not None:
                found.append(Function(toks[name_at][1], _line(text, toks[name_at][2]), k, pairs[k]))
                k = pairs[k] + 1
                continue
        k += 1
    return toks, found


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _named_body(toks: list[Token], pairs: dict[int, int], k: int, lang: str) -> int | None:
    """The token index of the function name when the ``{`` at ``k`` opens a function body."""
    if lang in ("go", "rust"):
        return _keyword_body(toks, pairs, k, "func" if lang == "go" else "fn")
    return _paren_body(toks, pairs, k)


def _keyword_body(toks: list[Token], pairs: dict[int, int], k: int, word: str) -> int | None:
    """Go and Rust: the ``{`` ends a ``func``/``fn`` signature (scanned back to the keyword
    over its parameter lists, result types and ``where`` clause)."""
    if _type_braces(toks, k):
        return None
    closes = {v: o for o, v in pairs.items()}
    j = k - 1
    while j >= 0:
        kind, t = toks[j][0], toks[j][1]
        if kind == "punct" and t in (")", "]", "}"):
            opener = closes.get(j)
            if opener is None or (t == "}" and not _type_braces(toks, opener)):
                return None
            j = opener - 1
            continue
        if kind == "punct" and t in (";", "{", "=", "=>"):
            return None
        if kind == "ident" and t == word:
            after = j + 1
            if word == "func" and after < len(toks) and toks[after][1] == "(":
                after = pairs.get(after, after) + 1  # a method's receiver
            if after < len(toks) and toks[after][0] == "ident":
                return after
            return None  # a function literal or closure type
        j -= 1
    return None


def _type_braces(toks: list[Token], opener: int) -> bool:
    """A brace pair inside a Go signature: ``struct{…}`` / ``interface{…}``."""
    return opener > 0 and toks[opener - 1][1] in ("struct", "interface")


def _paren_body(toks: list[Token], pairs: dict[int, int], k: int) -> int | None:
    """Java, C and C++: the ``{`` follows a parameter list (and qualifiers, ``throws``
    clauses, a trailing return type or a constructor's initializer list)."""
    if k > 1 and toks[k - 1][0] == "ident" and toks[k - 2][1] in (",", ":"):
        return None  # `x_{v}`: a brace initializer in a constructor's list
    closes = {v: o for o, v in pairs.items()}
    j = k - 1
    steps = 0
    while j >= 0 and steps < 64:
        steps += 1
        kind, t = toks[j][0], toks[j][1]
        if kind == "punct" and t == ")":
            opener = closes.get(j)
            if opener is None or opener == 0:
                return None
            name = opener - 1
            if toks[name][0] != "ident" or toks[name][1] in _CONTROL:
                return None
            before = toks[name - 1][1] if name > 0 else ""
            if before in ("new", ".", "->", "@", "record"):
                return None  # an anonymous class, a call chain, an annotation, a record
            if before in (",", ":") and name > 1 and toks[name - 2][1] in (")", "}"):
                j = name - 2  # one initializer of a constructor's list: keep going back
                continue
            return name
        if kind == "punct" and t == "}":
            opener = closes.get(j)  # an initializer `x_{v}` of a constructor's list
            if opener is None or opener == 0 or toks[opener - 1][0] != "ident":
                return None
            j = opener - 1
            continue
        if kind == "ident" and (t in _TAIL_WORDS or t not in _CONTROL):
            j -= 1
            continue
        if kind == "punct" and t in ("&", "&&", "*", "::", "<", ">", ",", ".", "->", ":", "[", "]"):
            j -= 1
            continue
        return None
    return None
