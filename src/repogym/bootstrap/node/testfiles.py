"""JavaScript/TypeScript test files read as source: fixture modules and computed test names.

* A file named like a test (``*.spec.ts``, ``*.test.js``, ``__tests__/…``) that defines no test
  (no ``describe``/``it``/``test``/``suite``/``context``/``specify``/``bench`` call, no
  ``node:test`` import) is a **fixture module** (``src/cases.spec.ts`` holding cases other specs
  import): a runner pointed at it fails ("Your test suite must contain at least one test"), so it
  is not a test file to select.
* A test whose **title is computed** — a template literal with ``${…}``, string concatenation,
  or any non-literal expression as the first argument of ``it``/``test``/``describe`` — may
  embed output of the code under test (``it(`matches ${toRegex("a*")}`)``). When the fix changes
  that output, the test's id exists only after the fix and looks fail-to-pass, but it pays only
  for byte-identical output. :func:`computed_f2p` finds such F2P ids so that the runtime can
  drop them (see its docstring for the rule).

Source is lexed with the tamper scanner's JavaScript lexer (comments and literals are told apart
from code), so titles inside strings or comments do not count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from repogym.shipped.js_lex import js_lex
from repogym.shipped.testfiles import JS_TEST_FILE

_CALL = re.compile(
    r"(?<![\w$.])(describe|context|suite|it|test|specify|bench|xit|xdescribe|fit|fdescribe)"
    r"((?:\s*\.\s*(?:only|skip|todo|each|concurrent|failing|sequential|fails|runIf|skipIf"
    r"|for|shuffle|serial))*)\s*(\(|`)"
)
_NODE_TEST = re.compile(r"""['"]node:test['"]""")
_CONST = re.compile(r"(?<![\w$.])(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*$")
_PLACEHOLDER = re.compile(r"%[sdifjoOp#]|\$[A-Za-z_][\w.]*")
_ANY = ".*"


@dataclass(frozen=True)
class ComputedTitle:
    """A test or suite title built at run time."""

    line: int
    call: str
    """``it``, ``test``, ``describe``, …"""
    pattern: str
    """A regex (``re.fullmatch``) the runtime title fits: the literal parts with ``.*`` between
    them; ``.*`` alone when nothing of the title is literal."""
    source: str
    """The title expression as written (at most 80 characters)."""


def has_test_calls(source: str) -> bool:
    """Whether ``source`` defines at least one test or suite (or imports ``node:test``)."""
    code, strings = js_lex(source)
    if _CALL.search(code):
        return True
    return any(_NODE_TEST.fullmatch(source[a:b]) for a, b, _v in strings)


def is_fixture_module(path: str, source: str) -> bool:
    """A file named like a JS/TS test that defines no test."""
    return bool(JS_TEST_FILE.search(path)) and not has_test_calls(source)


def runnable_test_files(sources: Mapping[str, str | bytes]) -> list[str]:
    """The paths of ``sources`` (path → text) named like tests that define tests, sorted."""
    out = []
    for path, text in sources.items():
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if JS_TEST_FILE.search(path) and has_test_calls(text):
            out.append(path)
    return sorted(out)


