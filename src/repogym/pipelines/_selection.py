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

import ast
import hashlib
import json
import os
import posixpath
import re
import warnings
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from repogym.sources._patches import is_test_path

__all__ = ["find_test_files", "import_graph", "tests_exercising"]

#: Test files a runner can be pointed at (the runtime harness selects tests with these too).
PY_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")
JS_TEST_FILE = re.compile(r"\.(test|spec)\.[cm]?[jt]sx?$|(^|/)__tests__/")

_PY_RUNNERS = frozenset({"pytest", "unittest"})
_JS_RUNNERS = frozenset({"jest", "vitest", "mocha", "node"})

#: Folder names never walked.
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "__pypackages__"})
#: Folder names walked only when they are a Python package (``pkg/build/__init__.py``).
_SKIP_UNLESS_PACKAGE = frozenset({"build", "dist", "venv", "env"})

_JS_CODE_EXTS = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts")
_JS_PARSED_EXTS = frozenset((*_JS_CODE_EXTS, ".vue", ".svelte"))
_JS_PROBE_EXTS = (*_JS_CODE_EXTS, ".json")
#: A TypeScript import of ``./x.js`` may name ``./x.ts`` (ESM-style TS imports).
_TS_SUBST = {
    ".js": (".ts", ".tsx"),
    ".jsx": (".tsx",),
    ".mjs": (".mts",),
    ".cjs": (".cts",),
}
#: Build-output folders that a ``main`` pointing at missing output may map back to ``src/``.
_OUTPUT_DIRS = ("dist", "lib", "build", "out", "esm", "cjs", "es")


# --------------------------------------------------------------------------- public API


def find_test_files(repo: Path, runner: str) -> list[str]:
    """Every runnable test file of ``repo`` for ``runner``: repo-relative posix paths, sorted.

    pytest/unittest: ``test_*.py``/``*_test.py``; jest/vitest/mocha/node: ``*.test.*``/
    ``*.spec.*`` and JS/TS files under ``__tests__/``; go: ``*_test.go``; anything else: ``[]``.
    """
    index = _Index(Path(repo))
    if runner in _PY_RUNNERS:
        return sorted(f for f in index.files if PY_TEST_FILE.search(f))
    if runner in _JS_RUNNERS:
        return sorted(
            f for f in index.files if f.endswith(_JS_CODE_EXTS) and JS_TEST_FILE.search(f)
        )
    if runner == "go":
        return sorted(f for f in index.files if f.endswith("_test.go"))
    return []


def tests_exercising(repo: Path, changed: list[str], test_files: list[str]) -> list[str]:
    """The subset of ``test_files`` (sorted) that reach any ``changed`` file through imports.

    A test file that is itself changed counts. Only Python and JS/TS files are analysed; for
    other languages the answer is ``[]``.
    """
    targets = {_norm(c) for c in changed}
    targets.discard("")
    tests = {_norm(t): t for t in test_files if _lang(_norm(t))}
    if not targets or not tests:
        return []
    resolver = _Resolver(Path(repo), extra_files=targets)
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
    resolver = _Resolver(Path(repo))
    return resolver.graph({_norm(f) for f in files if _norm(f)})


# --------------------------------------------------------------------------- helpers


def _norm(path: str) -> str:
    p = path.replace("\\", "/").strip()
    while p.startswith("./"):
        p = p[2:]
    return p.strip("/")


def _lang(path: str) -> str | None:
    if path.endswith(".py"):
        return "py"
    if path.endswith(tuple(_JS_PARSED_EXTS)):
        return "js"
    return None


def _join(base: str, rel: str) -> str | None:
    """``base``/``rel`` normalised, repo-relative; None when it escapes the repository."""
    joined = posixpath.normpath(posixpath.join(base, rel)) if base else posixpath.normpath(rel)
    if joined == ".":
        return ""
    if joined.startswith("../") or joined == ".." or joined.startswith("/"):
        return None
    return joined


def _dirname(path: str) -> str:
    return posixpath.dirname(path)


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _read_text(path: str) -> str:
    return _read_bytes(path).decode("utf-8", "replace")


class _Index:
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
        d = _dirname(path)
        while d and d not in self.dirs:
            self.dirs.add(d)
            d = _dirname(d)


def _skip_dir(abspath: str, name: str) -> bool:
    if name.startswith(".") or name in _SKIP_DIRS:
        return True
    if name in _SKIP_UNLESS_PACKAGE:
        return not os.path.isfile(os.path.join(abspath, "__init__.py"))
    return False


