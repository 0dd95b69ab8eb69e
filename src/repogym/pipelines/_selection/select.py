"""Pass-to-pass test selection: which test files reach the changed source files by imports.

Approach
--------
The repository snapshot is indexed once (one directory walk, skipping ``.git``,
``node_modules``, virtualenvs, ``site-packages``, build output, ``.tox``/``.nox`` and every
dot-folder), so resolving an import is a set lookup, not a ``stat``. Starting from the test files
(plus, for Python, every ``conftest.py`` pytest loads for them), each reachable file is read and
scanned exactly once and its imports are resolved to in-repository files; that gives a forward
graph. The selected tests are then found with one breadth-first search over the *reverse* graph
from the changed files: a test is selected when it is visited, or when one of the ``conftest.py``
files loaded for it is visited. Python scan results are memoised per process by content digest,
so the next candidate of the same repository only parses the files that differ.

Python: ``ast`` statements (``import``/``from … import`` anywhere: module level, functions,
``try``/``except ImportError``, ``if TYPE_CHECKING``), literal ``pytest_plugins`` entries and
literal ``importlib.import_module("a.b")``/``__import__("a.b")`` calls. Files ``ast`` rejects
(Python 2, syntax errors) and sources over 512 Ki characters (generated code) use a regex scan of
``from``/``import`` lines instead; non-UTF-8 bytes are decoded as U+FFFD. Module roots are
the repository root, ``src/``, the folders packaging metadata names (``package_dir``, ``where``,
poetry ``from``, hatch ``packages``), the folders holding a ``pyproject.toml``/``setup.cfg``/
``setup.py`` and pytest's ``pythonpath``. Test files (and test helpers, files outside a package,
and files that do not parse) also resolve against their own folder and pytest's rootdir-insertion
folder (the first ancestor without ``__init__.py``). Importing a module reaches every
``__init__.py`` of its packages: each module has an edge to its own package's ``__init__.py``.

JavaScript/TypeScript: regex scan of ``require()``, static ``import``/``export … from``,
side-effect ``import 'x'``, dynamic ``import()`` and ``jest.mock``/``vi.mock`` (and friends)
specifiers. Relative specifiers are probed with the usual extensions and ``index.*``; ``./x.js``
may mean ``./x.ts``. Bare specifiers are resolved through ``tsconfig.json``/``jsconfig.json``
``paths``/``baseUrl`` (nearest config, ``extends`` followed), ``package.json`` ``imports``
(``#x``), the ``name`` of any ``package.json`` in the repository (self-reference, workspaces),
and the ``@/``/``~/`` → ``src/`` convention; anything else is a dependency and ignored.

Limits (the selection is an over-approximation of a static graph, not coverage):

* module names computed at run time (``import_module(f"pkg.{name}")``, ``require(path)``),
  plugins loaded through entry points, string targets of ``mock.patch("pkg.mod.f")``;
* code exercised through a subprocess (CLI tests running ``python -m pkg``), through fixtures
  defined in installed pytest plugins, or by reading files rather than importing them;
* bundler/jest aliases other than tsconfig paths (``moduleNameMapper``, vite ``resolve.alias``);
* Python 3 absolute imports inside a package are never resolved against the importing folder,
  so a package module shadowing a stdlib name is only found through real roots;
* other languages (go, cargo, …): :func:`tests_exercising` returns ``[]`` and callers run the
  whole suite.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from repogym.pipelines._selection.import_resolve import ImportResolver
from repogym.pipelines._selection.repo_index import (
    JS_CODE_EXTS,
    JS_RUNNERS,
    PY_RUNNERS,
    RepoIndex_,
    language_of_,
    normalize_path,
)
from repogym.shipped.testfiles import JS_TEST_FILE, PY_TEST_FILE, is_test_path

__all__ = ["find_test_files", "import_graph", "tests_exercising"]

NATIVE_TEST_EXTS: dict[str, tuple[str, ...]] = {
    "cargo": (".rs",),
    "maven": (".java", ".kt"),
    "ctest": (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx"),
}
"""The test sources of the compiled-language runners, by extension."""


# --------------------------------------------------------------------------- public API


def find_test_files(repo: Path, runner: str) -> list[str]:
    """Every runnable test file of ``repo`` for ``runner``: repo-relative posix paths, sorted.

    pytest/unittest: ``test_*.py``/``*_test.py``; jest/vitest/mocha/node: ``*.test.*``/
    ``*.spec.*`` and JS/TS files under ``__tests__/``; go: ``*_test.go``; cargo, maven and
    ctest: the language's source files that are test paths
    (:func:`repogym.shipped.testfiles.is_test_path`: ``tests/``, ``src/test/java``, …; Rust's
    inline test modules are not files of their own); anything else: ``[]``.
    """
    index = RepoIndex_(Path(repo))
    if runner in PY_RUNNERS:
        return sorted(f for f in index.files if PY_TEST_FILE.search(f))
    if runner in JS_RUNNERS:
        return sorted(f for f in index.files if f.endswith(JS_CODE_EXTS) and JS_TEST_FILE.search(f))
    if runner == "go":
        return sorted(f for f in index.files if f.endswith("_test.go"))
    exts = NATIVE_TEST_EXTS.get(runner)
    if exts:
        return sorted(f for f in index.files if f.endswith(exts) and is_test_path(f))
    return []


def tests_exercising(repo: Path, changed: list[str], test_files: list[str]) -> list[str]:
    """The subset of ``test_files`` (sorted) that reach any ``changed`` file through imports.

    A test file that is itself changed counts. Only Python and JS/TS files are analysed; for
    other languages the answer is ``[]``.
    """
    targets = {normalize_path(c) for c in changed}
    targets.discard("")
    tests = {normalize_path(t): t for t in test_files if language_of_(normalize_path(t))}
    if not targets or not tests:
        return []
    resolver = ImportResolver(Path(repo), extra_files=targets)
    loaded: dict[str, list[str]] = {
        t: resolver.conftests_for(t) if t.endswith(".py") else [] for t in tests
    }
    starts = set(tests)
    for confs in loaded.values():
        starts.update(confs)
    graph = resolver.graph(starts)

    reverse: dict[str, list[str]] = {}
    for src, dsts in graph.items():
        for dst in dsts:
            reverse.setdefault(dst, []).append(src)
    seen = set(targets)
    queue = deque(targets)
    while queue:
        node = queue.popleft()
        for src in reverse.get(node, ()):
            if src not in seen:
                seen.add(src)
                queue.append(src)
    return sorted(
        orig for t, orig in tests.items() if t in seen or any(c in seen for c in loaded[t])
    )


def import_graph(repo: Path, files: list[str]) -> dict[str, set[str]]:
    """file → in-repository files it imports directly, for ``files`` and all they reach.

    Python modules also "import" their own package's ``__init__.py`` (Python runs it first).
    ``conftest.py`` loading is not an import and is not part of this graph.
    """
    resolver = ImportResolver(Path(repo))
    return resolver.graph({normalize_path(f) for f in files if normalize_path(f)})
