"""Procedural mutants of Go, Rust, Java, C and C++ functions (``bug_synth`` in compiled
languages): :func:`braced_mutants` is :func:`.mutants.python_mutants` for brace languages.

Edits are made on tokens (:mod:`repogym.verify.braced_lex`), never inside comments or literals,
and only in function bodies (in Rust, not in the file's ``#[cfg(test)]`` items). The operators
are those of :data:`repogym.spec.BUG_OPERATORS` that carry over:

* ``compare``: ``==``/``!=`` swapped; ``<``, ``<=``, ``>``, ``>=`` moved by one when spaced
  (``a < b``: an unspaced ``<`` is usually a generic's bracket);
* ``boolean``: one ``&&`` ↔ ``||``;
* ``negate_condition``: an ``if``/``while`` condition whole on its line negated
  (:func:`repogym.verify.mutation_braced.negate_line`);
* ``off_by_one``: an integer next to a bracket, a comparison or ``+``/``-`` moved by one;
* ``constant``: ``true`` ↔ ``false``, another integer moved by one;
* ``remove_guard``: an ``if`` whose only statement returns, breaks, continues or throws,
  dropped (no ``else``);
* ``remove_statement``: a line that is one call, assignment or increment statement, dropped;
* ``swap_args``: two single-token arguments of a call swapped.

Nothing here knows the types: a mutant that does not compile is dropped by the harness, which
asks the language's own compiler first. Order and de-duplication are as for Python mutants.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from repogym.pipelines._synthesis.mutants import (
    OPERATORS,
    Mutation,
    _Candidate,
    _interleave,
    _mutation,
    _round_robin,
    _short,
)
from repogym.pipelines._synthesis.ops import Edit
from repogym.shipped import rust_tests
from repogym.verify.braced_lex import (
    LANGUAGES,
    Function,
    LexError,
    Token,
    functions,
    match_brackets,
)
from repogym.verify.mutation_braced import negate_line

_SWAP = {"==": "!=", "!=": "==", "<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_ORDERING = frozenset({"<", "<=", ">", ">="})
_INT = re.compile(r"^([0-9]+)([A-Za-z_]*)$")
_EXITS = frozenset({"return", "continue", "break", "throw"})
_KEYWORDS = frozenset(
    {"if", "else", "for", "while", "do", "switch", "case", "default", "return", "break"}
    | {"continue", "goto", "let", "var", "const", "static", "final", "fn", "func", "throw"}
    | {"try", "catch", "finally", "defer", "go", "select", "match", "loop", "yield", "new"}
    | {"delete", "using", "typedef", "struct", "class", "enum", "union", "type", "import"}
    | {"package", "assert", "Self", "unsafe", "mut", "pub", "use"}
    | {"auto", "int", "char", "long", "short", "unsigned", "signed", "float", "double", "void"}
    | {"bool", "boolean", "byte", "synchronized", "sizeof", "fallthrough", "panic"}
)
_ASSIGN = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "|=", "&=", "^=", "<<=", ">>="})
_CHAIN = frozenset({".", "->", "::"})


@dataclass
class _Body:
    """One function body being mutated: its tokens and the text around them."""

    text: str
    lang: str
    toks: list[Token]
    pairs: dict[int, int]
    func: Function

    @property
    def span(self) -> range:
        return range(self.func.open + 1, self.func.close)

    def tok(self, k: int) -> Token:
        return self.toks[k] if 0 <= k < len(self.toks) else ("", "", -1, -1)

    def line_bounds(self, offset: int) -> tuple[int, int]:
        """``(start, end)`` of the line holding ``offset`` (end: after its newline)."""
        start = self.text.rfind("\n", 0, offset) + 1
        end = self.text.find("\n", offset)
        return start, len(self.text) if end == -1 else end + 1

    def owns_line(self, first: int, last: int) -> tuple[int, int] | None:
        """The lines from ``toks[first]`` to ``toks[last]`` when no other token shares them
        (whole lines to drop), else None."""
        start, _ = self.line_bounds(self.toks[first][2])
        _, end = self.line_bounds(self.toks[last][3] - 1)
        if self.text[start : self.toks[first][2]].strip():
            return None
        if self.text[self.toks[last][3] : end].strip():
            return None
        return start, end


def _compare(b: _Body) -> list[_Candidate]:
    out = []
    for k in b.span:
        kind, t, start, end = b.tok(k)
        if kind != "punct" or t not in _SWAP:
            continue
        spaced = b.text[start - 1 : start].isspace() and b.text[end : end + 1].isspace()
        if t in _ORDERING and not spaced:
            continue
        out.append(_Candidate("compare", ((start, end, _SWAP[t]),), f"{t} -> {_SWAP[t]}"))
    return out


def _boolean(b: _Body) -> list[_Candidate]:
    out = []
    for k in b.span:
        kind, t, start, end = b.tok(k)
        if kind == "punct" and t in ("&&", "||"):
            new = "||" if t == "&&" else "&&"
            out.append(_Candidate("boolean", ((start, end, new),), f"{t} -> {new}"))
    return out


def _negate(b: _Body) -> list[_Candidate]:
    out = []
    seen: set[int] = set()
    path = "x.go" if b.lang == "go" else "x.rs" if b.lang == "rust" else "x.java"
    for k in b.span:
        kind, t, start, _ = b.tok(k)
        if kind != "ident" or t not in ("if", "while"):
            continue
        line_start, line_end = b.line_bounds(start)
        if line_start in seen:
            continue
        seen.add(line_start)
        line = b.text[line_start:line_end].rstrip("\r\n")
        new = negate_line(line, path)
        if new is not None:
            edit = (line_start, line_start + len(line), new)
            out.append(_Candidate("negate_condition", (edit,), f"negate {_short(line)}"))
    return out


def _int_edits(t: str, start: int, end: int) -> list[tuple[Edit, str]]:
    m = _INT.match(t)
    if m is None or (len(m.group(1)) > 1 and m.group(1).startswith("0")):
        return []  # not a plain decimal (an octal literal in C and Go)
    n, suffix = int(m.group(1)), m.group(2)
    out = [((start, end, f"{n + 1}{suffix}"), f"{t} -> {n + 1}{suffix}")]
    if n > 0:
        out.append(((start, end, f"{n - 1}{suffix}"), f"{t} -> {n - 1}{suffix}"))
    return out


def _bound(b: _Body, k: int) -> bool:
    """An integer whose neighbour is a bracket, a comparison or ``+``/``-``, or one in a
    ``for`` loop's header: a bound."""
    before, after = b.tok(k - 1)[1], b.tok(k + 1)[1]
    near = {"[", "]", "+", "-", ":", *_SWAP}
    if before in near or after in near:
        return True
    start, end = b.line_bounds(b.toks[k][2])
    return b.text[start:end].lstrip().startswith(("for ", "for("))


