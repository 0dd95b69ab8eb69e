"""A parsed Python test file (:class:`TestFile`): its imports, helpers, fixtures, classes and
the test functions a qualname names.
"""

from __future__ import annotations

import ast

from repogym.pipelines._instructions.interface.context import Ctx, Mod, NameRef, Ref
from repogym.pipelines._instructions.interface.pyast import (
    FUNCS,
    absolute_module,
    dotted_name,
    header_nodes,
    is_type_checking,
    str_const,
    unparse_node,
)


class TestFile:
    """A parsed test file: its module-level imports, helpers, fixtures and classes."""

    def __init__(self, ctx: Ctx, rel: str, tree: ast.Module) -> None:
        self.ctx = ctx
        self.rel = rel
        self.tree = tree
        self.module, self.is_pkg, _root = ctx.head.file_module(rel)
        self.env: dict[str, Ref | None] = {}
        self.defs: dict[str, ast.AST] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.consts: dict[str, ast.expr] = {}
        self.fixtures: dict[str, ast.AST] = {}
        self.autouse: list[ast.AST] = []
        self.top: list[ast.stmt] = []
        self._visit(tree.body)
        for name, node in list(self.defs.items()):
            if isinstance(node, FUNCS):
                self._fixture(node, self.fixtures, self.autouse, name)

    @staticmethod
    def _fixture(fn: ast.AST, into: dict[str, ast.AST], autouse: list[ast.AST], name: str) -> None:
        for deco in getattr(fn, "decorator_list", []):
            if "fixture" not in unparse_node(deco, 400):
                continue
            alias = name
            if isinstance(deco, ast.Call):
                for kw in deco.keywords:
                    if kw.arg == "name" and str_const(kw.value):
                        alias = kw.value.value  # type: ignore[attr-defined]
                    if (
                        kw.arg == "autouse"
                        and isinstance(kw.value, ast.Constant)
                        and kw.value.value is True
                    ):
                        autouse.append(fn)
            into[alias] = fn

    def _visit(self, stmts: list[ast.stmt]) -> None:
        for st in stmts:
            if is_type_checking(st):
                continue
            if isinstance(st, FUNCS):
                self.defs[st.name] = st
            elif isinstance(st, ast.ClassDef):
                self.classes[st.name] = st
            elif isinstance(st, (ast.Import, ast.ImportFrom)):
                for key, bound, ref in import_events(self.ctx, st, self.module, self.is_pkg):
                    self.ctx.file_imports.append((key, self.rel, bound))
                    if bound:
                        self.env[bound] = ref
            else:
                if isinstance(st, ast.Assign) and len(st.targets) == 1:
                    target = st.targets[0]
                    if isinstance(target, ast.Name):
                        self.consts[target.id] = st.value
                if isinstance(st, (ast.If, ast.Try, ast.With)) or hasattr(st, "handlers"):
                    self.top.append(_header_only(st))
                    self._visit(getattr(st, "body", []))
                    self._visit(getattr(st, "orelse", []))
                    self._visit(getattr(st, "finalbody", []))
                    for handler in getattr(st, "handlers", []) or []:
                        self._visit(handler.body)
                else:
                    self.top.append(st)

    def chain(self, cls: ast.ClassDef, seen: set[int] | None = None) -> list[ast.ClassDef]:
        """The class and its bases defined in this file (depth first)."""
        seen = set() if seen is None else seen
        if id(cls) in seen or len(seen) > 20:
            return []
        seen.add(id(cls))
        out = [cls]
        for base in cls.bases:
            name = dotted_name(base)
            if name in self.classes:
                out += self.chain(self.classes[name], seen)
        return out

    def method(self, chain: list[ast.ClassDef], name: str) -> ast.AST | None:
        for cls in chain:
            for st in cls.body:
                if isinstance(st, FUNCS) and st.name == name:
                    return st
        return None

    def targets(self, parts: tuple[str, ...]) -> list[tuple[ast.AST, list[ast.ClassDef]]]:
        """Test functions named by a qualname (all tests of the file/class when it is short)."""
        if not parts:
            out: list[tuple[ast.AST, list[ast.ClassDef]]] = [
                (fn, []) for name, fn in self.defs.items() if name.startswith("test")
            ]
            for cls in self.classes.values():
                out += self._class_tests(cls)
            return out
        scope: dict[str, ast.AST] = {**self.defs, **self.classes}
        chain: list[ast.ClassDef] = []
        for i, part in enumerate(parts):
            node = scope.get(part)
            if node is None and chain:
                node = self.method(chain, part)
            if node is None:
                return []
            if isinstance(node, ast.ClassDef):
                chain = self.chain(node) if not chain else [node, *self.chain(node)[1:]]
                if i == len(parts) - 1:
                    return self._class_tests(node)
                scope = {st.name: st for st in node.body if isinstance(st, (*FUNCS, ast.ClassDef))}
            else:
                return [(node, chain)] if i == len(parts) - 1 else []
        return []

    def _class_tests(self, cls: ast.ClassDef) -> list[tuple[ast.AST, list[ast.ClassDef]]]:
        chain = self.chain(cls)
        names: list[str] = []
        for c in chain:
            for st in c.body:
                if isinstance(st, FUNCS) and st.name.startswith("test") and st.name not in names:
                    names.append(st.name)
        return [(m, chain) for n in names if (m := self.method(chain, n)) is not None]


def _header_only(st: ast.stmt) -> ast.stmt:
    """A compound statement's own expressions (its test / items), for module-level reading."""
    exprs = header_nodes(st)
    return ast.Expr(
        value=ast.Tuple(elts=[e for e in exprs if isinstance(e, ast.expr)], ctx=ast.Load())
    )


def import_events(
    ctx: Ctx, st: ast.Import | ast.ImportFrom, module: str, is_pkg: bool
) -> list[tuple[tuple, str, Ref | None]]:
    """(event, bound name, value) for each name an import statement binds."""
    out: list[tuple[tuple, str, Ref | None]] = []
    if isinstance(st, ast.Import):
        for alias in st.names:
            if alias.asname:
                out.append((("module", alias.name), alias.asname, Mod(alias.name)))
            else:
                top = alias.name.split(".")[0]
                out.append((("module", alias.name), top, Mod(top)))
        return out
    src = absolute_module(module, is_pkg, st.level, st.module)
    if not src:
        return out
    out.append((("module", src), "", None))
    for alias in st.names:
        if alias.name == "*":
            continue
        sub = f"{src}.{alias.name}"
        ref: Ref = Mod(sub) if ctx.is_module(sub) else NameRef(src, alias.name)
        out.append((("name", src, alias.name), alias.asname or alias.name, ref))
    return out