def _walk_files(index: _Index, names: Iterable[str]) -> Iterator[str]:
    wanted = set(names)
    for f in index.files:
        if posixpath.basename(f) in wanted:
            yield f


# --------------------------------------------------------------------------- Python scanning

_PY_DYNAMIC = re.compile(
    r"""(?:\bimport_module|\b__import__)\s*\(\s*[rRuU]?(['"])(\.*[\w.]+)\1""",
)
_PY_FROM_LINE = re.compile(
    r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)?|[^\n#;]*)", re.MULTILINE
)
_PY_IMPORT_LINE = re.compile(r"^[ \t]*import[ \t]+([^\n#;]*)", re.MULTILINE)
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")

#: One import as (level, module or "", imported names); ``import a.b`` is (0, "a.b", ()).
_PyImport = tuple[int, str, tuple[str, ...]]


#: Sources longer than this (characters; generated tables, vendored bundles) skip ``ast``.
_AST_MAX_CHARS = 512 * 1024
#: Scan results by content digest, shared by every call: the candidates of one repository are
#: snapshots that mostly hold the same files, so each distinct file is parsed once per process.
_SCAN_CACHE: dict[bytes, tuple[tuple[_PyImport, ...], bool]] = {}
_SCAN_CACHE_MAX = 200_000


def _scan_python_bytes(data: bytes) -> tuple[tuple[_PyImport, ...], bool]:
    """:func:`_scan_python` of a file's bytes, memoised by content."""
    key = hashlib.blake2b(data, digest_size=16).digest()
    hit = _SCAN_CACHE.get(key)
    if hit is None:
        if len(_SCAN_CACHE) >= _SCAN_CACHE_MAX:
            _SCAN_CACHE.clear()
        imports, parsed = _scan_python(data.decode("utf-8", "replace"))
        hit = _SCAN_CACHE[key] = (tuple(imports), parsed)
    return hit


def _scan_python(text: str) -> tuple[list[_PyImport], bool]:
    """Imports of a Python source; the flag is False when the regex fallback was used because
    ``ast`` rejected the file (Python 2, syntax errors)."""
    if "import" not in text and "pytest_plugins" not in text:  # nothing to find (cheap check)
        return [], True
    if len(text) > _AST_MAX_CHARS:
        return _scan_python_regex(text) + _scan_dynamic(text), True
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        out = _scan_python_regex(text)
        parsed = False
    else:
        out = []
        _collect_statements(tree.body, out)
        parsed = True
    return out + _scan_dynamic(text), parsed


def _scan_dynamic(text: str) -> list[_PyImport]:
    """Literal ``importlib.import_module("a.b")`` / ``__import__("a.b")`` calls."""
    out: list[_PyImport] = []
    if "import_module" in text or "__import__" in text:
        for m in _PY_DYNAMIC.finditer(text):
            spec = m.group(2)
            level = len(spec) - len(spec.lstrip("."))
            out.append((level, spec[level:], ()))
    return out


#: Statements that hold other statements (imports in functions, ``try``, ``if TYPE_CHECKING``).
_COMPOUND = tuple(
    getattr(ast, name)
    for name in (
        "If",
        "For",
        "AsyncFor",
        "While",
        "With",
        "AsyncWith",
        "Try",
        "TryStar",
        "FunctionDef",
        "AsyncFunctionDef",
        "ClassDef",
        "Match",
    )
    if hasattr(ast, name)
)


def _collect_statements(body: list[ast.stmt], out: list[_PyImport], top: bool = True) -> None:
    for node in body:
        kind = type(node)
        if kind is ast.Import:
            out.extend((0, alias.name, ()) for alias in node.names)
        elif kind is ast.ImportFrom:
            names = tuple(a.name for a in node.names if a.name != "*")
            out.append((node.level or 0, node.module or "", names))
        elif top and (kind is ast.Assign or kind is ast.AnnAssign):
            _pytest_plugins(node, out)
        elif isinstance(node, _COMPOUND):
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(node, field, None)
                if sub:
                    _collect_statements(sub, out, False)
            for handler in getattr(node, "handlers", ()):
                _collect_statements(handler.body, out, False)
            for case in getattr(node, "cases", ()):
                _collect_statements(case.body, out, False)


