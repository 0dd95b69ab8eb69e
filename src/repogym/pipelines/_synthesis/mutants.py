"""Procedural mutants behind ``bug_synth``: :func:`python_mutants` makes mutants (one of
:data:`OPERATORS` each) inside the function bodies of one Python source file.

Every edit is a minimal text edit on the exact source span of ``ast`` nodes (formatting,
comments and every other line stay byte-identical); each mutant compiles and differs from the
original. Mutants are ordered round-robin across functions (and, within a function, across
operators), so a caller that takes the first N gets diverse functions. The source positions and
function listing they build on are :mod:`.ops`.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import math
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from repogym.pipelines._synthesis.ops import (
    Edit,
    FunctionInfo,
    _apply,
    _compiles,
    _docstring_stmt,
    _Func,
    _own_nodes,
    _parsed_functions,
    _Source,
)
from repogym.spec import BUG_OPERATORS as OPERATORS

#: Calls whose string arguments are messages (mutating them is rarely observable).
_MESSAGE_CALLS = frozenset(
    {"print", "debug", "info", "warning", "warn", "error", "exception", "critical", "log"}
)
#: Calls whose arguments are not worth swapping (a swap only raises TypeError).
_NO_SWAP_CALLS = _MESSAGE_CALLS | {
    "isinstance",
    "issubclass",
    "getattr",
    "setattr",
    "hasattr",
    "super",
}
_COMPARE_SWAP: dict[type[ast.cmpop], tuple[re.Pattern[str], str]] = {
    ast.Lt: (re.compile(r"<"), "<="),
    ast.LtE: (re.compile(r"<="), "<"),
    ast.Gt: (re.compile(r">"), ">="),
    ast.GtE: (re.compile(r">="), ">"),
    ast.Eq: (re.compile(r"=="), "!="),
    ast.NotEq: (re.compile(r"!="), "=="),
    ast.Is: (re.compile(r"\bis\b"), "is not"),
    ast.IsNot: (re.compile(r"\bis\s+not\b"), "is"),
    ast.In: (re.compile(r"\bin\b"), "not in"),
    ast.NotIn: (re.compile(r"\bnot\s+in\b"), "in"),
}
#: Expressions that need parentheses before ``not`` or an appended ``- 1`` goes around them.
_LOOSE = (ast.BoolOp, ast.IfExp, ast.NamedExpr, ast.Lambda, ast.Compare, ast.Yield, ast.YieldFrom)
_ADD_SUB = (ast.Add, ast.Sub)
_TIGHT_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult)


@dataclass(frozen=True)
class Mutation:
    """One mutant of a file: its whole new text plus what changed (the description is for logs,
    never shown to agents)."""

    path: str
    function: str  # qualname of the mutated function
    function_line: int  # that function's :attr:`FunctionInfo.line` (the tracer's key)
    line: int  # line of the (first) edit
    operator: str  # one of OPERATORS
    description: str
    text: str  # the whole mutated file
    mutation_id: str  # stable: hash of path, line, operator and the edited spans


# --------------------------------------------------------------------------- mutants


@dataclass(frozen=True)
class _Candidate:
    operator: str
    edits: tuple[Edit, ...]
    what: str


def _module_names(tree: ast.Module) -> set[str]:
    """Names the file binds anywhere (a raise of such a name is not the builtin)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _short(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class _Mutator:
    """The candidate edits of one function's own body."""

    def __init__(self, src: _Source, func: _Func, module_names: set[str]) -> None:
        self.src = src
        self.text = src.text
        self.func = func
        self.module_names = module_names
        self.out: list[_Candidate] = []
        node = func.node
        doc = _docstring_stmt(node)
        self.body = node.body[1:] if doc is not None else node.body
        self.first_bound: dict[str, int] = {}
        args = node.args
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if a is not None:
                self.first_bound[a.arg] = 0
        for n in _own_nodes(self.body):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                self._bind(n.id, n.lineno)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self._bind(n.name, n.lineno)
            elif isinstance(n, ast.alias):
                self._bind((n.asname or n.name).split(".")[0], getattr(n, "lineno", 0))
            elif isinstance(n, ast.ExceptHandler) and n.name:
                self._bind(n.name, n.lineno)

    def _bind(self, name: str, line: int) -> None:
        self.first_bound[name] = min(line, self.first_bound.get(name, line))

    def run(self) -> list[_Candidate]:
        self._block(self.body)
        for stmt in self.body:
            self._visit(stmt, quiet=False)
        return self.out

    def _add(self, operator: str, edits: Sequence[Edit], what: str) -> None:
        self.out.append(_Candidate(operator, tuple(edits), what))

    # -- traversal

    def _visit(self, node: ast.AST, quiet: bool, parent: ast.AST | None = None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.JoinedStr)):
            return  # nested definitions are functions of their own; f-strings are left alone
        if isinstance(node, ast.Compare):
            self._compare(node)
        elif isinstance(node, ast.BoolOp):
            self._boolop(node)
        elif isinstance(node, (ast.If, ast.While)):
            self._negate(node)
        elif isinstance(node, ast.Subscript):
            self._subscript(node)
        elif isinstance(node, ast.Call):
            self._call(node)
        elif isinstance(node, ast.Return):
            self._return(node)
        elif isinstance(node, ast.Raise):
            self._raise(node)
        elif isinstance(node, ast.Constant):
            self._constant(node, parent, quiet)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # a bare string (a comment in code's clothing) or ``...``
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                self._block(block)
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns", "type_comment"):
                continue
            child_quiet = (
                quiet
                or isinstance(node, ast.Raise)
                or (isinstance(node, ast.Assert) and name == "msg")
                or (isinstance(node, ast.Call) and _call_name(node) in _MESSAGE_CALLS)
            )
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    self._visit(child, child_quiet, node)

    # -- operators

    def _compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            start = self.src.span(operands[i])[1]
            gap = self.text[start : self.src.span(operands[i + 1])[0]]
            pattern, new = _COMPARE_SWAP[type(op)]
            m = pattern.search(gap)
            if m is None or "#" in gap or "\\" in gap:
                continue
            self._add(
                "compare", [(start + m.start(), start + m.end(), new)], f"`{m.group()}` -> `{new}`"
            )

    def _boolop(self, node: ast.BoolOp) -> None:
        word, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        edits: list[Edit] = []
        for left, right in zip(node.values, node.values[1:], strict=False):
            start = self.src.span(left)[1]
            gap = self.text[start : self.src.span(right)[0]]
            matches = list(re.finditer(rf"\b{word}\b", gap))
            if len(matches) != 1 or "#" in gap:
                return
            edits.append((start + matches[0].start(), start + matches[0].end(), new))
        self._add("boolean", edits, f"`{word}` -> `{new}`")

    def _negate(self, node: ast.If | ast.While) -> None:
        test = node.test
        start, end = self.src.span(test)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            m = re.match(r"not\b[ \t]*", self.text[start:end])
            if m is not None:
                self._add("negate_condition", [(start, start + m.end(), "")], "removed `not`")
            return
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and not _is_ordering(test.ops[0]):
            return  # not (a == b) is the `compare` mutant a != b
        if isinstance(test, _LOOSE):
            edits: list[Edit] = [(start, start, "not ("), (end, end, ")")]
        else:
            edits = [(start, start, "not ")]
        self._add("negate_condition", edits, f"negated `{_short(self.text[start:end])}`")

    def _subscript(self, node: ast.Subscript) -> None:
        index = node.slice
        for item in index.elts if isinstance(index, ast.Tuple) else [index]:
            if isinstance(item, ast.Slice):
                for bound in (item.lower, item.upper):
                    if bound is not None:
                        self._bound(bound, shift=True)
            elif not isinstance(item, ast.Starred):
                self._bound(item, shift=False)

    def _call(self, node: ast.Call) -> None:
        name = _call_name(node)
        if name in ("range", "xrange") and isinstance(node.func, ast.Name) and not node.keywords:
            args = node.args
            if any(isinstance(a, ast.Starred) for a in args):
                return
            for arg in args[:1] if len(args) == 1 else args[:2]:
                self._bound(arg, shift=True)
        if name in _NO_SWAP_CALLS:
            return
        for left, right in zip(node.args, node.args[1:], strict=False):
            if isinstance(left, ast.Starred) or isinstance(right, ast.Starred):
                continue
            (ls, le), (rs, re_) = self.src.span(left), self.src.span(right)
            ltext, rtext = self.text[ls:le], self.text[rs:re_]
            if ltext != rtext:
                self._add(
                    "swap_args",
                    [(ls, le, rtext), (rs, re_, ltext)],
                    f"swapped `{_short(ltext, 30)}` and `{_short(rtext, 30)}`",
                )

    def _bound(self, expr: ast.expr, shift: bool) -> None:
        """Off-by-one edits of an index, slice bound or ``range`` argument."""
        found = list(_bound_ints(expr))
        for const, kind, parent in found:
            value = int(const.value)  # type: ignore[arg-type]  # _bound_ints yields ints only
            for new in (value - 1, value + 1):
                if new < 0:
                    continue
                if new == 0 and kind == "neg" and parent is not None:
                    ps, pe = self.src.span(parent)
                    edit = (ps, pe, "0")
                elif new == 0 and kind in ("right", "left") and isinstance(parent, ast.BinOp):
                    dropped = self._drop_operand(parent, const)
                    if dropped is None:
                        continue
                    edit = dropped
                else:
                    cs, ce = self.src.span(const)
                    edit = (cs, ce, str(new))
                old = self.text[edit[0] : edit[1]]
                self._add("off_by_one", [edit], f"`{_short(old) or value}` -> `{edit[2]}`")
        if found or not shift:
            return
        start, end = self.src.span(expr)
        loose = isinstance(expr, _LOOSE) or (
            isinstance(expr, ast.BinOp) and not isinstance(expr.op, _TIGHT_BINOPS)
        )
        for delta in (" - 1", " + 1"):
            if loose:
                edits: list[Edit] = [(start, start, "("), (end, end, ")" + delta)]
            else:
                edits = [(end, end, delta)]
            self._add("off_by_one", edits, f"`{_short(self.text[start:end])}`{delta}")

    def _constant(self, node: ast.Constant, parent: ast.AST | None, quiet: bool) -> None:
        value = node.value
        start, end = self.src.span(node)
        new: str | None = None
        if isinstance(value, bool):
            new = str(not value)
        elif isinstance(value, int):
            num = 1 if value == 0 else 0 if value == 1 else value + 1
            new = str(num)
            if num == 0 and isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub):
                start, end = self.src.span(parent)  # -1 -> 0, not -0
            elif num == 0 and isinstance(parent, ast.BinOp) and isinstance(parent.op, _ADD_SUB):
                dropped = self._drop_operand(parent, node)  # i + 1 -> i, not i + 0
                if dropped is not None:
                    start, end, new = dropped
                elif parent.right is node or isinstance(parent.op, ast.Add):
                    return  # (i) + 1: no `+ 0` mutant (1 - i -> 0 - i is kept)
        elif isinstance(value, float):
            if math.isfinite(value) and math.isfinite(value + 1):
                new = repr(value + 1)
        elif isinstance(value, (str, bytes)) and value and not quiet:
            m = re.match(r"([A-Za-z]*)(['\"])", self.text[start:end])
            if m is not None:
                new = ("b" if isinstance(value, bytes) else "") + m.group(2) * 2
        if new is not None:
            old = self.text[start:end]
            self._add("constant", [(start, end, new)], f"`{_short(old)}` -> `{new}`")

    def _drop_operand(self, binop: ast.BinOp, const: ast.Constant) -> Edit | None:
        """The edit that removes ``const`` and its operator from ``i + k``, ``i - k`` or
        ``k + i``; None when parentheses or comments sit between the operands."""
        (ls, le), (rs, re_) = self.src.span(binop.left), self.src.span(binop.right)
        if not re.fullmatch(r"[ \t]*[+-][ \t]*", self.text[le:rs]):
            return None
        if binop.right is const:
            return (le, re_, "")
        if binop.left is const and isinstance(binop.op, ast.Add):
            return (ls, rs, "")
        return None

    def _return(self, node: ast.Return) -> None:
        value = node.value
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            return
        start, end = self.src.span(value)
        self._add("return_none", [(start, end, "None")], f"`return {_short(self.text[start:end])}`")

    def _raise(self, node: ast.Raise) -> None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if not isinstance(exc, ast.Name) or exc.id in self.module_names:
            return
        cls = getattr(builtins, exc.id, None)
        if not isinstance(cls, type) or not issubclass(cls, Exception):
            return
        new = "ValueError" if issubclass(cls, RuntimeError) else "RuntimeError"
        start, end = self.src.span(exc)
        self._add("exception_type", [(start, end, new)], f"`{exc.id}` -> `{new}`")

    # -- statements

    def _block(self, stmts: Sequence[ast.stmt]) -> None:
        if len(stmts) < 2:
            return
        for stmt in stmts:
            if (
                isinstance(stmt, ast.If)
                and not stmt.orelse
                and len(stmt.body) == 1
                and isinstance(stmt.body[0], (ast.Return, ast.Raise, ast.Continue, ast.Break))
            ):
                operator = "remove_guard"
            elif self._removable(stmt):
                operator = "remove_statement"
            else:
                continue
            span = self._line_span(stmt)
            if span is not None:
                first = self.text[span[0] : span[1]].strip().splitlines()[0]
                self._add(operator, [(span[0], span[1], "")], f"removed `{_short(first)}`")

    def _removable(self, stmt: ast.stmt) -> bool:
        if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _own_nodes([stmt])):
            return False  # dropping the only yield would change the function's kind
        if isinstance(stmt, ast.Expr):
            value = stmt.value.value if isinstance(stmt.value, ast.Await) else stmt.value
            return isinstance(value, ast.Call)
        if isinstance(stmt, ast.AugAssign):
            return True
        if isinstance(stmt, ast.Assign):
            return all(self._rebinds(t, stmt.lineno) for t in stmt.targets)
        if isinstance(stmt, ast.AnnAssign):
            return stmt.value is not None and self._rebinds(stmt.target, stmt.lineno)
        return False

    def _rebinds(self, target: ast.expr, line: int) -> bool:
        """Whether assigning ``target`` only updates something that exists (removing it leaves
        a stale value, not a NameError)."""
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            return True
        if isinstance(target, ast.Name):
            return self.first_bound.get(target.id, line) < line
        if isinstance(target, (ast.Tuple, ast.List)):
            return all(self._rebinds(t, line) for t in target.elts)
        if isinstance(target, ast.Starred):
            return self._rebinds(target.value, line)
        return False

    def _line_span(self, stmt: ast.stmt) -> tuple[int, int] | None:
        """The whole lines of ``stmt`` (line break included) when nothing else shares them."""
        start, end = self.src.span(stmt)
        if self.src.indent_before(start) is None or not self.src.rest_is_comment(end):
            return None
        return self.src.line_start(stmt.lineno), self.src.next_line(self.src.lineno(end))


