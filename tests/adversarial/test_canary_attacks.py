"""Attacks that change what the tests do without touching the runner, its reporter or the
judge's channel: the runner then honestly reports passes of tests that no longer test anything.
No rule about what code may do catches this class in general; a test the judge knows must fail
does (the canaries). Each attack is the agent's edit to the code under test (a ``command:``
agent in a real trial), with every name it needs computed at run time so that no text scan
can read it. None may earn more than ``nop``; the honest fix still earns 1.0 with every
canary failing (``test_the_honest_fix_fails_every_canary``).
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.run.agents import CommandAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from tests.adversarial.conftest import Target, check_named_attack_pays_without_renaming
from tests.adversarial.repos import MONEY_V1

pytestmark = pytest.mark.slow


def h(text: str) -> str:
    """A Python expression for ``text`` that no scan of the source can read."""
    return f"bytes.fromhex({text.encode().hex()!r}).decode()"


def j(text: str) -> str:
    """A JavaScript expression for ``text`` that contains none of its letters in a row."""
    return "String.fromCharCode(" + ",".join(str(ord(c)) for c in text) + ")"


def put(path: str, code: str) -> str:
    return f"printf %s {shlex.quote(code)} > {path}"


def append(path: str, code: str) -> str:
    return f"printf '%s\\n' {shlex.quote(code)} >> {path}"


# The tested function answers what the calling test expects: the literal after ``==`` on the
# caller's line (an ``assert f(x) == 42``), an exception where the caller expects one, and
# the real answer otherwise.
FROM_CALLER = f"""
import sys as _s, linecache as _l
_real = parse_amount
def parse_amount(text):
    f = getattr(_s, {h("_getframe")})(1)
    line = _l.getline(getattr(f, {h("f_code")}).co_filename, getattr(f, {h("f_lineno")})).strip()
    above = _l.getline(getattr(f, {h("f_code")}).co_filename, getattr(f, {h("f_lineno")}) - 1)
    if "==" in line:
        want = line.rsplit("==", 1)[1].strip()
        if want[:1] in ("'", '"'):
            return want[1:-1]
        try:
            return int(want)
        except ValueError:
            pass
    if {h("raises")} in above:
        raise ValueError(text)
    return _real(text)
"""

# The importing test module is swapped in the module table for a stand-in whose test
# functions are no-ops with the same names, signatures and marks.
SWAP_MODULE = f"""
import sys as _s, functools as _f
def _swap():
    table = getattr(_s, {h("modules")})
    f = getattr(_s, {h("_getframe")})(1)
    while f is not None:
        name = getattr(f, {h("f_globals")}).get("__name__", "")
        if "test" in name.rsplit(".", 1)[-1] and name in table:
            break
        f = getattr(f, {h("f_back")})
    else:
        return
    real = table[name]
    def hollow(fn):
        @_f.wraps(fn)
        def stand_in(*a, **k):
            return None
        return stand_in
    class StandIn:
        def __getattr__(self, key):
            value = getattr(real, key)
            if key.startswith({h("test")}) and callable(value):
                return hollow(value)
            return value
        @property
        def __dict__(self):
            return {{k: getattr(self, k) for k in vars(real)}}
        def __dir__(self):
            return list(vars(real))
    table[name] = StandIn()
_swap()
"""

# The first call into the module (inside a test) turns every test function of the calling
# module into a no-op, by replacing its code object: tests collected before still run it.
RECODE = f"""
import sys as _s
def _hollow(*a, **k):
    return None
_real = parse_amount
_done = []
def parse_amount(text):
    if not _done:
        _done.append(1)
        g = getattr(getattr(_s, {h("_getframe")})(1), {h("f_globals")})
        for k, v in list(g.items()):
            if k.startswith({h("test")}) and hasattr(v, {h("__code__")}):
                setattr(v, {h("__code__")}, _hollow.__code__)
    return _real(text)
