"""Host-side helpers of ``equivalence_tests`` (no sandbox, nothing of the project imported):

* :func:`equivalence_targets`: the module-level functions of one file that may become tasks, or
  why not (async, generators, callables/generators/files in the signature, time/random/I/O
  names in the body, no parameters, …), with what the hypothesis inputs need;
* :func:`draw_inputs`: argument tuples drawn from the type hints with hypothesis
  (``st.from_type`` of builtin-typed parameters, a fixed seed), pickled with protocol 2;
* :func:`verifier_module`: the task's verifier template imported on the host, for its
  restricted unpickler and its comparison (generation judges the reference's outcomes with the
  very code that grades agents);
* :func:`import_root`: where the module is importable from, given its path and dotted name.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import sys
import threading
import typing
from dataclasses import dataclass, field
from importlib import resources
from types import ModuleType
from typing import Any

from repogym import shipped
from repogym.pipelines._synthesis.ops import FunctionInfo, python_functions

VERIFIER_TEMPLATE = "equiv_verifier.py"
RECORD_TEMPLATE = "equiv_record.py"

#: Modules whose use makes a function's result depend on something other than its arguments.
NONDETERMINISTIC_MODULES = frozenset(
    {
        "random",
        "secrets",
        "time",
        "uuid",
        "socket",
        "subprocess",
        "threading",
        "multiprocessing",
        "asyncio",
        "urllib",
        "requests",
        "httpx",
        "http",
        "tempfile",
        "shutil",
        "glob",
        "getpass",
        "signal",
        "select",
        "sqlite3",
    }
)
#: Builtins that read or write the outside world, or give per-process values.
IMPURE_BUILTINS = frozenset(
    {"open", "input", "print", "id", "hash", "globals", "locals", "vars", "exec", "eval",
     "breakpoint", "__import__"}
)  # fmt: skip
#: Attribute names that mean time, randomness or I/O wherever they appear (``np.random``,
#: ``datetime.now()``, ``os.environ``, ``path.read_text()`` …).
IMPURE_ATTRIBUTES = frozenset(
    {
        "random", "randint", "randrange", "choice", "choices", "shuffle", "sample", "uniform",
        "gauss", "urandom", "getrandom", "now", "today", "utcnow", "time_ns", "perf_counter",
        "monotonic", "process_time", "sleep", "uuid1", "uuid4", "getenv", "environ", "system",
        "popen", "getpid", "getcwd", "listdir", "scandir", "walk", "read_text", "write_text",
        "read_bytes", "write_bytes", "exists", "isfile", "isdir", "getsize", "getmtime",
        "abspath", "realpath", "expanduser", "stdin", "stdout", "stderr", "argv",
    }
)  # fmt: skip
#: Annotation names of things that cannot be stored as plain inputs or outputs.
OPAQUE_TYPES = frozenset(
    {
        "Callable", "Iterator", "Generator", "AsyncIterator", "AsyncGenerator", "Awaitable",
        "Coroutine", "IO", "TextIO", "BinaryIO", "Path", "PurePath", "PathLike", "TextIOWrapper",
        "BufferedReader", "Type",
    }
)  # fmt: skip

USES_IMPURE = "uses time, randomness or I/O"
"""The drop reason of a function whose body names time, randomness or I/O (see
:func:`impure_use` for what it names)."""

_SCALARS: dict[str, Any] = {
    "int": int,
    "float": float,
    "str": str,
    "bytes": bytes,
    "bool": bool,
    "None": type(None),
    "NoneType": type(None),
}
_LISTS = frozenset({"list", "List", "Sequence", "MutableSequence", "Collection", "Iterable"})
_TUPLES = frozenset({"tuple", "Tuple"})
_DICTS = frozenset({"dict", "Dict", "Mapping", "MutableMapping"})
_SETS = frozenset({"set", "Set", "AbstractSet", "MutableSet"})
_FROZENSETS = frozenset({"frozenset", "FrozenSet"})


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    """``positional`` (positional-only or positional-or-keyword), ``keyword`` (keyword-only),
    ``var_positional`` or ``var_keyword``."""
    required: bool
    annotation: Any
    """The typing object the annotation stands for (builtin-typed only), else None."""


@dataclass
class Target:
    """A module-level function that may become an equivalence task."""

    info: FunctionInfo
    params: list[Param] = field(default_factory=list)

    @property
    def hypothesis_ready(self) -> bool:
        """Every required parameter has a builtin-typed annotation (and none is ``*args``)."""
        return self.types() is not None

    def types(self, inferred: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The type to draw for each required parameter — its builtin-typed annotation, else
        ``inferred[name]`` — or None when one of them has neither (or there is none)."""
        required = [p for p in self.params if p.required]
        out = {p.name: p.annotation or (inferred or {}).get(p.name) for p in required}
        return out if out and all(t is not None for t in out.values()) else None


