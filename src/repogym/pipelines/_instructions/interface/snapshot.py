"""One snapshot of the repository (:class:`Snap`): files, parsed modules, definitions followed
through re-exports, class members and constructors, and the non-test source text.
"""

from __future__ import annotations

import ast
import builtins
import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from repogym.pipelines._instructions.interface.model import (
    JS_EXTS,
    MAX_BYTES,
    MAX_CORPUS_FILES,
    MAX_DEPTH,
    SKIP_DIRS,
    SKIP_TOP_DIRS,
    SOURCE_EXTS,
)
from repogym.pipelines._instructions.interface.pyast import (
    CLASS_DECOS,
    FUNCS,
    HARMLESS_BASES,
    Scope,
    collect_scope,
    decos_ok,
    dotted_name,
    last_part,
    parse_source,
    str_const,
    unparse_node,
)
from repogym.pipelines._instructions.interface.strings import (
    JS_TEMPLATE,
    python_strings,
    template_matches,
)
from repogym.shipped.testfiles import is_test_source

_DYNAMIC_TEXT = re.compile(r"\bglobals\(\)|\bvars\(\)|sys\.modules\[__name__\]|\blazy\.attach\b")


@dataclass
class Def:
    """Where a name is defined in one snapshot."""

    kind: str  # function | class | attribute | module | external (imported from outside the repo)
    module: str  # the defining module (the module itself for kind == "module")
    name: str  # name inside the module ("" for modules)
    nodes: list[ast.AST]
    file: str | None
    source: str
    rebound: bool = False  # also bound otherwise (conditional import, reassignment)

    @property
    def node(self) -> ast.AST | None:
        return self.nodes[-1] if self.nodes else None

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.name}" if self.name else self.module


_OBJECT = "object"
FOUND, ABSENT, UNKNOWN = "found", "absent", "unknown"


