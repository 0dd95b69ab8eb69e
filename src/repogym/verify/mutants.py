"""Mutants of a gold patch: deliberately wrong solutions for a test-adequacy gate.

A task is "make the failing tests pass at commit X"; its gold patch (``solution/patch.diff``)
is one correct answer and the hidden tests grade any answer. The gate asks whether those tests
can tell a right answer from a nearly-right one: from the gold patch this module builds K
*mutants* (small, plausible mistakes), the hidden tests are then run on each (elsewhere, not
here), and a mutant is **killed** when its reward is below the gold's reward. Surviving
mutants point at behaviour of the fix that no test checks.

This module only *builds* mutants, on the host: pure Python plus, optionally, ``node --check``.
Every mutant is a complete git-style unified diff from the base tree to the mutant tree (all
the gold's files, the mutated file changed), so it is applied exactly like the gold.

Operators — they touch only lines the gold patch added or changed (``+`` lines of hunks in
code files, see :func:`build_mutants` for which files count as code):

``hunk_revert``
    Undo one hunk of the gold: its region goes back to the base lines (for a hunk that
    creates or deletes a whole file, the file is not created / not deleted). Only when the
    gold has at least two hunks over all code files — reverting the only hunk is the empty
    solution. Hunks of non-code files (changelogs, docs) are never counted or reverted.
``drop_statement``
    Delete one added line that is a complete simple statement. Python: a one-line logical
    line that parses alone (after dedent) as one simple statement — not a block header,
    ``pass``, ``return``, ``break``/``continue``, ``global``/``nonlocal``, a docstring or
    other bare constant, a decorator, a comment, or part of a multi-line bracket expression;
    when it was the only statement of its block it becomes ``pass``. JavaScript: a
    bracket-balanced line at statement level (not inside a multi-line expression, string,
    template or comment) that starts a statement and ends one — with ``;``, or, in
    semicolon-less code, with a value while the next line cannot continue the expression —
    and is not a ``return``/``throw``/``break``/``continue``, a control-flow line or a
    directive such as ``'use strict'``.
``negate_condition``
    Python ``if C:`` / ``elif C:`` / ``while C:`` → ``if not (C):``, and the first one-line
    ternary ``A if C else B`` → ``A if not (C) else B``; JavaScript ``if (C)``,
    ``while (C)``, ``} else if (C)`` → ``if (!(C))`` when the condition closes on its line.
``replace_return``
    ``return EXPR`` → ``return None`` (Python; a multi-line return whose lines are all added
    counts too) / ``return undefined`` (JavaScript, one line). Bare returns and returns of
    ``None`` / ``undefined`` / ``null`` are skipped.

Filters: a mutated file must differ from its gold post-image. It may equal its base content
(reverting the only hunk of one file of a multi-file fix is a fair "forgot that file"
mistake), but a mutant that leaves every code file at its base state — the empty solution in
disguise, perhaps with a changelog edit — is dropped. Mutants giving identical trees are kept
once. With ``check_syntax`` a Python mutant
must ``compile()`` on the host — checked only when the gold post-image itself compiles there
(code for old Pythons may not parse on this interpreter; then the check is skipped for that
file) — and a ``.js``/``.cjs``/``.mjs`` mutant must pass ``node --check`` in the module
system under which the gold passes (no check without ``node`` on PATH; when the gold passes in
neither, the file is not plain JavaScript — JSX, Flow — and gets ``hunk_revert`` only).
TypeScript and JSX files (``.ts .tsx .jsx .mts .cts``) get ``hunk_revert`` only.

Odd input never raises: binary sections, renames without edits, mode-only changes, deleted
files, files whose base cannot be read or does not match the gold's context are kept verbatim
and simply not mutated. Line endings (CRLF) and a missing final newline are preserved; text is
``str`` decoded with UTF-8 + ``surrogateescape`` (see :mod:`repogym.sources._patches`), so any
encoding round-trips.
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import random
import re
import shutil
import subprocess
import tempfile
import tokenize
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from repogym.sources._patches import FilePatch, encode_patch, is_test_path, parse_patch

__all__ = [
    "CODE_EXTENSIONS",
    "KINDS",
    "Mutant",
    "build_mutants",
    "default_is_code",
    "is_release_notes",
    "select_mutants",
]

#: Mutation operators, in the order candidates of one line are listed.
KINDS = ("hunk_revert", "drop_statement", "negate_condition", "replace_return")
#: Extensions of the files :func:`default_is_code` accepts.
CODE_EXTENSIONS = (".py", ".js", ".cjs", ".mjs", ".jsx", ".ts", ".tsx", ".mts", ".cts")
_PY_EXT = (".py", ".pyi")
_JS_EXT = (".js", ".cjs", ".mjs")
_NODE_TIMEOUT = 60.0


@dataclass(frozen=True)
class Mutant:
    """One wrong solution derived from the gold patch."""

    kind: str  # one of KINDS
    path: str  # the mutated file (repository-relative; the old path of a deleted file)
    line: int  # 1-based line of the gold post-image where the mutation applies
    description: str  # one line, for reports
    patch: str  # git-style unified diff base -> mutant tree, every file of the gold patch


# --------------------------------------------------------------------------- file classes

_RELEASE_NAME_RE = re.compile(
    r"^(?:changelog|changes|history|news|releases|release.*notes)(?:[^a-z].*)?$",
    re.IGNORECASE,
)
_RELEASE_DOC_NAME_RE = re.compile(
    r"^(?:changelog|release.*notes|whatsnew(?![a-z])|releases(?![a-z]))", re.IGNORECASE
)
_FRAGMENT_DIRS = frozenset({"changelog.d", "newsfragments", ".changeset"})
_DOC_DIRS = frozenset({"doc", "docs"})
_TEXT_EXT = (".rst", ".md", ".txt")
_OTHER_PROGRAM_EXT = """pyi pyx go rb rs java kt kts scala c h cc cpp cxx hpp cs fs php pl pm sh
bash swift m mm lua r jl ex exs erl hs ml clj dart vue svelte"""
#: Extensions of program sources: ``history.py`` is a module, not release notes.
_PROGRAM_EXT = frozenset(
    {
        *(e[1:] for e in CODE_EXTENSIONS),
        *_OTHER_PROGRAM_EXT.split(),
    }
)


def is_release_notes(path: str) -> bool:
    """True for changelogs and release notes, which a mutant never touches.

    Matches (case-insensitive): a file named ``CHANGELOG*``, ``CHANGES*``, ``HISTORY*``,
    ``NEWS*``, ``RELEASE*NOTES*`` or ``RELEASES*`` (the prefix followed by nothing or a
    non-letter, and not a program source such as ``history.py``); any file under a
    ``changelog.d/``, ``newsfragments/`` or ``.changeset/`` directory; ``.rst``/``.md``/
    ``.txt`` files under a ``changes/`` directory; and, under a ``doc/`` or ``docs/``
    directory, files or directories named ``changelog*``, ``release*notes*``, ``whatsnew``
    or ``releases`` (Sphinx and Django layouts).
    """
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    if not parts:
        return False
    name, dirs = parts[-1], [d.lower() for d in parts[:-1]]
    low = name.lower()
    ext = low.rsplit(".", 1)[1] if "." in low.lstrip(".") else ""
    if any(d in _FRAGMENT_DIRS for d in dirs):
        return True
    if "changes" in dirs and low.endswith(_TEXT_EXT):
        return True
    if ext in _PROGRAM_EXT:
        return False
    if _RELEASE_NAME_RE.match(name):
        return True
    # under doc/ or docs/: a changelog*/release*notes*/whatsnew/releases file or directory
    for k, d in enumerate(dirs):
        if d in _DOC_DIRS:
            return any(_RELEASE_DOC_NAME_RE.match(x) for x in [*parts[k + 1 : -1], name])
    return False


def default_is_code(path: str) -> bool:
    """Python/JavaScript/TypeScript sources that are neither tests nor release notes."""
    return (
        path.lower().endswith(CODE_EXTENSIONS)
        and not is_release_notes(path)
        and not is_test_path(path)
    )


# --------------------------------------------------------------------------- hunks

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_NO_EOL = "\\ No newline at end of file"


@dataclass
class _Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    heading: str  # text after the closing "@@", verbatim
    # (tag " "/"-"/"+", content without "\n" (CR kept), the line has no newline)
    lines: list[tuple[str, str, bool]]

    def header(self) -> str:
        return f"@@ -{self.old_start},{self.old_len} +{self.new_start},{self.new_len} @@"


@dataclass
class _File:
    index: int
    fp: FilePatch
    code: bool
    header: list[str] = field(default_factory=list)  # extended git header, without "index"
    names: list[str] = field(default_factory=list)  # the "---" and "+++" lines
    hunks: list[_Hunk] = field(default_factory=list)
    base: list[str] | None = None  # base lines with their "\n" ([] for a new file)
    gold: list[str] | None = None  # gold post-image lines
    plus_at: dict[int, tuple[int, int]] = field(default_factory=dict)  # line -> (hunk, row)
    mutable: bool = False


def _parse_section(text: str) -> tuple[list[str], list[str], list[_Hunk]] | None:
    """Header lines, ``---``/``+++`` lines and hunks of one file section (None if odd)."""
    rows = text.split("\n")
    if rows and rows[-1] == "":
        rows.pop()
    header: list[str] = []
    names: list[str] = []
    hunks: list[_Hunk] = []
    i, n = 0, len(rows)
    while i < n and not rows[i].startswith("@@ "):
        if rows[i].startswith("--- ") and i + 1 < n and rows[i + 1].startswith("+++ "):
            names = [rows[i], rows[i + 1]]
            i += 2
            break
        header.append(rows[i])
        i += 1
    while i < n:
        m = _HUNK_HEADER.match(rows[i])
        if m is None:
            return None
        old_len = 1 if m.group(2) is None else int(m.group(2))
        new_len = 1 if m.group(4) is None else int(m.group(4))
        hunk = _Hunk(int(m.group(1)), old_len, int(m.group(3)), new_len, m.group(5), [])
        i += 1
        old_left, new_left = old_len, new_len
        while i < n and (old_left > 0 or new_left > 0):
            row = rows[i]
            tag = row[:1] or " "
            if tag == "\\":
                if not hunk.lines:
                    return None
                t, c, _ = hunk.lines[-1]
                hunk.lines[-1] = (t, c, True)
                i += 1
                continue
            if tag not in " -+":
                return None
            if tag != "+":
                old_left -= 1
            if tag != "-":
                new_left -= 1
            hunk.lines.append((tag, row[1:], False))
            i += 1
        if old_left or new_left:
            return None
        while i < n and rows[i].startswith("\\"):
            if not hunk.lines:
                return None
            t, c, _ = hunk.lines[-1]
            hunk.lines[-1] = (t, c, True)
            i += 1
        hunks.append(hunk)
    return header, names, hunks


def _split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` (only ``\\n`` splits); the last may lack it."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _full(content: str, no_eol: bool) -> str:
    return content if no_eol else content + "\n"


def _apply(
    base: list[str], hunks: list[_Hunk], plus_at: dict[int, tuple[int, int]] | None = None
) -> list[str] | None:
    """Post-image of ``hunks`` on ``base`` (exact positions), None when they do not match."""
    out: list[str] = []
    cur = 0
    for h_i, h in enumerate(hunks):
        start = h.old_start - 1 if h.old_len > 0 else h.old_start
        if start < cur or start > len(base):
            return None
        out += base[cur:start]
        cur = start
        for r_i, (tag, content, no_eol) in enumerate(h.lines):
            full = _full(content, no_eol)
            if tag != "+":
                if cur >= len(base) or base[cur] != full:
                    return None
                cur += 1
            if tag != "-":
                out.append(full)
                if tag == "+" and plus_at is not None:
                    plus_at[len(out)] = (h_i, r_i)
    return out + base[cur:]


def _renumber(hunks: list[_Hunk]) -> list[_Hunk]:
    """Drop hunks without changes, recount lengths and the new-side start lines."""
    out: list[_Hunk] = []
    delta = 0
    for h in hunks:
        if not any(tag != " " for tag, _, _ in h.lines):
            continue
        old_len = sum(1 for tag, _, _ in h.lines if tag != "+")
        new_len = sum(1 for tag, _, _ in h.lines if tag != "-")
        old_pos = h.old_start if h.old_len > 0 else h.old_start + 1
        new_pos = old_pos + delta
        new_start = new_pos if new_len > 0 else new_pos - 1
        out.append(_Hunk(h.old_start, old_len, new_start, new_len, h.heading, list(h.lines)))
        delta += new_len - old_len
    return out


def _quote(path: str) -> str:
    """A path for a synthesized git header, C-quoted when git would need quotes."""
    if not any(ch in '"\\' or ord(ch) < 32 or ord(ch) == 127 for ch in path):
        return path
    out = []
    for ch in path:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _render(f: _File, hunks: list[_Hunk], absent: bool) -> str:
    """The mutated file's section ("" when it leaves the file as in the base)."""
    status = f.fp.status
    if (status == "A" and absent) or (status == "D" and not hunks):
        return ""
    if f.fp.git:
        header, names = list(f.header), list(f.names)
    else:
        old, new = f.fp.old_path, f.fp.new_path
        a, b = old if old is not None else new, new if new is not None else old
        header = [f"diff --git {_quote('a/' + (a or ''))} {_quote('b/' + (b or ''))}"]
        if status == "A":
            header.append("new file mode 100644")
        elif status == "D":
            header.append("deleted file mode 100644")
        names = [
            "--- " + ("/dev/null" if old is None else _quote("a/" + old)),
            "+++ " + ("/dev/null" if new is None else _quote("b/" + new)),
        ]
    if not names:
        old, new = f.fp.old_path, f.fp.new_path
        names = [
            "--- " + ("/dev/null" if old is None else _quote("a/" + old)),
            "+++ " + ("/dev/null" if new is None else _quote("b/" + new)),
        ]
    if not hunks:
        if status == "M" and not any(h.startswith(("old mode ", "new mode ")) for h in header):
            return ""
        return "".join(h + "\n" for h in header)
    out = [h + "\n" for h in header] + [nm + "\n" for nm in names]
    for h in hunks:
        out.append(h.header() + h.heading + "\n")
        for tag, content, no_eol in h.lines:
            out.append(tag + content + "\n")
            if no_eol:
                out.append(_NO_EOL + "\n")
    return "".join(out)


