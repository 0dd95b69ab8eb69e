"""What :func:`required_interface` reports (:class:`Required`, :data:`KINDS`), its limits and the
small text helpers every other module of the package shares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

KINDS = (
    "module",
    "function",
    "class",
    "method",
    "attribute",
    "parameter",
    "cli_option",
    "error_message",
    "export",
)
KIND_ORDER = {k: i for i, k in enumerate(KINDS)}


def split_words(text: str) -> frozenset[str]:
    return frozenset(text.split())


MAX_BYTES = 1_000_000  # files larger than this are skipped
MAX_CORPUS_FILES = 4000  # non-test source files searched for CLI options and messages
MAX_FUNCS = 60  # functions analysed per F2P test (the test, its fixtures and helpers)
MAX_DEPTH = 8  # re-export chains and class hierarchies followed
_SIG_MAX = 160
DEFAULT_MAX = 40

SKIP_DIRS = split_words(
    ".git .hg .svn .tox .nox .venv venv node_modules __pycache__ site-packages "
    ".mypy_cache .pytest_cache .ruff_cache .eggs"
)
SKIP_TOP_DIRS = frozenset({"build", "dist", "env", "coverage", "out"})  # only at the repo root
SOURCE_EXTS = split_words(
    ".py .pyi .pyx .js .jsx .ts .tsx .mjs .cjs .mts .cts .cfg .toml .ini .sh .c .h .cc .cpp .rs .go"
)
JS_EXTS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts")


def collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def cap_items(text: str, limit: int = _SIG_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Required:
    """One name the hidden tests use that the base snapshot lacks.

    ``kind`` is one of :data:`KINDS`.  ``name`` is dotted as the tests reach it
    (``pkg.calc.multiply``; ``Humanizer.format`` for members; the bare keyword for a
    ``parameter``, whose ``owner`` is the function it belongs to).  ``signature`` is rendered from
    head (``multiply(a, b, *, strict=False)``), ``where`` is the head file that defines it; both
    are None when unknown.  ``tests`` are the F2P ids that need it.
    """

    kind: str
    name: str
    owner: str | None = None
    signature: str | None = None
    where: str | None = None
    tests: list[str] = field(default_factory=list, hash=False)