def _pytest_plugins(node: ast.Assign | ast.AnnAssign, out: list[_PyImport]) -> None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if not any(isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in targets):
        return
    value = node.value
    items = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
    for item in items:
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            out.append((0, item.value, ()))


def _scan_python_regex(text: str) -> list[_PyImport]:
    out: list[_PyImport] = []
    for m in _PY_FROM_LINE.finditer(text):
        spec, rest = m.group(1), m.group(2)
        level = len(spec) - len(spec.lstrip("."))
        names = []
        for part in rest.strip().strip("()\\").replace("\n", ",").split(","):
            name = part.strip().split(" as ")[0].strip().strip("()\\ ")
            if name and name != "*" and _NAME.match(name):
                names.append(name)
        out.append((level, spec[level:], tuple(names)))
    for m in _PY_IMPORT_LINE.finditer(text):
        for part in m.group(1).split(","):
            name = part.strip().split(" as ")[0].strip()
            if _NAME.match(name):
                out.append((0, name, ()))
    return out


# --------------------------------------------------------------------------- JS scanning

_Q = r"""(['"`])([^'"`\n]+?)\1"""
_JS_SPECIFIERS = [
    re.compile(r"\brequire\s*\(\s*" + _Q + r"\s*\)"),
    re.compile(r"\bimport\s*\(\s*" + _Q),
    re.compile(r"""(?<![\w$.])(?:import|export)\s+[\w$*{}\s,]*?\bfrom\s*""" + _Q),
    re.compile(r"""(?<![\w$.])import\s*""" + _Q),
    re.compile(
        r"\b(?:jest|vi)\s*\.\s*(?:mock|unmock|doMock|doUnmock|setMock|requireActual|"
        r"requireMock|importActual|importMock)\s*(?:<[^>]*>)?\s*\(\s*" + _Q
    ),
]


def _scan_js(text: str) -> list[str]:
    out: list[str] = []
    for pattern in _JS_SPECIFIERS:
        out.extend(m.group(2) for m in pattern.finditer(text))
    return out


def _strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas (tsconfig) → JSON; string contents untouched."""
    strings = r'"(?:\\.|[^"\\])*"'
    text = re.sub(
        strings + r"|//[^\n]*|/\*.*?\*/",
        lambda m: m.group(0) if m.group(0).startswith('"') else "",
        text,
        flags=re.DOTALL,
    )
    return re.sub(
        strings + r"|,(?=\s*[}\]])",
        lambda m: m.group(0) if m.group(0).startswith('"') else "",
        text,
    )


def _load_json(path: str, *, jsonc: bool = False) -> dict[str, Any]:
    text = _read_text(path)
    if jsonc:
        text = _strip_jsonc(text)
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _strings(value: Any) -> Iterator[str]:
    """Every string in a (nested) ``exports``/``imports`` target, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def _match_pattern(pattern: str, spec: str) -> str | None:
    """``*``-pattern match (tsconfig paths, exports/imports keys); the star text or None."""
    if "*" not in pattern:
        return "" if pattern == spec else None
    head, _, tail = pattern.partition("*")
    if spec.startswith(head) and spec.endswith(tail) and len(spec) >= len(head) + len(tail):
        return spec[len(head) : len(spec) - len(tail)]
    return None


# --------------------------------------------------------------------------- resolver

#: Markers :meth:`_Resolver._resolve_in` returns instead of a package folder.
_PARTIAL = "\0partial"  # a prefix resolved (``six.moves`` with only ``six.py``)
_MISSING = "\0missing"  # the first component is not under that root


