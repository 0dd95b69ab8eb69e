"""``equivalence_tests`` pieces without a sandbox: which functions qualify, inputs from type hints,
the options, and the verifier template itself (run on this host: the reference's outcomes with
``--expect``, then grading of honest, wrong and hostile implementations)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from repogym.pipelines._synthesis.equiv import (
    Target,
    _import_aliases,
    annotation_type,
    draw_inputs,
    equivalence_targets,
    import_root,
    impure_use,
    recorded_types,
    value_type,
    verifier_module,
)
from repogym.shipped import read as template
from repogym.spec import EquivalenceOptions, describe_error

V = verifier_module()


# ------------------------------------------------------------------------------ values


def test_same_is_strict_on_types_and_tolerant_on_floats() -> None:
    assert V.same(1, 1) and not V.same(1, 1.0) and not V.same(True, 1)
    assert V.same(0.1 + 0.2, 0.3) and not V.same(0.3, 0.31)
    assert V.same(float("nan"), float("nan")) and not V.same(float("nan"), 1.0)
    assert V.same(float("inf"), float("inf")) and not V.same(float("inf"), float("-inf"))
    assert V.same([1, (2.0, "a")], [1, (2.0, "a")]) and not V.same([1, 2], (1, 2))
    assert V.same({"a": [1.0]}, {"a": [1.0 + 1e-12]}) and not V.same({"a": 1}, {"b": 1})
    assert V.same({1, 2}, {2, 1}) and not V.same({1}, frozenset({1}))
    assert V.same(1 + 2j, 1 + 2j) and V.same(b"x", b"x") and not V.same(b"x", "x")


def test_outcomes_compare_kind_value_mutation_and_exception_type() -> None:
    ret = ("return", 3, None)
    assert V.outcomes_match(ret, ("return", 3, None))
    assert not V.outcomes_match(ret, ("return", 3, ([1], {})))
    assert not V.outcomes_match(ret, ("raise", "ValueError", None))
    assert V.outcomes_match(("raise", "KeyError", None), ("raise", "KeyError", None))
    assert not V.outcomes_match(("raise", "KeyError", None), ("raise", "LookupError", None))
    assert not V.outcomes_match(ret, None)


def test_plain_values_and_the_restricted_unpickler() -> None:
    value = (1, 2.5, 3j, "x", b"ab", b"", bytearray(b"q"), {1, 2}, frozenset([3]), [None, True])
    assert V.is_plain(value) and V.same(V.loads(V.dumps(value)), value)
    assert not V.is_plain(Path("/x")) and not V.is_plain([object()])

    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, ("echo pwned",))

    with pytest.raises(pickle.UnpicklingError, match="refused global"):
        V.loads(pickle.dumps(Evil(), 2))


# ------------------------------------------------------------------------------ targets

SOURCE = '''\
import random
from time import time as now_ish
from typing import Callable, Optional


def good(a: int, b: Optional[list[str]] = None, *, c: "dict[str, float]") -> int:
    """Fine."""
    return a


def plain(x, id=0):
    return x + id


async def coro(x):
    return x


def gen(x):
    yield x


def takes_callable(f: Callable[[int], int], x: int) -> int:
    return f(x)


def rolls(n):
    return random.randint(0, n)


def stamped(x):
    return (x, now_ish())


def prints(x):
    print(x)
    return x


def nothing():
    return 1


class K:
    def method(self, x):
        return x


def twice(x):
    return x


def twice(x):  # noqa: F811
    return x * 2
'''


def test_which_functions_qualify_and_why_not() -> None:
    found = equivalence_targets(SOURCE, "pkg/m.py")
    targets = {e.info.name: e for e in found if isinstance(e, Target)}
    reasons = {e[0].name: e[1] for e in found if isinstance(e, tuple)}
    assert set(targets) == {"good", "plain"}
    assert reasons == {
        "coro": "async function",
        "gen": "generator function",
        "takes_callable": "takes or returns callables, generators or files",
        "rolls": "uses time, randomness or I/O",
        "stamped": "uses time, randomness or I/O",
        "prints": "uses time, randomness or I/O",
        "nothing": "no parameters",
        "twice": "defined more than once",
    }
    import ast

    tree = ast.parse(SOURCE)
    aliases = _import_aliases(tree)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert impure_use(funcs["rolls"], aliases) == "uses random.randint"
    assert impure_use(funcs["stamped"], aliases) == "uses time.time"
    assert impure_use(funcs["prints"], aliases) == "uses print"
    assert impure_use(funcs["plain"], aliases) is None  # a parameter called id is not id()
    good = targets["good"]
    assert [(p.name, p.kind, p.required) for p in good.params] == [
        ("a", "positional", True),
        ("b", "positional", False),
        ("c", "keyword", True),
    ]
    assert good.hypothesis_ready and not targets["plain"].hypothesis_ready


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("int", int),
        ("'str'", str),
        ("Optional[int]", typing.Optional[int]),  # noqa: UP045
        ("int | None", typing.Optional[int]),  # noqa: UP045
        ("list[float]", list[float]),
        ("List[bytes]", list[bytes]),
        ("tuple[int, ...]", tuple[int, ...]),
        ("Tuple[int, str]", tuple[int, str]),
        ("Dict[str, bool]", dict[str, bool]),
        ("frozenset[int]", frozenset[int]),
        ("list", None),
        ("Foo", None),
        ("list[Foo]", None),
    ],
)
def test_annotation_types(text: str, expected: Any) -> None:
    import ast

    assert annotation_type(ast.parse(text, mode="eval").body) == expected


def test_hypothesis_draws_are_deterministic_per_seed(tmp_path: Path) -> None:
    (target,) = [
        e
        for e in equivalence_targets(SOURCE, "pkg/m.py")
        if isinstance(e, Target) and e.info.name == "good"
    ]
    one = draw_inputs(target, 15, 3, home=tmp_path)
    assert one == draw_inputs(target, 15, 3, home=tmp_path) and len(one) >= 10
    assert one != draw_inputs(target, 15, 4, home=tmp_path)
    for args, kwargs in one:
        assert type(args[0]) is int and set(kwargs) == {"c"} and V.is_plain((args, kwargs))
    plain = [e for e in equivalence_targets(SOURCE, "pkg/m.py") if isinstance(e, Target)]
    assert draw_inputs(next(t for t in plain if t.info.name == "plain"), 10, 0) == []


def test_types_inferred_from_recorded_arguments(tmp_path: Path) -> None:
    assert value_type([1, 2]) is int and value_type([True]) is bool
    assert value_type([1, None]) == typing.Optional[int]  # noqa: UP045
    assert value_type([1, 2.5]) == typing.Union[int, float]  # noqa: UP007
    assert value_type([[1], []]) == list[int] and value_type([[]]) is None
    assert value_type([(1, "a"), (2, "b")]) == tuple[int, str]
    assert value_type([(1,), (2, 3)]) == tuple[int, ...]
    assert value_type([{"a": 1.0}]) == dict[str, float]
    assert value_type([1, "a"]) is None and value_type([]) is None
    (plain,) = [
        e
        for e in equivalence_targets(SOURCE, "pkg/m.py")
        if isinstance(e, Target) and e.info.name == "plain"
    ]
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [(([1, 2],), {}), (([3], 5), {})]
    types = recorded_types(plain, calls)
    assert types == {"x": list[int]}  # id has a default: it keeps it
    drawn = draw_inputs(plain, 10, 0, home=tmp_path, inferred=types)
    assert drawn and all(type(args[0]) is list and len(args) == 1 for args, _ in drawn)
    assert recorded_types(plain, [(([1],), {}), (("a",), {})]) == {}


def test_import_root() -> None:
    assert import_root("src/pkg/m.py", "pkg.m") == "src"
    assert import_root("pkg/__init__.py", "pkg") == ""
    assert import_root("m.py", "m") == ""
    assert import_root("src/pkg/m.py", "other.m") is None
    assert import_root("src/pkg/m.py", "__main__") is None


def test_options_are_checked_in_one_line() -> None:
    assert EquivalenceOptions().reward == "graded"
    for bad, message in [
        ({"min_inputs": 60}, "min_inputs: Value error, 60 is larger than max_inputs (50)"),
        ({"max_recorded": 0, "hypothesis_examples": 5}, "hypothesis_examples (0 + 5) cannot"),
        ({"examples": 4}, "less than or equal to 3"),
        ({"call_timeout": 0}, "greater than 0"),
        ({"nonsense": 1}, "Extra inputs are not permitted"),
    ]:
        with pytest.raises(ValidationError) as info:
            EquivalenceOptions.model_validate(bad)
        text = describe_error(info.value)
        assert message in text and "\n" not in text


# ------------------------------------------------------------------------------ recorder


def test_the_recorder_keeps_distinct_plain_calls_of_module_level_functions(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    (project / "src" / "mk").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "src" / "mk" / "__init__.py").write_text("")
    (project / "src" / "mk" / "core.py").write_text(
        "import functools\n"
        "def add(a, b=2, *rest, scale=1, **kw):\n"
        "    return (a + b + sum(rest)) * scale\n"
        "@functools.lru_cache()\n"
        "def sq(x):\n"
        "    return x * x\n"
        "class K:\n"
        "    def m(self, x):\n"
        "        return sq(x)\n"
    )
    (project / "tests" / "test_core.py").write_text(
        "from mk.core import K, add, sq\n"
        "def helper(x):\n"
        "    return x\n"
        "def test_it():\n"
        "    assert add(1) == add(1) == 3\n"
        "    assert add(1, 2, 3, scale=2, z=1) == 12\n"
        "    assert add(1, 2, z=object()) == 3\n"
        "    assert K().m(3) == sq(3) == 9\n"
        "    assert helper(sq) is sq\n"
    )
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, as_name in [
        ("equiv_record.py", "equiv_record.py"),
        ("trace_calls.py", "trace_calls.py"),
        ("equiv_verifier.py", "equiv_verifier.py"),
    ]:
        (tools / as_name).write_bytes(template(name))
    out = tmp_path / "calls.json"
    res = subprocess.run(
        [sys.executable, str(tools / "equiv_record.py"), "--root", str(project), "--out",
         str(out), "--max", "5", "--", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        env=dict(os.environ, PYTHONPATH=str(project / "src")),
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    report = json.loads(out.read_text())
    assert [c[2] for c in report["called"]] == ["add", "sq", "m"], res.stdout + res.stderr
    functions = {f["name"]: f for f in report["functions"]}
    assert set(functions) == {"add", "sq"}  # methods and test helpers are not recorded
    add = functions["add"]
    assert add["module"] == "mk.core" and add["calls"] == 4
    assert add["reprs"] == ["((1, 2), {'scale': 1})", "((1, 2, 3), {'scale': 2, 'z': 1})"]
    assert add["rejected"] == {"not plain": 1}
    assert V.loads(__import__("base64").b64decode(add["inputs"][1])) == (
        (1, 2, 3),
        {"scale": 2, "z": 1},
    )
    assert functions["sq"]["reprs"] == ["((3,), {})"]  # through lru_cache's wrapper


# ------------------------------------------------------------------------------ verifier

REFERENCE = '''\
def scale(values, factor=2):
    """Multiply every value; ValueError on an empty list."""
    if not values:
        raise ValueError("empty")
    values.append(None)
    values.pop()
    return [v * factor for v in values]
'''

CALLS = [
    (([1, 2],), {}),
    (([0.5],), {"factor": 3}),
    (([],), {}),
    ((["a"],), {"factor": 2}),
    (([1, 2, 3],), {"factor": -1}),
]


class HostTask:
    """A task's ``tests/`` and workspace laid out on this host (no sandbox, no record)."""

    def __init__(self, root: Path, python: str = sys.executable) -> None:
        self.python = python
        self.tests = root / "tests"
        self.workspace = root / "workspace"
        self.logs = root / "logs"
        for folder in (self.tests, self.workspace / "pkg", self.logs):
            folder.mkdir(parents=True)
        (self.workspace / "pkg" / "__init__.py").write_text("")
        (self.tests / "verifier.py").write_bytes(template("equiv_verifier.py"))
        config = {
            "workdir": str(self.workspace),
            "source_root": "",
            "module": "pkg.mod",
            "function": "scale",
            "call_timeout": 1.0,
            "batch_size": 2,
            "reward_mode": "graded",
            "python": python,
        }
        (self.tests / "config.json").write_text(json.dumps(config))
        blobs = [V.dumps(call) for call in CALLS]
        (self.tests / "inputs.pkl").write_bytes(pickle.dumps(blobs, 2))

    def module(self, source: str) -> None:
        (self.workspace / "pkg" / "mod.py").write_text(source)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, REPOGYM_VERIFIER_LOGS=str(self.logs))
        return subprocess.run(
            [self.python, "-I", "-S", str(self.tests / "verifier.py"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def expect(self) -> list[dict[str, Any]]:
        out = self.tests.parent / "expect.json"
        res = self.run("--expect", str(out))
        assert res.returncode == 0, res.stderr
        payload = json.loads(out.read_text())
        assert payload["import_error"] is None and payload["integrity"] == []
        outcomes: list[dict[str, Any]] = payload["outcomes"]
        return outcomes

    def grade(self) -> tuple[float | None, dict[str, Any]]:
        """The reward (None when the verifier wrote none) and the details."""
        for name in os.listdir(self.logs):
            os.unlink(self.logs / name)
        self.run()
        if not (self.logs / "reward.txt").is_file():
            return None, {}
        reward = float((self.logs / "reward.txt").read_text())
        return reward, json.loads((self.logs / "reward-details.json").read_text())


@pytest.fixture
def host_task(tmp_path: Path) -> HostTask:
    task = HostTask(tmp_path)
    task.module(REFERENCE)
    expected = [V.outcome_of(raw) for raw in task.expect()]
    (task.tests / "expected.pkl").write_bytes(pickle.dumps(expected, 2))
    (task.tests / "reference.py").write_text(REFERENCE)
    return task


def test_expect_records_values_mutations_and_exceptions(tmp_path: Path) -> None:
    task = HostTask(tmp_path)
    task.module(
        REFERENCE.replace("    values.append(None)\n    values.pop()\n", "    values.append(0)\n")
    )
    raw = task.expect()
    kinds = [r["k"] for r in raw]
    assert kinds == ["return", "return", "raise", "return", "return"]
    assert raw[2]["t"] == "ValueError"
    first = V.outcome_of(raw[0])
    assert first == ("return", [2, 4, 0], (([1, 2, 0],), {}))  # with the argument it changed


def test_an_equivalent_rewrite_scores_one_and_the_stub_zero(host_task: HostTask) -> None:
    host_task.module(
        "def scale(values, factor=2):\n"
        "    if len(values) == 0:\n"
        "        raise ValueError('nothing')\n"
        "    out = []\n"
        "    for v in values:\n"
        "        out.append(v * factor)\n"
        "    return out\n"
    )
    reward, details = host_task.grade()
    assert reward == 1.0 and details["resolved"] and details["matched"] == 5
    assert details["isolation"] in (["landlock"], ["uid"])
    host_task.module("def scale(values, factor=2):\n    raise NotImplementedError\n")
    reward, details = host_task.grade()
    assert reward == 0.0 and details["failures"] == {"mismatch": 5}


PY36 = Path("/root/.pyenv/versions/3.6.15/bin/python")


@pytest.mark.skipif(not PY36.is_file(), reason="no Python 3.6 on this machine")
def test_the_verifier_runs_on_python_3_6(tmp_path: Path) -> None:
    task = HostTask(tmp_path, str(PY36))
    task.module(REFERENCE)
    expected = [V.outcome_of(raw) for raw in task.expect()]
    assert [e[0] for e in expected] == ["return", "return", "raise", "return", "return"]
    (task.tests / "expected.pkl").write_bytes(pickle.dumps(expected, 2))
    task.module("def scale(values, factor=2):\n    return [v * factor for v in values]\n")
    reward, details = task.grade()
    assert reward == pytest.approx(0.8) and details["isolation"] == ["landlock"]


def test_a_wrong_implementation_earns_its_share(host_task: HostTask) -> None:
    host_task.module("def scale(values, factor=2):\n    return [v * factor for v in values]\n")
    reward, details = host_task.grade()
    assert reward == pytest.approx(0.8) and not details["resolved"]
    host_task.module(
        "def scale(values, factor=2):\n    return [float(v * factor) for v in values]\n"
    )
    assert (host_task.grade()[0] or 0) < 0.8  # 2 == 2.0 does not count: types are exact


HOSTILE = {
    "reads the reference": """\
import runpy
def scale(values, factor=2):
    return runpy.run_path({reference!r})["scale"](values, factor)
""",
    "reads the expected outcomes": """\
import pickle
def scale(values, factor=2):
    with open({expected!r}, "rb") as fh:
        pickle.load(fh)
    return None
""",
    "writes a reward": """\
def scale(values, factor=2):
    for name in ("reward.txt", "reward.json"):
        with open({logs!r} + "/" + name, "w") as fh:
            fh.write("1")
    raise NotImplementedError
""",
    "kills the verifier": """\
import os, signal
def scale(values, factor=2):
    os.kill(os.getppid(), signal.SIGKILL)
""",
    "never returns": """\
def scale(values, factor=2):
    while True:
        try:
            pass
        except BaseException:
            pass
""",
    "fails to import": "import no_such_module\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_implementations_earn_nothing(host_task: HostTask, name: str) -> None:
    host_task.module(
        HOSTILE[name].format(
            reference=str(host_task.tests / "reference.py"),
            expected=str(host_task.tests / "expected.pkl"),
            logs=str(host_task.logs),
        )
    )
    if name == "reads the reference":
        # The attack works where the hidden files are readable (a plain interpreter) …
        res = subprocess.run(
            [sys.executable, "-c", "import pkg.mod; print(pkg.mod.scale([1, 2]))"],
            cwd=host_task.workspace,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.stdout.strip() == "[2, 4]", res.stderr
    # … and earns nothing through the verifier.
    reward, details = host_task.grade()
    if name == "kills the verifier" and reward is None:
        return  # Landlock < 6 cannot scope signals: no reward at all, never a paid one
    assert reward == 0.0, details
    if name == "never returns":
        assert details["failures"] == {"timeout": 5}
    if name == "fails to import":
        assert details["import_error"].startswith("ModuleNotFoundError")


ISOLATION_PROBE = """\
import json, os, sys
sys.path.insert(0, {templates!r})
import equiv_verifier as v
if {no_landlock}:
    v.landlock = lambda hidden, writable: False
if {no_uid}:
    v.drop_to_nobody = lambda: False
how = v.isolate([{hidden!r}], ["/tmp"], [{secret!r}])
try:
    open({secret!r}).read()
    readable = True
except OSError:
    readable = False
print(json.dumps({{"how": how, "readable": readable, "uid": os.getuid()}}))
"""


@pytest.mark.parametrize(
    ("no_landlock", "no_uid", "how"),
    [(False, False, "landlock"), (True, False, "uid"), (True, True, "none")],
)
def test_isolation_falls_back_and_says_so(
    tmp_path: Path, no_landlock: bool, no_uid: bool, how: str
) -> None:
    if how == "uid" and os.geteuid() != 0:
        pytest.skip("switching to nobody needs root")
    hidden = tmp_path / "tests"
    hidden.mkdir(mode=0o700)
    secret = hidden / "expected.pkl"
    secret.write_text("answers")
    (tmp_path / "equiv_verifier.py").write_bytes(template("equiv_verifier.py"))
    script = ISOLATION_PROBE.format(
        templates=str(tmp_path),
        no_landlock=no_landlock,
        no_uid=no_uid,
        hidden=str(hidden),
        secret=str(secret),
    )
    res = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["how"] == how
    assert report["readable"] is (how == "none")
    if how == "uid":
        assert report["uid"] == 65534
