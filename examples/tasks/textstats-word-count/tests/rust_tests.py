#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP031, UP035, UP045  (shipped into tasks: runs under the task's Python, maybe 3.6)
"""Rust unit tests inside source files (standard library only, Python 3.6+, no repogym imports).

Most crates keep their unit tests in the file they test, in ``#[cfg(test)] mod tests { … }``.
When a change edits such a module, its test part is hidden from the agent like a test file:

* :func:`test_items` finds the top-level test items of a file — ``#[cfg(test)]`` (or
  ``#[cfg(all(test, …))]``) items, ``mod tests { … }`` most often, and ``#[test]`` functions —
  skipping comments (nested ``/* */`` too), strings (raw ``r#"…"#``, byte and C strings),
  character literals and lifetimes, with matched braces;
* :func:`split` gives, for a base and a head text, the file the gold patch leads to (the head's
  code with the base's test items) and the hidden part (the head's test items);
* :func:`splice` puts hidden test items into whatever file an agent left, replacing every
  test item that file has (so none can be weakened), where its first one was or at the end.

Only top-level items count: a test module nested in another module stays code (its
``super`` is that module, which a splice could not keep).
"""

import re

# Some typing names appear only in type comments, which ruff does not read (hence F401).
from typing import List, Optional, Tuple  # noqa: F401


class RustSyntaxError(ValueError):
    """The text is not Rust this scanner can follow (an unclosed string, comment or brace)."""


_IDENT_START = re.compile(r"[A-Za-z_\u0080-\U0010ffff]")
_IDENT = re.compile(r"[A-Za-z0-9_\u0080-\U0010ffff]*")
_RAW = re.compile(r'(#*)"')
_NUMBER = re.compile(r"[0-9][0-9A-Za-z_]*(?:\.[0-9][0-9A-Za-z_]*)?")
_STRING_PREFIXES = ("b", "c", "r", "br", "cr")
OPEN = {"(": ")", "[": "]", "{": "}"}
CLOSE = {")", "]", "}"}


def _skip_string(text, i):
    # type: (str, int) -> int
    """The index after a ``"…"`` literal whose opening quote is at ``i`` (escapes honoured)."""
    n = len(text)
    i += 1
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        i += 1
    raise RustSyntaxError("unterminated string")


def _skip_raw(text, i, hashes):
    # type: (str, int, str) -> int
    """The index after a raw string whose opening quote is at ``i``."""
    end = text.find('"' + hashes, i + 1)
    if end == -1:
        raise RustSyntaxError("unterminated raw string")
    return end + 1 + len(hashes)


def _skip_block_comment(text, i):
    # type: (str, int) -> int
    """The index after a (nested) ``/* … */`` comment starting at ``i``."""
    depth, n = 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            depth += 1
            i += 2
        elif text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise RustSyntaxError("unterminated block comment")


def _quote(text, i):
    # type: (str, int) -> Tuple[str, int]
    """A ``'`` at ``i``: a character literal (``("char", end)``) or a lifetime / label."""
    n = len(text)
    if i + 1 < n and text[i + 1] == "\\":
        j = i + 2
        if j < n and text[j] == "u" and text.startswith("{", j + 1):
            close = text.find("}", j)
            j = close + 1 if close != -1 else n
        elif j < n and text[j] == "x":
            j += 3
        else:
            j += 1
        if j < n and text[j] == "'":
            return "char", j + 1
        raise RustSyntaxError("malformed character literal")
    if i + 2 < n and text[i + 2] == "'" and text[i + 1] != "'":
        return "char", i + 3
    m = _IDENT.match(text, i + 1)
    return "lifetime", m.end() if m else i + 1