# --------------------------------------------------------------------------- candidates


@dataclass
class _Cand:
    kind: str
    line: int
    edits: dict[int, str | None]  # post-image line -> new content (no CR/newline) or delete
    what: str  # description
    revert: int | None = None  # hunk index for hunk_revert


def _snippet(text: str, limit: int = 70) -> str:
    s = " ".join(text.split())
    s = s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _contents(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        c = line[:-1] if line.endswith("\n") else line
        out.append(c[:-1] if c.endswith("\r") else c)
    return out


# ---- Python


@dataclass
class _LogicalLine:
    start: int
    end: int
    indent: int
    toks: list[tokenize.TokenInfo]
    header: bool  # ends with ":" (a block follows)


_SKIP_TOKENS = frozenset(
    {
        tokenize.NL,
        tokenize.COMMENT,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    }
)
_SIMPLE_STMTS = (
    ast.Expr,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Raise,
    ast.Assert,
    ast.Delete,
    ast.Import,
    ast.ImportFrom,
)
_OPEN, _CLOSE = "([{", ")]}"


def _py_logical_lines(text: str) -> list[_LogicalLine] | None:
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except Exception:  # noqa: BLE001 - any tokenizer failure: no line-level operators
        return None
    out: list[_LogicalLine] = []
    cur: list[tokenize.TokenInfo] = []
    for t in toks:
        if t.type == tokenize.NEWLINE:
            if cur:
                last = cur[-1]
                header = last.type == tokenize.OP and last.string == ":"
                out.append(_LogicalLine(cur[0].start[0], t.start[0], cur[0].start[1], cur, header))
            cur = []
        elif t.type not in _SKIP_TOKENS:
            cur.append(t)
    if cur:
        end = max(t.end[0] for t in cur)
        out.append(_LogicalLine(cur[0].start[0], end, cur[0].start[1], cur, False))
    return out


def _is_name(tok: tokenize.TokenInfo, *names: str) -> bool:
    return tok.type == tokenize.NAME and tok.string in names


def _simple_statement(stripped: str) -> bool:
    # undecodable bytes (surrogates) cannot be parsed; U+FFFD keeps strings and comments valid
    stripped = stripped.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(stripped)
    except Exception:  # noqa: BLE001
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], _SIMPLE_STMTS):
        return False
    node = tree.body[0]
    return not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))


