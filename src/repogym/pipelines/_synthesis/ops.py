"""Procedural code edits behind ``bug_synth``, ``code_instruct`` and ``equivalence_tests``.

Pure functions over one Python source file (no sandbox, no I/O):

* :func:`python_functions` lists every function and method (``ast``), keyed like the
  tracer ``shipped/scripts/trace_calls.py`` reports calls: ``(path, line)`` where ``line`` is what
  ``code.co_firstlineno`` says, i.e. the first decorator's line, else the ``def`` line.
* the source positions and function listing :mod:`.mutants` builds its procedural
  mutants on (``bug_synth``);
* :func:`stub_function` replaces one function's body by its docstring plus
  ``raise NotImplementedError`` (code_instruct).

``ast`` columns are UTF-8 byte offsets of a line; :class:`_Source` turns them into ``str``
offsets, splitting lines the way the tokenizer does (``\\r\\n``, ``\\r``, ``\\n``).
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from repogym import shipped

#: The tracer shipped into sandboxes (``shipped/scripts``): records the functions a command calls.
TRACE_SCRIPT = "trace_calls.py"

_NEWLINE = re.compile(r"\r\n|\r|\n")
_FuncNode = ast.FunctionDef | ast.AsyncFunctionDef
_PROPERTY_DECORATORS = frozenset(
    {"property", "cached_property", "setter", "getter", "deleter", "abstractproperty"}
)
_ABSTRACT_DECORATORS = frozenset(
    {"abstractmethod", "abstractproperty", "abstractclassmethod", "abstractstaticmethod"}
)
Edit = tuple[int, int, str]  # (start offset, end offset, replacement) in the original text


@dataclass(frozen=True)
class FunctionInfo:
    """One function or method of a Python file."""

    path: str
    qualname: str  # as ``__qualname__``: ``Cache.get``, ``outer.<locals>.inner``
    name: str
    line: int  # ``co_firstlineno``: the first decorator's line, else the ``def`` line
    def_line: int  # the line of ``def`` / ``async def`` itself
    end_line: int
    docstring: str | None  # cleaned (``inspect.cleandoc``), None without one
    trivial: bool  # body is only pass / ... / docstring / raise NotImplementedError
    is_async: bool
    is_generator: bool  # its own body yields
    is_property: bool  # property, cached_property, x.setter/getter/deleter
    is_abstract: bool
    is_overload: bool
    statements: int  # statements of the body (nested bodies counted, docstring not)
    params: str  # source text between the parentheses of the signature
    returns: str | None  # source text of the return annotation
    signature: str  # source text from ``def``/``async def`` to the colon
    decorators: tuple[str, ...]  # source text of each decorator (without ``@``)

    @property
    def key(self) -> tuple[str, int]:
        """``(path, line)``: what the tracer reports for a call of this function."""
        return (self.path, self.line)

    @property
    def has_docstring(self) -> bool:
        return self.docstring is not None

    @property
    def mutable(self) -> bool:
        """Whether :func:`.mutants.python_mutants` mutates it (not trivial, property,
        abstract, overload)."""
        return not (self.trivial or self.is_property or self.is_abstract or self.is_overload)


# --------------------------------------------------------------------------- source positions


class _Source:
    """Line table of a text: ``ast`` (line, UTF-8 column) positions to ``str`` offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def line_start(self, lineno: int) -> int:
        return self.starts[lineno - 1]

    def next_line(self, lineno: int) -> int:
        """Offset of the line after ``lineno`` (the end of the text after the last line)."""
        return self.starts[lineno] if lineno < len(self.starts) else len(self.text)

    def line_end(self, lineno: int) -> int:
        """Offset of ``lineno``'s line break (or the end of the text)."""
        end = self.next_line(lineno)
        while end > self.starts[lineno - 1] and self.text[end - 1] in "\r\n":
            end -= 1
        return end

    def lineno(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def offset(self, lineno: int, col: int) -> int:
        start = self.starts[lineno - 1]
        if self.text[start : start + col].isascii():
            return start + col
        raw = self.text[start : self.line_end(lineno)].encode("utf-8")[:col]
        return start + len(raw.decode("utf-8", errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        end_lineno = getattr(node, "end_lineno", None)
        end_col = getattr(node, "end_col_offset", None)
        if end_lineno is None or end_col is None:  # pragma: no cover - every expr/stmt has them
            raise ValueError("node without an end position")
        return (
            self.offset(getattr(node, "lineno", 1), getattr(node, "col_offset", 0)),
            self.offset(end_lineno, end_col),
        )

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def indent_before(self, offset: int) -> str | None:
        """The text between the start of ``offset``'s line and ``offset`` when it is only
        whitespace (the indentation of a statement that starts its line), else None."""
        prefix = self.text[self.starts[self.lineno(offset) - 1] : offset]
        return prefix if not prefix.strip() else None

    def rest_is_comment(self, offset: int) -> bool:
        """Whether only whitespace or a comment follows ``offset`` on its line."""
        rest = self.text[offset : self.line_end(self.lineno(offset))].strip()
        return not rest or rest.startswith("#")


def _parse(text: str, path: str) -> tuple[ast.Module, _Source] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree, _Source(text)


def _compiles(text: str, path: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    return True


def _apply(text: str, edits: Iterable[Edit]) -> str:
    out = text
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + new + out[end:]
    return out


# --------------------------------------------------------------------------- functions


@dataclass(frozen=True)
class _Func:
    info: FunctionInfo
    node: _FuncNode
    colon: int  # offset just after the signature's colon


def _docstring_stmt(node: _FuncNode) -> ast.Expr | None:
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first
    return None


def _is_trivial_stmt(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return stmt.value.value is Ellipsis or isinstance(stmt.value.value, str)
    if isinstance(stmt, ast.Raise) and stmt.cause is None and stmt.exc is not None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def _own_nodes(stmts: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Every node under ``stmts``, not entering nested functions, classes or lambdas (whose
    own nodes are theirs); the nested definitions themselves are yielded."""
    stack = list(stmts)[::-1]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(list(ast.iter_child_nodes(node))[::-1])


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _header(src: _Source, node: _FuncNode) -> tuple[str, str, str | None, int]:
    """(signature, params, returns, offset after the colon) from the source of the header."""
    start = src.offset(node.lineno, node.col_offset)
    first = node.body[0]
    seg = src.text[start : src.offset(first.lineno, first.col_offset)]
    starts = [0] + [m.end() for m in _NEWLINE.finditer(seg)]

    def at(pos: tuple[int, int]) -> int:
        return starts[pos[0] - 1] + pos[1]

    depth = 0
    opened = closed = arrow = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(seg).readline):
            if tok.type != tokenize.OP:
                continue
            if tok.string in "([{":
                if tok.string == "(" and depth == 0 and opened is None:
                    opened = at(tok.end)
                depth += 1
            elif tok.string in ")]}":
                depth -= 1
                if tok.string == ")" and depth == 0 and closed is None:
                    closed = at(tok.start)
            elif tok.string == "->" and depth == 0:
                arrow = at(tok.end)
            elif tok.string == ":" and depth == 0 and closed is not None:
                colon = at(tok.start)
                returns = seg[arrow:colon].strip() if arrow is not None else None
                return seg[: colon + 1], seg[opened:closed], returns, start + colon + 1
    except (tokenize.TokenError, SyntaxError):
        pass
    # Unusual header: rebuild the text (``ast.unparse``), place the colon before the body.
    params = ast.unparse(node.args)
    returns = ast.unparse(node.returns) if node.returns is not None else None
    head = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    tail = f" -> {returns}" if returns else ""
    colon = seg.rstrip().rfind(":")
    return f"{head} {node.name}({params}){tail}:", params, returns, start + max(colon, 0) + 1


def _describe(src: _Source, node: _FuncNode, qualname: str, path: str) -> _Func:
    doc = _docstring_stmt(node)
    rest = node.body[1:] if doc is not None else node.body
    names = [_decorator_name(d) for d in node.decorator_list]
    own = list(_own_nodes(rest))
    signature, params, returns, colon = _header(src, node)
    info = FunctionInfo(
        path=path,
        qualname=qualname,
        name=node.name,
        line=node.decorator_list[0].lineno if node.decorator_list else node.lineno,
        def_line=node.lineno,
        end_line=node.end_lineno or node.lineno,
        docstring=ast.get_docstring(node) if doc is not None else None,
        trivial=all(_is_trivial_stmt(s) for s in rest),
        is_async=isinstance(node, ast.AsyncFunctionDef),
        is_generator=any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own),
        is_property=any(n in _PROPERTY_DECORATORS for n in names),
        is_abstract=any(n in _ABSTRACT_DECORATORS for n in names),
        is_overload="overload" in names,
        statements=sum(isinstance(n, ast.stmt) for n in own),
        params=params,
        returns=returns,
        signature=signature,
        decorators=tuple(src.segment(d) for d in node.decorator_list),
    )
    return _Func(info, node, colon)


def _functions(tree: ast.Module, src: _Source, path: str) -> list[_Func]:
    out: list[_Func] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualname = prefix + child.name
                out.append(_describe(src, child, qualname, path))
                visit(child, qualname + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _parsed_functions(text: str, path: str) -> tuple[_Source, ast.Module, list[_Func]] | None:
    parsed = _parse(text, path)
    if parsed is None:
        return None
    tree, src = parsed
    try:
        return src, tree, _functions(tree, src, path)
    except RecursionError:
        return None


def python_functions(text: str, path: str) -> list[FunctionInfo]:
    """Every function and method of a Python file (nested ones and those of nested classes
    too; lambdas not), in source order; ``[]`` when the file does not parse (Python 3.11
    grammar)."""
    found = _parsed_functions(text, path)
    return [f.info for f in found[2]] if found else []


# --------------------------------------------------------------------------- tracer results


def trace_script() -> bytes:
    """The tracer's source (:data:`TRACE_SCRIPT`), standard library only, Python 3.6+."""
    return shipped.read(TRACE_SCRIPT)


def called_keys(report: Mapping[str, Any]) -> set[tuple[str, int]]:
    """The ``(path, line)`` keys of a tracer report ``{"called": [[path, line, name], ...]}``
    (compare with :attr:`FunctionInfo.key`); malformed entries are ignored."""
    out: set[tuple[str, int]] = set()
    entries = report.get("called")
    if not isinstance(entries, list):
        return out
    for entry in entries:
        if (
            isinstance(entry, list)
            and len(entry) >= 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], int)
            and not isinstance(entry[1], bool)
        ):
            out.add((entry[0], entry[1]))
    return out


# --------------------------------------------------------------------------- stubs


def stub_function(text: str, path: str, qualname: str, line: int | None = None) -> str | None:
    """The file with ``qualname``'s body replaced by its docstring (kept as written) and
    ``raise NotImplementedError``; signature, decorators, comments above and indentation
    (tabs or spaces) unchanged. Comments inside the body (and deeper-indented comment lines
    right after it) go with the body.

    A generator keeps its kind: an unreachable ``yield`` follows the ``raise``. None when there
    is no such function (``line``, either :attr:`FunctionInfo.line` or ``def_line``, picks
    one of several with the same qualname; without it an ambiguous qualname gives None), when
    its body is already trivial, or when the result would not compile.
    """
    found = _parsed_functions(text, path)
    if found is None:
        return None
    src, _tree, funcs = found
    matches = [
        f
        for f in funcs
        if f.info.qualname == qualname and (line is None or line in (f.info.line, f.info.def_line))
    ]
    if len(matches) != 1 or matches[0].info.trivial:
        return None
    func = matches[0]
    node = func.node
    doc = _docstring_stmt(node)
    keep = 1 if doc is not None else 0
    first, last = node.body[keep], node.body[-1]
    # Where the removed region starts: on the line after the docstring (or the signature) when
    # the body starts on a line of its own, so comments between them go too.
    after = src.span(doc)[1] if doc is not None else func.colon
    first_start = src.offset(first.lineno, first.col_offset)
    indent = src.indent_before(first_start)
    if indent is not None and src.rest_is_comment(after) and src.lineno(after) < first.lineno:
        start = src.next_line(src.lineno(after))
        stub = indent + "raise NotImplementedError"
        if func.info.is_generator:
            stub += src.text[src.line_end(first.lineno) : src.next_line(first.lineno)] or "\n"
            stub += indent + "yield"
    else:
        start = first_start
        stub = "raise NotImplementedError" + ("; yield" if func.info.is_generator else "")
    end = _body_end(src, node, src.span(last)[1])
    new_text = text[:start] + stub + text[end:]
    if new_text == text or not _compiles(new_text, path):
        return None
    return new_text


def _body_end(src: _Source, node: _FuncNode, end: int) -> int:
    """Extend the end of a body over a comment on its last line and over the comment-only lines
    right after it that are indented deeper than the ``def``."""
    if not src.rest_is_comment(end):
        return end
    lineno = src.lineno(end)
    end = src.line_end(lineno)
    def_start = src.line_start(node.lineno)
    def_indent = len(src.text[def_start : src.offset(node.lineno, node.col_offset)].expandtabs())
    probe = lineno + 1
    while probe <= len(src.starts):
        text = src.text[src.line_start(probe) : src.line_end(probe)]
        stripped = text.lstrip()
        if stripped.startswith("#"):
            if len(text[: len(text) - len(stripped)].expandtabs()) <= def_indent:
                break
            end = src.line_end(probe)
        elif stripped:
            break
        probe += 1
    return end
