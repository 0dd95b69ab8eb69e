"""Reading the functions one F2P test runs (:class:`Reader`): the names, members, keyword
arguments, patch targets, CLI options and asserted error messages they use, as events.
"""

from __future__ import annotations

import ast
import os
import re

from repogym.pipelines._instructions.interface.context import Attr, Ctx, Inst, Mod, NameRef, Ref
from repogym.pipelines._instructions.interface.model import MAX_FUNCS, split_words
from repogym.pipelines._instructions.interface.pyast import (
    FUNCS,
    dotted_name,
    last_part,
    str_const,
    unparse_node,
)
from repogym.pipelines._instructions.interface.testfile import TestFile, import_events

_SETUPS = split_words(
    "setUp asyncSetUp setUpClass setUpTestData setup_method setup_class setup setup_function"
)
_FULL_OPTION = re.compile(r"^(--[A-Za-z][A-Za-z0-9_-]*)(?:=.*)?$", re.DOTALL)
_RUNNER_CALLS = split_words(
    "invoke run main cli run_cli check_output check_call call Popen system "
    "getoutput getstatusoutput runpytest run_command"
)
_EXTERNAL_TOOLS = split_words(
    "git pip pip3 npm npx node docker sh bash ls cat echo make cargo go gcc cc "
    "curl wget tar uv ruff mypy black"
)