def _py_ternary(toks: list[tokenize.TokenInfo]) -> tuple[int, int] | None:
    """Indices of the ``if`` and ``else`` tokens of the first ternary on the line."""
    depth = 0
    depths = []
    for t in toks:
        depths.append(depth)
        if t.type == tokenize.OP and t.string in _OPEN:
            depth += 1
        elif t.type == tokenize.OP and t.string in _CLOSE:
            depth -= 1
    for j in range(1, len(toks)):
        if not _is_name(toks[j], "if"):
            continue
        d = level = depths[j]
        for k in range(j + 1, len(toks)):
            t = toks[k]
            if t.type == tokenize.OP and t.string in _OPEN:
                level += 1
            elif t.type == tokenize.OP and t.string in _CLOSE:
                level -= 1
                if level < d:
                    break
            elif level == d:
                if _is_name(t, "else"):
                    if k > j + 1:
                        return j, k
                    break
                if _is_name(t, "if", "for", "lambda", "async") or (
                    t.type == tokenize.OP and t.string in (",", ":", "=", ";")
                ):
                    break
    return None


def _py_candidates(contents: list[str], added: set[int]) -> list[_Cand]:
    if any("\r" in c for c in contents):
        return []
    lls = _py_logical_lines("\n".join(contents) + "\n")
    if lls is None:
        return []
    out: list[_Cand] = []
    for idx, ll in enumerate(lls):
        if ll.start not in added:
            continue
        toks, first = ll.toks, ll.toks[0]
        content = contents[ll.start - 1]
        indent = content[: len(content) - len(content.lstrip())]
        one_line = ll.start == ll.end and all(t.end[0] == ll.start for t in toks)
        if _is_name(first, "return"):
            rest = [t for t in toks[1:] if not (t.type == tokenize.OP and t.string == ";")]
            all_added = all(n in added for n in range(ll.start, ll.end + 1))
            trivial = not rest or (len(rest) == 1 and _is_name(rest[0], "None"))
            if all_added and not trivial and first.start[0] == ll.start:
                edits: dict[int, str | None] = {ll.start: content[: first.start[1]] + "return None"}
                edits.update({n: None for n in range(ll.start + 1, ll.end + 1)})
                out.append(
                    _Cand("replace_return", ll.start, edits, f"return None: {_snippet(content)}")
                )
        if not one_line:
            continue
        if _is_name(first, "if", "elif", "while"):
            depth, colon = 0, None
            for k in range(1, len(toks)):
                t = toks[k]
                if t.type == tokenize.OP and t.string in _OPEN:
                    depth += 1
                elif t.type == tokenize.OP and t.string in _CLOSE:
                    depth -= 1
                elif depth == 0 and t.type == tokenize.OP and t.string == ":":
                    colon = k
                    break
            if colon is not None and colon > 1:
                a, b = first.end[1], toks[colon].start[1]
                cond = content[a:b].strip()
                new = content[:a] + " not (" + cond + ")" + content[b:]
                out.append(
                    _Cand(
                        "negate_condition",
                        ll.start,
                        {ll.start: new},
                        f"negate condition: {_snippet(content)}",
                    )
                )
            continue
        tern = _py_ternary(toks)
        if tern is not None:
            a, b = toks[tern[0]].end[1], toks[tern[1]].start[1]
            cond = content[a:b].strip()
            new = content[:a] + " not (" + cond + ") " + content[b:]
            out.append(
                _Cand(
                    "negate_condition",
                    ll.start,
                    {ll.start: new},
                    f"negate ternary condition: {_snippet(content)}",
                )
            )
        if _is_name(first, "return") or not _simple_statement(content.strip()):
            continue
        prev = lls[idx - 1] if idx > 0 else None
        nxt = lls[idx + 1] if idx + 1 < len(lls) else None
        alone = (
            prev is not None
            and prev.header
            and prev.indent < ll.indent
            and (nxt is None or nxt.indent <= prev.indent)
        )
        if alone:
            cand = _Cand(
                "drop_statement",
                ll.start,
                {ll.start: indent + "pass"},
                f"replace statement with pass: {_snippet(content)}",
            )
        else:
            cand = _Cand(
                "drop_statement", ll.start, {ll.start: None}, f"drop statement: {_snippet(content)}"
            )
        out.append(cand)
    return out


