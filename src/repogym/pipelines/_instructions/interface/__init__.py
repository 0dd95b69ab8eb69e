"""The interface hidden fail-to-pass tests need that the base snapshot lacks.

A task's instruction must name every new module, function, class, method, keyword argument,
command-line option and asserted error message its hidden F2P tests use, otherwise no agent can
solve it.  :func:`required_interface` finds them by static analysis only (standard library, no
code of either snapshot is imported or run):

* Python -- the test functions named by the F2P ids (pytest node ids, unittest dotted ids, a bare
  file for a whole module), the fixtures, ``setUp`` methods and same-file helpers they use, the
  test file's module-level code, all parsed with :mod:`ast`.  What they reference (imports,
  ``mod.name``, ``Cls.attr``, ``Cls(...).method()``, a local ``obj = Cls()``, keyword arguments,
  ``mock.patch("pkg.mod.name")``) is resolved in *base*; what is missing there is looked up in
  *head* for its file and signature.  ``"--flag"`` literals and asserted error messages
  (``pytest.raises(match=)``, ``assertRaisesRegex``, ``str(exc) == ...``) count when head's
  non-test source mentions (or can format) them and base's does not.
* Go (:mod:`.golang`) and Rust (:mod:`.rust`) -- lexer-level: the exported names of the
  package under test (Go) or the items of the crate (Rust) that the changed test code names and
  that only head defines, with their signatures from head.
* JavaScript/TypeScript -- regexes over the test files (``src/x.test.ts > suite > name`` ids map
  to files): relative imports of a module missing in base, named imports base does not export,
  members called on a default/namespace import that base never mentions, ``toThrow("...")``.

Every check errs on the side of silence: an unresolvable base class, a star import, a module- or
class-level ``__getattr__``, ``globals()`` tricks, an unknown decorator or a ``**kwargs``
parameter make it give up rather than invent a name.  Names defined in test files (changed test
files, ``tests/`` folders, ``conftest.py``) are never reported: the hidden tests bring them.
Files that fail to decode or parse, or exceed 1 MB, are skipped.

:func:`render_interface` turns the result into the Markdown section of an instruction: names,
files and signatures only, never a body.

Layout, in dependency order (each module imports only those above it): ``model`` (Required,
KINDS, limits), ``pyast`` (ast helpers, signatures, scopes), ``strings`` (string constants,
templates, message fragments), ``snapshot`` (:class:`Snap`), ``context`` (one call's state),
``testids`` (F2P ids to files), ``testfile`` and ``pyread`` (reading Python tests),
``pyresolve`` (events to items), ``js`` (JS/TS), ``golang`` and ``rust``, ``render``
(Markdown); this module holds the orchestration.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from repogym.pipelines._instructions.interface.context import Ctx
from repogym.pipelines._instructions.interface.golang import read_go
from repogym.pipelines._instructions.interface.js import read_js
from repogym.pipelines._instructions.interface.model import JS_EXTS, KINDS, Required
from repogym.pipelines._instructions.interface.pyread import Reader
from repogym.pipelines._instructions.interface.pyresolve import resolve_python
from repogym.pipelines._instructions.interface.render import render_interface
from repogym.pipelines._instructions.interface.rust import read_rust
from repogym.pipelines._instructions.interface.snapshot import keep_dir
from repogym.pipelines._instructions.interface.testfile import TestFile
from repogym.pipelines._instructions.interface.testids import map_ids
from repogym.shipped import rust_tests
from repogym.shipped.testfiles import is_test_source

__all__ = ["KINDS", "Required", "render_interface", "required_interface"]


def _import_roots(ctx: Ctx, py_files: Iterable[str]) -> tuple[str, ...]:
    roots = ["", "src", "lib"]
    for snap in (ctx.head, ctx.base):
        for dirpath, dirnames, filenames in os.walk(snap.root):
            rel = os.path.relpath(dirpath, snap.root).replace(os.sep, "/")
            depth = 0 if rel == "." else rel.count("/") + 1
            dirnames[:] = sorted(d for d in dirnames if keep_dir(d, rel == "."))
            if depth >= 3:
                dirnames[:] = []
            if rel != "." and {"setup.py", "pyproject.toml", "setup.cfg"} & set(filenames):
                roots += [rel, f"{rel}/src"]
    for rel in sorted(py_files):
        roots.append(ctx.head.file_module(rel)[2])
    seen: list[str] = []
    for r in roots:
        if r not in seen:
            seen.append(r)
    return tuple(seen)


def required_interface(
    base: Path,
    head: Path,
    test_files: list[str],
    f2p: list[str],
    hidden: dict[str, bytes] | None = None,
) -> list[Required]:
    """Names the F2P tests use that do not exist in ``base`` (see the module docstring).

    ``base``/``head`` are the snapshots before/after the fix, ``test_files`` the repo-relative
    changed test files, ``f2p`` the fail-to-pass test ids, ``hidden`` what the verifier restores
    (a source file with inline tests: only its test items).  The result is deduplicated and
    ordered by file, kind and name (Python and JavaScript first, then Go, then Rust).
    """
    ctx = Ctx(Path(base), Path(head), test_files, f2p)
    groups, js_files, unmapped = map_ids(ctx, ctx.f2p)
    py_rels = sorted({rel for rel, _ in groups})
    roots = _import_roots(ctx, py_rels)
    ctx.base.roots = ctx.head.roots = roots

    files: dict[str, TestFile | None] = {}
    for rel, parts in sorted(groups):
        ids = set(groups[(rel, parts)])
        ctx.file_ids.setdefault(rel, set()).update(ids)
    for rel in py_rels:
        tree = ctx.head.parse(rel)
        files[rel] = TestFile(ctx, rel, tree) if tree is not None else None
    for rel, parts in sorted(groups):
        tf = files.get(rel)
        if tf is None:
            continue
        reader = Reader(ctx, tf, set(groups[(rel, parts)]))
        try:
            reader.run(tf.targets(parts))
        except RecursionError:  # pathologically nested code: give up on this test only
            continue
    for rel in py_rels:
        tf = files.get(rel)
        if tf is not None:
            reader = Reader(ctx, tf, ctx.file_ids[rel])
            for st in tf.top:
                with contextlib.suppress(RecursionError):
                    reader.scan(st, tf.env)
    resolve_python(ctx)

    if unmapped:
        mapped = set(js_files)
        for rel in sorted(ctx.test_files):
            if rel.endswith(JS_EXTS) and rel not in mapped and ctx.head.is_file(rel):
                js_files.setdefault(rel, []).extend(unmapped)
    for rel in sorted(js_files):
        read_js(ctx, rel, set(js_files[rel]))
    native = read_go(Path(base), Path(head), test_files, f2p)
    native += read_rust(Path(base), Path(head), _rust_tests(Path(head), test_files, hidden), f2p)
    return ctx.result() + native


def _rust_tests(
    head: Path, test_files: list[str], hidden: dict[str, bytes] | None
) -> dict[str, str]:
    """The test code of each changed Rust test file: the hidden copy, else head's file (of a
    source file, only its test items)."""
    out: dict[str, str] = {}
    for rel in test_files:
        if not rel.endswith(".rs"):
            continue
        data = (hidden or {}).get(rel)
        if data is None:
            try:
                text = (head / rel).read_text("utf-8")
                if not is_test_source(rel):
                    text = rust_tests.items_text(text, rust_tests.test_items(text))
            except (OSError, UnicodeDecodeError, rust_tests.RustSyntaxError):
                continue
        else:
            text = data.decode("utf-8", "replace")
        out[rel] = text
    return out
