"""Procedural code edits (``pipelines/_synthesis/ops.py``) and the call tracer shipped into tasks
(``shipped/scripts/trace_calls.py``)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repogym.pipelines._synthesis import mutants, ops
from repogym.pipelines._synthesis.mutants import OPERATORS, Mutation, python_mutants
from repogym.pipelines._synthesis.ops import (
    called_keys,
    python_functions,
    stub_function,
    trace_script,
)
from repogym.shipped import infra

TRACER = Path(infra.__file__).parent / "scripts" / ops.TRACE_SCRIPT
OLD_PYTHONS = Path("/root/.pyenv/versions")

SAMPLE = '''\
"""Module docstring."""
import abc
import functools
from typing import overload


class Cache:
    """A tiny cache."""

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self.data = {}

    def get(self, key, default=None):  # look things up
        """Return the value for key."""
        if key not in self.data:
            return default
        return self.data[key]

    @functools.lru_cache(maxsize=None)
    def window(self, items: list[int], k: int = 3) -> list[list[int]]:
        return [items[i : i + k] for i in range(len(items) - k + 1)]

    @property
    def full(self):
        return len(self.data) >= self.size

    @full.setter
    def full(self, value):
        self.size = len(self.data) if value else self.size + 1

    class Inner:
        def deep(self):
            return 1

    @abc.abstractmethod
    def todo(self):
        ...

    @overload
    def over(self, x: int) -> int: ...


def outer(x):
    def inner(y):
        return x < y

    return inner(x)


async def fetch(url, *, retries=3):
    """Fetch."""
    for _ in range(retries):
        await sleep(1)
    return url


def gen(n):
    i = 0
    while i < n:
        yield i
        i += 1


def stub():
    """Docstring only."""


def not_impl():
    raise NotImplementedError("later")
'''


def by_name(text: str = SAMPLE) -> dict[str, ops.FunctionInfo]:
    return {
        f.qualname + (f"@{f.line}" if f.name == "full" else ""): f
        for f in python_functions(text, "m.py")
    }


def only(mutants: list[Mutation], operator: str) -> list[str]:
    return [m.text for m in mutants if m.operator == operator]


def mutate_body(body: str, operator: str, prefix: str = "def f(a, b, xs, n):\n") -> list[str]:
    """The new function texts of one operator's mutants of a function with ``body``."""
    text = prefix + textwrap.indent(textwrap.dedent(body), "    ")
    return only(python_mutants(text, "m.py", operators=[operator]), operator)


def body_of(text: str, prefix: str = "def f(a, b, xs, n):\n") -> str:
    assert text.startswith(prefix)
    return textwrap.dedent(text[len(prefix) :])


# --------------------------------------------------------------------------- python_functions


def test_functions_inventory() -> None:
    funcs = by_name()
    assert list(funcs) == [
        "Cache.__init__",
        "Cache.get",
        "Cache.window",
        "Cache.full@24",
        "Cache.full@28",
        "Cache.Inner.deep",
        "Cache.todo",
        "Cache.over",
        "outer",
        "outer.<locals>.inner",
        "fetch",
        "gen",
        "stub",
        "not_impl",
    ]
    get = funcs["Cache.get"]
    assert (get.line, get.def_line, get.end_line) == (14, 14, 18)
    assert get.docstring == "Return the value for key."
    assert get.params == "self, key, default=None"
    assert get.returns is None
    assert get.signature == "def get(self, key, default=None):"
    assert get.statements == 3 and not get.trivial and get.mutable
    window = funcs["Cache.window"]
    assert (window.line, window.def_line) == (20, 21)  # co_firstlineno: the decorator's line
    assert window.params == "self, items: list[int], k: int = 3"
    assert window.returns == "list[list[int]]"
    assert window.decorators == ("functools.lru_cache(maxsize=None)",)
    assert window.key == ("m.py", 20)
    assert funcs["Cache.full@24"].is_property and funcs["Cache.full@28"].is_property
    assert funcs["Cache.todo"].is_abstract and funcs["Cache.todo"].trivial
    assert funcs["Cache.over"].is_overload
    assert funcs["fetch"].is_async and funcs["fetch"].signature.startswith("async def fetch(")
    assert funcs["fetch"].params == "url, *, retries=3"
    assert funcs["gen"].is_generator and not funcs["outer"].is_generator
    assert funcs["stub"].trivial and funcs["not_impl"].trivial
    assert not any(f.mutable for f in funcs.values() if f.is_property or f.trivial)


