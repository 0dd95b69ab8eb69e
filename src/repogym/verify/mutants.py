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
TypeScript and JSX files (``.ts .tsx .jsx .mts .cts``) get ``hunk_revert`` only. Go, Rust,
Java and C/C++ files get ``hunk_revert`` and the ``negate_condition`` of
:mod:`.mutation_braced`, which compiles by construction (no host compiler is asked).

Odd input never raises: binary sections, renames without edits, mode-only changes, deleted
files, files whose base cannot be read or does not match the gold's context are kept verbatim
and simply not mutated. Line endings (CRLF) and a missing final newline are preserved; text is
``str`` decoded with UTF-8 + ``surrogateescape`` (see :mod:`repogym.sources.patches`), so any
encoding round-trips.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from repogym.sources.patches import encode_patch
from repogym.verify.file_kinds import (
    CODE_EXTENSIONS,
    JS_EXT,
    KINDS,
    NODE_TIMEOUT,
    PY_EXT,
    default_is_code,
    is_release_notes,
)
from repogym.verify.hunks import (
    Hunk,
    PatchedFile,
    apply_hunks,
    patched_files,
    render_file,
    renumber,
)
from repogym.verify.mutation_braced import BRACED_EXT, braced_candidates
from repogym.verify.mutation_sites import Site, js_candidates, line_contents, py_candidates, snippet

__all__ = [
    "CODE_EXTENSIONS",
    "KINDS",
    "Mutant",
    "build_mutants",
    "default_is_code",
    "is_release_notes",
    "select_mutants",
]


@dataclass(frozen=True)
class Mutant:
    """One wrong solution derived from the gold patch."""

    kind: str  # one of KINDS
    path: str  # the mutated file (repository-relative; the old path of a deleted file)
    line: int  # 1-based line of the gold post-image where the mutation applies
    description: str  # one line, for reports
    patch: str  # git-style unified diff base -> mutant tree, every file of the gold patch


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
                with open(p, "wb") as out:
                    out.write(encode_patch(text))
                paths.append(p)

            def run(p: str) -> bool:
                try:
                    proc = subprocess.run(
                        [node, "--check", p],
                        cwd=tmp,
                        capture_output=True,
                        timeout=NODE_TIMEOUT,
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
    results: list[tuple[PatchedFile, Site, str | None, str]],
) -> list[tuple[PatchedFile, Site, str | None, str]]:
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
        elif lang == "braced":
            continue  # negate_condition compiles wherever the gold does (see mutation_braced)
        else:
            for i in line_ops:
                keep[i] = False
    return [r for r, k in zip(results, keep, strict=True) if k]


# --------------------------------------------------------------------------- building


def _lang(path: str) -> str:
    low = path.lower()
    if low.endswith(PY_EXT):
        return "py"
    if low.endswith(JS_EXT):
        return "js"
    if low.endswith(BRACED_EXT):
        return "braced"
    return ""


def _edit_hunks(f: PatchedFile, cand: Site) -> list[Hunk]:
    hunks = [
        Hunk(h.old_start, h.old_len, h.new_start, h.new_len, h.heading, list(h.lines))
        for h in f.hunks
    ]
    if cand.revert is not None:
        del hunks[cand.revert]
        return renumber(hunks)
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
    return renumber(hunks)


def _first_change(h: Hunk) -> int:
    pos = h.new_start if h.new_len > 0 else h.new_start + 1
    for tag, _, _ in h.lines:
        if tag != " ":
            return max(1, pos)
        pos += 1
    return max(1, pos)


def _candidates(f: PatchedFile, revert_ok: bool, *, lines: bool = True) -> list[Site]:
    assert f.gold is not None
    path = snippet(f.fp.path, 300)
    out: list[Site] = []
    if revert_ok:
        for j, h in enumerate(f.hunks):
            what = f"revert hunk {j + 1} of {path} ({h.header()})"
            out.append(Site("hunk_revert", _first_change(h), {}, what, revert=j))
    if not lines:
        return out
    lang = _lang(f.fp.path)
    added = set(f.plus_at)
    line_cands: list[Site] = []
    if lang == "py":
        line_cands = py_candidates(line_contents(f.gold), added)
    elif lang == "js":
        line_cands = js_candidates(line_contents(f.gold), added)
    elif lang == "braced":
        line_cands = braced_candidates(line_contents(f.gold), added, f.fp.path)
    order = {k: i for i, k in enumerate(KINDS)}
    line_cands.sort(key=lambda c: (c.line, order.get(c.kind, len(order))))
    for c in line_cands:
        verb, _, detail = c.what.partition(": ")
        c.what = f"{verb} at {path}:{c.line}: {detail}"
    return out + line_cands


def _make(
    f: PatchedFile, cand: Site, gold_state: str, base_state: str | None, base_is_empty: bool
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
        post = apply_hunks(f.base, hunks)
        if post is None:
            return None
        state = "".join(post)
        if state == gold_state:
            return None
    if base_is_empty and state == base_state:
        return None
    return state, render_file(f, hunks, absent)


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
    pred = is_code or default_is_code
    files = patched_files(
        gold_patch, lambda p: bool(pred(p)) and not is_release_notes(p), read_base
    )
    if files is None:
        return []
    code_hunks = sum(len(f.hunks) for f in files if f.code and not f.fp.binary)

    seen: set[tuple[int, str | None]] = set()
    results: list[tuple[PatchedFile, Site, str | None, str]] = []
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