def _numbers(b: _Body) -> list[_Candidate]:
    out = []
    for k in b.span:
        kind, t, start, end = b.tok(k)
        if kind == "ident" and t in ("true", "false"):
            new = "false" if t == "true" else "true"
            out.append(_Candidate("constant", ((start, end, new),), f"{t} -> {new}"))
        elif kind == "number":
            op = "off_by_one" if _bound(b, k) else "constant"
            out.extend(_Candidate(op, (edit,), what) for edit, what in _int_edits(t, start, end))
    return out


def _guard_end(b: _Body, k: int) -> int | None:
    """The last token of the guard ``if`` at ``k`` when its only statement leaves (returns,
    breaks, continues, throws) and no ``else`` follows; else None."""
    j = k + 1
    if b.lang not in ("go", "rust"):
        if b.tok(j)[1] != "(" or j not in b.pairs:
            return None
        j = b.pairs[j] + 1
        if b.tok(j)[1] != "{":  # `if (c) return x;`
            if b.tok(j)[1] not in _EXITS:
                return None
            end = _statement_end(b, j)
            return end if end is not None and b.tok(end + 1)[1] != "else" else None
    else:
        while j < b.func.close and b.tok(j)[1] != "{":
            j = b.pairs.get(j, j) + 1 if b.tok(j)[1] in ("(", "[") else j + 1
    if b.tok(j)[1] != "{" or j not in b.pairs:
        return None
    close = b.pairs[j]
    inner = b.toks[j + 1 : close]
    if not inner or inner[0][1] not in _EXITS or any(t[1] in ("{", "}") for t in inner):
        return None
    semis = [i for i, t in enumerate(inner) if t[1] == ";"]
    if semis and semis != [len(inner) - 1]:
        return None
    return close if b.tok(close + 1)[1] != "else" else None


def _statement_end(b: _Body, k: int) -> int | None:
    """The ``;`` ending the statement starting at ``k`` (brackets skipped)."""
    j = k
    while j < b.func.close:
        t = b.tok(j)[1]
        if t == ";":
            return j
        if t in ("{", "}"):
            return None
        j = b.pairs.get(j, j) + 1 if t in ("(", "[") else j + 1
    return None


def _remove_guard(b: _Body) -> list[_Candidate]:
    out = []
    for k in b.span:
        kind, t, start, _ = b.tok(k)
        if kind != "ident" or t != "if" or b.tok(k - 1)[1] == "else":
            continue
        last = _guard_end(b, k)
        lines = b.owns_line(k, last) if last is not None else None
        if lines is not None:
            what = _short(b.text[start : b.toks[last][3]])  # type: ignore[index]
            out.append(_Candidate("remove_guard", ((lines[0], lines[1], ""),), f"drop {what}"))
    return out