def test_functions_keys_match_the_interpreter(tmp_path: Path) -> None:
    """``line`` is ``co_firstlineno`` and ``qualname`` is ``__qualname__``, for every function."""
    text = SAMPLE.replace("await sleep(1)", "pass")
    path = tmp_path / "m.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("m_sample", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    seen: dict[tuple[str, int], tuple[str, str]] = {}
    for code in _codes(compile(text, str(path), "exec")):
        if code.co_name != "<module>" and code.co_flags & 0x1 and not code.co_name.startswith("<"):
            seen[(code.co_qualname, code.co_firstlineno)] = (code.co_name, code.co_qualname)
    funcs = python_functions(text, "m.py")
    assert {(f.qualname, f.line) for f in funcs} == set(seen)
    assert (
        module.Cache.window.__wrapped__.__code__.co_firstlineno
        == by_name(text)["Cache.window"].line
    )


def _codes(code: object) -> list:
    out = [code]
    for const in getattr(code, "co_consts", ()):
        if hasattr(const, "co_code"):
            out.extend(_codes(const))
    return out


def test_functions_edge_cases() -> None:
    assert python_functions("def broken(:\n", "x.py") == []
    assert python_functions("", "x.py") == []
    text = "def f(a,  # first\n      b: 'x)' = ')'  # tricky\n      ) -> 'int':  # done\n    return a\n"
    (f,) = python_functions(text, "x.py")
    assert f.params == "a,  # first\n      b: 'x)' = ')'  # tricky\n      "
    assert f.returns == "'int'"
    assert f.signature.endswith("-> 'int':")
    unicode = "def f():\n    s = 'héllo wörld'; return s < 'z'\n"
    (g,) = python_functions(unicode, "u.py")
    assert g.statements == 2


# --------------------------------------------------------------------------- operators


