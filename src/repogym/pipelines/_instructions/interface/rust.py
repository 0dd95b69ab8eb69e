"""Rust: the items of a crate that its hidden tests use and that only the fixed source defines
(lexer-level, with the shipped scanner :mod:`repogym.shipped.rust_tests`; no cargo is run).

What the tests are: the changed files under ``tests/`` whole, and for a source file with inline
tests only its test items (``#[cfg(test)] mod tests``, ``#[test]`` functions). What the crate
defines: the items of the non-test ``.rs`` files under the crate's ``src/`` (the nearest
``Cargo.toml`` above the test file), its test items left out — ``fn``, ``struct``, ``enum``,
``trait``, ``type``, ``const``, ``static``, ``macro_rules!`` at any module depth, and the
methods of ``impl`` blocks (``Type::method``). Integration tests reach ``pub`` items only;
inline tests (``use super::*``) the private ones of their own file too.

A free item counts when the tests name it (``parse``, ``crate::parse``, ``demo::parse``,
``Pair { … }``) and do not declare the name themselves; a method when they call
``Type::method`` or ``.method(`` and the base crate has nothing of that name (a method call's
receiver type is unknown: an old method could be meant, and a common standard name such as
``len`` or ``sum`` counts only when the tests have the type in hand: they name it, or a new item
they call mentions it in its signature). Signatures come from the fixed source, bodies never.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from repogym.pipelines._instructions.interface.model import (
    MAX_BYTES,
    Required,
    collapse,
    split_words,
)
from repogym.shipped import rust_tests
from repogym.shipped.testfiles import is_test_source

Tok = tuple[str, str, int, int]

_FREE = {
    "fn": "function",
    "struct": "class",
    "enum": "class",
    "union": "class",
    "trait": "class",
    "type": "class",
    "const": "attribute",
    "static": "attribute",
}
#: Method names so common in the standard library that a ``.name(`` call proves nothing.
COMMON_METHODS = split_words(
    "len is_empty iter iter_mut into_iter get get_mut push pop insert remove contains clone "
    "to_string to_owned as_str as_ref as_mut unwrap expect map and_then ok err is_some "
    "is_none is_ok is_err collect next into from parse fmt eq cmp partial_cmp hash default "
    "new clear with_capacity extend first last keys values entry sort dedup join split trim "
    "chars bytes lines starts_with ends_with find position count sum min max rev take skip "
    "zip filter"
)


@dataclass(frozen=True)
class Item:
    kind: str
    name: str
    """``name``, or ``Type::name`` for a method."""
    signature: str
    where: str
    public: bool


def _read(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _skip_generics(toks: list[Tok], j: int) -> int:
    """The index after a ``<…>`` generic list starting at ``toks[j]`` (``j`` when none)."""
    if j >= len(toks) or toks[j][1] != "<":
        return j
    depth = 0
    while j < len(toks):
        t = toks[j][1]
        if t == "<":
            depth += 1
        elif t == ">" and toks[j - 1][1] != "-":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return j


def _impl_type(toks: list[Tok], j: int, body: int) -> tuple[str | None, bool]:
    """The implementing type of ``impl<…> [Trait for] path::Type<…> {`` (``toks[j]`` is
    ``impl``, ``toks[body]`` its ``{``), and whether it implements a trait."""
    seg: list[str] = []
    trait = False
    k = _skip_generics(toks, j + 1)
    while k < body and toks[k][1] != "where":
        if toks[k][1] == "for":
            seg, trait = [], True
        elif toks[k][0] == "ident":
            seg.append(toks[k][1])
            k = _skip_generics(toks, k + 1)
            continue
        k += 1
    return (seg[-1] if seg else None), trait


def _head(text: str, toks: list[Tok], start: int, end: int) -> str:
    """The text of an item from ``toks[start]`` up to (not including) ``toks[end]``."""
    head = collapse(text[toks[start][2] : toks[end][2]])
    return re.sub(r",?\s*\)", ")", re.sub(r"\(\s+", "(", head))


def rust_items(text: str, where: str) -> list[Item]:
    """The items of one Rust file (its test items left out); [] when it cannot be read."""
    try:
        code, _ = rust_tests.remove_spans(text, rust_tests.test_items(text))
        toks = rust_tests.tokens(code)
    except rust_tests.RustSyntaxError:
        return []
    out: list[Item] = []
    _scan(code, toks, (0, len(toks)), None, where, out)
    return out


def _scan(
    text: str,
    toks: list[Tok],
    span: tuple[int, int],
    owner: tuple[str, bool] | None,
    where: str,
    out: list[Item],
) -> None:
    """Items between ``toks[span[0]]`` and ``toks[span[1]]`` (a module's, an impl's or a
    trait's body); ``owner``: (the type or trait, whether its methods are public anyway)."""
    k, stop = span
    while k < stop:
        kind, t = toks[k][0], toks[k][1]
        if t == "#" and k + 1 < stop and toks[k + 1][1] in ("[", "!"):
            k = rust_tests.matching(toks, k + (2 if toks[k + 1][1] == "!" else 1)) + 1
            continue
        if kind == "punct" and t in rust_tests.OPEN:
            k = rust_tests.matching(toks, k) + 1
            continue
        start, public = k, t == "pub"
        if public:
            k += 1
            if k < stop and toks[k][1] == "(":
                k = rust_tests.matching(toks, k) + 1
        while k + 1 < stop and toks[k][1] in ("const", "async", "unsafe", "extern", "default"):
            if toks[k][1] == "const" and toks[k + 1][1] not in ("fn", "unsafe", "async"):
                break
            k += 2 if toks[k + 1][0] == "literal" else 1
        if k + 1 >= stop:
            break
        word, name = toks[k][1], toks[k + 1][1]
        if word in ("mod", "impl", "trait"):
            body = k
            while body < stop and toks[body][1] not in ("{", ";"):
                body += 1
            if body >= stop or toks[body][1] == ";":
                k = body + 1
                continue
            close = rust_tests.matching(toks, body)
            inner: tuple[str, bool] | None = None
            if word == "impl":
                typ, trait = _impl_type(toks, k, body)
                inner = (typ, trait) if typ else None
            elif word == "trait":
                out.append(Item("class", name, _head(text, toks, start, body), where, public))
                inner = (name, public)
            if word == "mod" or inner is not None:
                _scan(text, toks, (body + 1, close), inner, where, out)
            k = close + 1
            continue
        if word in _FREE and toks[k + 1][0] == "ident":
            end = _end(toks, k, stop, semi=word in ("const", "static", "type"))
            cut = next((j for j in range(k, end + 1) if toks[j][1] in ("{", ";", "=")), end)
            sig = _head(text, toks, start, cut)
            if owner is not None and word == "fn":
                out.append(Item("method", f"{owner[0]}::{name}", sig, where, public or owner[1]))
            elif owner is None:
                out.append(Item(_FREE[word], name, sig, where, public))
            k = end + 1
            continue
        if word == "macro_rules" and name == "!" and k + 2 < stop:
            macro = toks[k + 2][1]
            out.append(Item("function", macro + "!", f"macro_rules! {macro}", where, True))
        k += 1


def _end(toks: list[Tok], k: int, stop: int, semi: bool) -> int:
    """The last token of the item at ``toks[k]``: its ``;`` or the brace closing its body
    (``semi``: its ``;`` only, an initializer may hold braces)."""
    j = k
    while j < stop:
        t = toks[j][1]
        if t == ";":
            return j
        if t == "{" and not semi:
            return rust_tests.matching(toks, j)
        if t in rust_tests.OPEN:
            j = rust_tests.matching(toks, j)
        j += 1
    return stop - 1


# ------------------------------------------------------------------------------ the crate


def _crate(root: Path, rel: str) -> tuple[str, str] | None:
    """(the crate's folder, its name as code spells it) from the nearest ``Cargo.toml`` above
    ``rel``."""
    parts = rel.split("/")[:-1]
    for i in range(len(parts), -1, -1):
        text = _read(root.joinpath(*parts[:i], "Cargo.toml"))
        if text is None:
            continue
        lib = re.search(r"^\[lib\][^\[]*?^name\s*=\s*\"([^\"]+)\"", text, re.M | re.S)
        pkg = re.search(r"^\[package\][^\[]*?^name\s*=\s*\"([^\"]+)\"", text, re.M | re.S)
        found = lib or pkg
        name = found.group(1) if found else ""
        return "/".join(parts[:i]), name.replace("-", "_")
    return None


def crate_items(root: Path, folder: str) -> list[Item]:
    """The items of the crate's non-test source files under ``folder/src``."""
    src = root / folder / "src" if folder else root / "src"
    out: list[Item] = []
    for path in sorted(src.rglob("*.rs")) if src.is_dir() else []:
        rel = path.relative_to(root).as_posix()
        if is_test_source(rel) or path.is_symlink():
            continue
        text = _read(path)
        if text is not None:
            out += rust_items(text, rel)
    return out


def test_uses(text: str) -> tuple[set[str], set[str], set[tuple[str, str]]]:
    """(names the test code uses as paths or bare, method names it calls with ``.name(``,
    ``(Type, name)`` pairs it calls as ``Type::name``), minus names it declares itself."""
    try:
        toks = rust_tests.tokens(text)
    except rust_tests.RustSyntaxError:
        return set(), set(), set()
    free: set[str] = set()
    called: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    declared: set[str] = set()
    for i, (kind, t, _, _) in enumerate(toks):
        if kind != "ident":
            continue
        prev = toks[i - 1][1] if i else ""
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if prev in ("fn", "let", "mut", "struct", "enum", "const", "static", "mod", "type"):
            declared.add(t)
        if prev == ".":
            if nxt in ("(", ":"):
                called.add(t)
            continue
        if nxt == "!":
            free.add(t + "!")
            continue
        free.add(t)
        if prev == ":" and i >= 3 and toks[i - 2][1] == ":" and toks[i - 3][0] == "ident":
            pairs.add((toks[i - 3][1], t))
    return free - declared, called, pairs


def read_rust(base: Path, head: Path, tests: dict[str, str], f2p: list[str]) -> list[Required]:
    """The crate items the hidden Rust tests (``tests``: file → its test code) use that only
    ``head`` defines."""
    found: dict[tuple[str, str], Required] = {}
    for rel in sorted(tests):
        crate = _crate(head, rel)
        if crate is None:
            continue
        folder, _name = crate
        new, old = crate_items(head, folder), crate_items(base, folder)
        old_names = {i.name for i in old}
        old_short = {i.name.rpartition(":")[2].rstrip("!") for i in old}
        inline = not is_test_source(rel)
        free, called, pairs = test_uses(tests[rel])
        fresh = [
            i for i in new if i.name not in old_names and (i.public or (inline and i.where == rel))
        ]
        wanted = [i for i in fresh if i.kind != "method" and i.name in free]
        # Types the tests have in hand: named, or returned by a new item they call.
        in_play = free | {w for i in wanted for w in re.findall(r"\w+", i.signature)}
        for item in fresh:
            if item.kind != "method":
                continue
            typ, _, method = item.name.partition("::")
            if (typ, method) in pairs or (
                method in called
                and method not in old_short
                and (method not in COMMON_METHODS or typ in in_play)
            ):
                wanted.append(item)
        for item in wanted:
            found.setdefault(
                (item.where, item.name),
                Required(item.kind, item.name, None, item.signature, item.where, sorted(f2p)[:20]),
            )
    return [found[k] for k in sorted(found)]
