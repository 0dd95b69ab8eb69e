"""tox envlists (brace expansion) and nox sessions (read with ``ast``), statically.

* ``envlist = py{310,311,312,313,314,py3}, lint`` names ``py310`` … ``py314``, ``pypy3`` and
  ``lint``; braces nest and multiply (``py{310,311}-{a,b}`` is four envs).
* A noxfile is parsed, never run: each ``@nox.session`` function's ``session.install(…)`` and
  ``session.run("pip", "install", …)`` calls are read argument by argument — string literals,
  module-level lists of strings (``*DEPS``), ``*nox.project.dependency_groups(PYPROJECT, "g")``
  — and turned into :class:`~repogym.bootstrap.installs.InstallSpec` like a CI command.
"""

from __future__ import annotations

import ast
import configparser
import itertools
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from repogym.bootstrap.installs import InstallSpec, parse_install

# ------------------------------------------------------------------------------ tox


def _split_top(text: str, seps: str = ",") -> list[str]:
    """Split at ``seps`` outside braces."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)
        if ch in seps and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def expand_braces(text: str) -> list[str]:
    """``py{310,311}-{a,b}`` → ``py310-a py310-b py311-a py311-b`` (nested braces and tox 4
    ranges ``3.1{0-3}`` too)."""
    start = text.find("{")
    if start < 0:
        return [text]
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            break
    else:
        return [text]  # unbalanced: left as written
    inner = text[start + 1 : end]
    options: list[str] = []
    for part in _split_top(inner):
        span = re.fullmatch(r"(\d+)-(\d+)", part)  # tox 4 ranges: py3{10-13}
        if span and int(span[1]) <= int(span[2]) and int(span[2]) - int(span[1]) < 100:
            options += [str(n) for n in range(int(span[1]), int(span[2]) + 1)]
        else:
            options += expand_braces(part)
    options = options or [""]
    prefix, rest = text[:start], expand_braces(text[end + 1 :])
    return [prefix + o + r for o, r in itertools.product(options, rest)]


def tox_envs(tox: configparser.ConfigParser) -> list[str]:
    """Every env name of ``[tox] envlist`` / ``env_list`` (comma or line separated)."""
    value = tox.get("tox", "envlist", fallback="") + "\n" + tox.get("tox", "env_list", fallback="")
    names: list[str] = []
    for item in _split_top(value, ",\n"):
        if item.startswith("#"):
            continue
        names += [n.strip() for n in expand_braces(item) if n.strip()]
    return list(dict.fromkeys(names))


def _toml_value(value: Any) -> str:
    """A native-TOML tox value as ini text: lists one item a line, commands as words."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        items = []
        for item in value:
            if isinstance(item, list):  # a command: words (``{replace = …}`` dropped)
                items.append(shlex.join(w for w in item if isinstance(w, str)))
            elif isinstance(item, str):
                items.append(item)
        return "\n".join(items)
    return ""


