#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045, UP031, UP032
"""The tamper scan's Python rules: an AST walk with names resolved through the file's
imports and constant strings (the rules are listed in ``tamper.py``).

Part of the tamper scan: standard library only, Python 3.6 to 3.13 syntax and AST, shipped into
each generated task's ``tests/`` folder with ``tamper.py``.
"""

import ast
import re
from typing import Any, Dict, List, Optional, Tuple  # noqa: F401 - Dict, Tuple: type comments

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:  # in the repogym package
    from repogym.shipped._tamper_strings import Hit, make_hit, snippet, string_findings
else:  # a task's copy: the siblings beside it (tamper.py put its folder on sys.path)
    from _tamper_strings import Hit, make_hit, snippet, string_findings


# -- Python ---------------------------------------------------------------------------------------

_RUNNER_TOPS = frozenset(["pytest", "_pytest", "pluggy", "py"])
_UNITTEST_SUBMODULES = frozenset(["case", "result", "runner", "main", "loader", "suite", "signals"])
_UNITTEST_FROM = frozenset(
    [
        "TestCase",
        "TestResult",
        "TextTestRunner",
        "TextTestResult",
        "main",
        "TestProgram",
        "TestLoader",
        "TestSuite",
        "runner",
        "result",
        "case",
        "loader",
        "suite",
        "signals",
        "defaultTestLoader",
    ]
)
_UNITTEST_ATTRS = _UNITTEST_FROM
_IMPORT_FUNCS = frozenset(
    ["__import__", "builtins.__import__", "importlib.import_module", "importlib.__import__"]
)
_EXIT_ALWAYS = frozenset(
    [
        "os._exit",
        "os.abort",
        "os.kill",
        "os.killpg",
        "posix._exit",
        "posix.abort",
        "posix.kill",
        "posix.killpg",
        "signal.signal",
        "signal.raise_signal",
        "signal.pthread_kill",
        "atexit.register",
    ]
)
_EXEC_RE = re.compile(r"^(?:os|posix)\.(?:exec[lv]p?e?|spawn[lv]p?e?|posix_spawnp?)$")
_EXIT_AT_IMPORT = frozenset(["sys.exit", "exit", "quit", "builtins.exit", "builtins.quit"])
_TRACE_CALLS = frozenset(
    [
        "sys.settrace",
        "sys.setprofile",
        "sys.addaudithook",
        "sys.monitoring.register_callback",
        "sys.monitoring.use_tool_id",
        "threading.settrace",
        "threading.setprofile",
        "threading.settrace_all_threads",
        "threading.setprofile_all_threads",
        "gc.get_objects",
        "gc.get_referrers",
    ]
)
_TRACE_STORES = frozenset(
    [
        "sys.stdout",
        "sys.stderr",
        "sys.__stdout__",
        "sys.__stderr__",
        "sys.excepthook",
        "sys.displayhook",
        "sys.unraisablehook",
        "threading.excepthook",
    ]
)
_FRAME_WALK = frozenset(
    [
        "sys._getframe",
        "sys._getframemodulename",
        "sys._current_frames",
        "inspect.stack",
        "inspect.currentframe",
        "inspect.getouterframes",
    ]
)
_BUILTIN_MODULES = frozenset(["builtins", "__builtin__", "__builtins__"])
_BUILTIN_DICTS = frozenset(["__builtins__", "builtins.__dict__", "__builtin__.__dict__"])
_DICT_WRITES = frozenset(
    ["update", "setdefault", "pop", "popitem", "__setitem__", "__delitem__", "clear"]
)
_DYNAMIC_FUNCS = frozenset(
    ["exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile"]
)
_MAX_EXEC_DEPTH = 3
_IN_FUNC, _IN_MAIN, _CONSUMED = 1, 2, 4  # walk flags: inside a def/lambda, under __main__,
_SCOPE = _IN_FUNC | _IN_MAIN  # and a string already scanned as part of a folded "a" + "b"
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_STRING_KINDS = frozenset(
    getattr(ast, name) for name in ("Constant", "Str", "Bytes") if name in ast.__dict__
)
_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_NO_CHILD_FIELDS = frozenset(["ctx", "op", "ops", "type_comment", "kind", "type_ignores"])
_CHILD_FIELDS = {}  # type: Dict[Any, Tuple[str, ...]]
# hook names pytest calls on plugin objects too (methods); any pytest_* def counts at module level
_PYTEST_HOOK_RE = re.compile(
    r"^pytest_(?:add(?:option|hooks)|(?:un)?configure|session(?:start|finish)"
    r"|collect\w*|ignore_collect|itemcollected|deselected|make_collect_report|pycollect_\w+"
    r"|generate_tests|make_parametrize_id|runtest_\w+|pyfunc_call|fixture_\w+|report_\w+"
    r"|terminal_summary|warning_recorded|exception_interact|keyboard_interrupt|internalerror"
    r"|cmdline_\w+|load_initial_conftests|plugin_registered|assert\w+|markeval_namespace"
    r"|(?:enter|leave)_pdb|xdist_\w+)$"
)