# ---- JavaScript


@dataclass
class _JsLine:
    masked: str  # same length as the line; string/regex bodies "x", comments " "
    start_code: bool  # the line starts in code (not in a comment, string or template)
    start_top: str | None  # innermost open bracket at the start
    start_depth: int
    end_code: bool
    end_depth: int
    min_depth: int

    @property
    def balanced(self) -> bool:
        return (
            self.start_code
            and self.end_code
            and self.min_depth >= self.start_depth == (self.end_depth)
        )

    @property
    def statement_level(self) -> bool:
        return self.start_code and self.start_top in (None, "{")


_JS_REGEX_AFTER_WORDS = frozenset(
    {
        "return",
        "typeof",
        "instanceof",
        "in",
        "of",
        "new",
        "delete",
        "void",
        "throw",
        "case",
        "do",
        "else",
        "yield",
        "await",
    }
)
_JS_REGEX_AFTER_CHARS = frozenset("(,=:[!&|?{};~+-*%<>^")
_PAIRS = {")": "(", "]": "[", "}": "{"}


def _js_word_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_$" or ord(ch) > 127


def _js_scan(lines: list[str]) -> list[_JsLine] | None:
    """A light lexer: per line, what is code, and the bracket nesting (None if confused)."""
    stack: list[str] = []  # "(" "[" "{" "`" (template text) "${" (template expression)
    mode = ""  # "" code, "*" block comment, "'" / '"' string continued with a backslash
    prev = ""  # the last significant token (a punctuation char or a word)
    out: list[_JsLine] = []
    for ln, line in enumerate(lines):
        in_tpl = bool(stack) and stack[-1] == "`"
        start_code, start_top = mode == "" and not in_tpl, stack[-1] if stack else None
        start_depth = min_depth = len(stack)
        buf = list(line)
        n, i = len(line), 0
        if ln == 0 and line.startswith("#!"):
            buf = [" "] * n
            i = n
        while i < n:
            c = line[i]
            if mode == "*":
                j = line.find("*/", i)
                end = n if j < 0 else j + 2
                buf[i:end] = [" "] * (end - i)
                if j >= 0:
                    mode = ""
                i = end
                continue
            if mode in ("'", '"'):
                j = i
                while j < n and line[j] != mode:
                    j += 2 if line[j] == "\\" else 1
                if j >= n:
                    if not line.endswith("\\"):
                        return None
                    buf[i:n] = ["x"] * (n - i)
                    i = n
                    continue
                buf[i:j] = ["x"] * (j - i)
                mode, prev, i = "", "x", j + 1
                continue
            if stack and stack[-1] == "`":
                if c == "\\":
                    end = min(n, i + 2)
                    buf[i:end] = ["x"] * (end - i)
                    i = end
                elif c == "`":
                    stack.pop()
                    min_depth = min(min_depth, len(stack))
                    prev, i = "x", i + 1
                elif c == "$" and line[i + 1 : i + 2] == "{":
                    stack.append("${")
                    prev, i = "{", i + 2
                else:
                    buf[i] = "x"
                    i += 1
                continue
            nxt = line[i + 1 : i + 2]
            if c in " \t\r\f\v\ufeff\xa0":
                i += 1
            elif c == "/" and nxt == "/":
                buf[i:n] = [" "] * (n - i)
                i = n
            elif c == "/" and nxt == "*":
                mode = "*"
                buf[i : i + 2] = [" ", " "]
                i += 2
            elif c in "'\"":
                j = i + 1
                while j < n and line[j] != c:
                    j += 2 if line[j] == "\\" else 1
                if j >= n:
                    if not line.endswith("\\"):
                        return None
                    buf[i + 1 : n] = ["x"] * (n - i - 1)
                    mode, i = c, n
                    continue
                buf[i + 1 : j] = ["x"] * (j - i - 1)
                prev, i = "x", j + 1
            elif c == "`":
                stack.append("`")
                i += 1
            elif c == "/":
                if prev == "" or prev in _JS_REGEX_AFTER_CHARS or prev in _JS_REGEX_AFTER_WORDS:
                    j, in_class = i + 1, False
                    while j < n:
                        ch = line[j]
                        if ch == "\\":
                            j += 2
                            continue
                        if ch == "[":
                            in_class = True
                        elif ch == "]":
                            in_class = False
                        elif ch == "/" and not in_class:
                            break
                        j += 1
                    if j < n:
                        buf[i + 1 : j] = ["x"] * (j - i - 1)
                        i = j + 1
                        while i < n and _js_word_char(line[i]):
                            i += 1
                        prev = "x"
                        continue
                prev, i = "/", i + 1
            elif c in _OPEN:
                stack.append(c)
                prev, i = c, i + 1
            elif c in _CLOSE:
                want = "${" if c == "}" and stack and stack[-1] == "${" else _PAIRS[c]
                if not stack or stack[-1] != want:
                    return None
                stack.pop()
                min_depth = min(min_depth, len(stack))
                prev, i = c, i + 1
            elif _js_word_char(c):
                j = i
                while j < n and _js_word_char(line[j]):
                    j += 1
                prev, i = line[i:j], j
            else:
                prev, i = c, i + 1
        if mode in ("'", '"') and not line.endswith("\\"):
            return None
        end_code = mode == "" and not (stack and stack[-1] == "`")
        out.append(
            _JsLine(
                "".join(buf), start_code, start_top, start_depth, end_code, len(stack), min_depth
            )
        )
    if mode or stack:
        return None
    return out