@pytest.mark.parametrize(
    ("operator", "body", "expected"),
    [
        ("compare", "return a < b\n", ["return a <= b\n"]),
        ("compare", "return a>=b\n", ["return a>b\n"]),
        ("compare", "return a is  not b\n", ["return a is b\n"]),
        ("compare", "return a not in b\n", ["return a in b\n"]),
        ("compare", "return (a) == (b)\n", ["return (a) != (b)\n"]),
        (
            "compare",
            "return a < b < n\n",
            ["return a <= b < n\n", "return a < b <= n\n"],
        ),
        ("boolean", "return a and b and n\n", ["return a or b or n\n"]),
        ("boolean", "return (a or\n        b)\n", ["return (a and\n        b)\n"]),
        ("negate_condition", "if a:\n    g()\n", ["if not a:\n    g()\n"]),
        ("negate_condition", "while not a:\n    g()\n", ["while a:\n    g()\n"]),
        ("negate_condition", "if a or b:\n    g()\n", ["if not (a or b):\n    g()\n"]),
        ("negate_condition", "if a < b:\n    g()\n", ["if not (a < b):\n    g()\n"]),
        ("negate_condition", "if a == b:\n    g()\n", []),  # that is the `compare` mutant
        ("off_by_one", "return range(n)\n", ["return range(n - 1)\n", "return range(n + 1)\n"]),
        (
            "off_by_one",
            "return xs[:n]\n",
            ["return xs[:n - 1]\n", "return xs[:n + 1]\n"],
        ),
        ("off_by_one", "return xs[a + 1]\n", ["return xs[a]\n", "return xs[a + 2]\n"]),
        ("off_by_one", "return xs[-1]\n", ["return xs[0]\n", "return xs[-2]\n"]),
        ("off_by_one", "return xs[0]\n", ["return xs[1]\n"]),
        ("off_by_one", "return xs[a]\n", []),  # a key, not a bound
        (
            "off_by_one",
            "return xs[a or 1:]\n",
            ["return xs[(a or 1) - 1:]\n", "return xs[(a or 1) + 1:]\n"],
        ),
        (
            "off_by_one",
            "return range(1, n)\n",
            [
                "return range(0, n)\n",
                "return range(2, n)\n",
                "return range(1, n - 1)\n",
                "return range(1, n + 1)\n",
            ],
        ),
        (
            "remove_guard",
            "if a:\n    return 1\ng()\nreturn 2\n",
            ["g()\nreturn 2\n"],
        ),
        (
            "remove_guard",
            "for x in xs:\n    if x:  # skip\n        continue\n    g(x)\n",
            ["for x in xs:\n    g(x)\n"],
        ),
        ("remove_guard", "if a:\n    return 1\n", []),  # the only statement
        ("remove_guard", "if a:\n    return 1\nelse:\n    g()\nreturn 2\n", []),
        (
            "remove_statement",
            "x = a\nx = x + 1\nx += b\nself.c = x\ng(x)\nreturn x\n",
            [
                "x = a\nx += b\nself.c = x\ng(x)\nreturn x\n",
                "x = a\nx = x + 1\nself.c = x\ng(x)\nreturn x\n",
                "x = a\nx = x + 1\nx += b\ng(x)\nreturn x\n",
                "x = a\nx = x + 1\nx += b\nself.c = x\nreturn x\n",
            ],
        ),
        ("remove_statement", "a = 1; g()\nreturn a\n", []),  # shares its line
        ("swap_args", "return g(a, b, n=1)\n", ["return g(b, a, n=1)\n"]),
        (
            "swap_args",
            "return g(a, b.c, *xs)\n",
            ["return g(b.c, a, *xs)\n"],
        ),
        ("swap_args", "return isinstance(a, b)\n", []),
        ("constant", "return True\n", ["return False\n"]),
        ("constant", "return 0\n", ["return 1\n"]),
        ("constant", "return 1\n", ["return 0\n"]),
        ("constant", "return 7\n", ["return 8\n"]),
        ("constant", "return -1\n", ["return 0\n"]),
        ("constant", "return 2.5\n", ["return 3.5\n"]),
        ("constant", "return 'abc'\n", ["return ''\n"]),
        ("constant", "return rb'abc'\n", ["return b''\n"]),
        ("constant", "return ''\n", []),
        ("constant", "return a + 1\n", ["return a\n"]),
        ("constant", "return 1 + a\n", ["return a\n"]),
        ("constant", "return 1 - a\n", ["return 0 - a\n"]),
        ("constant", "return (a) + 1\n", []),
        ("constant", "return not (1 + (not a))\n", []),
        ("off_by_one", "return xs[(1) + (not a)]\n", ["return xs[(2) + (not a)]\n"]),
        ("constant", "print('hi')\nreturn f'{a}-1'\n", []),
        ("return_none", "return a\n", ["return None\n"]),
        ("return_none", "return a, b\n", ["return None\n"]),
        ("return_none", "return None\n", []),
        (
            "exception_type",
            "raise ValueError('bad')\n",
            ["raise RuntimeError('bad')\n"],
        ),
        (
            "exception_type",
            "if a:\n    raise NotImplementedError\nreturn 1\n",
            ["if a:\n    raise ValueError\nreturn 1\n"],
        ),
        ("exception_type", "raise MyError('bad')\n", []),
        ("exception_type", "raise SystemExit(1)\n", []),
    ],
)
def test_operator(operator: str, body: str, expected: list[str]) -> None:
    assert [body_of(t) for t in mutate_body(body, operator)] == expected