def _runner_module(name: str) -> Optional[str]:
    """``name`` when it is a test-runner module (see rule ``runner-import``), else None."""
    if not name or name.startswith("."):
        return None
    parts = name.split(".")
    if parts[0] in _RUNNER_TOPS:
        return name
    if parts[0] == "unittest" and len(parts) > 1 and parts[1] in _UNITTEST_SUBMODULES:
        return name
    return None


def _const_str(node: Any) -> Optional[str]:
    """The value of a str literal on any Python (``Constant`` on 3.8+, ``Str`` before)."""
    kind = type(node).__name__
    if kind == "Constant":
        value = getattr(node, "value", None)
        return value if isinstance(value, str) else None
    if kind == "Str":
        return getattr(node, "s", None)
    return None


def _const_bytes(node: Any) -> Optional[bytes]:
    kind = type(node).__name__
    if kind == "Constant":
        value = getattr(node, "value", None)
        return value if isinstance(value, bytes) else None
    if kind == "Bytes":
        return getattr(node, "s", None)
    return None


def _slice_value(node: Any) -> Any:
    """A subscript's index expression (unwrapping ``ast.Index`` of Python < 3.9)."""
    sl = node.slice
    if type(sl).__name__ == "Index":
        sl = sl.value
    return sl


def _is_main_guard(test: Any) -> bool:
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return False
    if not isinstance(test.ops[0], ast.Eq):
        return False
    left, right = test.left, test.comparators[0]
    for a, b in ((left, right), (right, left)):
        if isinstance(a, ast.Name) and a.id == "__name__" and _const_str(b) == "__main__":
            return True
    return False


