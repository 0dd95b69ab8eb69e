"""Static facts about the source tree: the import graph between packages, private names used
across packages, and the sizes of modules and functions.

Shared by the import-rules test (tests/structure/test_layering.py) and scripts/structure.py,
which prints the figures. Everything is read with `ast`; nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "src" / "repogym"


@dataclass(frozen=True)
class Import:
    """One `import`/`from … import` of a repogym name, wherever it appears (lazy ones too)."""

    module: str  # importing module, dotted (repogym.run.trial)
    target: str  # imported module, dotted (repogym.sandbox.base)
    names: tuple[str, ...]  # names taken from it (empty for `import x`)
    line: int
    lazy: bool  # inside a function or under TYPE_CHECKING


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def package_of(module: str) -> str:
    """`repogym.run.trial` → `run`; top-level modules are their own package (`spec`, `llm`)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "repogym"


def _resolve(module: str, is_pkg: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports() -> Iterator[Import]:
    mods = modules()
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_pkg = path.name == "__init__.py"
        yield from _walk(tree, mod, is_pkg, mods, lazy=False)


def _walk(
    node: ast.AST, mod: str, is_pkg: bool, mods: dict[str, Path], lazy: bool
) -> Iterator[Import]:
    for child in ast.iter_child_nodes(node):
        child_lazy = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            child_lazy = True
        if isinstance(child, ast.Import):
            for alias in child.names:
                if alias.name.split(".")[0] == "repogym":
                    yield Import(mod, alias.name, (), child.lineno, lazy)
        elif isinstance(child, ast.ImportFrom):
            target = _resolve(mod, is_pkg, child.level, child.module)
            if target.split(".")[0] != "repogym":
                continue
            # `from repogym.x import y` where y is a module: the target is the module
            plain: list[str] = []
            for alias in child.names:
                sub = f"{target}.{alias.name}"
                if sub in mods:
                    yield Import(mod, sub, (), child.lineno, lazy)
                else:
                    plain.append(alias.name)
            if plain:
                yield Import(mod, target, tuple(plain), child.lineno, lazy)
        else:
            yield from _walk(child, mod, is_pkg, mods, child_lazy)


def is_private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def package_edges(include_lazy: bool = True) -> dict[tuple[str, str], list[Import]]:
    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in imports():
        if imp.lazy and not include_lazy:
            continue
        a, b = package_of(imp.module), package_of(imp.target)
        if a != b and b != "repogym":
            edges.setdefault((a, b), []).append(imp)
    return edges


def package_cycles(edges: dict[tuple[str, str], list[Import]]) -> list[tuple[str, str]]:
    """Pairs of packages that import each other, directly or through others (one pair per
    strongly connected component member pair that has a direct edge back)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())

    def reaches(src: str, dst: str) -> bool:
        seen, stack = set(), [src]
        while stack:
            n = stack.pop()
            if n == dst:
                return True
            if n in seen:
                continue
            seen.add(n)
            stack.extend(graph.get(n, ()))
        return False

    return sorted((a, b) for a, b in edges if reaches(b, a))


def private_cross_package(imports_: list[Import] | None = None) -> list[Import]:
    """Imports that take a private module or name from another package."""
    out = []
    for imp in imports_ if imports_ is not None else imports():
        if package_of(imp.module) == package_of(imp.target):
            continue
        pkg_prefix = "repogym." + package_of(imp.target)
        rest = imp.target[len(pkg_prefix) :] if imp.target.startswith(pkg_prefix) else imp.target
        if is_private(rest) or any(is_private(n) for n in imp.names):
            out.append(imp)
    return out


@dataclass
class Sizes:
    modules: dict[str, int] = field(default_factory=dict)  # module → lines
    functions: dict[str, int] = field(default_factory=dict)  # module:qualname → lines


SHIPPED = ("shipped/", "sandbox/_forkserver", "sandbox/_untar")


def sizes() -> Sizes:
    out = Sizes()
    for mod, path in modules().items():
        text = path.read_text(encoding="utf-8")
        out.modules[mod] = text.count("\n") + (0 if text.endswith("\n") else 1)
        tree = ast.parse(text)
        for qual, node in _functions(tree, ""):
            assert node.end_lineno is not None
            out.functions[f"{mod}:{qual}"] = node.end_lineno - node.lineno + 1
    return out


def _functions(
    node: ast.AST, prefix: str
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            qual = f"{prefix}{child.name}"
            yield qual, child
            yield from _functions(child, qual + ".")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