def test_exception_type_skips_shadowed_builtins() -> None:
    text = "from errors import ValueError\n\n\ndef f(a):\n    raise ValueError(a)\n"
    assert python_mutants(text, "m.py", operators=["exception_type"]) == []


def test_formatting_and_comments_preserved() -> None:
    text = (
        "# header comment\n"
        "def f(a,b):   # odd   spacing\n"
        "    x=a  <  b   # compare them\n"
        "    # a comment line\n"
        "    if   x :\n"
        "        return   [a,   b][0]\n"
        "    return b\n"
        "\n"
        "TAIL = 1  # untouched\n"
    )
    mutants = python_mutants(text, "m.py")
    assert mutants
    original = text.splitlines(keepends=True)
    for m in mutants:
        lines = m.text.splitlines(keepends=True)
        assert lines[:2] == original[:2] and lines[-2:] == original[-2:]
        changed = [a for a, b in zip(original, lines, strict=False) if a != b]
        if len(lines) == len(original):
            assert len(changed) == 1  # one edited line; everything else byte-identical
        assert "# compare them" in m.text or m.operator == "remove_statement"
    compare = next(m for m in mutants if m.operator == "compare")
    assert compare.text == text.replace("x=a  <  b", "x=a  <=  b")


def test_docstrings_fstrings_annotations_and_messages_are_left_alone() -> None:
    text = (
        "def f(a: int = 1) -> 'str':\n"
        '    """Doc 1 < 2 and True."""\n'
        "    'a bare string'\n"
        "    b: 'int' = a\n"
        "    log.info('message %s', 1)\n"
        "    assert a, 'assertion message'\n"
        "    raise ValueError(f'{a} bad')\n"
    )
    for m in python_mutants(text, "m.py"):
        assert '"""Doc 1 < 2 and True."""' in m.text
        assert "'a bare string'" in m.text
        assert "f'{a} bad'" in m.text and "'assertion message'" in m.text
        assert "'message %s'" in m.text or m.operator == "remove_statement"
        assert "b: 'int'" in m.text and "def f(a: int = 1) -> 'str':" in m.text
    assert {m.operator for m in python_mutants(text, "m.py")} <= {
        "remove_statement",
        "exception_type",
        "constant",
    }


def test_every_mutant_compiles_differs_and_has_a_stable_id() -> None:
    mutants = python_mutants(SAMPLE, "pkg/m.py")
    assert len(mutants) > 20
    assert {m.operator for m in mutants} <= set(OPERATORS)
    texts = {m.text for m in mutants}
    assert len(texts) == len(mutants) and SAMPLE not in texts
    assert len({m.mutation_id for m in mutants}) == len(mutants)
    for m in mutants:
        compile(m.text, m.path, "exec")
        assert m.path == "pkg/m.py" and m.description.startswith(m.operator)
    assert [m.mutation_id for m in python_mutants(SAMPLE, "pkg/m.py")] == [
        m.mutation_id for m in mutants
    ]
    funcs = by_name()
    mutated = {m.function for m in mutants}
    assert mutated == {
        "Cache.__init__",
        "Cache.get",
        "Cache.window",
        "outer",
        "outer.<locals>.inner",
        "fetch",
        "gen",
        "Cache.Inner.deep",
    }
    for m in mutants:
        info = next(f for f in funcs.values() if f.qualname == m.function)
        assert m.function_line == info.line and info.def_line <= m.line <= info.end_line


def test_round_robin_limits_and_filters() -> None:
    mutants = python_mutants(SAMPLE, "m.py", limit=8)
    assert len(mutants) == 8
    assert len({m.function for m in mutants}) == 8  # one per function before any second
    firsts = python_mutants(SAMPLE, "m.py", per_function=1)
    assert len(firsts) == len({m.function for m in firsts})
    only_get = python_mutants(SAMPLE, "m.py", functions={"Cache.get"})
    assert only_get and {m.function for m in only_get} == {"Cache.get"}
    # within a function, operators take turns
    ops_of_get = [m.operator for m in only_get]
    assert ops_of_get == ["compare", "remove_guard", "return_none", "return_none"]
    assert python_mutants(SAMPLE, "m.py", functions=set()) == []
    assert python_mutants("def f(:\n", "m.py") == []
    assert {m.operator for m in python_mutants(SAMPLE, "m.py", operators=["constant"])} == {
        "constant"
    }