class Snap:
    """Read-only view of one snapshot: files, parsed modules, definitions, source text."""

    def __init__(self, root: Path, skip: frozenset[str]) -> None:
        self.root = Path(root)
        try:
            self._real = self.root.resolve()
        except OSError:
            self._real = self.root
        self.skip = skip  # repo-relative test files (never part of the "source")
        self.roots: tuple[str, ...] = ("",)
        self._text: dict[str, str | None] = {}
        self._tree: dict[str, ast.Module | None] = {}
        self._modfile: dict[str, str | None] = {}
        self._info: dict[str, tuple[Scope, str, str] | None] = {}
        self._class_scopes: dict[int, Scope] = {}
        self._corpus: list[tuple[str, str]] | None = None
        self._blob: str | None = None
        self._tables: list[tuple[str, str, list[tuple[str, ...]]]] | None = None

    # -- files

    def _path(self, rel: str) -> Path | None:
        rel = rel.strip("/")
        norm = posixpath.normpath(rel) if rel else "."
        if norm.startswith("../") or norm == ".." or norm.startswith("/"):
            return None
        return self.root if norm == "." else self.root / norm

    def is_file(self, rel: str) -> bool:
        p = self._path(rel)
        try:
            return p is not None and p.is_file()
        except OSError:
            return False

    def is_dir(self, rel: str) -> bool:
        p = self._path(rel)
        try:
            return p is not None and p.is_dir()
        except OSError:
            return False

    def read(self, rel: str) -> str | None:
        if rel in self._text:
            return self._text[rel]
        text = None
        p = self._path(rel)
        try:
            if (
                p is not None
                and p.is_file()
                and p.stat().st_size <= MAX_BYTES
                and p.resolve().is_relative_to(self._real)
            ):
                text = p.read_bytes().decode("utf-8-sig")
        except (OSError, UnicodeDecodeError, ValueError):
            text = None
        self._text[rel] = text
        return text

    def parse(self, rel: str) -> ast.Module | None:
        if rel in self._tree:
            return self._tree[rel]
        tree = None
        text = self.read(rel)
        if text is not None:
            tree = parse_source(text, rel)
        self._tree[rel] = tree
        return tree

    def _has_py(self, rel: str, depth: int = 2) -> bool:
        p = self._path(rel)
        if p is None:
            return False
        try:
            with os.scandir(p) as it:
                entries = list(it)
        except OSError:
            return False
        for e in entries:
            if e.name.endswith(".py") and e.is_file():
                return True
        if depth > 1:
            for e in entries:
                if e.is_dir() and e.name not in SKIP_DIRS and self._has_py(f"{rel}/{e.name}", 1):
                    return True
        return False

    # -- modules

    def module_file(self, dotted: str) -> str | None:
        """``a/b.py``, ``a/b/__init__.py``, a stub/extension source, or ``a/b/`` (namespace)."""
        if dotted in self._modfile:
            return self._modfile[dotted]
        found = None
        parts = dotted.split(".") if dotted else []
        if parts and all(p.isidentifier() for p in parts):
            sub = "/".join(parts)
            for root in self.roots:
                base = f"{root}/{sub}" if root else sub
                for cand in (f"{base}.py", f"{base}/__init__.py", f"{base}.pyi", f"{base}.pyx"):
                    if self.is_file(cand):
                        found = cand
                        break
                if found is None and self.is_dir(base) and self._has_py(base):
                    found = base + "/"
                if found is not None:
                    break
        self._modfile[dotted] = found
        return found

    def module_scope(self, dotted: str) -> tuple[Scope, str, str] | None:
        """(scope, file, source) of a parsed ``.py`` module; None for anything else."""
        if dotted in self._info:
            return self._info[dotted]
        info = None
        file = self.module_file(dotted)
        if file is not None and file.endswith(".py"):
            tree = self.parse(file)
            if tree is not None:
                source = self.read(file) or ""
                scope = collect_scope(tree.body, dotted, file.endswith("__init__.py"))
                if _DYNAMIC_TEXT.search(source):
                    scope.dynamic = True
                info = (scope, file, source)
        self._info[dotted] = info
        return info

    def file_module(self, rel: str) -> tuple[str, bool, str]:
        """(dotted name, is package, import root) of a ``.py`` file, pytest-rootdir style."""
        parts = rel[:-3].split("/") if rel.endswith(".py") else rel.split("/")
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        i = len(parts) - 1
        while i > 0 and self.is_file("/".join(parts[:i]) + "/__init__.py"):
            i -= 1
        return ".".join(parts[i:]), is_pkg, "/".join(parts[:i])

    def has_name(self, module: str, name: str) -> bool | None:
        """Whether ``from module import name`` can work; None when it cannot be told."""
        file = self.module_file(module)
        if file is None:
            return None
        if self.module_file(f"{module}.{name}") is not None:
            return True
        info = self.module_scope(module)
        if info is None:
            return False if file.endswith("/") else None
        scope = info[0]
        if scope.has(name) or name in scope.all_names:
            return True
        return None if scope.dynamic else False

    def definition(self, module: str, name: str, depth: int = 0) -> Def | None:
        """Follow re-exports to the definition of ``module.name``."""
        if depth > MAX_DEPTH or self.module_file(module) is None:
            return None
        info = self.module_scope(module)
        if info is None:
            sub = self.module_file(f"{module}.{name}")
            return Def("module", f"{module}.{name}", "", [], sub, "") if sub else None
        scope, file, source = info
        if name in scope.defs:
            nodes = scope.defs[name]
            kind = "class" if isinstance(nodes[-1], ast.ClassDef) else "function"
            if any(isinstance(n, ast.ClassDef) != (kind == "class") for n in nodes):
                return Def("attribute", module, name, [], file, source, rebound=True)
            rebound = name in scope.others or name in scope.imports
            return Def(kind, module, name, list(nodes), file, source, rebound)
        if name in scope.imports:
            src, attr = scope.imports[name]
            external = Def("external", module, name, [], file, source)
            if attr is None:
                mf = self.module_file(src)
                return Def("module", src, "", [], mf, "") if mf else external
            found = self.definition(src, attr, depth + 1)
            if found is None:
                sub = self.module_file(f"{src}.{attr}")
                if sub is not None:
                    return Def("module", f"{src}.{attr}", "", [], sub, "")
                return external
            if name in scope.others:
                found.rebound = True
            return found
        if name in scope.others:
            return Def("attribute", module, name, [], file, source)
        sub = self.module_file(f"{module}.{name}")
        if sub is not None:
            return Def("module", f"{module}.{name}", "", [], sub, "")
        return None

    def resolve_dotted(self, module: str, parts: list[str], depth: int = 0) -> Def | None:
        found = self.definition(module, parts[0], depth + 1)
        for part in parts[1:]:
            if found is None or found.kind != "module":
                return None
            found = self.definition(found.module, part, depth + 1)
        return found

    # -- classes

    def class_scope(self, cls: ast.ClassDef) -> Scope:
        key = id(cls)
        if key in self._class_scopes:
            return self._class_scopes[key]
        scope = collect_scope(cls.body, "", False)
        for fns in list(scope.defs.values()):
            for fn in fns:
                if not isinstance(fn, FUNCS):
                    continue
                args = [*fn.args.posonlyargs, *fn.args.args]
                first = args[0].arg if args else None
                for sub in ast.walk(fn):
                    target = sub if isinstance(sub, ast.Attribute) else None
                    if (
                        target is not None
                        and isinstance(target.ctx, ast.Store)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == first
                    ):
                        scope.others.add(target.attr)
                    elif (isinstance(sub, ast.Call) and last_part(sub.func) == "setattr") or (
                        isinstance(sub, ast.Attribute) and sub.attr == "__dict__"
                    ):
                        scope.dynamic = True
        for st in cls.body:
            if isinstance(st, ast.Assign) and any(
                dotted_name(t) == "__slots__" for t in st.targets
            ):
                for sub in ast.walk(st.value):
                    text = str_const(sub)
                    if text:
                        scope.others.add(text)
        self._class_scopes[key] = scope
        return scope

    def base_class(self, module: str, expr: ast.expr, depth: int) -> Def | type | str | None:
        """A base class expression: a repo class, a builtin type, ``_OBJECT`` or None (unknown)."""
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        dotted = dotted_name(expr)
        if dotted is None:
            return None
        parts = dotted.split(".")
        info = self.module_scope(module)
        bound = info is not None and info[0].has(parts[0])
        if not bound:
            if len(parts) == 1:
                if parts[0] in HARMLESS_BASES:
                    return _OBJECT
                bt = getattr(builtins, parts[0], None)
                if isinstance(bt, type):
                    return bt
            return None
        found = self.resolve_dotted(module, parts, depth + 1)
        if found is not None and found.kind == "class" and not found.rebound:
            return found
        if (found is None or found.kind == "external") and parts[-1] in HARMLESS_BASES:
            return _OBJECT
        return None

    def _class_ok(self, cls: ast.ClassDef) -> bool:
        if not decos_ok(cls.decorator_list, CLASS_DECOS):
            return False
        for kw in cls.keywords:
            if kw.arg != "metaclass" or last_part(kw.value) not in ("ABCMeta", "type"):
                return False
        return True

    def member(self, d: Def, attr: str, depth: int = 0) -> tuple[str, Def | None, list[ast.AST]]:
        """(found | absent | unknown, defining class, function definitions) of ``Class.attr``."""
        cls = d.node
        if depth > MAX_DEPTH or d.kind != "class" or d.rebound or not isinstance(cls, ast.ClassDef):
            return UNKNOWN, None, []
        scope = self.class_scope(cls)
        if scope.has(attr):
            fns = [] if attr in scope.others or attr in scope.imports else scope.defs.get(attr, [])
            return FOUND, d, list(fns)
        if scope.dynamic or not self._class_ok(cls):
            return UNKNOWN, None, []
        for base in cls.bases:
            b = self.base_class(d.module, base, depth)
            if b is None:
                return UNKNOWN, None, []
            if b is _OBJECT:
                continue
            if isinstance(b, type):
                if hasattr(b, attr):
                    return FOUND, None, []
                continue
            assert isinstance(b, Def)
            result = self.member(b, attr, depth + 1)
            if result[0] != ABSENT:
                return result
        if hasattr(object, attr):
            return FOUND, None, []
        return ABSENT, None, []

    def ctor(self, d: Def, depth: int = 0) -> tuple:
        """("fns", defs, owner) | ("fields", [(name, default node | None)], owner) | ("none",)
        | ("unknown",) -- what ``Class(...)`` accepts."""
        cls = d.node
        if depth > MAX_DEPTH or d.kind != "class" or d.rebound or not isinstance(cls, ast.ClassDef):
            return ("unknown",)
        if not self._class_ok(cls):
            return ("unknown",)
        scope = self.class_scope(cls)
        for special in ("__init__", "__new__"):
            if special in scope.others or special in scope.imports:
                return ("unknown",)
        if "__init__" in scope.defs:
            return ("fns", scope.defs["__init__"], d)
        if "__new__" in scope.defs:
            return ("unknown",)
        if any(last_part(x) == "dataclass" for x in cls.decorator_list):
            fields = self.dataclass_fields(d, depth)
            return ("unknown",) if fields is None else ("fields", fields, d)
        for base in cls.bases:
            b = self.base_class(d.module, base, depth)
            if b is _OBJECT:
                continue
            if not isinstance(b, Def):
                return ("unknown",)
            found = self.ctor(b, depth + 1)
            if found[0] != "none":
                return found
        return ("none",)

    def dataclass_fields(self, d: Def, depth: int = 0) -> list[tuple[str, ast.expr | None]] | None:
        cls = d.node
        if depth > MAX_DEPTH or not isinstance(cls, ast.ClassDef):
            return None
        for deco in cls.decorator_list:
            if isinstance(deco, ast.Call) and last_part(deco) == "dataclass":
                for kw in deco.keywords:
                    if kw.arg == "init" and not (
                        isinstance(kw.value, ast.Constant) and kw.value.value is True
                    ):
                        return None
        fields: list[tuple[str, ast.expr | None]] = []
        for base in cls.bases:
            b = self.base_class(d.module, base, depth)
            if b is _OBJECT:
                continue
            if not isinstance(b, Def) or not isinstance(b.node, ast.ClassDef):
                return None
            if not any(last_part(x) == "dataclass" for x in b.node.decorator_list):
                return None
            inherited = self.dataclass_fields(b, depth + 1)
            if inherited is None:
                return None
            fields += inherited
        for st in cls.body:
            if not isinstance(st, ast.AnnAssign) or not isinstance(st.target, ast.Name):
                continue
            ann = unparse_node(st.annotation, 200)
            if "ClassVar" in ann or "KW_ONLY" in ann:
                continue
            value = st.value
            if (
                isinstance(value, ast.Call)
                and last_part(value.func) == "field"
                and any(
                    k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in value.keywords
                )
            ):
                continue
            fields = [f for f in fields if f[0] != st.target.id]
            fields.append((st.target.id, value))
        return fields

    # -- source text (non-test files)

    def corpus(self) -> list[tuple[str, str]]:
        """(path, text) of the non-test source files, sorted, capped."""
        if self._corpus is not None:
            return self._corpus
        out: list[tuple[str, str]] = []
        for rel in _walk_files(self.root, MAX_CORPUS_FILES * 4):
            if len(out) >= MAX_CORPUS_FILES:
                break
            if os.path.splitext(rel)[1] not in SOURCE_EXTS:
                continue
            if rel in self.skip or is_test_source(rel):
                continue
            text = self.read(rel)
            if text is not None:
                out.append((rel, text))
            self._text.pop(rel, None)  # keep memory flat: the corpus holds the text now
        self._corpus = out
        return out

    def blob(self) -> str:
        if self._blob is None:
            self._blob = "\n".join(text for _, text in self.corpus())
        return self._blob

    def _string_tables(self) -> list[tuple[str, str, list[tuple[str, ...]]]]:
        """Per source file: its string constants (unescaped) and message templates."""
        if self._tables is not None:
            return self._tables
        tables: list[tuple[str, str, list[tuple[str, ...]]]] = []
        for rel, text in self.corpus():
            strings: list[str] = []
            templates: list[tuple[str, ...]] = []
            if rel.endswith(".py"):
                tree = parse_source(text, rel)
                if tree is not None:
                    python_strings(tree, strings, templates)
            elif rel.endswith(JS_EXTS):
                for m in JS_TEMPLATE.finditer(text):
                    pieces = tuple(p for p in re.split(r"\$\{[^}]*\}", m.group(1)) if p)
                    if pieces and "${" in m.group(1):
                        templates.append(pieces)
            if strings or templates:
                tables.append((rel, "\n".join(strings), templates))
        self._tables = tables
        return tables

    def locate(self, fragment: str) -> str | None:
        """The first non-test source file that can produce ``fragment`` (literally, as a string
        constant, or through an f-string/format/template whose constant parts it contains)."""
        if fragment in self.blob():
            return self.find_text(fragment)
        for rel, strings, templates in self._string_tables():
            if fragment in strings or any(template_matches(fragment, t) for t in templates):
                return rel
        return None

    def has_text(self, fragment: str) -> bool:
        return self.locate(fragment) is not None

    def find_text(self, needle: str) -> str | None:
        if needle not in self.blob():
            return None
        for rel, text in self.corpus():
            if needle in text:
                return rel
        return None


def keep_dir(name: str, at_root: bool) -> bool:
    if name in SKIP_DIRS or name.startswith("."):
        return False
    return not (at_root and name in SKIP_TOP_DIRS)


def _walk_files(root: Path, limit: int) -> Iterator[str]:
    count = 0
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames if keep_dir(d, rel_dir == "."))
        for name in sorted(filenames):
            count += 1
            if count > limit:
                return
            yield name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
