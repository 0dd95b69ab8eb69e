"""Python :mod:`ast` helpers: dotted names, decorators, relative imports, signatures as written,
keyword acceptance and the names a module or class body binds (:class:`Scope`).
"""

from __future__ import annotations

import ast
import warnings

from repogym.pipelines._instructions.interface.model import (
    DEFAULT_MAX,
    cap_items,
    collapse,
    split_words,
)


def dotted_name(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted_name(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def last_part(node: ast.AST) -> str:
    """Last name of a (possibly called) decorator or callee: ``a.b.c(...)`` -> ``c``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def unparse_node(node: ast.AST, limit: int = 80) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse of a parsed tree does not fail in practice
        return ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def str_const(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_FUNC_DECOS = split_words(
    "staticmethod classmethod abstractmethod abstractclassmethod "
    "abstractstaticmethod lru_cache cache overload override final contextmanager "
    "asynccontextmanager cached_property property"
)
CLASS_DECOS = frozenset({"dataclass", "total_ordering", "final", "unique", "runtime_checkable"})
HARMLESS_BASES = frozenset({"object", "ABC", "Generic", "Protocol"})


def decos_ok(decorators: list[ast.expr], allowed: frozenset[str]) -> bool:
    return all(last_part(d) in allowed for d in decorators)


def is_static(fn: ast.AST) -> bool:
    return any(last_part(d) == "staticmethod" for d in getattr(fn, "decorator_list", []))


def is_property(fn: ast.AST) -> bool:
    for d in getattr(fn, "decorator_list", []):
        name = last_part(d)
        if name in ("property", "cached_property") or name in ("setter", "getter", "deleter"):
            return True
    return False


def absolute_module(module: str, is_pkg: bool, level: int, name: str | None) -> str | None:
    """The absolute module of ``from <level dots><name> import ...`` inside ``module``."""
    if not level:
        return name
    parts = module.split(".") if module else []
    if not is_pkg:
        parts = parts[:-1]
    if level - 1 > len(parts):
        return None
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    if name:
        parts += name.split(".")
    return ".".join(parts) or None


def expr_text(node: ast.AST, source: str) -> str:
    seg = None
    try:
        seg = ast.get_source_segment(source, node)
    except Exception:
        seg = None
    text = collapse(seg if seg is not None else unparse_node(node, 200))
    return cap_items(text, DEFAULT_MAX)


def signature_text(name: str, fn: ast.AST, source: str, drop_first: bool) -> str:
    """``name(a, b=1, *, c=None)``: parameters with defaults as written, no annotations."""
    a = fn.args  # type: ignore[attr-defined]
    pos = [*a.posonlyargs, *a.args]
    defaults: list[ast.expr | None] = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    entries = [
        (arg, d, i < len(a.posonlyargs))
        for i, (arg, d) in enumerate(zip(pos, defaults, strict=True))
    ]
    if drop_first and entries:
        entries = entries[1:]
    items: list[str] = []
    for i, (arg, dflt, posonly) in enumerate(entries):
        items.append(arg.arg + (f"={expr_text(dflt, source)}" if dflt is not None else ""))
        if posonly and (i + 1 == len(entries) or not entries[i + 1][2]):
            items.append("/")
    if a.vararg is not None:
        items.append("*" + a.vararg.arg)
    elif a.kwonlyargs:
        items.append("*")
    for arg, dflt in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        items.append(arg.arg + (f"={expr_text(dflt, source)}" if dflt is not None else ""))
    if a.kwarg is not None:
        items.append("**" + a.kwarg.arg)
    return cap_items(f"{name}({', '.join(items)})")


def accepts_call(fns: list[ast.AST], kw: str) -> bool | None:
    """Whether one of these definitions (overloads) takes keyword ``kw``; None when unknowable."""
    if not fns:
        return None
    for fn in fns:
        if not isinstance(fn, FUNCS) or not decos_ok(fn.decorator_list, _FUNC_DECOS):
            return None
    for fn in fns:
        a = fn.args  # type: ignore[attr-defined]
        if a.kwarg is not None:
            return True
        if kw in {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}:
            return True
    return False


def header_nodes(st: ast.stmt) -> list[ast.AST]:
    """The parts of a statement that bind names in its own scope (not nested bodies)."""
    if isinstance(st, ast.Assign):
        return [*st.targets, st.value]
    if isinstance(st, (ast.AnnAssign, ast.AugAssign)):
        return [st.target] + ([st.value] if st.value is not None else [])
    if isinstance(st, (ast.For, ast.AsyncFor)):
        return [st.target, st.iter]
    if isinstance(st, (ast.With, ast.AsyncWith)):
        return [x for item in st.items for x in (item.context_expr, item.optional_vars) if x]
    if isinstance(st, (ast.If, ast.While)):
        return [st.test]
    if isinstance(st, ast.Expr):
        return [st.value]
    return []


def is_type_checking(st: ast.stmt) -> bool:
    return isinstance(st, ast.If) and (dotted_name(st.test) or "").endswith("TYPE_CHECKING")


class Scope:
    """Names bound at the top level of a module or class body."""

    def __init__(self) -> None:
        self.defs: dict[str, list[ast.AST]] = {}  # def/class name -> definitions, in order
        self.others: set[str] = set()  # bound by assignment, loops, with, except, global
        self.imports: dict[str, tuple[str, str | None]] = {}  # name -> (module, attr | None)
        self.all_names: set[str] = set()
        self.dynamic = False  # star import, __getattr__, setattr/globals() tricks

    def bound(self) -> set[str]:
        return set(self.defs) | self.others | set(self.imports)

    def has(self, name: str) -> bool:
        return name in self.defs or name in self.others or name in self.imports


def collect_scope(body: list[ast.stmt], module: str, is_pkg: bool) -> Scope:
    scope = Scope()

    def visit(stmts: list[ast.stmt]) -> None:
        for st in stmts:
            if isinstance(st, (*FUNCS, ast.ClassDef)):
                scope.defs.setdefault(st.name, []).append(st)
                if isinstance(st, FUNCS):
                    for sub in ast.walk(st):
                        if isinstance(sub, ast.Global):
                            scope.others.update(sub.names)
                continue
            if isinstance(st, ast.Import):
                for alias in st.names:
                    if alias.asname:
                        scope.imports[alias.asname] = (alias.name, None)
                    else:
                        top = alias.name.split(".")[0]
                        scope.imports[top] = (top, None)
                continue
            if isinstance(st, ast.ImportFrom):
                src = absolute_module(module, is_pkg, st.level, st.module)
                for alias in st.names:
                    if alias.name == "*":
                        scope.dynamic = True
                    elif src:
                        scope.imports[alias.asname or alias.name] = (src, alias.name)
                    else:
                        scope.others.add(alias.asname or alias.name)
                continue
            for node in header_nodes(st):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                        scope.others.add(sub.id)
                    elif isinstance(sub, ast.NamedExpr):
                        scope.others.add(sub.target.id)
            _collect_all(st, scope)
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(st, name, None)
                if isinstance(inner, list):
                    visit(inner)
            for handler in getattr(st, "handlers", []) or []:
                if handler.name:
                    scope.others.add(handler.name)
                visit(handler.body)
            for case in getattr(st, "cases", []) or []:
                visit(case.body)

    visit(body)
    if scope.has("__getattr__") or scope.has("__getattribute__"):
        scope.dynamic = True
    return scope


def _collect_all(st: ast.stmt, scope: Scope) -> None:
    """``__all__ = [...]``, ``__all__ += [...]``, ``__all__.extend([...])``/``.append(...)``."""
    value: ast.AST | None = None
    if (isinstance(st, ast.Assign) and any(dotted_name(t) == "__all__" for t in st.targets)) or (
        isinstance(st, (ast.AugAssign, ast.AnnAssign)) and dotted_name(st.target) == "__all__"
    ):
        value = st.value
    elif (
        isinstance(st, ast.Expr)
        and isinstance(st.value, ast.Call)
        and dotted_name(st.value.func) in ("__all__.extend", "__all__.append")
        and st.value.args
    ):
        value = st.value.args[0]
    if value is None:
        return
    for sub in ast.walk(value):
        text = str_const(sub)
        if text is not None:
            scope.all_names.add(text)


def parse_source(text: str, rel: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=rel)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
