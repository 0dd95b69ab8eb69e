"""Red-team candidates: generic wrong solutions that a sound task must not pay for.

Mutants (:mod:`repogym.verify.mutants`) ask whether the tests tell the gold fix from a near
miss. Red-team candidates ask a blunter question: does the task pay for *nothing real*? Each
candidate starts from the gold post-image and replaces the body of **every function the gold
patch touched** (a function containing an added line; Python) with one generic answer:

``hollow``      ``pass``
``raise``       ``raise NotImplementedError``
``const_true``  ``return True`` (also ``== 1``)
``const_false`` ``return False`` (also ``== 0``)
``const_empty`` ``return ''``
``identity``    the first argument returned unchanged (functions with one)
``spoof``       an object equal to everything, truthy, iterable, callable, with any attribute

The methods that make an object (``__init__``, ``__new__``, ...) keep their bodies (an
``__init__`` returning ``True`` is a ``TypeError``, not a wrong answer), and so do one-line
definitions; other dunders (``__getitem__``, ``__eq__``, ``__get__``) are rewritten like any
function. A candidate that changes nothing, does not compile
or repeats another is left out. Every candidate is a complete git-style diff from the base tree
(all files of the gold patch, code files rewritten), applied like the gold.

The gate runs each as a trial; the highest reward any of them earns is the task's
**adversarial floor**, and the floor minus the nop reward is its **gameability gap**. A task
with a gap is gameable: generate's gate drops it, ``verify`` marks it. The spoof is expected to
be caught by the judge (``repogym_boot``'s check for objects equal to anything), not by luck.

JavaScript (``.js .cjs .mjs``): the same kinds but ``spoof`` (``===`` and ``Object.is``
cannot be fooled by a value), for functions whose header line ends with ``{`` and whose body
closes on a line of its own (``function f(a) {``, methods, arrows with a block body), found by
the comment- and string-aware scan the mutants use; each candidate must pass ``node --check``
in the module system the gold file passes in. TypeScript is left alone. Go, Rust and Java get
``raise`` only (:mod:`.redteam_braced`). A patch with no function to rewrite gives no
candidates (the report says so).
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass

from repogym.verify.file_kinds import JS_EXT, PY_EXT, default_is_code, is_release_notes
from repogym.verify.hunks import PatchedFile, patched_files
from repogym.verify.mutants import _node_check
from repogym.verify.mutation_sites import _js_scan
from repogym.verify.redteam_braced import BRACED_KINDS, BRACED_REDTEAM_EXT
from repogym.verify.redteam_braced import rewrite as braced_rewrite

__all__ = ["KINDS", "SPOOF_CLASS", "Candidate", "build_candidates"]

SPOOF_CLASS = "_Anything"
"""The name of the spoof's class, appended to each rewritten module."""

_SPOOF_SOURCE = f'''

class {SPOOF_CLASS}:
    """Equal to everything, truthy, iterable, callable, with any attribute."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __le__ = __ge__ = __eq__
    __lt__ = __gt__ = __ne__

    def __hash__(self):
        return 0

    def __bool__(self):
        return True

    def __len__(self):
        return 1

    def __iter__(self):
        return iter(())

    def __contains__(self, item):
        return True

    def __call__(self, *args, **kwargs):
        return self

    def __getattr__(self, name):
        return self

    def __getitem__(self, key):
        return self
'''


_Func = ast.FunctionDef | ast.AsyncFunctionDef

_KEEP_BODIES = frozenset(
    {"__init__", "__new__", "__init_subclass__", "__set_name__", "__class_getitem__", "__del__"}
)
"""Methods whose body stays: making an object (a wrong value there is a TypeError, not a
wrong answer). Other dunders (``__getitem__``, ``__eq__``, ``__get__``, ...) are answers too."""


def _first_argument(node: _Func) -> str | None:
    args = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
    decorators = {getattr(d, "id", getattr(d, "attr", "")) for d in node.decorator_list}
    if args and "staticmethod" not in decorators and args[0] in ("self", "cls"):
        args = args[1:]
    if args:
        return args[0]
    if node.args.vararg is not None:
        return f"({node.args.vararg.arg}[0] if {node.args.vararg.arg} else None)"
    return None


KINDS: dict[str, Callable[[_Func], str | None]] = {
    "hollow": lambda node: "pass",
    "raise": lambda node: "raise NotImplementedError",
    "const_true": lambda node: "return True",
    "const_false": lambda node: "return False",
    "const_empty": lambda node: "return ''",
    "identity": lambda node: f"return {arg}" if (arg := _first_argument(node)) else None,
    "spoof": lambda node: f"return {SPOOF_CLASS}()",
    # Compiled languages only (:mod:`.redteam_braced`): in Python and JavaScript the judge's
    # channel and report pipe already refuse a run that ends itself.
    "exit": lambda node: None,
}
"""Kind -> the one statement that becomes a touched function's body (None: not for it)."""