def tox_from_toml(table: dict[str, Any]) -> configparser.ConfigParser:
    """tox's native TOML (``tox.toml``, ``[tool.tox]``) as the ini sections tox.ini has:
    ``[tox]`` (``env_list``), ``[testenv]`` (``env_run_base``), ``[testenv:<name>]``."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.add_section("tox")
    parser.set("tox", "env_list", _toml_value(table.get("env_list") or table.get("envlist")))
    sections = [("testenv", table.get("env_run_base"))]
    envs = table.get("env")
    if isinstance(envs, dict):
        sections += [(f"testenv:{name}", env) for name, env in envs.items()]
    for section, env in sections:
        if not isinstance(env, dict):
            continue
        parser.add_section(section)
        for key in ("deps", "extras", "dependency_groups", "commands"):
            if key in env:
                parser.set(section, key, _toml_value(env[key]))
    return parser


def python_minor(env: str) -> tuple[int, int] | None:
    """The CPython 3 minor an env name selects: ``py311``, ``py3.11``, ``3.11``, ``py311-x``."""
    for factor in env.split("-"):
        m = re.fullmatch(r"(?:py)?3\.?(\d{1,2})", factor)
        if m and (factor.startswith("py") or "." in factor):
            return 3, int(m[1])
    return None


def tox_python_cap(tox: configparser.ConfigParser) -> tuple[int, int] | None:
    """The newest CPython 3 minor of the envlist (None when it names none)."""
    minors = [m for m in map(python_minor, tox_envs(tox)) if m]
    return max(minors) if minors else None


# ------------------------------------------------------------------------------ nox


@dataclass
class NoxSession:
    name: str
    line: int
    installs: list[InstallSpec] = field(default_factory=list)
    runs_pytest: bool = False
    runs_unittest: bool = False


def _is_session_decorator(node: ast.expr) -> tuple[bool, str | None]:
    """Whether a decorator is ``@nox.session`` (any form) and the ``name=`` it gives."""
    call = node if isinstance(node, ast.Call) else None
    target = call.func if call else node
    dotted = ast.unparse(target)
    if dotted not in ("nox.session", "session", "nox.session_decorator"):
        return False, None
    for kw in call.keywords if call else []:
        if kw.arg == "name" and isinstance(kw.value, ast.Constant):
            return True, str(kw.value.value)
    return True, None


class _Args:
    """Reads call arguments into words (module constants resolved)."""

    def __init__(self, constants: dict[str, list[str]]) -> None:
        self.constants = constants

    def words(self, args: list[ast.expr]) -> tuple[list[str], list[str], list[str]]:
        """``(words, dependency groups, unreadable)``."""
        words: list[str] = []
        groups: list[str] = []
        unknown: list[str] = []
        for arg in args:
            value = arg.value if isinstance(arg, ast.Starred) else arg
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                words.append(value.value)
            elif isinstance(value, ast.Name) and value.id in self.constants:
                words += self.constants[value.id]
            elif isinstance(value, ast.Call) and ast.unparse(value.func).endswith(
                "dependency_groups"
            ):
                groups += [
                    a.value
                    for a in value.args[1:]
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ]
            elif isinstance(value, ast.List | ast.Tuple):
                inner, more_groups, more_unknown = self.words(list(value.elts))
                words, groups, unknown = words + inner, groups + more_groups, unknown + more_unknown
            else:
                unknown.append(ast.unparse(value)[:60])
        return words, groups, unknown


def _constants(tree: ast.Module) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        try:
            literal = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            continue
        if isinstance(literal, str):
            out[target.id] = [literal]
        elif isinstance(literal, list | tuple) and all(isinstance(x, str) for x in literal):
            out[target.id] = list(literal)
    return out


def _param_defaults(func: ast.FunctionDef, call: ast.Call | None) -> dict[str, list[str]]:
    """Literal string (list) values of a helper's parameters: defaults, then the call's."""
    params = func.args.args
    values: dict[str, ast.expr] = {}
    with_defaults = params[len(params) - len(func.args.defaults) :]
    for param, default in zip(with_defaults, func.args.defaults, strict=True):
        values[param.arg] = default
    if call is not None:
        for param, arg in zip(params, call.args, strict=False):
            values[param.arg] = arg
        values.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
    out: dict[str, list[str]] = {}
    for name, node in values.items():
        try:
            literal = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            continue
        if isinstance(literal, str):
            out[name] = [literal]
        elif isinstance(literal, list | tuple) and all(isinstance(x, str) for x in literal):
            out[name] = list(literal)
    return out


class _SessionReader:
    """Walks a session function (and the module helpers it passes the session to)."""

    def __init__(self, tree: ast.Module, path: str) -> None:
        self.path = path
        self.constants = _constants(tree)
        self.helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}

    def read(
        self,
        session: NoxSession,
        func: ast.FunctionDef,
        call: ast.Call | None = None,
        depth: int = 0,
    ) -> None:
        if not func.args.args:
            return
        param = func.args.args[0].arg
        reader = _Args({**self.constants, **_param_defaults(func, call)})
        for node in ast.walk(func):
            if not isinstance(node, ast.Call):
                continue
            helper = self.helpers.get(node.func.id) if isinstance(node.func, ast.Name) else None
            passes_session = any(isinstance(a, ast.Name) and a.id == param for a in node.args)
            if helper is not None and passes_session and depth < 3 and helper is not func:
                self.read(session, helper, node, depth + 1)
                continue
            if not isinstance(node.func, ast.Attribute):
                continue
            owner = node.func.value
            if not (isinstance(owner, ast.Name) and owner.id == param):
                continue
            words, groups, unknown = reader.words(list(node.args))
            where = f"{self.path}:{node.lineno}"
            method = node.func.attr
            spec = None
            if method in ("install", "conda_install", "install_and_run_script"):
                spec = parse_install(["pip", "install", *words], where)
            elif method in ("run", "run_install", "run_always"):
                spec = parse_install(words, where)
                session.runs_pytest |= bool({"pytest", "py.test"} & set(words))
                session.runs_unittest |= "unittest" in words
            if spec is not None:
                spec.groups += groups
                spec.unknown += unknown
                session.installs.append(spec)


def read_noxfile(text: str, path: str = "noxfile.py") -> list[NoxSession]:
    """The sessions of a noxfile with what they install (empty for unparseable files).

    Calls of module-level helpers that get the session (``tests_impl(session, extras="x")``)
    are followed, with the helper's literal parameter values.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    reader = _SessionReader(tree, path)
    sessions: list[NoxSession] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        marks = [_is_session_decorator(d) for d in node.decorator_list]
        if not any(ok for ok, _ in marks):
            continue
        name = next((n for ok, n in marks if ok and n), node.name)
        session = NoxSession(name, node.lineno)
        reader.read(session, node)
        sessions.append(session)
    return sessions