def _argument_end(code: str, start: int) -> int:
    """The offset of the ``,`` or ``)`` that ends the call argument starting at ``start``."""
    depth = 0
    for i in range(start, len(code)):
        c = code[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return i
            depth -= 1
        elif c == "," and depth == 0:
            return i
    return len(code)


def _skip_call(code: str, open_paren: int) -> int:
    """The offset just after the ``)`` matching ``code[open_paren]``."""
    end = _argument_end(code, open_paren + 1)
    while end < len(code) and code[end] == ",":
        end = _argument_end(code, end + 1)
    return end + 1


def _literal_pattern(value: str, each: bool) -> str | None:
    """The pattern of a literal title (None when fully static)."""
    if not each or not _PLACEHOLDER.search(value):
        return None
    parts = _PLACEHOLDER.split(value)
    return _ANY.join(re.escape(p) for p in parts)


def _depth(code: str, a: int, b: int) -> int:
    """Bracket depth at ``b`` counted from ``a``."""
    depth = 0
    for c in code[a:b]:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
    return depth


def _piece(source: str, literal: tuple[int, int, str]) -> str:
    start, _end, value = literal
    if source[start] == "`":
        return _ANY.join(re.escape(p) for p in value.split("{}"))
    return re.escape(value)


def _title_pattern(
    source: str,
    code: str,
    region: tuple[int, int],
    strings: list[tuple[int, int, str]],
    consts: dict[str, str],
    each: bool,
) -> str | None:
    """None for a static title, else the pattern its runtime value fits."""
    a, b = region
    text = source[a:b].strip()
    a += len(source[a:b]) - len(source[a:b].lstrip())
    b = a + len(text)
    inside = [t for t in strings if t[0] >= a and t[1] <= b]
    # Literals of the title itself: not nested in another literal, not inside a call's brackets.
    top = [
        t
        for t in inside
        if not any(o[0] < t[0] and t[1] <= o[1] for o in inside) and _depth(code, a, t[0]) == 0
    ]
    if len(top) == 1 and top[0][0] == a and top[0][1] == b:
        start, _end, value = top[0]
        if source[start] == "`" and "${" in source[start:b]:
            return _piece(source, top[0])
        return _literal_pattern(value, each)
    if re.fullmatch(r"[A-Za-z_$][\w$]*", text) and text in consts:
        return _literal_pattern(consts[text], each)
    pieces = []
    cursor = a
    for literal in top:
        if code[cursor : literal[0]].strip(" \t\n+()"):
            pieces.append(_ANY)
        pieces.append(_piece(source, literal))
        cursor = literal[1]
    if code[cursor:b].strip(" \t\n+()") or not top:
        pieces.append(_ANY)
    return re.sub(r"(?:\.\*)+", _ANY, "".join(pieces))


def computed_titles(source: str) -> list[ComputedTitle]:
    """Every test/suite call in ``source`` whose title is not a plain literal."""
    code, strings = js_lex(source)
    by_start = {s[0]: s for s in strings}
    consts: dict[str, str] = {}
    for start, end, value in strings:
        m = _CONST.search(code, max(0, start - 80), start)
        if m and source[start] != "`" and code[end : end + 80].lstrip(" \t")[:1] in ";\n":
            consts.setdefault(m.group(1), value)
    out = []
    for m in _CALL.finditer(code):
        modifiers = m.group(2)
        each = any(w in modifiers for w in ("each", "for"))
        pos = m.end() - 1
        if m.group(3) == "`":  # test.each`table`(title, fn)
            literal = by_start.get(pos)
            if literal is None:
                continue
            pos = literal[1]
            while pos < len(code) and code[pos].isspace():
                pos += 1
            if code[pos : pos + 1] != "(":
                continue
        elif each or re.search(r"runIf|skipIf", modifiers):
            after = _skip_call(code, pos)
            while after < len(code) and code[after].isspace():
                after += 1
            if code[after : after + 1] != "(":
                continue
            pos = after
        end = _argument_end(code, pos + 1)
        pattern = _title_pattern(source, code, (pos + 1, end), strings, consts, each)
        if pattern is None:
            continue
        line = source.count("\n", 0, m.start()) + 1
        snippet = " ".join(source[pos + 1 : end].split())[:80]
        out.append(ComputedTitle(line, m.group(1), pattern, snippet))
    return out


def _segments(test_id: str) -> list[str]:
    parts = test_id.split(" > ")
    if len(parts) > 1 and re.search(r"\.[cm]?[jt]sx?$", parts[0]):
        parts = parts[1:]
    return parts


def computed_test_names(test_file_source: str, ids: Iterable[str]) -> set[str]:
    """The ``ids`` one of whose titles (a suite's or the test's) fits a computed title of
    ``test_file_source``. A title with no literal part (``it(name, …)``) fits every name."""
    patterns = [re.compile(t.pattern, re.S) for t in computed_titles(test_file_source)]
    if not patterns:
        return set()
    return {
        t for t in ids if any(p.fullmatch(seg) for p in patterns for seg in _segments(t) if seg)
    }


def _group(test_id: str) -> str:
    """What a test shares with its siblings: its file (ids that start with one), else its
    outermost suite."""
    parts = test_id.split(" > ")
    return parts[0] if len(parts) > 1 else ""


def computed_f2p(
    f2p: Iterable[str],
    before_runs: Iterable[Mapping[str, str]],
    sources: Mapping[str, str | bytes],
) -> dict[str, str]:
    """F2P ids to drop, each with its reason.

    An id is dropped when (1) one of its titles fits a computed title of the hidden test file
    it names (``sources``: path → text; ids that name no file are matched against every
    source), (2) it is absent from every run before the fix, and (3) its file (or, for ids
    without one, its outermost suite) reported other results before the fix. Then the test
    existed before the fix under another name, one that embedded other output. A test whose
    file failed to load before the fix (it imports a new export) keeps its F2P status: (3)
    does not hold.
    """
    before = [dict(r) for r in before_runs]
    seen: set[str] = set().union(*before) if before else set()
    groups = {_group(t) for t in seen if " > " in t}
    texts = {
        p: (t.decode("utf-8", "replace") if isinstance(t, bytes) else t)
        for p, t in sources.items()
        if re.search(r"\.[cm]?[jt]sx?$", p)
    }
    out: dict[str, str] = {}
    for test_id in f2p:
        if test_id in seen or " > " not in test_id or _group(test_id) not in groups:
            continue
        first = test_id.split(" > ")[0]
        for path in [first] if first in texts else sorted(texts):
            if computed_test_names(texts[path], [test_id]):
                out[test_id] = f"computed test name ({path}); no such id before the fix"
                break
    return out