JS_KINDS: dict[str, Callable[[str | None], str | None]] = {
    "hollow": lambda arg: "return undefined;",
    "raise": lambda arg: 'throw new Error("not implemented");',
    "const_true": lambda arg: "return true;",
    "const_false": lambda arg: "return false;",
    "const_empty": lambda arg: 'return "";',
    "identity": lambda arg: f"return {arg};" if arg else None,
}
"""Kind -> a JavaScript function's new body, given its first plain parameter."""

_JS_HEADER = re.compile(
    r"(?:\bfunction\b\s*\*?\s*([\w$]*)\s*\(([^()]*)\)"  # function f(a, b) {
    r"|^\s*(?:(?:static|async|get|set)\s+)*([\w$]+)\s*\(([^()]*)\)"  # method(a) {
    r"|(?:\(([^()]*)\)|([\w$]+))\s*=>)\s*\{\s*$"  # (a) => {   a => {
)
_JS_NOT_METHODS = frozenset({"if", "for", "while", "switch", "catch", "with", "function"})


_JsFunc = tuple[str, int, int, str | None]
"""(name, header line, closing line (1-based), first plain parameter)."""


def _js_param(params: str) -> str | None:
    first = params.split(",")[0].strip()
    return first if re.fullmatch(r"[A-Za-z_$][\w$]*", first) else None


def _js_functions(lines: list[str], added: set[int]) -> list[_JsFunc]:
    """Outermost functions with an added line in their body: (name, header line, closing line
    (1-based), first plain parameter)."""
    scan = _js_scan(lines)
    if scan is None:
        return []
    found: list[_JsFunc] = []
    i = 0
    while i < len(lines):
        info = scan[i]
        masked = info.masked.rstrip("\r\n")
        match = _JS_HEADER.search(masked) if info.end_code else None
        name = (match.group(1) or match.group(3) or "<anonymous>") if match else ""
        if not match or name in _JS_NOT_METHODS or info.end_depth != info.start_depth + 1:
            i += 1
            continue
        close = next(
            (
                k
                for k in range(i + 1, len(lines))
                if scan[k].end_depth == info.start_depth and scan[k].min_depth == info.start_depth
            ),
            None,
        )
        if close is None or not scan[close].masked.strip().startswith("}"):
            i += 1
            continue
        body = set(range(i + 2, close + 1))  # 1-based lines strictly inside
        if body and body & added:
            groups = (match.group(2), match.group(4), match.group(5), match.group(6))
            params = next((g for g in groups if g is not None), "")
            found.append((name, i + 1, close + 1, _js_param(params)))
            i = close + 1
            continue
        i += 1
    return found


def _js_rewrite(lines: list[str], functions: list[_JsFunc], kind: str) -> list[str] | None:
    out = list(lines)
    changed = False
    for _name, header, close, arg in sorted(functions, key=lambda f: f[1], reverse=True):
        statement = JS_KINDS[kind](arg)
        if statement is None:
            continue
        first = out[header] if header < close - 1 else out[close - 1]
        indent = first[: len(first) - len(first.lstrip())] or "  "
        newline = "\r\n" if out[header - 1].endswith("\r\n") else "\n"
        out[header : close - 1] = [f"{indent}{statement}{newline}"]
        changed = True
    return out if changed else None


def _js_module_suffix(text: str) -> str | None:
    """The suffix under which ``node --check`` accepts the gold file (CommonJS first)."""
    for suffix in (".cjs", ".mjs"):
        ok = _node_check([text], suffix)
        if ok is None:
            return None
        if ok and ok[0]:
            return suffix
    return None


@dataclass(frozen=True)
class Candidate:
    """One generic wrong solution."""

    kind: str
    description: str
    functions: tuple[str, ...]  # "path:qualname" of each rewritten function
    patch: str  # git-style unified diff, base -> candidate tree


