"""Renamed failing tests: where each fail-to-pass test is named in the hidden files, so that
the judge (``verifier.py``) gives it a new name in every run.

The instruction names the failing tests and canaries have names of their own, so code that
forges outcomes by name could pick the named tests and leave every canary failing. Renamed
to a name formed as a canary's is (the test's name, ``_`` and a word of its neighbours'
names), a failing test is one new name among the canaries' new names. Sites are found as the
canaries find tests: Python by the syntax tree, JavaScript ``it``/``test`` titles by the
comment- and string-aware scan, Go, Rust, JUnit and GoogleTest by their formatter's layout
(:mod:`.canaries_braced`)."""

from __future__ import annotations

import ast
import re
from typing import Any

from repogym.verify import canaries, canaries_braced

__all__ = ["sites"]


def sites(
    files: dict[str, bytes], f2p: list[str], p2p: list[str], runner: str
) -> list[dict[str, Any]]:
    """Where each fail-to-pass test is named in the hidden files, for the judge to rename it
    in every run: ``{file, line, col, title, names, ids}`` — the name's place, the names it may
    take (formed as a canary's are, so a renamed test and a canary look alike) and the graded
    ids the test gives, each with where the name starts in it."""
    graded = f2p + p2p
    wanted = set(f2p)
    out: list[dict[str, Any]] = []
    for rel, data in sorted(files.items()):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if "\r" in text:
            continue
        if runner in canaries.PY_RUNNERS and rel.endswith(".py"):
            out += _py_disguise(rel, text, graded, wanted)
        elif runner in canaries.JS_RUNNERS and rel.endswith(canaries._JS_FILES):
            out += _js_disguise(rel, text, graded, wanted)
        elif runner in canaries.BRACED_RUNNERS and rel.endswith(canaries._BRACED_FILES[runner]):
            out += _braced_disguise(rel, text, graded, wanted, runner)
    return out


def _site(
    rel: str, line: int, col: int, title: str, names: list[str], ids: list[str]
) -> dict[str, Any] | None:
    placed = []
    for t in ids:
        spots = (_name_at(t), 0, len(t) - len(title))  # JavaScript ids end with the title
        at = next((a for a in spots if a >= 0 and t.startswith(title, a)), None)
        if at is not None:
            placed.append([t, at])
    if not names or not placed:
        return None
    return {"file": rel, "line": line, "col": col, "title": title, "names": names, "ids": placed}


def _name_at(test_id: str) -> int:
    """Where a test function's name starts in its id: after the last ``::`` (pytest, Go,
    Rust) or ``#`` (Surefire), else after the last dot (unittest, GoogleTest's
    ``Suite.Name``); parameters after it are not looked into. (A Go id without its package
    starts with the name: the caller tries 0 too.)"""
    base = test_id.split("[", 1)[0]
    if "#" in base:
        return base.rfind("#") + 1
    if "::" in base:
        return base.rfind("::") + 2
    return base.rfind(".") + 1


def _braced_disguise(
    rel: str, text: str, graded: list[str], wanted: set[str], runner: str
) -> list[dict[str, Any]]:
    found = canaries_braced.blocks(text, runner)
    titles = [b[2] for b in found]
    vocab = canaries._vocabulary(titles, r"_|(?<=[a-z0-9])(?=[A-Z])")
    out = []
    for _start, _end, name, line, col in found:
        ids = canaries_braced.owners(name, graded, runner)
        if not wanted.intersection(ids):
            continue
        names = canaries._names(name, "_", [w for w in vocab if w not in name.lower()], set(titles))
        site = _site(rel, line, col, name, names, ids)
        if site is not None:
            out.append(site)
    return out


def _js_disguise(rel: str, text: str, graded: list[str], wanted: set[str]) -> list[dict[str, Any]]:
    """``it(...)``/``test(...)`` titles (ids end with them; one title may be used under
    several blocks of a file, and each of its blocks is renamed)."""
    found = canaries.js_blocks(text)
    if found is None:
        return []
    blocks, _info = found
    titles = [b[2] for b in blocks]
    vocab = canaries._vocabulary(titles, r"\s+")
    out = []
    for start, _end, title, col in blocks:
        ids = [t for t in graded if t.endswith(title)]
        if not wanted.intersection(ids):
            continue
        names = canaries._names(title, " ", vocab, set(titles))
        site = _site(rel, start, col, title, names, ids)
        if site is not None:
            out.append(site)
    return out


def _py_disguise(rel: str, text: str, graded: list[str], wanted: set[str]) -> list[dict[str, Any]]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines()
    existing = {
        n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    vocab = canaries._vocabulary(sorted(existing), r"_+")
    by_function: dict[tuple[str, ...], list[str]] = {}
    for t in graded:
        found = canaries._py_parts(t.split("[", 1)[0], rel)
        if found:
            by_function.setdefault(tuple(found), []).append(t)
    out = []
    for path, ids in by_function.items():
        func = canaries._py_function(tree, list(path))
        if func is None or not wanted.intersection(ids):
            continue
        header = lines[func.lineno - 1]
        m = re.search(rf"\bdef\s+({re.escape(func.name)})\s*\(", header)
        if m is None:
            continue
        names = canaries._names(func.name, "_", vocab, existing)
        site = _site(rel, func.lineno - 1, m.start(1), func.name, names, ids)
        if site is not None:
            out.append(site)
    return out