def _is_ordering(op: ast.cmpop) -> bool:
    return isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE))


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _is_int(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    )


def _bound_ints(expr: ast.expr) -> Iterator[tuple[ast.Constant, str, ast.expr | None]]:
    """Integer literals that set an index/bound: ``k``, ``-k``, ``i + k``, ``k + i``, ``i - k``
    (through chains of ``+``/``-``), with how they sit (plain, neg, right, left)."""
    if isinstance(expr, ast.Constant) and _is_int(expr):
        yield expr, "plain", None
    elif isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        if isinstance(expr.operand, ast.Constant) and _is_int(expr.operand):
            yield expr.operand, "neg", expr
    elif isinstance(expr, ast.BinOp) and isinstance(expr.op, _ADD_SUB):
        if isinstance(expr.left, ast.Constant) and _is_int(expr.left):
            if isinstance(expr.op, ast.Add):
                yield expr.left, "left", expr
        elif isinstance(expr.left, ast.BinOp):
            yield from _bound_ints(expr.left)
        if isinstance(expr.right, ast.Constant) and _is_int(expr.right):
            yield expr.right, "right", expr


def _interleave(groups: Sequence[Sequence[_Candidate]]) -> list[_Candidate]:
    out: list[_Candidate] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out.extend(g[i] for g in groups if i < len(g))
    return out


