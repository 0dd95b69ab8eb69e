"""The repository files test selection reads: the folders it skips, paths normalised and joined,
and an index of the tree built once per selection (test-file patterns live in
:mod:`repogym.shipped.testfiles`)."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Iterator
from pathlib import Path

PY_RUNNERS = frozenset({"pytest", "unittest"})
JS_RUNNERS = frozenset({"jest", "vitest", "mocha", "node"})

#: Folder names never walked.
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "__pypackages__"})
#: Folder names walked only when they are a Python package (``pkg/build/__init__.py``).
_SKIP_UNLESS_PACKAGE = frozenset({"build", "dist", "venv", "env"})

JS_CODE_EXTS = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts")
_JS_PARSED_EXTS = frozenset((*JS_CODE_EXTS, ".vue", ".svelte"))
JS_PROBE_EXTS = (*JS_CODE_EXTS, ".json")
#: A TypeScript import of ``./x.js`` may name ``./x.ts`` (ESM-style TS imports).
TS_SUBST = {
    ".js": (".ts", ".tsx"),
    ".jsx": (".tsx",),
    ".mjs": (".mts",),
    ".cjs": (".cts",),
}
#: Build-output folders that a ``main`` pointing at missing output may map back to ``src/``.
OUTPUT_DIRS = ("dist", "lib", "build", "out", "esm", "cjs", "es")


# --------------------------------------------------------------------------- helpers


def normalize_path(path: str) -> str:
    p = path.replace("\\", "/").strip()
    while p.startswith("./"):
        p = p[2:]
    return p.strip("/")


def language_of_(path: str) -> str | None:
    if path.endswith(".py"):
        return "py"
    if path.endswith(tuple(_JS_PARSED_EXTS)):
        return "js"
    return None


def join_path(base: str, rel: str) -> str | None:
    """``base``/``rel`` normalised, repo-relative; None when it escapes the repository."""
    joined = posixpath.normpath(posixpath.join(base, rel)) if base else posixpath.normpath(rel)
    if joined == ".":
        return ""
    if joined.startswith("../") or joined == ".." or joined.startswith("/"):
        return None
    return joined


def parent_dir(path: str) -> str:
    return posixpath.dirname(path)


def read_file_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def read_text_file_(path: str) -> str:
    return read_file_bytes(path).decode("utf-8", "replace")


class RepoIndex_:
    """All files and folders of the snapshot (repo-relative posix paths), walked once."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.files: set[str] = set()
        self.dirs: set[str] = {""}
        self._walk(str(repo), "")

    def _walk(self, abspath: str, rel: str) -> None:
        try:
            entries = list(os.scandir(abspath))
        except OSError:
            return
        for entry in entries:
            name = entry.name
            child = f"{rel}/{name}" if rel else name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if _skip_dir(entry.path, name):
                        continue
                    self.dirs.add(child)
                    self._walk(entry.path, child)
                elif entry.is_file():
                    self.files.add(child)
            except OSError:
                continue

    def add(self, path: str) -> None:
        """Treat ``path`` as present (a file a fix adds is still a resolution target)."""
        self.files.add(path)
        d = parent_dir(path)
        while d and d not in self.dirs:
            self.dirs.add(d)
            d = parent_dir(d)


def _skip_dir(abspath: str, name: str) -> bool:
    if name.startswith(".") or name in _SKIP_DIRS:
        return True
    if name in _SKIP_UNLESS_PACKAGE:
        return not os.path.isfile(os.path.join(abspath, "__init__.py"))
    return False


def walk_files(index: RepoIndex_, names: Iterable[str]) -> Iterator[str]:
    wanted = set(names)
    for f in index.files:
        if posixpath.basename(f) in wanted:
            yield f