class PyScan:
    """One pass over a parsed module; ``hits`` collects the findings."""

    def __init__(self, tree: Any, depth: int = 0, line: Optional[int] = None) -> None:
        self.tree = tree
        self.depth = depth  # > 0 when scanning the literal given to exec/eval/compile
        self.fixed_line = line
        self.hits = []  # type: List[Hit]
        self.alias = {}  # type: Dict[str, str]
        self.module_defs = set()  # ids of functions defined at module level (maybe under if/try)
        # imports are statements: walk statement blocks only (expressions are most of the tree)
        todo = [(s, True) for s in getattr(tree, "body", [])]
        while todo:
            stmt, top = todo.pop()
            if isinstance(stmt, ast.Import):
                for a in stmt.names:
                    if a.asname:
                        self.alias[a.asname] = a.name
                    else:
                        first = a.name.split(".")[0]
                        self.alias[first] = first
            elif isinstance(stmt, ast.ImportFrom):
                if not stmt.level and stmt.module:
                    for a in stmt.names:
                        if a.name != "*":
                            self.alias[a.asname or a.name] = stmt.module + "." + a.name
            elif top and isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.module_defs.add(id(stmt))
            inner = top and not isinstance(
                stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            )
            for field in _BLOCK_FIELDS:
                block = getattr(stmt, field, None)
                if isinstance(block, list):
                    todo.extend((b, inner) for b in block if isinstance(b, ast.AST))

    # helpers

    def add(self, rule: str, node: Any, sig: str, detail: str, line: Optional[int] = None) -> None:
        if self.fixed_line is not None:
            line = self.fixed_line
            detail = "in code given to exec/eval: " + detail
        elif line is None:
            line = getattr(node, "lineno", 1)
        self.hits.append(make_hit(rule, line, sig, detail))

    def dotted(self, node: Any) -> Optional[str]:
        """``a.b.c`` with the root resolved through the imports; None for other expressions."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        root = None  # type: Optional[str]
        if isinstance(node, ast.Name):
            root = self.alias.get(node.id, node.id)
        elif isinstance(node, ast.Call):
            root = self.import_call_target(node)
            if root is None:
                return None
        elif isinstance(node, ast.Subscript) and self.dotted(node.value) == "sys.modules":
            root = self.literal(_slice_value(node))  # sys.modules["os"]._exit
            if not root:
                return None
        else:
            return None
        parts.append(root)
        return ".".join(reversed(parts))

    def import_call_target(self, call: Any) -> Optional[str]:
        """The module returned by ``__import__("m")`` / ``importlib.import_module("m")``."""
        if not call.args or not isinstance(call.func, (ast.Name, ast.Attribute)):
            return None
        fname = self.dotted(call.func)
        if fname not in _IMPORT_FUNCS:
            return None
        name = self.literal(call.args[0])
        if not name:
            return None
        if fname.endswith("__import__"):
            return name.split(".")[0]
        return name

    def render(self, node: Any) -> str:
        """An f-string's text with each replacement field as ``{}``."""
        out = []
        for v in node.values:
            s = _const_str(v)
            out.append("{}" if s is None else s)
        return "".join(out)

    def literal(self, node: Any) -> Optional[str]:
        """The value of a str literal or a ``+`` chain of them (``"o" + "s"``); None otherwise."""
        return self.fold(node, False)

    def fold(self, node: Any, fields: bool = True) -> Optional[str]:
        """The value of a str literal, f-string or ``+`` chain of them; None otherwise.

        With ``fields`` false an f-string with replacement fields is not a value.
        """
        parts = []
        while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            parts.append(node.right)
            node = node.left
        parts.append(node)
        out = []
        for p in reversed(parts):
            if isinstance(p, ast.BinOp):
                if not isinstance(p.op, ast.Add):
                    return None  # "%s" % x, "a" * 3: not a literal (and no endless recursion)
                s = self.fold(p, fields)
            elif isinstance(p, ast.JoinedStr):
                if not fields and any(isinstance(v, ast.FormattedValue) for v in p.values):
                    return None
                s = self.render(p)
            else:
                s = _const_str(p)
            if s is None:
                return None
            out.append(s)
        return "".join(out)

    def string_hits(self, node: Any, value: str) -> None:
        findings = string_findings(value)
        if not findings:
            return
        start = getattr(node, "lineno", 1)
        nl = value.count("\n")
        physical = False
        if getattr(node, "col_offset", 0) == -1:  # Python < 3.8: a multi-line str's last line
            start = max(1, start - nl)
            physical = True
        elif getattr(node, "end_lineno", None) is not None and nl:
            physical = node.end_lineno - start == nl
        for rule, sig, offset, detail in findings:
            line = start + value.count("\n", 0, offset) if physical else start
            self.add(rule, node, sig, detail, line)

    # the walk

    def run(self) -> List[Hit]:
        checks = {
            ast.Import: self.check_import,
            ast.ImportFrom: self.check_import_from,
            ast.Call: self.check_call,
            ast.Attribute: self.check_attribute,
            ast.Name: self.check_name,
            ast.Subscript: self.check_subscript,
            ast.Raise: self.check_raise,
            ast.FunctionDef: self.check_def,
            ast.AsyncFunctionDef: self.check_def,
        }
        stack = [(self.tree, 0)]  # (node, _IN_FUNC | _IN_MAIN | _CONSUMED flags)
        push = stack.append
        while stack:
            node, flags = stack.pop()
            kind = type(node)
            check = checks.get(kind)
            if check is not None:
                check(node, flags)
            scope = flags & _SCOPE
            if kind in _DEFS:
                for c in node.decorator_list:
                    push((c, scope))
                push((node.args, scope))
                if node.returns is not None:
                    push((node.returns, scope))
                for c in node.body:
                    push((c, scope | _IN_FUNC))
                continue
            if kind is ast.Lambda:
                push((node.args, scope))
                push((node.body, scope | _IN_FUNC))
                continue
            if kind is ast.JoinedStr:
                if not flags & _CONSUMED:
                    self.string_hits(node, self.render(node))
                for v in node.values:
                    if isinstance(v, ast.FormattedValue):
                        push((v.value, scope))
                continue
            if kind is ast.If and not scope & _IN_FUNC and _is_main_guard(node.test):
                for c in node.body:
                    push((c, scope | _IN_MAIN))
                for c in node.orelse:
                    push((c, scope))
                continue
            child_flags = scope
            if kind is ast.BinOp and isinstance(node.op, ast.Add):
                if flags & _CONSUMED:
                    child_flags |= _CONSUMED
                else:
                    value = self.fold(node)
                    if value is not None:
                        self.string_hits(node, value)
                        child_flags |= _CONSUMED
            elif kind in _STRING_KINDS:
                if not flags & _CONSUMED:
                    s = _const_str(node)
                    if s is None:
                        b = _const_bytes(node)
                        if b is not None:
                            s = b.decode("latin-1")
                    if s is not None:
                        self.string_hits(node, s)
                continue
            fields = _CHILD_FIELDS.get(kind)
            if fields is None:
                fields = _CHILD_FIELDS[kind] = tuple(
                    f for f in kind._fields if f not in _NO_CHILD_FIELDS
                )
            for field in fields:
                value = getattr(node, field, None)
                if isinstance(value, list):
                    for c in value:
                        if isinstance(c, ast.AST):
                            push((c, child_flags))
                elif isinstance(value, ast.AST):
                    push((value, child_flags))
        return self.hits

    def check_raise(self, node: Any, flags: int) -> None:
        if flags & _SCOPE or node.exc is None:
            return
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if self.dotted(exc) in ("SystemExit", "builtins.SystemExit"):
            self.add("exit-call", node, "exit-call:SystemExit", "raises SystemExit at import time")

    def check_def(self, node: Any, flags: int) -> None:
        top = id(node) in self.module_defs
        if _PYTEST_HOOK_RE.match(node.name) or (
            top and (node.name.startswith("pytest_") or node.name == "load_tests")
        ):
            self.add(
                "runner-hook",
                node,
                "runner-hook:" + node.name,
                "defines test-runner hook %s()" % node.name,
            )

    def check_import(self, node: Any, flags: int) -> None:
        for a in node.names:
            mod = _runner_module(a.name)
            if mod is not None:
                self.add(
                    "runner-import",
                    node,
                    "runner-import:" + mod,
                    "imports test-runner module %s" % mod,
                )
            if a.name.split(".")[0] == "ctypes":
                self.add("trace-hook", node, "trace-hook:ctypes", "imports ctypes")

    def check_import_from(self, node: Any, flags: int) -> None:
        if node.level or not node.module:
            return
        mod = node.module
        runner = _runner_module(mod) is not None
        for a in node.names:
            full = mod + "." + a.name
            if runner or (mod == "unittest" and a.name in _UNITTEST_FROM):
                self.add(
                    "runner-import",
                    node,
                    "runner-import:" + full,
                    "imports test-runner internals %s" % full,
                )
            if full in _EXIT_ALWAYS or _EXEC_RE.match(full):
                self.add("exit-call", node, "exit-import:" + full, "imports %s" % full)
        if mod.split(".")[0] == "ctypes":
            self.add("trace-hook", node, "trace-hook:ctypes", "imports from ctypes")

    def check_reference(self, node: Any, name: str) -> None:
        """Rules that fire on any use of a resolved name (call, reference, decorator)."""
        if name in _EXIT_ALWAYS or _EXEC_RE.match(name):
            self.add(
                "exit-call",
                node,
                "exit-call:" + name,
                "uses %s (ends, signals or replaces the process)" % name,
            )
        elif name in _TRACE_CALLS:
            self.add("trace-hook", node, "trace-hook:" + name, "uses %s" % name)
        elif name in _FRAME_WALK:
            self.add(
                "frame-walk", node, "frame-walk:" + name, "walks interpreter frames: %s" % name
            )

    def check_store(self, node: Any, target: str, how: str) -> None:
        """Rules for writing the attribute ``target`` (``a.b``), by assignment or setattr."""
        owner, _, attr = target.rpartition(".")
        if target == "sys.modules":
            self.add("sys-modules", node, "sys-modules:assign", "%s sys.modules" % how)
        elif target in _TRACE_STORES:
            self.add("trace-hook", node, "trace-hook:%s=" % target, "%s %s" % (how, target))
        elif owner in _BUILTIN_MODULES:
            self.add(
                "builtins-patch",
                node,
                "builtins-patch:" + attr,
                "%s builtin %s" % (how, attr),
            )

    def check_attribute(self, node: Any, flags: int) -> None:
        name = self.dotted(node)
        if name is None:
            return
        self.check_reference(node, name)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            how = "deletes" if isinstance(node.ctx, ast.Del) else "replaces"
            self.check_store(node, name, how)
        if (
            isinstance(node.value, ast.Name)
            and self.alias.get(node.value.id) == "unittest"
            and node.attr in _UNITTEST_ATTRS
        ):
            self.add(
                "runner-attr",
                node,
                "runner-attr:unittest." + node.attr,
                "uses test-runner internals unittest.%s" % node.attr,
            )

    def check_name(self, node: Any, flags: int) -> None:
        if isinstance(node.ctx, ast.Load) and node.id in self.alias:
            self.check_reference(node, self.alias[node.id])
        elif isinstance(node.ctx, (ast.Store, ast.Del)) and node.id == "__builtins__":
            self.add(
                "builtins-patch",
                node,
                "builtins-patch:__builtins__",
                "rebinds __builtins__",
            )

    def check_subscript(self, node: Any, flags: int) -> None:
        owner = self.dotted(node.value)
        if owner is None:
            return
        key = self.literal(_slice_value(node))
        store = isinstance(node.ctx, (ast.Store, ast.Del))
        verb = "del" if isinstance(node.ctx, ast.Del) else "store"
        if owner == "sys.modules":
            if key is not None:
                self.check_module_key(node, key)
            if store:
                sig = "sys-modules:" + verb
                if key is not None:
                    sig += ":" + key[:60]
                self.add(
                    "sys-modules",
                    node,
                    sig,
                    "%s sys.modules[%s]" % (verb, snippet(key, 50) if key is not None else "..."),
                )
        elif owner in _BUILTIN_DICTS and store:
            name = key[:60] if key is not None else "?"
            self.add(
                "builtins-patch",
                node,
                "builtins-patch:" + name,
                "%s builtins item %s" % (verb, name),
            )

    def check_module_key(self, node: Any, key: str) -> None:
        mod = _runner_module(key)
        if mod is not None:
            self.add(
                "runner-import",
                node,
                "runner-import:" + mod,
                "reaches test-runner module %s by name" % mod,
            )
        elif key.split(".")[0] == "ctypes":
            self.add("trace-hook", node, "trace-hook:ctypes", "reaches ctypes by name")

    def check_call(self, node: Any, flags: int) -> None:
        func = node.func
        fname = self.dotted(func)
        if fname is None:
            return
        first = node.args[0] if node.args else None
        if fname in _IMPORT_FUNCS and first is not None:
            name = self.literal(first)
            if name is not None:
                self.check_module_key(node, name)
        elif fname in _EXIT_AT_IMPORT and not flags & _SCOPE:
            self.add(
                "exit-call",
                node,
                "exit-call:" + fname,
                "calls %s() at import time" % fname,
            )
        elif fname in ("getattr", "builtins.getattr") and len(node.args) >= 2:
            owner = self.dotted(node.args[0])
            attr = self.literal(node.args[1])
            if owner is not None and attr is not None:  # getattr(os, "_exit") is os._exit
                self.check_reference(node, owner + "." + attr)
        elif fname in ("setattr", "delattr", "builtins.setattr", "builtins.delattr"):
            if len(node.args) >= 2:
                owner = self.dotted(node.args[0])
                attr = self.literal(node.args[1])
                how = "%s()" % fname.split(".")[-1]
                if owner is not None and attr is not None:
                    self.check_store(node, owner + "." + attr, "%s on" % how)
                elif owner in _BUILTIN_MODULES:
                    self.add(
                        "builtins-patch",
                        node,
                        "builtins-patch:?",
                        "%s on builtins with a computed name" % how,
                    )
        elif fname in _DYNAMIC_FUNCS:
            self.check_dynamic(node, fname.split(".")[-1], first)
        if isinstance(func, ast.Attribute):
            owner = self.dotted(func.value)
            if owner == "sys.modules":
                if func.attr in _DICT_WRITES:
                    self.add(
                        "sys-modules",
                        node,
                        "sys-modules:" + func.attr,
                        "writes sys.modules via .%s()" % func.attr,
                    )
                if func.attr in ("get", "pop", "setdefault", "__getitem__") and first is not None:
                    key = self.literal(first)
                    if key is not None:
                        self.check_module_key(node, key)
            elif owner in _BUILTIN_DICTS and func.attr in _DICT_WRITES:
                self.add(
                    "builtins-patch",
                    node,
                    "builtins-patch:" + func.attr,
                    "writes builtins via .%s()" % func.attr,
                )

    def check_dynamic(self, node: Any, fname: str, first: Any) -> None:
        if first is None:
            return
        code = _const_str(first)
        if code is None:
            b = _const_bytes(first)
            if b is not None:
                code = b.decode("utf-8", "replace")
        if code is None:
            self.add(
                "dynamic-code",
                node,
                "dynamic-code:" + fname,
                "%s() of a computed (non-literal) argument" % fname,
            )
            return
        if self.depth >= _MAX_EXEC_DEPTH:
            return
        try:
            tree = ast.parse(code)
        except Exception:
            return
        line = self.fixed_line if self.fixed_line is not None else getattr(node, "lineno", 1)
        inner = PyScan(tree, self.depth + 1, line)
        # the literal itself is also scanned as a string constant; keep only code findings
        self.hits.extend(
            h for h in inner.run() if h["rule"] not in ("result-string", "verifier-path")
        )


def parse_python(text: str) -> Any:
    return ast.parse(text.lstrip("\ufeff"))
