"""Which changed files are code a mutant may change, and which are release notes (changelog
entries, news fragments) that ride along with a fix but are not the change."""

from __future__ import annotations

import re

from repogym.shipped.testfiles import is_test_path

#: Mutation operators, in the order candidates of one line are listed.
KINDS = ("hunk_revert", "drop_statement", "negate_condition", "replace_return")
#: Extensions of the files :func:`default_is_code` accepts.
CODE_EXTENSIONS = (
    *(".py", ".js", ".cjs", ".mjs", ".jsx", ".ts", ".tsx", ".mts", ".cts"),
    *(".go", ".rs", ".java", ".kt", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx"),
)
PY_EXT = (".py", ".pyi")
JS_EXT = (".js", ".cjs", ".mjs")
NODE_TIMEOUT = 60.0


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