def _mutation_id(path: str, line: int, operator: str, edits: Sequence[Edit]) -> str:
    h = hashlib.sha256(f"{path}\0{line}\0{operator}".encode())
    for start, end, new in sorted(edits):
        h.update(f"\0{start}:{end}:{new}".encode())
    return h.hexdigest()[:16]


def python_mutants(
    text: str,
    path: str,
    functions: Collection[str] | None = None,
    *,
    limit: int | None = None,
    per_function: int | None = None,
    operators: Collection[str] | None = None,
) -> list[Mutation]:
    """Procedural mutants of the functions of a Python file.

    Only functions whose qualname is in ``functions`` when given; never trivial, property,
    abstract or overload functions, docstrings, f-strings, annotations or nested definitions
    (a nested function is a function of its own). ``operators`` restricts to some of
    :data:`OPERATORS`. Order: round-robin over the functions (source order), and within a
    function round-robin over the operators (each in source order), so the first ``limit``
    mutants spread over functions; ``per_function`` caps each function. Every mutant compiles
    (``compile()``), differs from the original and from every earlier mutant.
    """
    found = _parsed_functions(text, path)
    if found is None:
        return []
    src, tree, funcs = found
    module_names = _module_names(tree)
    wanted = set(OPERATORS if operators is None else operators)
    queues: list[tuple[FunctionInfo, Iterator[_Candidate]]] = []
    for func in funcs:
        info = func.info
        if not info.mutable or (functions is not None and info.qualname not in functions):
            continue
        candidates = _Mutator(src, func, module_names).run()
        groups = [
            sorted(
                (c for c in candidates if c.operator == op),
                key=lambda c: min((e[0], e[1]) for e in c.edits),
            )
            for op in OPERATORS
            if op in wanted
        ]
        queues.append((info, iter(_interleave(groups))))

    def realize(info: FunctionInfo, cand: _Candidate, new_text: str) -> Mutation | None:
        if not _compiles(new_text, path):
            return None
        line = src.lineno(min(e[0] for e in cand.edits))
        return _mutation(path, info.qualname, info.line, line, cand, new_text)

    return _round_robin(text, queues, realize, limit=limit, per_function=per_function)