def tokens(text):
    # type: (str) -> List[Tuple[str, str, int, int]]
    """``(kind, text, start, end)`` of the tokens of ``text``: ``ident``, ``literal``,
    ``lifetime`` or ``punct`` (one character); comments and whitespace are left out."""
    out = []  # type: List[Tuple[str, str, int, int]]
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end == -1 else end + 1
        elif text.startswith("/*", i):
            i = _skip_block_comment(text, i)
        elif c == '"':
            end = _skip_string(text, i)
            out.append(("literal", text[i:end], i, end))
            i = end
        elif c == "'":
            kind, end = _quote(text, i)
            out.append(("literal" if kind == "char" else "lifetime", text[i:end], i, end))
            i = end
        elif _IDENT_START.match(c):
            end = _IDENT.match(text, i + 1).end()  # type: ignore[union-attr]
            word = text[i:end]
            if word in _STRING_PREFIXES and end < n:
                raw = _RAW.match(text, end) if "r" in word else None
                if raw is not None:
                    stop = _skip_raw(text, raw.end() - 1, raw.group(1))
                    out.append(("literal", text[i:stop], i, stop))
                    i = stop
                    continue
                if text[end] == '"':
                    stop = _skip_string(text, end)
                    out.append(("literal", text[i:stop], i, stop))
                    i = stop
                    continue
                if word == "b" and text[end] == "'":
                    _kind, stop = _quote(text, end)
                    out.append(("literal", text[i:stop], i, stop))
                    i = stop
                    continue
            if word == "r" and text.startswith("#", end) and _IDENT_START.match(text[end + 1 :]):
                end = _IDENT.match(text, end + 2).end()  # type: ignore[union-attr]
                word = text[i:end]  # a raw identifier, r#type
            out.append(("ident", word, i, end))
            i = end
        elif c.isdigit():
            end = _NUMBER.match(text, i).end()  # type: ignore[union-attr]
            out.append(("literal", text[i:end], i, end))
            i = end
        else:
            out.append(("punct", c, i, i + 1))
            i += 1
    return out


def matching(toks, k):
    # type: (List[Tuple[str, str, int, int]], int) -> int
    """The index of the token closing the bracket opened at ``toks[k]``."""
    stack = []  # type: List[str]
    for j in range(k, len(toks)):
        kind, t = toks[j][0], toks[j][1]
        if kind != "punct":
            continue
        if t in OPEN:
            stack.append(OPEN[t])
        elif t in CLOSE:
            if not stack or stack.pop() != t:
                raise RustSyntaxError("unbalanced %r at offset %d" % (t, toks[j][2]))
            if not stack:
                return j
    raise RustSyntaxError("unclosed bracket at offset %d" % toks[k][2])


_TEST_ATTR = re.compile(
    r"^(?:cfg\(\s*(?:test|all\(\s*test\s*(?:,.*)?\))\s*\)|(?:\w+\s*::\s*)*test)$", re.DOTALL
)
#: Items that end at their first ``;`` (an initializer's braces are inside them).
_SEMI_ITEMS = frozenset({"use", "static", "type", "let"})
_ITEM_WORDS = frozenset(
    {"fn", "mod", "struct", "enum", "union", "trait", "impl", "use", "const", "static", "type"}
    | {"extern", "macro_rules"}
)


def _is_test_attr(text, start, end):
    # type: (str, int, int) -> bool
    """Whether the attribute ``#[ … ]`` between offsets ``start`` and ``end`` (its brackets
    excluded) marks a test item: ``test`` (``tokio::test`` too), ``cfg(test)`` or
    ``cfg(all(test, …))``."""
    return bool(_TEST_ATTR.match(re.sub(r"\s+", " ", text[start:end]).strip()))


def _line_start(text, pos):
    # type: (str, int) -> int
    """Where the line holding ``pos`` starts, when only blanks precede ``pos`` on it, with the
    ``///`` doc comments right above it; else ``pos``."""
    start = text.rfind("\n", 0, pos) + 1
    if text[start:pos].strip():
        return pos
    while start > 0:
        prev = text.rfind("\n", 0, start - 1) + 1
        line = text[prev : start - 1].strip()
        if not (line.startswith("///") and not line.startswith("////")):
            break
        start = prev
    return start


def _item_end(toks, k):
    # type: (List[Tuple[str, str, int, int]], int) -> int
    """The index of the last token of the item starting at ``toks[k]`` (after its attributes):
    its first ``;`` outside brackets, or the brace closing its first ``{`` — but a ``use``,
    ``static``, ``type`` or valued ``const`` ends only at its ``;``."""
    n, semi_only, word = len(toks), False, None
    j = k
    while j < n:
        kind, t = toks[j][0], toks[j][1]
        if kind == "ident" and word is None and t in _ITEM_WORDS:
            nxt = toks[j + 1][1] if j + 1 < n else ""
            if t == "const" and nxt in ("fn", "unsafe", "async", "extern"):
                j += 1
                continue
            word = t
            semi_only = t in _SEMI_ITEMS or t == "const" or (t == "extern" and nxt == "crate")
        if kind == "punct":
            if t == ";":
                return j
            if t == "{" and not semi_only:
                return matching(toks, j)
            if t in OPEN:
                j = matching(toks, j)
            elif t in CLOSE:
                raise RustSyntaxError("unbalanced %r at offset %d" % (t, toks[j][2]))
        j += 1
    raise RustSyntaxError("unfinished item at offset %d" % toks[k][2])