def test_unicode_crlf_and_tabs() -> None:
    text = "def f(a):\r\n\ts = 'héllo wörld'; t = 'ü' if a < 2 else 'x'\r\n\treturn s, t\r\n"
    mutants = python_mutants(text, "m.py")
    compare = next(m for m in mutants if m.operator == "compare")
    assert compare.text == text.replace("a < 2", "a <= 2")
    for m in mutants:
        assert m.text.count("\r\n") == text.count("\r\n") and "\n" not in m.text.replace("\r\n", "")
        assert "\t" in m.text
    strings = [m.text for m in mutants if m.operator == "constant"]
    assert text.replace("'héllo wörld'", "''") in strings


# --------------------------------------------------------------------------- property test

_NAMES = st.sampled_from(["a", "b", "xs", "n", "self.v"])
_ATOMS = (
    _NAMES
    | st.integers(0, 3).map(str)
    | st.sampled_from(["True", "None", "'s'", "'é✓'", "-1", "2.5", "(a)", "( 1 )", "-(n)"])
)
_EXPRS = st.recursive(
    _ATOMS,
    lambda inner: st.one_of(
        st.tuples(
            inner,
            st.sampled_from(["<", "<=", ">", ">=", "==", "!=", "is", "is not", "in", "not in"]),
            inner,
        ).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(inner, st.sampled_from(["+", "-", "*", "|"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        inner.map(lambda e: f"(not {e})"),
        st.tuples(_NAMES, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(_NAMES, inner, inner).map(lambda t: f"{t[0]}[{t[1]}:{t[2]}]"),
        st.lists(inner, max_size=3).map(lambda xs: f"g({', '.join(xs)})"),
        inner.map(lambda e: f"range({e})"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]} -  # note\n        {t[1]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
    ),
    max_leaves=6,
)


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _block(depth: int) -> st.SearchStrategy[list[str]]:
    simple = st.one_of(
        _EXPRS.map(lambda e: [f"x = {e}"]),
        _EXPRS.map(lambda e: [f"n += {e}"]),
        _EXPRS.map(lambda e: [f"g({e}, n)  # call"]),
        _EXPRS.map(lambda e: [f"return {e}"]),
        _EXPRS.map(lambda e: [f"xs[{e}] = n"]),
        st.just(["raise ValueError('bad')"]),
        st.just(["if a:", "    return n"]),
    )
    if depth == 0:
        stmt = simple
    else:
        inner = _block(depth - 1)
        stmt = st.one_of(
            simple,
            st.tuples(_EXPRS, inner).map(lambda t: [f"if {t[0]}:", *_indent(t[1])]),
            st.tuples(_EXPRS, inner, inner).map(
                lambda t: [f"if {t[0]}:", *_indent(t[1]), "else:", *_indent(t[2])]
            ),
            st.tuples(_EXPRS, inner).map(lambda t: [f"while {t[0]}:", *_indent(t[1]), "    break"]),
            st.tuples(_EXPRS, inner).map(
                lambda t: [f"for i in range({t[0]}):", *_indent(t[1]), "    continue"]
            ),
        )
    return st.lists(stmt, min_size=1, max_size=4).map(lambda ss: [line for s in ss for line in s])


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # `x is 1` in generated code
@settings(max_examples=120)
@given(_block(2))
def test_property_every_candidate_compiles(lines: list[str]) -> None:
    text = "import os\n\n\ndef fn(a, b, xs, n):\n" + "\n".join(_indent(lines)) + "\n\n\nEND = 1\n"
    compile(text, "gen.py", "exec")
    original = ast.dump(ast.parse(text))
    parsed = ops._parse(text, "gen.py")
    assert parsed is not None
    tree, src = parsed
    (func,) = ops._functions(tree, src, "gen.py")
    # Every candidate edit is valid Python and changes the program (the compile filter is only
    # a safety net).
    for cand in mutants._Mutator(src, func, mutants._module_names(tree)).run():
        new = ops._apply(text, cand.edits)
        compile(new, "gen.py", "exec")
        assert ast.dump(ast.parse(new)) != original, cand
        assert new.startswith("import os\n\n\ndef fn(a, b, xs, n):\n") and new.endswith(
            "\n\n\nEND = 1\n"
        )
    for m in python_mutants(text, "gen.py"):
        assert m.text != text and m.function == "fn"


# --------------------------------------------------------------------------- stub_function


def test_stub_method_keeps_docstring_and_comments_above() -> None:
    new = stub_function(SAMPLE, "m.py", "Cache.get")
    assert new == SAMPLE.replace(
        '        """Return the value for key."""\n'
        "        if key not in self.data:\n"
        "            return default\n"
        "        return self.data[key]\n",
        '        """Return the value for key."""\n        raise NotImplementedError\n',
    )


def test_stub_decorated_nested_async_and_docstringless() -> None:
    window = stub_function(SAMPLE, "m.py", "Cache.window")
    assert window is not None
    assert (
        "    @functools.lru_cache(maxsize=None)\n    def window(self, items: list[int], k: int = 3) -> list[list[int]]:\n        raise NotImplementedError\n\n    @property"
        in window
    )
    inner = stub_function(SAMPLE, "m.py", "outer.<locals>.inner")
    assert (
        inner is not None
        and "    def inner(y):\n        raise NotImplementedError\n\n    return inner(x)" in inner
    )
    fetch = stub_function(SAMPLE, "m.py", "fetch")
    assert fetch is not None
    assert (
        'async def fetch(url, *, retries=3):\n    """Fetch."""\n    raise NotImplementedError\n\n\ndef gen'
        in fetch
    )
    deep = stub_function(SAMPLE, "m.py", "Cache.Inner.deep")
    assert (
        deep is not None
        and "        def deep(self):\n            raise NotImplementedError\n" in deep
    )
    for new in (window, inner, fetch, deep):
        compile(new, "m.py", "exec")


def test_stub_generator_keeps_its_kind() -> None:
    new = stub_function(SAMPLE, "m.py", "gen")
    assert new is not None
    assert "def gen(n):\n    raise NotImplementedError\n    yield\n\n\ndef stub" in new
    one_line = stub_function("def g(n): yield n\n", "m.py", "g")
    assert one_line == "def g(n): raise NotImplementedError; yield\n"


def test_stub_tabs_one_liners_and_body_comments() -> None:
    text = (
        "class A:\n"
        "\tdef m(self, x):  # kept\n"
        "\t\t# how it works: secret\n"
        "\t\ty = x * 2  # double\n"
        "\t\treturn y  # done\n"
        "\t\t# trailing note\n"
        "\n"
        "\t# about the next one\n"
        "\tdef n(self): return 1\n"
    )
    new = stub_function(text, "m.py", "A.m")
    assert new == (
        "class A:\n"
        "\tdef m(self, x):  # kept\n"
        "\t\traise NotImplementedError\n"
        "\n"
        "\t# about the next one\n"
        "\tdef n(self): return 1\n"
    )
    assert stub_function(text, "m.py", "A.n") == text.replace(
        "def n(self): return 1", "def n(self): raise NotImplementedError"
    )


def test_stub_refuses() -> None:
    assert stub_function(SAMPLE, "m.py", "stub") is None  # docstring only
    assert stub_function(SAMPLE, "m.py", "not_impl") is None
    assert stub_function(SAMPLE, "m.py", "Cache.todo") is None
    assert stub_function(SAMPLE, "m.py", "missing") is None
    assert stub_function("def f(:\n", "m.py", "f") is None
    # two functions share the qualname (property getter and setter): a line picks one
    assert stub_function(SAMPLE, "m.py", "Cache.full") is None
    setter = stub_function(SAMPLE, "m.py", "Cache.full", line=28)
    assert setter is not None
    assert "    def full(self, value):\n        raise NotImplementedError\n" in setter
    assert "        return len(self.data) >= self.size\n" in setter
    assert stub_function(SAMPLE, "m.py", "Cache.full", line=25) is not None  # the def line


# --------------------------------------------------------------------------- tracer


PACKAGE = """\
import functools


def used(x):
    return helper(x) + 1


def helper(x):
    return x * 2


def unused(x):
    return x


@functools.lru_cache(maxsize=None)
def cached(x):
    return x


class Shape:
    @property
    def area(self):
        return 3

    def never(self):
        return 0

    def spin(self):
        def inner():
            return 1

        return inner()
"""
TESTS = """\
import threading

from pkg import core


def helper_in_tests():
    return 1


def test_calls():
    assert core.used(2) == 5
    assert core.cached(1) == 1
    assert core.Shape().spin() == 1
    t = threading.Thread(target=lambda: core.Shape().area)
    t.start()
    t.join()
    assert helper_in_tests() == 1
"""


def make_project(root: Path, tests: str = TESTS) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "core.py").write_text(PACKAGE)
    (root / "tests").mkdir()
    (root / "tests" / "test_core.py").write_text(tests)
    (root / "tests" / "conftest.py").write_text("def pytest_configure(config):\n    pass\n")
    (root / "pytest.ini").write_text("[pytest]\n")


def run_tracer(
    root: Path, *args: str, python: str = sys.executable, mode: str = "auto"
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = root / "out" / "calls.json"
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [python, str(TRACER), "--root", str(root), "--out", str(out), "--mode", mode, "--", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return proc, out


@pytest.mark.parametrize("mode", ["auto", "profile"])  # 3.11: the C profiler, a Python one
def test_tracer_keys_match_python_functions(tmp_path: Path, mode: str) -> None:
    make_project(tmp_path)
    proc, out = run_tracer(
        tmp_path, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/", mode=mode
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    report = json.loads(out.read_text())
    keys = called_keys(report)
    funcs = {f.qualname: f for f in python_functions(PACKAGE, "pkg/core.py")}
    expected = {"used", "helper", "cached", "Shape.area", "Shape.spin", "Shape.spin.<locals>.inner"}
    assert {q for q, f in funcs.items() if f.key in keys} == expected
    assert keys == {funcs[q].key for q in expected}  # no tests, conftest, pytest or lambdas
    names = {(e[0], e[1]): e[2] for e in report["called"]}
    assert all(names[funcs[q].key] == funcs[q].name for q in expected)
    assert not (tmp_path / "out" / "calls.json.tmp").exists()


def test_tracer_failing_suite_keeps_exit_code_and_writes(tmp_path: Path) -> None:
    make_project(tmp_path, TESTS + "\n\ndef test_fails():\n    assert core.helper(1) == 3\n")
    proc, out = run_tracer(tmp_path, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/")
    assert proc.returncode == 1
    assert "1 failed, 1 passed" in proc.stdout
    assert ("pkg/core.py", 8) in called_keys(json.loads(out.read_text()))


def test_tracer_script_exit_and_argv(tmp_path: Path) -> None:
    make_project(tmp_path)
    script = tmp_path / "tools" / "run.py"
    script.parent.mkdir()
    script.write_text(
        "import sys\nsys.path.insert(0, sys.argv[1])\nfrom pkg import core\n"
        f"print(sys.argv[2:], sys.path[1] == {str(script.parent)!r}, __name__)\n"
        "core.helper(1)\nsys.exit(3)\n"
    )
    proc, out = run_tracer(tmp_path, str(script), str(tmp_path), "x", "y")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.strip() == "['x', 'y'] True __main__"
    assert called_keys(json.loads(out.read_text())) == {("pkg/core.py", 8)}
    proc, out = run_tracer(
        tmp_path, "-c", "from pkg import core; core.unused(1); raise KeyError('k')"
    )
    assert proc.returncode == 1 and "KeyError: 'k'" in proc.stderr
    assert called_keys(json.loads(out.read_text())) == {("pkg/core.py", 12)}
    proc, _ = run_tracer(tmp_path)
    assert proc.returncode == 2 and "usage" in proc.stderr
    proc, _ = run_tracer(tmp_path, "-c", "pass", mode="fast")
    assert proc.returncode == 2 and "--mode is one of" in proc.stderr


def _old_python(version: str) -> str:
    candidates = sorted(OLD_PYTHONS.glob(f"{version}.*/bin/python{version}"))
    if not candidates:
        pytest.skip(f"no Python {version} installed here")
    return str(candidates[-1])


@pytest.mark.parametrize(
    ("version", "mode"), [("3.6", "auto"), ("3.6", "profile"), ("3.12", "auto"), ("3.13", "lsprof")]
)
def test_tracer_on_other_pythons(tmp_path: Path, version: str, mode: str) -> None:
    """Python 3.6 syntax and runtime (C profiler or Python profile function); 3.12+ uses
    sys.monitoring (asked for the C profiler it falls back to a Python profile function)."""
    python = _old_python(version)
    compiled = subprocess.run(
        [
            python,
            "-c",
            "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')",
            str(TRACER),
        ],
        capture_output=True,
        text=True,
    )
    assert compiled.returncode == 0, compiled.stderr
    make_project(tmp_path)
    (tmp_path / "tests" / "test_ut.py").write_text(
        "import unittest\nfrom pkg import core\n\n\nclass T(unittest.TestCase):\n"
        "    def test_a(self):\n        self.assertEqual(core.used(2), 5)\n"
        "        self.assertEqual(core.Shape().area, 3)\n"
        "    def test_b(self):\n        self.assertEqual(core.cached(2), 3)\n"
        "    def test_thread(self):\n        import threading\n"
        "        t = threading.Thread(target=core.Shape().spin)\n        t.start()\n        t.join()\n"
    )
    proc, out = run_tracer(tmp_path, "-m", "unittest", "tests.test_ut", python=python, mode=mode)
    assert proc.returncode == 1 and "FAILED (failures=1)" in proc.stderr
    funcs = {f.qualname: f.key for f in python_functions(PACKAGE, "pkg/core.py")}
    assert called_keys(json.loads(out.read_text())) == {
        funcs[q]
        for q in (
            "used",
            "helper",
            "Shape.area",
            "cached",
            "Shape.spin",
            "Shape.spin.<locals>.inner",
        )
    }


def _tracer_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trace_calls_under_test", TRACER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tracer_exclusions_follow_the_test_infrastructure_rule() -> None:
    tracer = _tracer_module()
    paths = [
        "pkg/core.py",
        "tests/helpers.py",
        "pkg/test/util.py",
        "pkg/testing/tools.py",
        "test_pkg.py",
        "pkg/core_test.py",
        "conftest.py",
        "pkg/tests.py",
        "Tests/x.py",
        "a.tests/x.py",
        "pkg/testutils.py",
        "src/pkg/contest.py",
    ]
    for path in paths:
        assert tracer.excluded(path) == infra.is_test_path(path), path
    for path in (".venv/lib/x.py", "venv/x.py", "lib/site-packages/x.py", ".tox/x.py"):
        assert tracer.excluded(path)
    assert trace_script() == TRACER.read_bytes()


def test_called_keys_ignores_malformed_entries() -> None:
    report = {"called": [["a.py", 3, "f"], ["b.py", True], ["c.py"], "x", [1, 2], ["d.py", 4]]}
    assert called_keys(report) == {("a.py", 3), ("d.py", 4)}
    assert called_keys({}) == set() and called_keys({"called": "no"}) == set()