class Reader:
    """Reads the functions one F2P test runs and records what they reference."""

    def __init__(self, ctx: Ctx, tf: TestFile, ids: set[str]) -> None:
        self.ctx = ctx
        self.tf = tf
        self.ids = ids
        self.env: dict[str, Ref | None] = dict(tf.env)
        self.self_attrs: dict[str, Ref] = {}
        self.stored: set[tuple[str, str]] = set()

    # -- which functions

    def closure(
        self, targets: list[tuple[ast.AST, list[ast.ClassDef]]]
    ) -> list[tuple[ast.AST, list[ast.ClassDef]]]:
        work: list[tuple[ast.AST, list[ast.ClassDef]]] = []
        for fn, chain in targets:
            work.append((fn, chain))
            for name in sorted(_SETUPS):
                m = self.tf.method(chain, name)
                if m is not None:
                    work.append((m, chain))
            for cls in chain:
                fixtures: dict[str, ast.AST] = {}
                autouse: list[ast.AST] = []
                for st in cls.body:
                    if isinstance(st, FUNCS):
                        TestFile._fixture(st, fixtures, autouse, st.name)
                work += [(a, chain) for a in autouse]
            work += [(a, []) for a in self.tf.autouse]
        seen: set[int] = set()
        order: list[tuple[ast.AST, list[ast.ClassDef]]] = []
        while work and len(order) < MAX_FUNCS:
            fn, chain = work.pop(0)
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            order.append((fn, chain))
            args = fn.args  # type: ignore[attr-defined]
            params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            for deco in getattr(fn, "decorator_list", []):
                if last_part(deco) == "usefixtures" and isinstance(deco, ast.Call):
                    params += [v for v in map(str_const, deco.args) if v]
            for p in params:
                fx = self.fixture(p, chain)
                if fx is not None:
                    work.append(fx)
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if isinstance(func, ast.Name) and func.id in self.tf.defs:
                    work.append((self.tf.defs[func.id], []))
                elif (
                    isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Name)
                    and func.value.id in ("self", "cls")
                ):
                    m = self.tf.method(chain, func.attr)
                    if m is not None:
                        work.append((m, chain))
        return order

    def fixture(self, name: str, chain: list[ast.ClassDef]) -> tuple[ast.AST, list] | None:
        for cls in chain:
            found: dict[str, ast.AST] = {}
            for st in cls.body:
                if isinstance(st, FUNCS):
                    TestFile._fixture(st, found, [], st.name)
            if name in found:
                return found[name], chain
        if name in self.tf.fixtures:
            return self.tf.fixtures[name], []
        return None

    # -- reading

    def run(self, targets: list[tuple[ast.AST, list[ast.ClassDef]]]) -> None:
        funcs = self.closure(targets)
        for fn, _chain in funcs:  # imports inside the functions
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for key, bound, ref in import_events(
                        self.ctx, node, self.tf.module, self.tf.is_pkg
                    ):
                        self.ctx.event(key, self.ids)
                        if bound:
                            self.env[bound] = ref
        # self.x = Cls(...) in setUp and friends
        counts: dict[str, int] = {}
        values: dict[str, ast.expr] = {}
        for fn, _chain in funcs:
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Store)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in ("self", "cls")
                ):
                    counts[node.attr] = counts.get(node.attr, 0) + 1
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    t = node.targets[0]
                    if (
                        isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name)
                        and t.value.id in ("self", "cls")
                        and isinstance(node.value, ast.Call)
                    ):
                        values[t.attr] = node.value
        for attr, value in values.items():
            if counts.get(attr) == 1:
                ref = self.ev(value, self.env)
                if isinstance(ref, Inst):
                    self.self_attrs[attr] = ref
        fixture_values: dict[str, Ref] = {}
        for fn, chain in funcs:
            for p in fn.args.args:  # type: ignore[attr-defined]
                fx = self.fixture(p.arg, chain)
                if fx is not None and p.arg not in fixture_values:
                    ref = self._fixture_value(fx[0])
                    if ref is not None:
                        fixture_values[p.arg] = ref
        classes_seen: set[int] = set()
        for fn, chain in funcs:
            self.read_function(fn, fixture_values)
            for cls in chain:
                if id(cls) in classes_seen:
                    continue
                classes_seen.add(id(cls))
                for st in cls.body:
                    if not isinstance(st, (*FUNCS, ast.ClassDef)):
                        self.scan(st, self.env)

    def _fixture_value(self, fx: ast.AST) -> Ref | None:
        values = [
            n.value
            for n in ast.walk(fx)
            if isinstance(n, (ast.Return, ast.Yield)) and n.value is not None
        ]
        if len(values) == 1 and isinstance(values[0], ast.Call):
            ref = self.ev(values[0], self.env)
            return ref if isinstance(ref, Inst) else None
        return None

    def read_function(self, fn: ast.AST, fixture_values: dict[str, Ref]) -> None:
        local = dict(self.env)
        stores: dict[str, int] = {}
        self.stored = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                stores[node.id] = stores.get(node.id, 0) + 1
            elif isinstance(node, ast.arg):
                stores[node.arg] = stores.get(node.arg, 0) + 1
            elif isinstance(node, (*FUNCS, ast.ClassDef)) and node is not fn:
                stores[node.name] = stores.get(node.name, 0) + 2
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
            ):
                self.stored.add((node.value.id, node.attr))
        own_args = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}  # type: ignore[attr-defined]
        for name in stores:
            local[name] = None
        for name in own_args:
            if name in fixture_values and stores.get(name) == 1:
                local[name] = fixture_values[name]
        assigns = sorted(
            (
                n
                for n in ast.walk(fn)
                if isinstance(n, ast.Assign)
                and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name)
                and isinstance(n.value, ast.Call)
            ),
            key=lambda n: (n.lineno, n.col_offset),
        )
        for node in assigns:
            name = node.targets[0].id  # type: ignore[attr-defined]
            if stores.get(name) == 1:
                ref = self.ev(node.value, local)
                if isinstance(ref, Inst):
                    local[name] = ref
        self.scan(fn, local)
        self.cli_options(fn)
        self.messages(fn)

    def scan(self, root: ast.AST, env: dict[str, Ref | None]) -> None:
        for node in ast.walk(root):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.ctx.usage.setdefault((self.tf.rel, node.id), set()).update(self.ids)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                self.ev(node, env)
            elif isinstance(node, ast.Call):
                self.ev(node, env)
                self.patch_target(node)

    def ev(self, node: ast.AST, env: dict[str, Ref | None]) -> Ref | None:
        """The abstract value of an expression, recording every name it needs."""
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.Attribute):
            val, attr = node.value, node.attr
            if isinstance(val, ast.Name) and val.id in ("self", "cls") and attr in self.self_attrs:
                return self.self_attrs[attr]
            base = self.ev(val, env)
            if isinstance(base, Mod):
                self.ctx.event(("name", base.dotted, attr), self.ids)
                sub = f"{base.dotted}.{attr}"
                return Mod(sub) if self.ctx.is_module(sub) else NameRef(base.dotted, attr)
            if isinstance(base, NameRef):
                self.ctx.event(("member", base.module, base.name, attr), self.ids)
                return Attr(base, attr)
            if isinstance(base, Inst):
                if isinstance(val, ast.Name) and (val.id, attr) in self.stored:
                    return None
                self.ctx.event(("member", base.cls.module, base.cls.name, attr), self.ids)
                return Attr(base.cls, attr)
            return None
        if isinstance(node, ast.Call):
            func = self.ev(node.func, env)
            kws = [k.arg for k in node.keywords if k.arg]
            if isinstance(func, NameRef):
                self.ctx.called.add(("name", func.module, func.name))
                for kw in kws:
                    self.ctx.event(("kw", func.module, func.name, None, kw), self.ids)
                return Inst(func) if self.ctx.is_class(func) else None
            if isinstance(func, Attr):
                self.ctx.called.add(("member", func.cls.module, func.cls.name, func.attr))
                for kw in kws:
                    self.ctx.event(("kw", func.cls.module, func.cls.name, func.attr, kw), self.ids)
            return None
        return None

    def patch_target(self, call: ast.Call) -> None:
        """``mock.patch("pkg.mod.name")`` / ``monkeypatch.setattr("pkg.mod.name", v)``."""
        name = last_part(call.func)
        is_patch = name == "patch" and call.args
        is_setattr = name == "setattr" and "monkeypatch" in (dotted_name(call.func) or "")
        if not (is_patch or (is_setattr and len(call.args) == 2)):
            return
        for kw in call.keywords:
            if kw.arg in ("create", "raising"):
                return
        target = str_const(call.args[0])
        if not target or not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", target):
            return
        parts = target.split(".")
        for k in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:k])
            if self.ctx.is_module(module):
                self.ctx.event(("module", module), self.ids)
                self.ctx.event(("name", module, parts[k]), self.ids)
                if len(parts) == k + 2:
                    self.ctx.event(("member", module, parts[k], parts[k + 1]), self.ids)
                return

    # -- literals

    def cli_options(self, fn: ast.AST) -> None:
        excluded: set[int] = set()
        for node in ast.walk(fn):
            if isinstance(node, (ast.List, ast.Tuple)) and self._foreign_argv(node.elts):
                excluded.update(id(e) for e in node.elts)
            elif isinstance(node, ast.Call) and (
                self._foreign_argv(node.args)
                or set(last_part(node.func).lower().strip("_").split("_")) & _EXTERNAL_TOOLS
            ):  # git("diff", "--stat"), repo.run_git(...), run("npm", "--version")
                excluded.update(id(e) for e in node.args)
        roots: list[ast.AST] = [fn]
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id in self.tf.consts:
                roots.append(self.tf.consts[node.id])
        for root in roots:
            for node in ast.walk(root):
                text = str_const(node)
                if text is not None and id(node) not in excluded:
                    m = _FULL_OPTION.match(text.strip())
                    if m:
                        self.ctx.event(("cli", m.group(1)), self.ids)
                if isinstance(node, ast.Call) and last_part(node.func) in _RUNNER_CALLS:
                    for arg in node.args:
                        text = str_const(arg)
                        if text and " " in text.strip():
                            tokens = text.split()
                            if self._foreign_argv([ast.Constant(t) for t in tokens]):
                                continue
                            for tok in tokens:
                                m = _FULL_OPTION.match(tok)
                                if m:
                                    self.ctx.event(("cli", m.group(1)), self.ids)

    def _foreign_argv(self, elts: list[ast.expr]) -> bool:
        """An argv of another program: ``["git", ...]``, ``[sys.executable, "-m", "pytest"]``."""
        if not elts:
            return False
        first = str_const(elts[0])
        if first and not first.startswith("-"):
            prog = os.path.basename(first)
            if prog in _EXTERNAL_TOOLS:
                return True
            if (
                re.fullmatch(r"[A-Za-z][\w.+-]*", prog)
                and not prog.startswith("python")
                and prog not in self.ctx.base.blob()
                and prog not in self.ctx.head.blob()
            ):
                return True
        texts = [str_const(e) for e in elts]
        for i, text in enumerate(texts[:-1]):
            module = texts[i + 1]
            if text == "-m" and module and module.split(".")[0].isidentifier():
                return not self.ctx.is_module(module.split(".")[0])
        return False

    def messages(self, fn: ast.AST) -> None:
        exc: dict[str, tuple[str | None, str | None]] = {}  # var -> (exception, attribute)
        for node in ast.walk(fn):
            if isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    kind = _raises_kind(item.context_expr)
                    if kind and isinstance(item.optional_vars, ast.Name):
                        owner = _raises_owner(item.context_expr)  # type: ignore[arg-type]
                        exc[item.optional_vars.id] = (
                            owner,
                            "value" if kind == "pytest" else "exception",
                        )
            elif isinstance(node, ast.ExceptHandler) and node.name and node.type is not None:
                exc[node.name] = (unparse_node(node.type, 60), None)

        def exc_of(e: ast.AST) -> str | None | bool:
            if (
                isinstance(e, ast.Attribute)
                and isinstance(e.value, ast.Name)
                and e.value.id in exc
                and exc[e.value.id][1] == e.attr
            ):
                return exc[e.value.id][0] or True
            if isinstance(e, ast.Name) and e.id in exc and exc[e.id][1] is None:
                return exc[e.id][0] or True
            return None

        def text_of(e: ast.AST) -> str | None | bool:
            if (
                isinstance(e, ast.Call)
                and isinstance(e.func, ast.Name)
                and e.func.id == "str"
                and len(e.args) == 1
            ):
                return exc_of(e.args[0])
            if (
                isinstance(e, ast.Subscript)
                and isinstance(e.value, ast.Attribute)
                and e.value.attr == "args"
                and _is_zero(e.slice)
            ):
                return exc_of(e.value.value)
            if isinstance(e, ast.Attribute) and e.attr == "message":
                return exc_of(e.value)
            return None

        def record(owner: str | None | bool, lit: tuple[str, bool] | None) -> None:
            if lit is None or owner is None:
                return
            text, regex = lit
            name = owner if isinstance(owner, str) else None
            self.ctx.event(("msg", name, text, regex), self.ids)

        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                fname = last_part(node.func)
                if _raises_kind(node) == "pytest":
                    for kw in node.keywords:
                        if kw.arg == "match":
                            record(_raises_owner(node) or True, _literal(kw.value, True))
                elif fname in ("assertRaisesRegex", "assertRaisesRegexp"):
                    regex = node.args[1] if len(node.args) > 1 else None
                    for kw in node.keywords:
                        if kw.arg == "expected_regex":
                            regex = kw.value
                    if regex is not None:
                        record(_raises_owner(node) or True, _literal(regex, True))
                elif fname == "match" and isinstance(node.func, ast.Attribute) and node.args:
                    v = node.func.value
                    if isinstance(v, ast.Name) and v.id in exc and exc[v.id][1] == "value":
                        record(exc[v.id][0] or True, _literal(node.args[0], True))
                elif fname in ("assertEqual", "assertIn", "assertRegex") and len(node.args) >= 2:
                    a, b = node.args[0], node.args[1]
                    is_regex = fname == "assertRegex"
                    if not is_regex:
                        record(text_of(b), _literal(a, False))
                    record(text_of(a), _literal(b, is_regex))
                elif fname == "startswith" and isinstance(node.func, ast.Attribute) and node.args:
                    record(text_of(node.func.value), _literal(node.args[0], False))
            elif isinstance(node, ast.Compare) and len(node.ops) == 1:
                left, right, op = node.left, node.comparators[0], node.ops[0]
                if isinstance(op, ast.Eq):
                    record(text_of(left), _literal(right, False))
                    record(text_of(right), _literal(left, False))
                elif isinstance(op, ast.In):
                    record(text_of(right), _literal(left, False))


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0


def _raises_kind(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    dotted = dotted_name(node.func) or ""
    if dotted in ("pytest.raises", "raises"):
        return "pytest"
    if last_part(node.func) in ("assertRaises", "assertRaisesRegex", "assertRaisesRegexp"):
        return "unittest"
    return None


def _raises_owner(node: ast.Call) -> str | None:
    if node.args:
        return unparse_node(node.args[0], 60)
    for kw in node.keywords:
        if kw.arg in ("expected_exception", "exception"):
            return unparse_node(kw.value, 60)
    return None


def _literal(node: ast.AST, regex: bool) -> tuple[str, bool] | None:
    text = str_const(node)
    if text is not None:
        return (text, regex) if text.strip() else None
    if (
        isinstance(node, ast.Call)
        and dotted_name(node.func) in ("re.escape", "escape")
        and len(node.args) == 1
    ):
        inner = str_const(node.args[0])
        if inner:
            return inner, False
    return None