def test_items(text):
    # type: (str) -> List[Tuple[int, int]]
    """``(start, end)`` offsets of the top-level test items of ``text``: ``#[cfg(test)]`` (or
    ``#[cfg(all(test, …))]``) items — ``mod tests { … }`` most often — and ``#[test]``
    functions; from the start of the line of their first attribute (doc comments above it
    included) to just after their closing brace or ``;``. Raises :class:`RustSyntaxError`."""
    toks = tokens(text)
    spans = []  # type: List[Tuple[int, int]]
    k, n = 0, len(toks)
    while k < n:
        kind, t = toks[k][0], toks[k][1]
        if kind == "punct" and t in OPEN:  # an item's body, a block, a macro's input
            k = matching(toks, k) + 1
            continue
        if kind == "punct" and t in CLOSE:
            raise RustSyntaxError("unbalanced %r at offset %d" % (t, toks[k][2]))
        if not (kind == "punct" and t == "#"):
            k += 1
            continue
        first, test, seen = k, False, False
        while k + 1 < n and toks[k][1] == "#" and toks[k + 1][1] in ("[", "!"):
            seen = True
            if toks[k + 1][1] == "!":  # an inner attribute: belongs to the file
                if k + 2 >= n or toks[k + 2][1] != "[":
                    raise RustSyntaxError("malformed attribute at offset %d" % toks[k][2])
                k = first = matching(toks, k + 2) + 1
                continue
            close = matching(toks, k + 1)
            test = test or _is_test_attr(text, toks[k + 1][3], toks[close][2])
            k = close + 1
        if not seen:
            k += 1
            continue
        if test and k < n:
            end = _item_end(toks, k)
            spans.append((_line_start(text, toks[first][2]), toks[end][3]))
            k = end + 1
    return spans


def remove_spans(text, spans):
    # type: (str, List[Tuple[int, int]]) -> Tuple[str, int]
    """``text`` without ``spans`` (sorted, disjoint), and where the first one was (-1: none).
    The blank lines before a later span go with it."""
    out, last = [], 0
    for i, (start, end) in enumerate(spans):
        chunk = text[last:start]
        if i and not chunk.strip():
            chunk = ""
        elif i:
            chunk = chunk.rstrip() + "\n"
        out.append(chunk)
        last = end
    out.append(text[last:])
    return "".join(out), spans[0][0] if spans else -1


def insert(text, anchor, items):
    # type: (str, int, str) -> str
    """``items`` put into ``text`` at ``anchor``, or after its end when ``anchor`` is -1."""
    if not items:
        return text
    if anchor >= 0:
        return text[:anchor] + items + text[anchor:]
    body = text.rstrip("\n")
    return (body + "\n\n" if body else "") + items + "\n"


def items_text(text, spans):
    # type: (str, List[Tuple[int, int]]) -> str
    """The test items of ``text`` one after the other (a blank line between them)."""
    return "\n\n".join(text[a:b] for a, b in spans)


def split(base, head):
    # type: (Optional[str], str) -> Optional[Tuple[str, str]]
    """``(gold, hidden)`` for a file at ``base`` (None: a new file) changed into ``head``:
    ``gold`` is the head's code with the base's test items where the head's first one is,
    ``hidden`` the head's test items. None when the test items did not change or the head
    has none (a removal of tests is then part of the source change). Raises
    :class:`RustSyntaxError` when either side cannot be read."""
    head_spans = test_items(head)
    base_spans = test_items(base) if base is not None else []
    hidden = items_text(head, head_spans)
    old = items_text(base, base_spans) if base is not None else ""
    if not hidden or hidden == old:
        return None
    code, anchor = remove_spans(head, head_spans)
    return insert(code, anchor, old), hidden


def splice(current, hidden):
    # type: (str, str) -> str
    """``current`` (the file an agent left) with every top-level test module replaced by the
    ``hidden`` ones: where its first test module was, else at the end. Raises
    :class:`RustSyntaxError` when ``current`` cannot be read (the caller must not fall back to
    appending: an unclosed string or comment could swallow the hidden tests)."""
    return splice_at(current, hidden)[0]


def splice_at(current, hidden):
    # type: (str, str) -> Tuple[str, int]
    """:func:`splice`, and the offset in the result where ``hidden`` starts (always at the
    start of a line)."""
    code, anchor = remove_spans(current, test_items(current))
    if not hidden:
        return code, len(code)
    if anchor >= 0:
        return insert(code, anchor, hidden), anchor
    body = code.rstrip("\n")
    start = len(body) + 2 if body else 0
    return insert(code, anchor, hidden), start