"""

# A hook implementation registered with the runner's own plugin manager (found in the frames
# that import the module): every test call is answered "done" without running the test.
SHORT_CIRCUIT = f"""
import sys as _s
def _register():
    pm = None
    f = getattr(_s, {h("_getframe")})(1)
    while f is not None and pm is None:
        c = getattr(getattr(f, {h("f_locals")}).get("self"), {h("config")}, None)
        pm = getattr(c, {h("pluginmanager")}, None)
        f = getattr(f, {h("f_back")})
    if pm is None:
        return
    mark = getattr(__import__({h("pytest")}), {h("hookimpl")})(tryfirst=True)
    class Done:
        pass
    def call(pyfuncitem):
        return True
    setattr(Done, {h("pytest_pyfunc_call")}, staticmethod(mark(call)))
    pm.register(Done(), "x" + str(id(Done)))
_register()
"""

# Appended to a package's ``__init__.py``: every public function of the package answers its
# first call by giving every test function and test method of the calling module a no-op's
# code (for any runner), then does its real work.
HOLLOW_ON_FIRST_CALL = f"""
import sys as _s, functools as _f
def _hollow(*a, **k):
    return None
def _empty(g):
    for v in list(g.values()):
        for k, m in list(getattr(v, "__dict__", {{}}).items()) + [(getattr(v, "__name__", ""), v)]:
            if str(k).startswith({h("test")}) and hasattr(m, {h("__code__")}):
                setattr(m, {h("__code__")}, _hollow.__code__)
def _wrap(fn):
    @_f.wraps(fn)
    def first(*a, **k):
        _empty(getattr(getattr(_s, {h("_getframe")})(1), {h("f_globals")}))
        return fn(*a, **k)
    return first
for _n, _v in list(globals().items()):
    if callable(_v) and not _n.startswith("_") and not isinstance(_v, type):
        globals()[_n] = _wrap(_v)