_JS_NO_DROP = re.compile(
    r"^(?:return|throw|break|continue|case|default|if|else|for|while|do|switch|try|catch"
    r"|finally|function|class|async\s+function)\b"
)
_JS_COND = re.compile(r"^\s*(?:\}\s*)?(?:else\s+)?(?:if|while)\s*\(")
_JS_LABEL = re.compile(r"^\s*(?:case\b.*|default\s*):$")
_JS_DIRECTIVE = re.compile(r"^(['\"])x*\1;$")
_JS_HEADER = re.compile(r"^(?:\}\s*)?(?:if|for|while|else|with|do)(?![\w$])")
_JS_OPERATOR_WORDS = frozenset(
    {"typeof", "instanceof", "in", "of", "new", "delete", "void", "await", "yield", "else", "do"}
)


def _js_candidates(contents: list[str], added: set[int]) -> list[_Cand]:
    if any(ch in c for c in contents for ch in ("\r", "\u2028", "\u2029")):
        return []
    info = _js_scan(contents)
    if info is None:
        return []
    sig = [i for i, li in enumerate(info) if li.masked.strip()]
    out: list[_Cand] = []
    for pos, i in enumerate(sig):
        ln = i + 1
        if ln not in added:
            continue
        li, content = info[i], contents[i]
        sm = li.masked.strip()
        lead = len(li.masked) - len(li.masked.lstrip())
        prev = info[sig[pos - 1]].masked.strip() if pos > 0 else None
        nxt = info[sig[pos + 1]].masked.strip() if pos + 1 < len(sig) else None
        m = _JS_COND.match(li.masked)
        if m is not None and li.start_code:
            open_at, depth, close_at = m.end() - 1, 0, None
            for k in range(open_at, len(li.masked)):
                ch = li.masked[k]
                if ch in _OPEN:
                    depth += 1
                elif ch in _CLOSE:
                    depth -= 1
                    if depth == 0:
                        close_at = k
                        break
            if close_at is not None and content[open_at + 1 : close_at].strip():
                new = content[: open_at + 1] + "!(" + content[open_at + 1 : close_at] + ")"
                new += content[close_at:]
                what = f"negate condition: {_snippet(content)}"
                out.append(_Cand("negate_condition", ln, {ln: new}, what))
            continue
        if not (li.statement_level and li.balanced):
            continue
        semi = sm.endswith(";")
        # without ";" the line must end a statement by ASI: a value at its end, and a next
        # line that cannot continue the expression
        asi_end = not semi and _js_ends_value(sm) and not _js_continues(nxt)
        if re.match(r"return(?![\w$])", sm):
            if not (semi or asi_end or (nxt is not None and nxt.startswith("}"))):
                continue
            start = lead + len("return")
            end = lead + len(sm) - (1 if semi else 0)
            expr = content[start:end].strip()
            if expr and expr not in ("undefined", "null", "void 0"):
                new = content[:lead] + "return undefined" + (";" if semi else "")
                what = f"return undefined: {_snippet(content)}"
                out.append(_Cand("replace_return", ln, {ln: new}, what))
            continue
        if not (semi or asi_end) or sm == ";":
            continue
        if _JS_NO_DROP.match(sm) or _JS_DIRECTIVE.match(sm.rstrip(";") + ";"):
            continue
        if sm[0] in "})].,?:":
            continue
        if prev is None or prev[-1] in ";{}" or _JS_LABEL.match(prev):
            prev_ok = True
        else:  # the previous line ended its statement by ASI
            p_info = info[sig[pos - 1]]
            prev_ok = (
                p_info.statement_level
                and p_info.balanced
                and _js_ends_value(prev)
                and not _JS_HEADER.match(prev)
                and sm[0] not in "([`+-/*%<>=&|^"
            )
        if not prev_ok:
            continue
        if prev is not None and prev.endswith("}") and nxt is not None and nxt[0] in "([`+-/":
            continue
        out.append(_Cand("drop_statement", ln, {ln: None}, f"drop statement: {_snippet(content)}"))
    return out