# ------------------------------------------------------------------------------ targets


def equivalence_targets(text: str, path: str) -> list[Target | tuple[FunctionInfo, str]]:
    """The functions of a file, each a :class:`Target` or ``(info, drop reason)``."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    nodes = {
        n.lineno: n
        for n in _module_level(tree.body)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    counts: dict[str, int] = {}
    for each in nodes.values():
        counts[each.name] = counts.get(each.name, 0) + 1
    aliases = _import_aliases(tree)
    out: list[Target | tuple[FunctionInfo, str]] = []
    for info in python_functions(text, path):
        node = nodes.get(info.def_line)
        if node is None or "." in info.qualname:
            continue  # methods and nested functions: not reachable as a module attribute
        reason = _drop_reason(info, node, aliases, counts)
        if reason:
            out.append((info, reason))
            continue
        assert isinstance(node, ast.FunctionDef)
        out.append(Target(info, _params(node.args)))
    return out


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements at module level, looking into ``if``/``try``/``with`` blocks."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.If):
            out += _module_level(stmt.body) + _module_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody):
                out += _module_level(block)
            for handler in stmt.handlers:
                out += _module_level(handler.body)
        elif isinstance(stmt, ast.With):
            out += _module_level(stmt.body)
    return out


def _import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name → dotted origin of every import in ``tree`` (``np`` → ``numpy``,
    ``choice`` → ``random.choice``)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


def _drop_reason(
    info: FunctionInfo, node: ast.AST, aliases: dict[str, str], counts: dict[str, int]
) -> str | None:
    if info.name.startswith("__") and info.name.endswith("__"):
        return "special function"
    if counts.get(info.name, 0) > 1:
        return "defined more than once"
    if info.is_async:
        return "async function"
    if info.is_generator:
        return "generator function"
    if info.trivial or info.is_abstract or info.is_overload:
        return "nothing to implement"
    assert isinstance(node, ast.FunctionDef)
    args = node.args
    if not (args.posonlyargs or args.args or args.vararg or args.kwonlyargs or args.kwarg):
        return "no parameters"
    annotations = [a.annotation for a in _all_args(args)] + [node.returns]
    for ann in annotations:
        if ann is not None and _names(ann) & OPAQUE_TYPES:
            return "takes or returns callables, generators or files"
    if impure_use(node, aliases):
        return USES_IMPURE
    return None


def _all_args(args: ast.arguments) -> list[ast.arg]:
    found = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    found += [a for a in (args.vararg, args.kwarg) if a is not None]
    return found


def _names(node: ast.AST) -> set[str]:
    """Every name and attribute in an annotation (string annotations parsed)."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            with contextlib.suppress(SyntaxError):
                out |= _names(ast.parse(sub.value, mode="eval"))
    return out


def impure_use(func: ast.AST, aliases: dict[str, str]) -> str | None:
    """What in a function's body looks like time, randomness or I/O (``uses random``), or None."""
    local = _import_aliases(func)
    known = {**aliases, **local}
    bound = _bound_names(func)
    for node in ast.walk(func):
        if isinstance(node, ast.Name):
            if node.id in bound and node.id not in local:
                continue
            origin = known.get(node.id)
            if origin is not None and origin.split(".")[0] in NONDETERMINISTIC_MODULES:
                return f"uses {origin}"
            if origin is not None and origin.split(".")[-1] in IMPURE_ATTRIBUTES:
                return f"uses {origin}"
            if origin is None and node.id in IMPURE_BUILTINS:
                return f"uses {node.id}"
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node, known, bound - set(local))
            if dotted and dotted.split(".")[0] in NONDETERMINISTIC_MODULES:
                return f"uses {dotted}"
            if node.attr in IMPURE_ATTRIBUTES:
                return f"uses {dotted or '.' + node.attr}"
        elif isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for mod in mods:
                if mod and mod.split(".")[0] in NONDETERMINISTIC_MODULES:
                    return f"uses {mod}"
    return None