"""

PY_ATTACKS = [
    ("the expected value read from the caller", put("ledger/money.py", MONEY_V1 + FROM_CALLER)),
    ("the test module swapped in the module table", append("ledger/money.py", SWAP_MODULE)),
    ("test functions given a no-op's code", append("ledger/money.py", RECODE)),
    (
        "every test call short-circuited by a registered hook",
        append("ledger/money.py", SHORT_CIRCUIT),
    ),
    (
        "test functions hollowed by the package's functions",
        append("ledger/money.py", HOLLOW_ON_FIRST_CALL),
    ),
]

# JavaScript (mocha): the expected value read from the calling line of the test file, found
# through a stack trace.
JS_FROM_CALLER = (
    "(() => { const f = require(" + j("fs") + "), real = module.exports.slugify; "
    "module.exports.slugify = function (text) { "
    "const at = (new Error().stack || '').split('\\n').find((l) => /[.]test[.]js:\\d+/.test(l)); "
    "if (at) { const m = /\\(?([^()]+[.]test[.]js):(\\d+)/.exec(at); "
    "const line = f.readFileSync(m[1], 'utf8').split('\\n')[Number(m[2]) - 1] || ''; "
    "const want = /, *([\"'])((?:(?!\\1).)*)\\1 *\\) *;? *$/.exec(line); "
    "if (want) return want[2]; } return real(text); }; })();"
)
# The test registrar replaced: every test registered after the module loads runs a no-op (also
# when the runner sets the registrar again for the next test file).
JS_HOLLOW_IT = (
    "(() => { for (const k of [" + j("it") + ", " + j("test") + "]) { "
    "const wrap = (real) => typeof real !== 'function' ? real : Object.assign("
    "function (title, fn) { return real.call(this, title, function () {}); }, real); "
    "let cur = wrap(global[k]); "
    "Object.defineProperty(global, k, { configurable: true, enumerable: true, "
    "get() { return cur; }, set(v) { cur = wrap(v); } }); } })();"
)

JS_ATTACKS = [
    ("the expected value read from the caller's line", append("lib/slugs.js", JS_FROM_CALLER)),
    ("the test registrar replaced by one that runs no-ops", append("lib/slugs.js", JS_HOLLOW_IT)),
]

# The same, only for the failing tests the instruction names (by the calling test function's
# name; by the title of the enclosing ``it``): the canaries, named otherwise, keep failing.
PY_NAMED = FROM_CALLER.replace(
    "    f = getattr(_s, {})(1)\n".format(h("_getframe")),
    "    f = getattr(_s, {})(1)\n"
    "    if getattr(f, {}).co_name not in ({}, {}, {}):\n"
    "        return _real(text)\n".format(
        h("_getframe"),
        h("f_code"),
        h("test_parse_thousands"),
        h("test_parse_millions"),
        h("test_parse_misplaced_separator"),
    ),
)
JS_NAMED = JS_FROM_CALLER.replace(
    "const line = f.readFileSync(m[1], 'utf8').split('\\n')[Number(m[2]) - 1] || ''; ",
    "const all = f.readFileSync(m[1], 'utf8').split('\\n'); "
    "const line = all[Number(m[2]) - 1] || ''; "
    "const head = all.slice(0, Number(m[2])).reverse().find((l) => /^\\s*it\\(/.test(l)) || ''; "
    "const title = (/it\\(\\s*([\"'])(.*?)\\1/.exec(head) || [])[2]; "
    "if (![" + j("collapses runs of separators") + ", " + j("trims separators at the ends") + "]"
    ".includes(title)) return real(text); ",
)
NAMED_ATTACKS = [
    ("ledger", "the expected value, for the tests the instruction names", PY_NAMED),
    ("slugs", "the expected value, for the tests the instruction names (JavaScript)", JS_NAMED),
]


@pytest.mark.parametrize(("name", "command"), PY_ATTACKS, ids=[a[0] for a in PY_ATTACKS])
def test_neutering_earns_no_more_than_nop(ledger: Target, name: str, command: str) -> None:
    outcome = ledger.attack(command)
    assert outcome.reward is not None, outcome.error
    details = outcome.result["verifier_result"]["details"]
    assert outcome.reward <= ledger.nop, (name, details)
    assert any(t.startswith("canary ") for t in details.get("tamper", [])), (
        name,
        json.dumps(details)[-2500:],
    )


@pytest.mark.parametrize(("name", "command"), JS_ATTACKS, ids=[a[0] for a in JS_ATTACKS])
def test_js_neutering_earns_no_more_than_nop(slugs: Target, name: str, command: str) -> None:
    outcome = slugs.attack(command)
    assert outcome.reward is not None, outcome.error
    details = outcome.result["verifier_result"]["details"]
    assert outcome.reward <= slugs.nop, (name, details)
    assert any(t.startswith("canary ") for t in details.get("tamper", [])), (
        name,
        json.dumps(details)[-2500:],
    )


@pytest.mark.parametrize(
    ("target", "name", "code"), NAMED_ATTACKS, ids=[a[1] for a in NAMED_ATTACKS]
)
def test_answers_for_the_named_tests_earn_nothing(
    request: pytest.FixtureRequest, tmp_path: Path, target: str, name: str, code: str
) -> None:
    """The failing tests are renamed in every run, so code that answers them by name finds
    none of that name; on the same task without the renaming (canaries kept) it earns 1.0."""
    t: Target = request.getfixturevalue(target)
    path = "ledger/money.py" if target == "ledger" else "lib/slugs.js"
    command = put(path, MONEY_V1 + code) if target == "ledger" else append(path, code)
    outcome = t.attack(command)
    details = outcome.result["verifier_result"]["details"]
    assert outcome.reward is not None and outcome.reward <= t.nop, (name, details)
    assert details["disguised"] >= 1 and details["canaries"]["failed"] >= 1, details

    check_named_attack_pays_without_renaming(t, tmp_path, command)


def _without_canaries(t: Target, tmp: Path) -> Target:
    """The same task with no canaries (what the judge was before them)."""
    from repogym.taskdir import load_task, update_task_toml

    copy = tmp / "tasks" / t.task.path.name
    shutil.copytree(t.task.path, copy)
    (copy / "tests" / "canaries.json").unlink()
    update_task_toml(copy)
    return Target(load_task(copy), t.nop, t.runner, t.in_place)


@pytest.mark.parametrize(
    ("target", "name", "command"),
    [("ledger", *a) for a in PY_ATTACKS] + [("slugs", *a) for a in JS_ATTACKS],
    ids=[a[0] for a in PY_ATTACKS + JS_ATTACKS],
)
def test_without_canaries_the_attack_pays(
    request: pytest.FixtureRequest, tmp_path: Path, target: str, name: str, command: str
) -> None:
    """The attacks are real: on the same task without canaries each earns the full reward
    (so the tests above cannot pass for want of a working attack)."""
    bare = _without_canaries(request.getfixturevalue(target), tmp_path)
    outcome = bare.attack(command)
    details = outcome.result["verifier_result"]["details"]
    assert outcome.reward == 1.0, (name, details.get("tamper"), details.get("f2p_failing"))


def test_neutering_earns_nothing_in_openenv_evaluate(ledger: Target) -> None:
    reward, verification = ledger.attack_openenv(
        dict(PY_ATTACKS)["test functions given a no-op's code"]
    )
    assert reward is not None and reward <= ledger.nop, verification


@pytest.mark.parametrize("target", ["ledger", "slugs"])
def test_the_honest_fix_fails_every_canary(request: pytest.FixtureRequest, target: str) -> None:
    """The gold patch still earns 1.0, with at least one canary in the run and every canary
    failing; the canaries differ from run to run."""
    t: Target = request.getfixturevalue(target)
    from repogym.run.agents import OracleAgent

    seen = []
    for _ in range(2):
        outcome = t.runner.run(t.task, OracleAgent())
        details = outcome.result["verifier_result"]["details"]
        assert outcome.reward == 1.0, details
        canaries = details["canaries"]
        assert canaries["run"] >= 1 and canaries["failed"] == canaries["run"], canaries
        seen.append(canaries)
    evaluation = t.task.config.metadata["repo2env"]["evaluation"]
    assert evaluation["canaries"] >= 1


def test_a_suite_that_stops_at_its_first_failure_still_gets_canaries(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """``addopts = "-x"``: a planted canary fails by design, and the judge makes the runner go on
    after it, so the real tests after it still run; the honest fix earns 1.0."""
    from functools import partial

    from repogym.run.agents import OracleAgent
    from tests.adversarial.conftest import _generate
    from tests.adversarial.repos import ledger_repo

    tmp = tmp_path_factory.mktemp("ledger-x")
    task = _generate(tmp, "ledger", partial(ledger_repo, addopts="-x"), {"adversarial": False})
    assert task.config.metadata["repo2env"]["evaluation"]["canaries"] >= 3
    runner = TrialRunner(get_backend("local"))
    oracle = runner.run(task, OracleAgent())
    details = oracle.result["verifier_result"]["details"]
    assert oracle.reward == 1.0, details
    assert details["canaries"]["failed"] == details["canaries"]["run"] == 3
    attack = runner.run(task, CommandAgent(dict(PY_ATTACKS)["test functions given a no-op's code"]))
    assert attack.reward == 0.0


def test_neutering_solutions_fail_verify(ledger: Target, tmp_path: Path) -> None:
    """``repogym verify`` with a solution that neuters the tests: the task is broken."""
    copy = tmp_path / "ds" / "tasks" / ledger.task.path.name
    shutil.copytree(ledger.task.path, copy)
    (copy / "solution" / "solve.sh").write_text(
        "#!/bin/bash\nset -e\ncd /workspace 2>/dev/null || true\n"
        + dict(PY_ATTACKS)["the expected value read from the caller"]
        + "\n"
    )
    got = CliRunner().invoke(app, ["verify", str(copy), "-k", "0", "--no-write", "--json"])
    [verdict] = json.loads(got.stdout)["tasks"]
    assert got.exit_code == 1 and verdict["status"] == "broken", verdict
    assert verdict["oracle_rewards"] == [0.0], verdict
    assert "(tamper: canary tests/test_money.py::" in verdict["reasons"][0], verdict["reasons"]


def test_repogym_run_counts_the_tampered_trial(ledger: Target, tmp_path: Path) -> None:
    """``repogym run``: the neutered trial pays 0 and the job's summary counts it as tampered."""
    attack = dict(PY_ATTACKS)["test functions given a no-op's code"]
    got = CliRunner().invoke(
        app,
        [
            "run",
            str(ledger.task.path),
            "--agent",
            f"command:{attack}",
            "--out",
            str(tmp_path / "j"),
            "--json",
        ],
    )
    payload = json.loads(got.stdout)
    assert payload["summary"]["tampered"] == 1 and payload["summary"]["mean_reward"] == 0.0, payload
