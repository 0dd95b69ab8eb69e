"""What a source file imports: Python (``ast``, with a regex fallback for files that do not
parse) and JavaScript/TypeScript (specifier patterns), cached by content."""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

from repogym.pipelines._selection.repo_index import read_text_file_

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


def scan_python_bytes(data: bytes) -> tuple[tuple[_PyImport, ...], bool]:
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
        if isinstance(node, ast.Import):
            out.extend((0, alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names if a.name != "*")
            out.append((node.level or 0, node.module or "", names))
        elif top and isinstance(node, (ast.Assign, ast.AnnAssign)):
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


def scan_js(text: str) -> list[str]:
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


def load_json(path: str, *, jsonc: bool = False) -> dict[str, Any]:
    text = read_text_file_(path)
    if jsonc:
        text = _strip_jsonc(text)
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def iter_strings(value: Any) -> Iterator[str]:
    """Every string in a (nested) ``exports``/``imports`` target, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from iter_strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_strings(v)


def match_pattern(pattern: str, spec: str) -> str | None:
    """``*``-pattern match (tsconfig paths, exports/imports keys); the star text or None."""
    if "*" not in pattern:
        return "" if pattern == spec else None
    head, _, tail = pattern.partition("*")
    if spec.startswith(head) and spec.endswith(tail) and len(spec) >= len(head) + len(tail):
        return spec[len(head) : len(spec) - len(tail)]
    return None