class _Resolver:
    """Resolves imports of one snapshot; every file is scanned at most once."""

    def __init__(self, repo: Path, extra_files: Iterable[str] = ()) -> None:
        self.repo = repo
        self._root = os.fspath(repo)
        self.index = _Index(repo)
        for f in extra_files:
            if _lang(f) or f.endswith(".json"):
                self.index.add(f)
        self.files = self.index.files
        self.dirs = self.index.dirs
        self._edges: dict[str, set[str]] = {}
        self._py_roots: list[str] | None = None
        self._abs_cache: dict[tuple[tuple[str, ...], str], tuple[list[str], str | None]] = {}
        self._conftest_dir: dict[str, list[str]] = {}
        self._tsconfig_dir: dict[str, list[tuple[str, dict[str, list[str]], str | None]]] = {}
        self._pkg_dir: dict[str, str | None] = {}
        self._pkg_json: dict[str, dict[str, Any]] = {}
        self._workspaces: dict[str, list[str]] | None = None
        self._ts_files: dict[str, list[str]] | None = None

    # ---------------------------------------------------------------- graph

    def graph(self, starts: Iterable[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        queue = deque(s for s in starts if s in self.files)
        seen = set(queue)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            while queue:
                node = queue.popleft()
                deps = self.edges(node)
                out[node] = deps
                for dep in deps:
                    if dep not in seen:
                        seen.add(dep)
                        queue.append(dep)
        return out

    def edges(self, path: str) -> set[str]:
        cached = self._edges.get(path)
        if cached is None:
            lang = _lang(path)
            if lang == "py":
                cached = self._py_edges(path)
            elif lang == "js":
                cached = self._js_edges(path)
            else:
                cached = set()
            cached.discard(path)
            self._edges[path] = cached
        return cached

    def conftests_for(self, test: str) -> list[str]:
        return list(self._conftests_in(_dirname(test)))

    def _conftests_in(self, folder: str) -> list[str]:
        hit = self._conftest_dir.get(folder)
        if hit is None:
            conf = f"{folder}/conftest.py" if folder else "conftest.py"
            hit = [conf] if conf in self.files else []
            if folder:
                hit = hit + self._conftests_in(_dirname(folder))
            self._conftest_dir[folder] = hit
        return hit

    # ---------------------------------------------------------------- Python

    def _py_edges(self, path: str) -> set[str]:
        imports, parsed = _scan_python_bytes(_read_bytes(os.path.join(self._root, path)))
        folder = _dirname(path)
        deps: set[str] = set()
        # Importing a module runs its package's __init__ first (and that one its parent's).
        if posixpath.basename(path) == "__init__.py":
            own_init = (_dirname(folder) + "/__init__.py").lstrip("/") if folder else ""
        else:
            own_init = f"{folder}/__init__.py" if folder else "__init__.py"
        if own_init and own_init in self.files:
            deps.add(own_init)
        local = self._local_roots(path, folder, parsed)
        for level, module, names in imports:
            if level:
                base = folder
                for _ in range(level - 1):
                    if not base:
                        base = None
                        break
                    base = _dirname(base)
                if base is None:
                    continue
                files, pkg = self._resolve_in(base, module.split(".") if module else [])
                if not module:
                    init = f"{base}/__init__.py" if base else "__init__.py"
                    if init in self.files:
                        deps.add(init)
                    pkg = base
            else:
                if not module:
                    continue
                files, pkg = self._resolve_abs(local, module)
            deps.update(files)
            if pkg is not None and pkg is not _PARTIAL and pkg is not _MISSING:
                for name in names:
                    deps.update(self._submodule(pkg, name))
        return deps

    def _local_roots(self, path: str, folder: str, parsed: bool) -> tuple[str, ...]:
        """Folders on ``sys.path`` for this file only (script dir, pytest rootdir insertion)."""
        init = f"{folder}/__init__.py" if folder else "__init__.py"
        in_package = init in self.files
        if not (is_test_path(path) or not parsed or not in_package):
            return ()
        roots = [folder]
        base = folder
        while base and (f"{base}/__init__.py" in self.files):
            base = _dirname(base)
        if base != folder:
            roots.append(base)
        return tuple(roots)

    def _submodule(self, pkg: str, name: str) -> list[str]:
        stem = f"{pkg}/{name}" if pkg else name
        out = [f for f in (f"{stem}.py", f"{stem}/__init__.py") if f in self.files]
        return out

    def _resolve_in(self, root: str, parts: list[str]) -> tuple[list[str], str | None]:
        """Files of ``parts`` under ``root``; also the package folder when all parts resolve
        to packages (for ``from pkg import submodule``). Raises nothing; partial is fine."""
        files: list[str] = []
        cur = root
        for i, part in enumerate(parts):
            stem = f"{cur}/{part}" if cur else part
            init = f"{stem}/__init__.py"
            if init in self.files:
                files.append(init)
                cur = stem
            elif f"{stem}.py" in self.files:
                files.append(f"{stem}.py")
                return files, None if i == len(parts) - 1 else _PARTIAL
            elif stem in self.dirs:
                cur = stem  # namespace package
            else:
                return files, _PARTIAL if i else _MISSING
        return files, cur

    def _resolve_abs(self, local: tuple[str, ...], module: str) -> tuple[list[str], str | None]:
        key = (local, module)
        hit = self._abs_cache.get(key)
        if hit is not None:
            return hit
        parts = module.split(".")
        roots = list(local) + [r for r in self._roots() if r not in local]
        full_empty: tuple[list[str], str | None] | None = None
        partial: tuple[list[str], str | None] | None = None
        result: tuple[list[str], str | None] = ([], None)
        for root in roots:
            files, pkg = self._resolve_in(root, parts)
            if pkg is _MISSING:
                continue
            if pkg is _PARTIAL:
                if partial is None and files:
                    partial = (files, None)
                continue
            if files:
                result = (files, pkg)
                break
            if full_empty is None:
                full_empty = (files, pkg)
        else:
            result = partial or full_empty or ([], None)
        self._abs_cache[key] = result
        return result

    def _roots(self) -> list[str]:
        if self._py_roots is None:
            roots = [""]
            if "src" in self.dirs:
                roots.append("src")
            for found in sorted(self._config_roots(), key=lambda r: (r.count("/"), r)):
                if found not in roots and found in self.dirs:
                    roots.append(found)
            self._py_roots = roots
        return self._py_roots

    def _config_roots(self) -> set[str]:
        roots: set[str] = set()
        names = ("pyproject.toml", "setup.cfg", "setup.py", "pytest.ini", "tox.ini")
        for cfg in _walk_files(self.index, names):
            if "/" in cfg and is_test_path(cfg):
                continue  # fixture projects under tests/ are not module roots
            base = _dirname(cfg)
            text = _read_text(os.path.join(self._root, cfg))
            if posixpath.basename(cfg) in names[:3]:
                roots.add(base)
            for rel in _config_dirs(text):
                joined = _join(base, rel)
                if joined is not None:
                    roots.add(joined)
        return roots

    # ---------------------------------------------------------------- JS / TS

    def _js_edges(self, path: str) -> set[str]:
        text = _read_text(os.path.join(self._root, path))
        folder = _dirname(path)
        deps: set[str] = set()
        for raw in _scan_js(text):
            spec = raw.split("?", 1)[0].split("#", 1)[0] if not raw.startswith("#") else raw
            if not spec:
                continue
            deps.update(self._resolve_js(folder, spec))
        return deps

    def _resolve_js(self, folder: str, spec: str) -> list[str]:
        if spec.startswith(("./", "../")) or spec in (".", ".."):
            target = _join(folder, spec)
            return self._probe(target) if target is not None else []
        if spec.startswith("/"):
            pkg = self._nearest_package(folder)
            target = _join(pkg or "", spec.lstrip("/"))
            return self._probe(target) if target is not None else []
        out: list[str] = []
        for base, paths, base_url in self._tsconfigs(folder):
            for pattern, targets in paths.items():
                star = _match_pattern(pattern, spec)
                if star is None:
                    continue
                for tgt in targets:
                    joined = _join(base, tgt.replace("*", star, 1))
                    if joined is not None:
                        out.extend(self._probe(joined))
            if not out and base_url is not None:
                joined = _join(base_url, spec)
                if joined is not None:
                    out.extend(self._probe(joined))
        if out:
            return out
        if spec.startswith("#"):
            return self._package_imports(folder, spec)
        segments = spec.split("/")
        name = "/".join(segments[:2]) if spec.startswith("@") else segments[0]
        sub = spec[len(name) + 1 :]
        for d in self._workspace_names().get(name, ()):
            out.extend(self._package_entry(d, sub))
        if out:
            return out
        if spec.startswith(("@/", "~/")):
            pkg = self._nearest_package(folder) or ""
            for base in ("src", ""):
                joined = _join(pkg, posixpath.join(base, spec[2:]) if base else spec[2:])
                if joined is not None:
                    out.extend(self._probe(joined))
                if out:
                    break
        return out

    def _probe(self, target: str, *, depth: int = 0) -> list[str]:
        """Files a relative specifier resolved to ``target`` may name."""
        files = self.files
        if target in files:
            return [target]
        out: list[str] = []
        stem, ext = posixpath.splitext(target)
        for alt in _TS_SUBST.get(ext, ()):
            if stem + alt in files:
                out.append(stem + alt)
        if out:
            return out
        out = [target + e for e in _JS_PROBE_EXTS if target + e in files]
        if out:
            return out
        if target in self.dirs:
            pj = f"{target}/package.json" if target else "package.json"
            if pj in files and depth < 2:
                out = self._package_entry(target, "", depth=depth + 1)
            if not out:
                index = f"{target}/index" if target else "index"
                out = [index + e for e in _JS_PROBE_EXTS if index + e in files]
        return out

    def _package_json(self, folder: str) -> dict[str, Any]:
        data = self._pkg_json.get(folder)
        if data is None:
            pj = f"{folder}/package.json" if folder else "package.json"
            data = _load_json(os.path.join(self._root, pj)) if pj in self.files else {}
            self._pkg_json[folder] = data
        return data

    def _nearest_package(self, folder: str) -> str | None:
        if folder in self._pkg_dir:
            return self._pkg_dir[folder]
        pj = f"{folder}/package.json" if folder else "package.json"
        if pj in self.files:
            found: str | None = folder
        elif folder:
            found = self._nearest_package(_dirname(folder))
        else:
            found = None
        self._pkg_dir[folder] = found
        return found

    def _workspace_names(self) -> dict[str, list[str]]:
        if self._workspaces is None:
            names: dict[str, list[str]] = {}
            for pj in sorted(_walk_files(self.index, ("package.json",))):
                folder = _dirname(pj)
                name = self._package_json(folder).get("name")
                if isinstance(name, str) and name:
                    names.setdefault(name, []).append(folder)
            self._workspaces = names
        return self._workspaces

    def _package_entry(self, pkg: str, sub: str, *, depth: int = 0) -> list[str]:
        """Files that ``<package at pkg>[/sub]`` names (exports, main/module, sub path)."""
        data = self._package_json(pkg)
        exports = data.get("exports")
        targets: list[str] = []
        key = f"./{sub}" if sub else "."
        if isinstance(exports, dict) and any(k.startswith(".") for k in exports):
            for pattern, value in exports.items():
                star = _match_pattern(pattern, key)
                if star is not None:
                    targets.extend(t.replace("*", star) for t in _strings(value))
        elif exports is not None and not sub:
            targets.extend(_strings(exports))
        if not sub:
            for field in ("source", "module", "main", "browser"):
                value = data.get(field)
                if isinstance(value, str):
                    targets.append(value)
        out: list[str] = []
        for tgt in targets:
            joined = _join(pkg, tgt)
            if joined is None or joined.endswith(".d.ts"):
                continue
            found = self._probe_entry(joined, depth)
            out.extend(f for f in found if f not in out)
        if not out:
            fallbacks = [sub, f"src/{sub}"] if sub else ["index", "src/index"]
            for rel in fallbacks:
                joined = _join(pkg, rel)
                if joined is not None and joined != pkg:
                    out.extend(self._probe(joined, depth=depth + 1))
                if out:
                    break
        return out

    def _probe_entry(self, target: str, depth: int) -> list[str]:
        found = self._probe(target, depth=depth + 1)
        if found:
            return found
        parts = target.split("/")
        for i, part in enumerate(parts):
            if part in _OUTPUT_DIRS:
                alt = "/".join([*parts[:i], "src", *parts[i + 1 :]])
                stem, ext = posixpath.splitext(alt)
                found = self._probe(alt, depth=depth + 1)
                if not found and ext in _TS_SUBST:
                    found = self._probe(stem, depth=depth + 1)
                if found:
                    return found
        return []

    def _package_imports(self, folder: str, spec: str) -> list[str]:
        pkg = self._nearest_package(folder)
        if pkg is None:
            return []
        imports = self._package_json(pkg).get("imports")
        out: list[str] = []
        if isinstance(imports, dict):
            for pattern, value in imports.items():
                star = _match_pattern(pattern, spec)
                if star is None:
                    continue
                for tgt in _strings(value):
                    joined = _join(pkg, tgt.replace("*", star))
                    if joined is not None and tgt.startswith("."):
                        out.extend(self._probe_entry(joined, 0))
        return out

    def _tsconfigs(self, folder: str) -> list[tuple[str, dict[str, list[str]], str | None]]:
        """(folder ``paths`` are relative to, ``paths``, ``baseUrl`` folder) of every config in
        the nearest folder (from ``folder`` up) holding a ``tsconfig*.json``/``jsconfig.json``."""
        hit = self._tsconfig_dir.get(folder)
        if hit is None:
            configs = self._ts_config_files().get(folder)
            if configs:
                hit = [o for cfg in configs if (o := self._ts_options(cfg, 0)) is not None]
            elif folder:
                hit = self._tsconfigs(_dirname(folder))
            else:
                hit = []
            self._tsconfig_dir[folder] = hit
        return hit

    def _ts_config_files(self) -> dict[str, list[str]]:
        if self._ts_files is None:
            found: dict[str, list[str]] = {}
            for f in sorted(self.files):
                name = posixpath.basename(f)
                if name == "jsconfig.json" or (
                    name.startswith("tsconfig") and name.endswith(".json")
                ):
                    found.setdefault(_dirname(f), []).append(f)
            self._ts_files = found
        return self._ts_files

    def _ts_options(
        self, cfg: str, depth: int
    ) -> tuple[str, dict[str, list[str]], str | None] | None:
        """Effective ``paths``/``baseUrl`` of one config, ``extends`` (relative) followed."""
        data = _load_json(os.path.join(self._root, cfg), jsonc=True)
        base = _dirname(cfg)
        paths: dict[str, list[str]] | None = None
        paths_dir = base
        url_dir: str | None = None
        extends = data.get("extends")
        parents = [extends] if isinstance(extends, str) else extends
        if depth < 5 and isinstance(parents, list):
            for parent in parents:  # later entries override earlier ones
                if not (isinstance(parent, str) and parent.startswith(".")):
                    continue
                rel = parent if parent.endswith(".json") else parent + ".json"
                joined = _join(base, rel)
                inherited = self._ts_options(joined, depth + 1) if joined in self.files else None
                if inherited is not None:
                    paths_dir, paths, url_dir = inherited
                    paths = paths or None
        options = data.get("compilerOptions")
        options = options if isinstance(options, dict) else {}
        if isinstance(options.get("paths"), dict):
            paths = {
                k: [t for t in v if isinstance(t, str)]
                for k, v in options["paths"].items()
                if isinstance(k, str) and isinstance(v, list)
            }
            paths_dir = base
        if isinstance(options.get("baseUrl"), str):
            url_dir = _join(base, options["baseUrl"])
        if paths is None and url_dir is None:
            return None
        # paths are relative to baseUrl when there is one, else to the config defining them
        return (url_dir if url_dir is not None else paths_dir, paths or {}, url_dir)


_CFG_PATTERNS = [
    # setup.py package_dir={"": "src"}; pyproject package-dir = {"" = "src"}
    re.compile(r"""package[-_]dir\s*=\s*\{\s*['"]{2}\s*[:=]\s*['"]([^'"]+)['"]"""),
    # setup.cfg [options] package_dir =\n    = src
    re.compile(r"""package_dir\s*=\s*\n\s*=\s*([\w./-]+)"""),
    # where = ["src"] / where = src / find_packages(where="src") / find_packages("src")
    re.compile(r"""\bwhere\s*=\s*\[?\s*['"]?([\w./-]+)"""),
    re.compile(r"""find_(?:namespace_)?packages\(\s*['"]([\w./-]+)['"]"""),
    # poetry packages = [{ include = "pkg", from = "src" }]
    re.compile(r"""\bfrom\s*=\s*['"]([\w./-]+)['"]"""),
]
_HATCH_PACKAGES = re.compile(r"""^\s*(?:packages|sources)\s*=\s*\[([^\]]*)\]""", re.MULTILINE)
_PYTHONPATH = re.compile(r"""^\s*pythonpath\s*=\s*(\[[^\]]*\]|[^\n]*)""", re.MULTILINE)


def _config_dirs(text: str) -> set[str]:
    """Module-root folders named in packaging/pytest config (relative to the config's folder)."""
    out: set[str] = set()
    for pattern in _CFG_PATTERNS:
        out.update(m.group(1) for m in pattern.finditer(text))
    for m in _HATCH_PACKAGES.finditer(text):
        for item in re.findall(r"""['"]([^'"]+)['"]""", m.group(1)):
            if "/" in item.strip("/"):
                out.add(posixpath.dirname(item.strip("/")))
            elif m.group(0).lstrip().startswith("sources"):
                out.add(item)
    for m in _PYTHONPATH.finditer(text):
        value = m.group(1)
        items = re.findall(r"""['"]([^'"]+)['"]""", value) if "[" in value else value.split()
        out.update(items)
    return {d.strip().strip("/") or "." for d in out if d.strip()}