def _js_ends_value(sm: str) -> bool:
    """The (masked) line ends with a token that can end an expression."""
    last = sm[-1]
    if last in ")]'\"`" or (last.isdigit()):
        return True
    if not _js_word_char(last):
        return False
    word = re.search(r"[\w$\u0080-\U0010ffff]+$", sm)
    return word is None or word.group(0) not in _JS_OPERATOR_WORDS


def _js_continues(nxt: str | None) -> bool:
    """The next (masked) line could continue the expression of the line before it."""
    if nxt is None:
        return False
    return nxt[0] in ".([`+-*/%&|^<>=?:," or bool(re.match(r"(?:in|instanceof|of)(?![\w$])", nxt))


# --------------------------------------------------------------------------- syntax checks


def _compiles(text: str, path: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(encode_patch(text), path, "exec", dont_inherit=True)
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError, RecursionError...
        return False
    return True


def _node_check(texts: list[str], suffix: str) -> list[bool] | None:
    """``node --check`` of each text saved with ``suffix``; None when node is unavailable."""
    node = shutil.which("node")
    if node is None:
        return None
    if not texts:
        return []
    try:
        with tempfile.TemporaryDirectory(prefix="repogym-mutants-") as tmp:
            with open(os.path.join(tmp, "package.json"), "w", encoding="utf-8") as fh:
                fh.write('{"type": "commonjs"}\n')
            paths = []
            for i, text in enumerate(texts):
                p = os.path.join(tmp, f"m{i}{suffix}")
                with open(p, "wb") as fh:
                    fh.write(encode_patch(text))
                paths.append(p)

            def run(p: str) -> bool:
                try:
                    proc = subprocess.run(
                        [node, "--check", p],
                        cwd=tmp,
                        capture_output=True,
                        timeout=_NODE_TIMEOUT,
                        check=False,
                    )
                except (OSError, subprocess.SubprocessError):
                    return False
                return proc.returncode == 0

            workers = max(1, min(8, os.cpu_count() or 1, len(paths)))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                return list(pool.map(run, paths))
    except OSError:
        return None


def _syntax_filter(
    results: list[tuple[_File, _Cand, str | None, str]],
) -> list[tuple[_File, _Cand, str | None, str]]:
    """Keep the mutants whose mutated file still compiles (see the module docstring)."""
    keep = [True] * len(results)
    by_file: dict[int, list[int]] = {}
    for i, (f, _, _, _) in enumerate(results):
        by_file.setdefault(f.index, []).append(i)
    for idxs in by_file.values():
        f = results[idxs[0]][0]
        assert f.gold is not None
        gold = "".join(f.gold)
        lang = _lang(f.fp.path)
        line_ops = [i for i in idxs if results[i][1].kind != "hunk_revert"]
        if lang == "py":
            if not _compiles(gold, f.fp.path):
                continue  # written for another Python: no check for this file
            for i in idxs:
                state = results[i][2]
                if state is not None and not _compiles(state, f.fp.path):
                    keep[i] = False
        elif lang == "js":
            ext = "." + f.fp.path.lower().rsplit(".", 1)[-1]
            suffix = None
            for candidate in (ext, ".mjs") if ext == ".js" else (ext,):
                ok = _node_check([gold], candidate)
                if ok is None:
                    break  # no node: no check
                if ok[0]:
                    suffix = candidate
                    break
            else:
                for i in line_ops:  # not plain JavaScript (JSX, Flow...): reverts only
                    keep[i] = False
                continue
            if suffix is None:
                continue
            todo = [i for i in idxs if results[i][2] is not None]
            checked = _node_check([results[i][2] or "" for i in todo], suffix)
            if checked is None:
                continue
            for i, ok_i in zip(todo, checked, strict=True):
                keep[i] = keep[i] and ok_i
        else:
            for i in line_ops:
                keep[i] = False
    return [r for r, k in zip(results, keep, strict=True) if k]


# --------------------------------------------------------------------------- building


def _load(files: list[_File], read_base: Callable[[str], str | None]) -> None:
    counts: dict[str, int] = {}
    for f in files:
        for p in {f.fp.old_path, f.fp.new_path}:
            if p is not None:
                counts[p] = counts.get(p, 0) + 1
    for f in files:
        fp = f.fp
        if not f.code or fp.binary or not f.hunks:
            continue
        if any(counts.get(p, 0) > 1 for p in (fp.old_path, fp.new_path) if p is not None):
            continue  # a path in several sections: positions would not be against the base
        if fp.status == "A":
            base_text: str | None = ""
        else:
            try:
                base_text = read_base(fp.old_path or "")
            except Exception:  # noqa: BLE001 - an unreadable base: leave the file alone
                base_text = None
        if not isinstance(base_text, str):
            continue
        f.base = _split_lines(base_text) if base_text else []
        f.gold = _apply(f.base, f.hunks, f.plus_at)
        f.mutable = f.gold is not None


def _lang(path: str) -> str:
    low = path.lower()
    if low.endswith(_PY_EXT):
        return "py"
    if low.endswith(_JS_EXT):
        return "js"
    return ""


def _edit_hunks(f: _File, cand: _Cand) -> list[_Hunk]:
    hunks = [
        _Hunk(h.old_start, h.old_len, h.new_start, h.new_len, h.heading, list(h.lines))
        for h in f.hunks
    ]
    if cand.revert is not None:
        del hunks[cand.revert]
        return _renumber(hunks)
    drop: set[tuple[int, int]] = set()
    for line, new in cand.edits.items():
        h_i, r_i = f.plus_at[line]
        tag, content, no_eol = hunks[h_i].lines[r_i]
        if new is None:
            drop.add((h_i, r_i))
        else:
            cr = "\r" if content.endswith("\r") else ""
            hunks[h_i].lines[r_i] = (tag, new + cr, no_eol)
    for h_i, h in enumerate(hunks):
        h.lines = [row for r_i, row in enumerate(h.lines) if (h_i, r_i) not in drop]
    return _renumber(hunks)


def _first_change(h: _Hunk) -> int:
    pos = h.new_start if h.new_len > 0 else h.new_start + 1
    for tag, _, _ in h.lines:
        if tag != " ":
            return max(1, pos)
        pos += 1
    return max(1, pos)


def _candidates(f: _File, revert_ok: bool, *, lines: bool = True) -> list[_Cand]:
    assert f.gold is not None
    path = _snippet(f.fp.path, 300)
    out: list[_Cand] = []
    if revert_ok:
        for j, h in enumerate(f.hunks):
            what = f"revert hunk {j + 1} of {path} ({h.header()})"
            out.append(_Cand("hunk_revert", _first_change(h), {}, what, revert=j))
    if not lines:
        return out
    lang = _lang(f.fp.path)
    added = set(f.plus_at)
    line_cands: list[_Cand] = []
    if lang == "py":
        line_cands = _py_candidates(_contents(f.gold), added)
    elif lang == "js":
        line_cands = _js_candidates(_contents(f.gold), added)
    order = {k: i for i, k in enumerate(KINDS)}
    line_cands.sort(key=lambda c: (c.line, order.get(c.kind, len(order))))
    for c in line_cands:
        verb, _, detail = c.what.partition(": ")
        c.what = f"{verb} at {path}:{c.line}: {detail}"
    return out + line_cands


def _make(
    f: _File, cand: _Cand, gold_state: str, base_state: str | None, base_is_empty: bool
) -> tuple[str | None, str] | None:
    """(mutated file content or None when absent, its section), None when not a mutant.

    ``base_is_empty``: the file's base state is the whole code tree's base state (no other
    code file changes), so a mutant equal to the base is the empty solution.
    """
    assert f.base is not None
    hunks = _edit_hunks(f, cand)
    absent = f.fp.status == "A" and cand.revert is not None and not hunks
    if f.fp.status == "D":
        if hunks:
            return None  # only the revert changes a deletion
        state: str | None = base_state
    elif absent:
        state = None
    else:
        post = _apply(f.base, hunks)
        if post is None:
            return None
        state = "".join(post)
        if state == gold_state:
            return None
    if base_is_empty and state == base_state:
        return None
    return state, _render(f, hunks, absent)


def build_mutants(
    gold_patch: str,
    read_base: Callable[[str], str | None],
    *,
    is_code: Callable[[str], bool] | None = None,
    check_syntax: bool = True,
) -> list[Mutant]:
    """Every candidate mutant of ``gold_patch``, in a deterministic order.

    ``read_base(path)`` returns the base text of a file (UTF-8 + surrogateescape), None when
    it does not exist. ``is_code(path)`` says which files may be mutated and whose hunks count
    for ``hunk_revert`` (default :func:`default_is_code`); release notes
    (:func:`is_release_notes`) never count, whatever ``is_code`` says. Mutants come per file
    in patch order: hunk reverts first, then the line operators by line. With
    ``check_syntax`` mutants that do not compile are left out (see the module docstring).
    """
    try:
        sections = parse_patch(gold_patch)
    except Exception:  # noqa: BLE001 - never raise on odd input
        return []
    pred = is_code or default_is_code
    files: list[_File] = []
    for i, fp in enumerate(sections):
        try:
            code = bool(pred(fp.path)) and not is_release_notes(fp.path)
        except Exception:  # noqa: BLE001
            code = False
        f = _File(i, fp, code)
        if not fp.binary:
            parsed = _parse_section(fp.text)
            if parsed is not None:
                f.header = [h for h in parsed[0] if not h.startswith("index ")]
                f.names, f.hunks = parsed[1], parsed[2]
        files.append(f)
    code_hunks = sum(len(f.hunks) for f in files if f.code and not f.fp.binary)
    _load(files, read_base)

    seen: set[tuple[int, str | None]] = set()
    results: list[tuple[_File, _Cand, str | None, str]] = []
    for f in files:
        if not f.mutable or f.gold is None or f.base is None:
            continue
        try:
            cands = _candidates(f, code_hunks >= 2, lines=True)
        except Exception:  # noqa: BLE001 - an analyser bug must not sink the whole build
            cands = _candidates(f, code_hunks >= 2, lines=False)
        others_change = any(g.code for g in files if g is not f)
        gold_state = "".join(f.gold)
        base_state = None if f.fp.status == "A" else "".join(f.base)
        pure = f.fp.status in ("M", "A", "D") and not any(
            h.startswith(("old mode ", "new mode ")) for h in f.header
        )
        for cand in cands:
            try:
                made = _make(f, cand, gold_state, base_state, pure and not others_change)
            except Exception:  # noqa: BLE001 - skip what cannot be mutated
                continue
            if made is None or (f.index, made[0]) in seen:
                continue
            seen.add((f.index, made[0]))
            results.append((f, cand, made[0], made[1]))

    if check_syntax:
        results = _syntax_filter(results)

    mutants: list[Mutant] = []
    for f, cand, _state, section in results:
        parts = [section if g is f else g.fp.text for g in files]
        patch = "".join(parts)
        if not patch.strip():
            continue
        mutants.append(Mutant(cand.kind, f.fp.path, cand.line, cand.what, patch))
    return mutants


# --------------------------------------------------------------------------- selection


def select_mutants(mutants: list[Mutant], k: int, seed: str) -> list[Mutant]:
    """``k`` mutants, round-robin over the kinds, deterministic for ``(mutants, k, seed)``.

    A PRNG seeded with SHA-256 of ``seed`` shuffles the mutants of each kind (kinds taken in
    :data:`KINDS` order, unknown kinds after them by name) and then the order in which the
    kinds take turns; picks then go one per kind per round, skipping exhausted kinds. So four
    mutants of a patch with all four kinds are one of each, and ``k`` at least
    ``len(mutants)`` returns them all.
    """
    if k <= 0 or not mutants:
        return []
    rng = random.Random(hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest())
    groups: dict[str, list[Mutant]] = {}
    for m in mutants:
        groups.setdefault(m.kind, []).append(m)
    rank = {kind: i for i, kind in enumerate(KINDS)}
    kinds = sorted(groups, key=lambda kind: (rank.get(kind, len(rank)), kind))
    for kind in kinds:
        rng.shuffle(groups[kind])
    rng.shuffle(kinds)
    out: list[Mutant] = []
    depth = 0
    while len(out) < k:
        took = False
        for kind in kinds:
            if depth < len(groups[kind]):
                out.append(groups[kind][depth])
                took = True
                if len(out) == k:
                    break
        if not took:
            break
        depth += 1
    return out