def _statement_shape(toks: list[Token], lang: str) -> bool:
    """A call, assignment or increment statement: ``a.b(…);``, ``x += y;``, ``i++;``."""
    if lang != "go":
        if toks[-1][1] != ";":
            return False
        toks = toks[:-1]
    if not toks:
        return False
    if toks[0][1] in ("++", "--"):
        toks = toks[1:]
    if not toks or toks[0][0] != "ident" or toks[0][1] in _KEYWORDS:
        return False
    j = 1
    while j + 1 < len(toks) and toks[j][1] in _CHAIN and toks[j + 1][0] == "ident":
        j += 2
    if j == len(toks):
        return False
    nxt = toks[j][1]
    if nxt in ("++", "--"):
        return j == len(toks) - 1
    if nxt in _ASSIGN:
        return j < len(toks) - 1
    if nxt == "(":
        last = toks[-1][1]
        return last == ")" or (lang == "rust" and last == "?" and toks[-2][1] == ")")
    return False


def _remove_statement(b: _Body) -> list[_Candidate]:
    out = []
    by_line: dict[int, list[int]] = {}
    for k in b.span:
        by_line.setdefault(b.line_bounds(b.toks[k][2])[0], []).append(k)
    for start, ks in by_line.items():
        line_toks = [b.toks[k] for k in ks]
        if b.owns_line(ks[0], ks[-1]) is None or not _balanced(line_toks):
            continue
        if not _statement_shape(line_toks, b.lang):
            continue
        end = b.line_bounds(start)[1]
        if b.lang == "go" and b.text[end:].lstrip().startswith("."):
            continue  # a chain continued on the next line
        what = _short(b.text[start:end])
        out.append(_Candidate("remove_statement", ((start, end, ""),), f"drop {what}"))
    return out


def _balanced(toks: list[Token]) -> bool:
    depth = 0
    for t in toks:
        if t[1] in ("(", "[", "{"):
            depth += 1
        elif t[1] in (")", "]", "}"):
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _swap_args(b: _Body) -> list[_Candidate]:
    out = []
    for k in b.span:
        if b.tok(k)[1] != "(" or b.tok(k - 1)[0] != "ident" or b.tok(k - 1)[1] in _KEYWORDS:
            continue
        close = b.pairs.get(k)
        if close is None or close - k != 4 or b.tok(k + 2)[1] != ",":
            continue
        first, second = b.tok(k + 1), b.tok(k + 3)
        kinds = ("ident", "number", "string", "char")
        if first[0] not in kinds or second[0] not in kinds or first[1] == second[1]:
            continue
        edits = ((first[2], first[3], second[1]), (second[2], second[3], first[1]))
        what = f"{b.tok(k - 1)[1]}({first[1]}, {second[1]}) -> ({second[1]}, {first[1]})"
        out.append(_Candidate("swap_args", edits, _short(what)))
    return out


_MAKERS = (_compare, _boolean, _negate, _numbers, _remove_guard, _remove_statement, _swap_args)


def _excluded(text: str, lang: str) -> list[tuple[int, int]]:
    """Spans never mutated: a Rust file's test items (hidden and restored by the verifier)."""
    if lang != "rust":
        return []
    try:
        return rust_tests.test_items(text)
    except rust_tests.RustSyntaxError:
        return [(0, len(text))]


def braced_mutants(
    text: str,
    path: str,
    *,
    per_function: int | None = None,
    operators: Collection[str] | None = None,
) -> list[Mutation]:
    """Procedural mutants of the function bodies of one Go, Rust, Java, C or C++ file (its
    extension decides; :data:`repogym.verify.braced_lex.LANGUAGES`), in the order of
    :func:`.mutants.python_mutants`: round-robin over functions, within one round-robin over
    operators. A file the lexer cannot follow gives none."""
    lang = LANGUAGES.get("." + path.rsplit(".", 1)[-1].lower()) if "." in path else None
    if lang is None:
        return []
    try:
        toks, funcs = functions(text, lang)
        pairs = match_brackets(toks)
    except LexError:
        return []
    excluded = _excluded(text, lang)
    wanted = set(OPERATORS if operators is None else operators)
    queues: list[tuple[Function, Iterator[_Candidate]]] = []
    for func in funcs:
        offset = toks[func.open][2]
        if any(a <= offset < z for a, z in excluded) or func.close - func.open < 3:
            continue
        body = _Body(text, lang, toks, pairs, func)
        made = [c for maker in _MAKERS for c in maker(body) if c.operator in wanted]
        groups = [
            sorted((c for c in made if c.operator == op), key=lambda c: min(e[:2] for e in c.edits))
            for op in OPERATORS
        ]
        queues.append((func, iter(_interleave(groups))))

    def realize(func: Function, cand: _Candidate, new_text: str) -> Mutation:
        line = text.count("\n", 0, min(e[0] for e in cand.edits)) + 1
        return _mutation(path, func.name, func.line, line, cand, new_text)

    return _round_robin(text, queues, realize, per_function=per_function)