def _touched(tree: ast.Module, added: set[int]) -> list[tuple[str, _Func]]:
    """The outermost function around each added line, each once, in file order: (qualname,
    node). Object-making dunders and one-line definitions keep their bodies (their nested
    functions are still looked at)."""
    found: list[tuple[str, _Func]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                end = child.end_lineno or child.lineno
                dunder = child.name in _KEEP_BODIES
                one_line = child.body[0].lineno == child.lineno
                hit = any(child.body[0].lineno <= line <= end for line in added)
                if hit and not (dunder or one_line):
                    found.append((name, child))
                else:
                    visit(child, name + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return sorted(found, key=lambda item: item[1].lineno)


def _rewrite(lines: list[str], functions: list[_Func], kind: str) -> list[str] | None:
    """``lines`` with each function's body replaced by the kind's statement (None: the kind
    applies to none of them)."""
    out = list(lines)
    changed = False
    for node in sorted(functions, key=lambda n: n.lineno, reverse=True):
        statement = KINDS[kind](node)
        if statement is None:
            continue
        first = node.body[0]
        start, end = first.lineno - 1, (node.end_lineno or first.lineno)
        indent = out[start][: len(out[start]) - len(out[start].lstrip())]
        newline = "\r\n" if out[end - 1].endswith("\r\n") else "\n"
        out[start:end] = [f"{indent}{statement}{newline}"]
        changed = True
    if not changed:
        return None
    if kind == "spoof":
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
        out += _SPOOF_SOURCE.splitlines(keepends=True)
    return out


def _section(f: PatchedFile, lines: list[str]) -> str:
    """A git-style diff of one file, base -> ``lines`` (modes from the gold's header)."""
    path = f.fp.path
    base = f.base or []
    new_file = f.fp.status == "A"
    header = [f"diff --git a/{path} b/{path}\n"]
    header += [
        h + "\n" for h in f.header if h.startswith(("new file mode", "old mode", "new mode"))
    ]
    body = list(
        difflib.unified_diff(
            base,
            lines,
            fromfile="/dev/null" if new_file else f"a/{path}",
            tofile=f"b/{path}",
            n=3,
        )
    )
    text = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in body
    )
    return "".join(header) + text


def build_candidates(
    gold_patch: str,
    read_base: Callable[[str], str | None],
    *,
    is_code: Callable[[str], bool] | None = None,
) -> list[Candidate]:
    """Every red-team candidate of ``gold_patch`` (kinds in :data:`KINDS` order).

    ``read_base(path)`` returns a file's base text (None when absent), as for mutants."""
    pred = is_code or default_is_code
    files = patched_files(
        gold_patch,
        lambda p: (
            bool(pred(p))
            and not is_release_notes(p)
            and p.endswith(PY_EXT + JS_EXT + BRACED_REDTEAM_EXT)
        ),
        read_base,
    )
    if files is None:
        return []
    targets: list[tuple[PatchedFile, list[str], list[tuple[str, _Func]]]] = []
    js_targets: list[tuple[PatchedFile, list[str], list[_JsFunc], str]] = []
    braced: dict[str, list[tuple[PatchedFile, list[str], list[str]]]] = {}
    for f in files:
        if not (f.mutable and f.gold is not None and f.fp.status in ("A", "M")):
            continue
        if f.fp.path.endswith(BRACED_REDTEAM_EXT):
            for braced_kind in BRACED_KINDS:
                made = braced_rewrite(f.gold, set(f.plus_at), f.fp.path, braced_kind)
                if made is not None:
                    braced.setdefault(braced_kind, []).append((f, *made))
            continue
        if f.fp.path.endswith(JS_EXT):
            functions = _js_functions(f.gold, set(f.plus_at))
            suffix = _js_module_suffix("".join(f.gold)) if functions else None
            if functions and suffix:
                js_targets.append((f, f.gold, functions, suffix))
            continue
        text = "".join(f.gold)
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        touched = _touched(tree, set(f.plus_at))
        if touched:
            targets.append((f, f.gold, touched))
    out: list[Candidate] = []
    seen: set[str] = set()
    for kind in KINDS:
        sections_by_file: dict[int, str] = {}
        names: list[str] = []
        for f, gold, touched in targets:
            lines = _rewrite(gold, [node for _q, node in touched], kind)
            if lines is None:
                continue
            try:
                compile("".join(lines), f.fp.path, "exec", dont_inherit=True)
            except (SyntaxError, ValueError):
                continue
            sections_by_file[f.index] = _section(f, lines)
            names += [f"{f.fp.path}:{q}" for q, _n in touched]
        for f, braced_lines, functions_named in braced.get(kind, []):
            sections_by_file[f.index] = _section(f, braced_lines)
            names += [f"{f.fp.path}:{name}" for name in functions_named]
        for f, gold, functions, suffix in js_targets if kind in JS_KINDS else []:
            js_lines = _js_rewrite(gold, functions, kind)
            if js_lines is None or _node_check(["".join(js_lines)], suffix) != [True]:
                continue
            sections_by_file[f.index] = _section(f, js_lines)
            names += [f"{f.fp.path}:{name}" for name, *_rest in functions]
        if not sections_by_file:
            continue
        patch = "".join(sections_by_file.get(g.index, g.fp.text) for g in files)
        if patch in seen:
            continue
        seen.add(patch)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out.append(Candidate(kind, f"{kind}: {shown}", tuple(names), patch))
    return out