Realize = Callable[[Any, _Candidate, str], "Mutation | None"]
"""How a caller turns a candidate (of the function it keys its queue by) and the text it
makes into a mutant, or None to skip it."""


def _round_robin(
    text: str,
    queues: Sequence[tuple[Any, Iterator[_Candidate]]],
    realize: Realize,
    *,
    limit: int | None = None,
    per_function: int | None = None,
) -> list[Mutation]:
    """One mutant of each function's queue in turn (``per_function`` at most), skipping
    candidates whose text equals the original or an earlier mutant's."""
    results: list[Mutation] = []
    seen = {hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()}
    counts = [0] * len(queues)
    active = list(range(len(queues)))
    while active:
        still: list[int] = []
        for i in active:
            if limit is not None and len(results) >= limit:
                return results
            key, pending = queues[i]
            for cand in pending:
                new_text = _apply(text, cand.edits)
                digest = hashlib.sha256(new_text.encode("utf-8", "surrogatepass")).digest()
                if digest in seen:
                    continue
                mutation = realize(key, cand, new_text)
                if mutation is None:
                    continue
                seen.add(digest)
                results.append(mutation)
                counts[i] += 1
                if per_function is None or counts[i] < per_function:
                    still.append(i)
                break
        active = still
    return results


def _mutation(
    path: str, function: str, function_line: int, line: int, cand: _Candidate, new_text: str
) -> Mutation:
    return Mutation(
        path=path,
        function=function,
        function_line=function_line,
        line=line,
        operator=cand.operator,
        description=f"{cand.operator}: {cand.what} at {path}:{line} in {function}",
        text=new_text,
        mutation_id=_mutation_id(path, line, cand.operator, cand.edits),
    )
