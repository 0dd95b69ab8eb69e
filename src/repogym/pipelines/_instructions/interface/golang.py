"""Go: the exported names of a package that its changed ``_test.go`` files use and that only
the fixed source defines (lexer-level; no Go toolchain or parser is run).

A Go test file that names a missing symbol does not compile, so every changed test file of a
package counts as what the hidden tests need. Names are read from the package under test (the
non-test ``.go`` files of the test file's folder): top-level ``func``, ``type``, ``const`` and
``var`` declarations (grouped ones too) and methods (``func (r *T) M(…)``), exported ones only.
A test file of the package itself uses them bare (``NewV6WithTime(…)``); an external test
package (``package x_test``) through the package's import (``uuid.NewV6WithTime``). A method
counts when the tests call it on a variable whose type they show (``c, _ := New2Q(…)``,
``c := &Cache{…}``), or select it (``.M``) and the base package has no method or field of
that name at all (a selector whose receiver type is unknown could be the old one). Signatures come
from the fixed source, bodies never.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from repogym.pipelines._instructions.interface.model import MAX_BYTES, Required, collapse

Token = tuple[str, str, int]
"""(kind: ident | literal | punct, text, offset)."""

_IDENT = re.compile(r"[A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_\u0080-\U0010ffff]*")
_NUMBER = re.compile(r"[0-9][0-9A-Za-z_.]*")
_OPEN = {"(": ")", "[": "]", "{": "}"}
_DECL = ("func", "type", "const", "var")


def go_tokens(text: str) -> list[Token]:
    """The tokens of Go source; comments and whitespace left out (an unterminated literal or
    comment ends the text)."""
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end == -1 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end == -1 else end + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(("literal", text[i : j + 1], i))
            i = j + 1
        elif c == "`":
            end = text.find("`", i + 1)
            j = n if end == -1 else end + 1
            out.append(("literal", text[i:j], i))
            i = j
        elif (m := _IDENT.match(text, i)) is not None:
            out.append(("ident", m.group(), i))
            i = m.end()
        elif (m := _NUMBER.match(text, i)) is not None:
            out.append(("literal", m.group(), i))
            i = m.end()
        else:
            out.append(("punct", c, i))
            i += 1
    return out


def _close(toks: list[Token], k: int) -> int:
    """The index of the bracket closing the one at ``toks[k]`` (the last token when unclosed)."""
    depth = 0
    for j in range(k, len(toks)):
        t = toks[j][1] if toks[j][0] == "punct" else ""
        if t in _OPEN:
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


@dataclass(frozen=True)
class Decl:
    kind: str
    """function, method, class (a type) or attribute (a const or var)."""
    name: str
    """``Name``, or ``Type.Name`` for a method."""
    signature: str
    where: str


def _signature(text: str, toks: list[Token], k: int) -> tuple[str, int]:
    """A ``func`` declaration's text from ``toks[k]`` up to its body, and the body's last
    token index (or the last token of the signature when there is no body)."""
    j, n = k, len(toks)
    while j < n:
        kind, t, _ = toks[j]
        if kind == "punct" and t in ("(", "["):
            j = _close(toks, j) + 1
            continue
        if kind == "punct" and t == "{":
            if j > k and toks[j - 1][1] in ("interface", "struct"):
                j = _close(toks, j) + 1
                continue
            return collapse(text[toks[k][2] : toks[j][2]]), _close(toks, j)
        if kind == "ident" and t in _DECL and j > k and "\n" in text[toks[j - 1][2] : toks[j][2]]:
            break
        j += 1
    end = toks[j - 1] if j > k else toks[k]
    return collapse(text[toks[k][2] : end[2] + len(end[1])]), j - 1


def _receiver_type(toks: list[Token], k: int, close: int) -> str | None:
    """The type of the receiver ``(u *UUID)``, ``(UUID)``, ``(l *List[T])`` in ``toks[k:close]``."""
    inner = toks[k + 1 : close]
    named = (
        len(inner) >= 2
        and inner[0][0] == "ident"
        and (inner[1][0] == "ident" or inner[1][1] == "*")
    )
    rest = inner[1:] if named else inner
    return next((t for kind, t, _ in rest if kind == "ident"), None)


def _spec(text: str, toks: list[Token], word: str, j: int, end: int) -> str:
    """``const X T`` / ``var X T`` / ``type X struct`` / ``type F func(int) error``: the name and
    its declared type, never a value or a body."""
    stop = j + 1
    while (
        stop <= end
        and toks[stop][1] not in ("=", "{", ";")
        and "\n" not in text[toks[stop - 1][2] : toks[stop][2]]
    ):
        stop = _close(toks, stop) + 1 if toks[stop][1] in ("(", "[") else stop + 1
    last = toks[min(stop, len(toks)) - 1]
    return collapse(f"{word} " + text[toks[j][2] : last[2] + len(last[1])])


def go_decls(text: str, where: str) -> list[Decl]:
    """The top-level declarations of one Go file."""
    toks = go_tokens(text)
    out: list[Decl] = []
    k, n = 0, len(toks)
    while k < n:
        kind, t, _ = toks[k]
        if kind == "punct" and t in _OPEN:
            k = _close(toks, k) + 1
            continue
        line_start = k == 0 or "\n" in text[toks[k - 1][2] : toks[k][2]]
        if kind != "ident" or t not in _DECL or k + 1 >= n or not line_start:
            k += 1
            continue
        if t == "func":
            sig, last = _signature(text, toks, k)
            if toks[k + 1][1] == "(":
                close = _close(toks, k + 1)
                recv = _receiver_type(toks, k + 1, close)
                if recv and close + 1 < n and toks[close + 1][0] == "ident":
                    out.append(Decl("method", f"{recv}.{toks[close + 1][1]}", sig, where))
            elif toks[k + 1][0] == "ident":
                out.append(Decl("function", toks[k + 1][1], sig, where))
            k = last + 1
            continue
        group = toks[k + 1][1] == "("
        start, end = (k + 2, _close(toks, k + 1) - 1) if group else (k + 1, k + 1)
        label = "class" if t == "type" else "attribute"
        bound = end if group else n - 1
        j = start
        while j <= end:
            at_line = (
                j == start or "\n" in text[toks[j - 1][2] : toks[j][2]] or toks[j - 1][1] == ";"
            )
            if toks[j][0] == "ident" and at_line:
                out.append(Decl(label, toks[j][1], _spec(text, toks, t, j, bound), where))
            if toks[j][0] == "punct" and toks[j][1] in _OPEN:
                j = _close(toks, j)
            j += 1
        k = end + 1 if group else k + 2
    return out


# ------------------------------------------------------------------------------ the package


def _read(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _package(toks: list[Token]) -> str | None:
    for i, (kind, t, _) in enumerate(toks[:-1]):
        if kind == "ident" and t == "package" and toks[i + 1][0] == "ident":
            return toks[i + 1][1]
    return None


def package_decls(root: Path, folder: str) -> tuple[str | None, list[Decl]]:
    """The package name and declarations of the non-test ``.go`` files of ``folder``."""
    name, out = None, []
    base = root / folder if folder else root
    for path in sorted(base.glob("*.go")) if base.is_dir() else []:
        if path.name.endswith("_test.go"):
            continue
        text = _read(path)
        if text is None:
            continue
        rel = f"{folder}/{path.name}" if folder else path.name
        name = name or _package(go_tokens(text))
        out += go_decls(text, rel)
    return name, out


def _module_path(root: Path, folder: str) -> str | None:
    """The import path of ``folder`` from the nearest ``go.mod`` above it."""
    parts = folder.split("/") if folder else []
    for i in range(len(parts), -1, -1):
        text = _read(root.joinpath(*parts[:i], "go.mod"))
        m = re.search(r"^module\s+(\S+)", text or "", re.M)
        if m:
            return "/".join([m.group(1).strip('"'), *parts[i:]])
    return None


def _aliases(toks: list[Token], import_path: str | None, package: str) -> tuple[set[str], bool]:
    """Names under which a test file imports the package under test, and whether it
    dot-imports it."""
    names: set[str] = set()
    dot = False
    for i, (kind, t, _) in enumerate(toks):
        if kind != "literal" or t[:1] not in '"`' or t[1:-1] != import_path:
            continue
        prev = toks[i - 1] if i else ("punct", "", 0)
        if prev[0] == "ident" and prev[1] not in ("import",):
            names.add(prev[1])
        elif prev[1] == ".":
            dot = True
        else:
            names.add(package)
    return names, dot


def uses(toks: list[Token], aliases: set[str], internal: bool) -> tuple[set[str], set[str]]:
    """(package-level names a test file uses, names it selects with ``.``)."""
    free: set[str] = set()
    selected: set[str] = set()
    for i, (kind, t, _) in enumerate(toks):
        if kind != "ident":
            continue
        after_dot = i > 0 and toks[i - 1][1] == "."
        if after_dot:
            selected.add(t)
            if i > 1 and toks[i - 2][0] == "ident" and toks[i - 2][1] in aliases:
                free.add(t)
        elif internal:
            free.add(t)
    return free, selected


def _result_type(signature: str, types: set[str]) -> str | None:
    """The package type a function returns (``func New2Q[K, V](n int) (*TwoQueueCache[K, V],
    error)`` → ``TwoQueueCache``), if any."""
    toks = go_tokens(signature)
    k = 2 if len(toks) > 2 and toks[0][1] == "func" else len(toks)
    if k < len(toks) and toks[k][1] == "[":
        k = _close(toks, k) + 1
    if k < len(toks) and toks[k][1] == "(":
        k = _close(toks, k) + 1
    return next((t for kind, t, _ in toks[k:] if kind == "ident" and t in types), None)


def typed_calls(
    toks: list[Token], aliases: set[str], internal: bool, decls: list[Decl]
) -> set[tuple[str, str]]:
    """(Type, Method) pairs a test calls on a variable whose type it knows: assigned from one
    of the package's functions (its result type) or a composite literal ``T{…}``/``&T{…}``."""
    types = {d.name for d in decls if d.kind == "class"}
    returns = {d.name: _result_type(d.signature, types) for d in decls if d.kind == "function"}
    typed: dict[str, set[str]] = {}
    n = len(toks)
    for i in range(1, n - 1):
        t = toks[i][1]
        assign = (t == ":" and toks[i + 1][1] == "=") or (
            t == "=" and toks[i - 1][1] not in "=!<>:+-*/%&|^" and toks[i + 1][1] != "="
        )
        if not assign or toks[i - 1][0] != "ident":
            continue
        lhs = i - 1
        while lhs >= 2 and toks[lhs - 1][1] == "," and toks[lhs - 2][0] == "ident":
            lhs -= 2
        j = i + (2 if t == ":" else 1)
        j += 1 if j < n and toks[j][1] == "&" else 0
        if j + 2 < n and toks[j][1] in aliases and toks[j + 1][1] == ".":
            j += 2
        elif not internal:
            continue
        name = toks[j][1] if j < n else ""
        nxt = toks[j + 1][1] if j + 1 < n else ""
        typ = name if name in types and nxt in ("{", "[") else returns.get(name)
        if typ:
            typed.setdefault(toks[lhs][1], set()).add(typ)
    pairs: set[tuple[str, str]] = set()
    for i in range(n - 3):
        if toks[i][1] in typed and toks[i + 1][1] == "." and toks[i + 3][1] in ("(", "["):
            pairs |= {(typ, toks[i + 2][1]) for typ in typed[toks[i][1]]}
    return pairs