def _dotted(node: ast.Attribute, known: dict[str, str], bound: set[str]) -> str | None:
    """``random.randint`` for an attribute chain on an imported name (aliases resolved)."""
    parts = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if not isinstance(value, ast.Name) or value.id in bound:
        return None
    parts.append(known.get(value.id, value.id))
    return ".".join(reversed(parts))


def _bound_names(func: ast.AST) -> set[str]:
    """Names a function binds itself (parameters, assignments, loop targets, nested defs)."""
    out: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            out.add(node.id)
        elif (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node is not func
        ):
            out.add(node.name)
    return out


# ------------------------------------------------------------------------------ hypothesis


def _params(args: ast.arguments) -> list[Param]:
    out: list[Param] = []
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    for i, a in enumerate(positional):
        out.append(Param(a.arg, "positional", i < first_default, annotation_type(a.annotation)))
    if args.vararg is not None:
        out.append(Param(args.vararg.arg, "var_positional", False, None))
    for a, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append(Param(a.arg, "keyword", default is None, annotation_type(a.annotation)))
    if args.kwarg is not None:
        out.append(Param(args.kwarg.arg, "var_keyword", False, None))
    return out


def annotation_type(node: ast.AST | None) -> Any:
    """The typing object an annotation stands for when it is built only from ``int``,
    ``float``, ``str``, ``bytes``, ``bool``, ``None`` and list/tuple/dict/set/frozenset/
    Optional/Union of those; else None."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.Constant) and node.value is None:
        return type(None)
    if isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else node.attr
        return _SCALARS.get(name)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = annotation_type(node.left), annotation_type(node.right)
        return None if left is None or right is None else typing.Union[left, right]  # noqa: UP007
    if not isinstance(node, ast.Subscript):
        return None
    base = node.value.id if isinstance(node.value, ast.Name) else getattr(node.value, "attr", "")
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if base in _TUPLES:
        if len(items) == 2 and isinstance(items[1], ast.Constant) and items[1].value is ...:
            inner = annotation_type(items[0])
            return None if inner is None else tuple[inner, ...]  # type: ignore[valid-type]
        kinds = [annotation_type(i) for i in items]
        return None if any(k is None for k in kinds) else tuple[tuple(kinds)]  # type: ignore[misc]
    kinds = [annotation_type(i) for i in items]
    if any(k is None for k in kinds):
        return None
    if base == "Optional" and len(kinds) == 1:
        return typing.Optional[kinds[0]]  # noqa: UP045
    if base == "Union":
        return typing.Union[tuple(kinds)]  # noqa: UP007
    if base in _LISTS and len(kinds) == 1:
        return list[kinds[0]]  # type: ignore[valid-type]
    if base in _SETS and len(kinds) == 1:
        return set[kinds[0]]  # type: ignore[valid-type]
    if base in _FROZENSETS and len(kinds) == 1:
        return frozenset[kinds[0]]  # type: ignore[valid-type]
    if base in _DICTS and len(kinds) == 2:
        return dict[kinds[0], kinds[1]]  # type: ignore[valid-type]
    return None


def recorded_types(
    target: Target, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]
) -> dict[str, Any]:
    """For each required parameter, the type every recorded argument of it shares
    (:func:`value_type`), when there is one: what to draw for parameters without hints."""
    out: dict[str, Any] = {}
    positional = [p for p in target.params if p.kind == "positional"]
    for index, param in enumerate(positional):
        if param.required:
            seen = [args[index] for args, _ in calls if len(args) > index]
            if len(seen) == len(calls):
                out[param.name] = value_type(seen)
    for param in target.params:
        if param.kind == "keyword" and param.required:
            seen = [kwargs[param.name] for _, kwargs in calls if param.name in kwargs]
            if len(seen) == len(calls):
                out[param.name] = value_type(seen)
    return {k: v for k, v in out.items() if v is not None}


def value_type(values: list[Any], depth: int = 0) -> Any:
    """The builtin type all ``values`` share, containers typed by their items (``[[1], []]``
    → ``list[int]``), ``None`` among them making it Optional, ``int`` with ``float`` giving
    their union; None when they share none (or there are no values)."""
    kinds = {type(v) for v in values}
    if not kinds or depth > 4:
        return None
    optional = type(None) in kinds and len(kinds) > 1
    if optional:
        kinds.discard(type(None))
    if kinds == {int, float}:
        found: Any = typing.Union[int, float]  # noqa: UP007
    elif len(kinds) != 1:
        return None
    else:
        kind = kinds.pop()
        found = _container_type(kind, values, depth)
    if found is None:
        return None
    return typing.Optional[found] if optional else found  # noqa: UP045


def _container_type(kind: type, values: list[Any], depth: int) -> Any:
    if kind in (int, float, str, bytes, bool, type(None)):
        return kind
    if kind in (list, set, frozenset):
        inner = value_type([item for v in values for item in v], depth + 1)
        return None if inner is None else kind[inner]
    if kind is tuple:
        lengths = {len(v) for v in values}
        if len(lengths) == 1 and 0 < min(lengths) <= 6:
            items = [value_type([v[i] for v in values], depth + 1) for i in range(min(lengths))]
            return None if None in items else tuple[tuple(items)]  # type: ignore[misc]
        inner = value_type([item for v in values for item in v], depth + 1)
        return None if inner is None else tuple[inner, ...]  # type: ignore[valid-type]
    if kind is dict:
        keys = value_type([k for v in values for k in v], depth + 1)
        vals = value_type([x for v in values for x in v.values()], depth + 1)
        return None if keys is None or vals is None else dict[keys, vals]  # type: ignore[valid-type]
    return None


_HYPOTHESIS_LOCK = threading.Lock()


def draw_inputs(
    target: Target,
    count: int,
    seed: int,
    home: Any = None,
    inferred: dict[str, Any] | None = None,
) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Up to ``count`` distinct ``(args, kwargs)`` drawn with hypothesis (``st.from_type``) for
    the required parameters (optional ones keep their defaults), from their builtin type hints
    or, for a parameter without one, its ``inferred`` type (:func:`recorded_types`);
    deterministic for a seed. ``[]`` when a required parameter has neither or hypothesis is not
    installed. ``home`` is where hypothesis keeps its caches (default: under the current
    folder)."""
    types = target.types(inferred)
    if count <= 0 or types is None:
        return []
    try:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import configuration as hconfig
        from hypothesis import seed as hseed
        from hypothesis import strategies as st
    except ImportError:
        return []
    required = [p for p in target.params if p.required]
    positional = st.tuples(*(st.from_type(types[p.name]) for p in required if p.kind != "keyword"))
    keywords = st.fixed_dictionaries(
        {p.name: st.from_type(types[p.name]) for p in required if p.kind == "keyword"}
    )
    drawn: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    @hseed(seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        derandomize=False,
        print_blob=False,
    )
    @given(st.tuples(positional, keywords))
    def collect(value: tuple[tuple[Any, ...], dict[str, Any]]) -> None:
        drawn.append(value)

    with _HYPOTHESIS_LOCK:
        saved = vars(hconfig).get("__hypothesis_home_directory")
        if home is not None:
            hconfig.set_hypothesis_home_dir(home)
        try:
            collect()
        except Exception:  # hypothesis gave up (unsatisfiable, too slow): keep what was drawn
            pass
        finally:
            if home is not None:
                hconfig.set_hypothesis_home_dir(saved)
    return drawn


# ------------------------------------------------------------------------------ verifier


def verifier_module() -> ModuleType:
    """The verifier template imported on the host (``is_plain``, ``dumps``, ``loads``,
    ``same``, ``outcome_of``, ``outcomes_match``)."""
    name = "repogym_equiv_verifier"
    if name in sys.modules:
        return sys.modules[name]
    with resources.as_file(shipped.locate(VERIFIER_TEMPLATE)) as path:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def import_root(path: str, module: str | None) -> str | None:
    """The folder (relative, ``""`` for the top) from which ``module`` imports as the file
    ``path``, or None when the dotted name does not end the path (``src/pkg/m.py`` and
    ``pkg.m`` → ``src``)."""
    if not module or module == "__main__" or not path.endswith(".py"):
        return None
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    names = module.split(".")
    if len(names) > len(parts) or parts[len(parts) - len(names) :] != names:
        return None
    return "/".join(parts[: len(parts) - len(names)])