def read_go(base: Path, head: Path, test_files: list[str], f2p: list[str]) -> list[Required]:
    """The exported names the changed Go test files use that only ``head`` defines."""
    found: dict[tuple[str, str], Required] = {}
    for rel in sorted(t for t in test_files if t.endswith("_test.go")):
        text = _read(head / rel)
        if text is None:
            continue
        folder = rel.rpartition("/")[0]
        package, new = package_decls(head, folder)
        if package is None:
            continue
        _old_name, old = package_decls(base, folder)
        toks = go_tokens(text)
        own = _package(toks)
        aliases, dot = _aliases(toks, _module_path(head, folder), package)
        free, selected = uses(toks, aliases, own == package or dot)
        pairs = typed_calls(toks, aliases, own == package or dot, new)
        old_names = {d.name for d in old} | {d.name.rpartition(".")[2] for d in old}
        old_names |= _fields(base, folder)
        for decl in new:
            short = decl.name.rpartition(".")[2]
            if not short[:1].isupper() or decl.name in {d.name for d in old}:
                continue
            recv = decl.name.rpartition(".")[0]
            needed = (
                (recv, short) in pairs or (short in selected and short not in old_names)
                if decl.kind == "method"
                else decl.name in free
            )
            if needed:
                found.setdefault(
                    (decl.where, decl.name),
                    Required(
                        decl.kind, decl.name, None, decl.signature, decl.where, sorted(f2p)[:20]
                    ),
                )
    return [found[k] for k in sorted(found)]


def _fields(root: Path, folder: str) -> set[str]:
    """Every identifier followed by a type inside the base package's struct bodies (its field
    names, roughly): a selector of one of them is not a new method."""
    out: set[str] = set()
    base = root / folder if folder else root
    for path in sorted(base.glob("*.go")) if base.is_dir() else []:
        text = _read(path)
        toks = go_tokens(text or "")
        for i, (kind, t, _) in enumerate(toks):
            if kind == "ident" and t == "struct" and i + 1 < len(toks) and toks[i + 1][1] == "{":
                end = _close(toks, i + 1)
                out |= {x for k2, x, _ in toks[i + 2 : end] if k2 == "ident"}
    return out
