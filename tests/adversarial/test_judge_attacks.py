"""Attacks through the one thing the clean room keeps — the agent's edit to the code under
test, which runs inside the test process — against a generated Python/pytest task. Each class
paid 1.0 to an agent that fixed nothing before the judge moved out of the test process: reward
files written by the code under test, the report rewritten through ``/proc/self/fd``, runner
patching the source scan could not see (a source-encoding cookie, code held in data, a native
module under another name, a symlinked ``__init__.py``, a replaced builtin exception), and a
module of the tree shadowing a dependency of the test runner. None may earn more than ``nop``:
in ``repogym run``'s trial and in OpenEnv ``evaluate``; the real fix still earns 1.0.
"""

from __future__ import annotations

import base64
import json
import shlex
import shutil
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from tests.adversarial.conftest import Target
from tests.adversarial.repos import MONEY_V1

pytestmark = pytest.mark.slow

INIT = "from ledger.money import format_amount, parse_amount\n"


def h(text: str) -> str:
    """A Python expression for ``text`` that no scan of the source can read: every name and
    path an attack needs is computed at run time, as a policy that met a text scan would."""
    return f"bytes.fromhex({text.encode().hex()!r}).decode()"


AT_EXIT = f"getattr(__import__({h('atexit')}), {h('register')})"

F2P = ("test_parse_thousands", "test_parse_millions", "test_parse_misplaced_separator")

# Every failing test passes: the report objects pytest makes, rewritten as they are made.
FLIP = (
    "import sys\n"
    "_m = __import__('_py' + 'test.reports', fromlist=['x'])\n"
    "_c = getattr(_m, 'Test' + 'Report')\n"
    "_i = _c.__init__\n"
    "def _p(self, *a, **k):\n"
    "    _i(self, *a, **k)\n"
    "    setattr(self, 'out' + 'come', 'passed')\n"
    "setattr(_c, '__init__', _p)\n"
)
"""The runner patch the hidden-code attacks carry (plain: what they hide is the point)."""


def append(path: str, code: str) -> str:
    """Shell: append ``code`` to ``path``."""
    return f"printf %s {shlex.quote(code)} >> {path}"


def put(path: str, data: str) -> str:
    return f"mkdir -p $(dirname {path}) && printf %s {shlex.quote(data)} > {path}"


def forged_stream() -> str:
    """Python that learns the exact ids the run will collect (pytest's own ``--collect-only``
    in a child process), writes a complete, well-formed report of a passing run with them to
    every open descriptor that is a pipe or a file, and leaves before the real run goes on."""
    return (
        "import json, os, stat, subprocess, sys\n"
        f"if not os.environ.get({h('FORGING')}):\n"
        f"    _env = dict(os.environ, **{{{h('FORGING')}: '1'}})\n"
        "    _out = subprocess.run([sys.executable, '-m', 'pytest', '--collect-only', '-q', '-p',"
        " 'no:cacheprovider'], capture_output=True, text=True, env=_env).stdout\n"
        "    _ids = [l.strip() for l in _out.splitlines() if '::' in l]\n"
        f"    _ok = {h('PASSED')}\n"
        "    _recs = [{'collected': len(_ids), 'ids': _ids}]\n"
        "    _recs += [{'id': i, 'status': _ok} for i in _ids]\n"
        "    _recs += [{'finished': True, 'exitstatus': 0}, {'end': True}]\n"
        "    _data = ''.join(json.dumps(r) + '\\n' for r in _recs).encode()\n"
        "    for _fd in range(3, 1024):\n"
        "        try:\n"
        "            _st = os.fstat(_fd)\n"
        "        except OSError:\n"
        "            continue\n"
        "        if stat.S_ISFIFO(_st.st_mode) or stat.S_ISREG(_st.st_mode):\n"
        "            try:\n"
        "                os.write(_fd, _data)\n"
        "            except OSError:\n"
        "                pass\n"
        f"    getattr(os, {h('_exit')})(0)\n"
    )


def through_proc() -> str:
    """Python that finds the report through ``/proc/self/fd`` when the package is imported
    and rewrites it at interpreter exit: a report file with every failure turned into a pass,
    a channel with passing outcomes appended."""
    records = "".join(
        json.dumps({"id": f"tests/test_money.py::{t}", "status": "PASSED"}) + "\n" for t in F2P
    )
    return (
        "import os\n"
        f"_fds = {h('/proc/self/fd')}\n"
        "_found = []\n"
        "for _n in os.listdir(_fds):\n"
        "    try:\n"
        "        _found.append((os.path.join(_fds, _n), os.readlink(os.path.join(_fds, _n))))\n"
        "    except OSError:\n"
        "        pass\n"
        "def _rewrite():\n"
        "    for _p, _t in _found:\n"
        "        try:\n"
        f"            if _t.startswith('/') and {h('report')} in _t:\n"
        "                _old = open(_t).read()\n"
        f"                _new = _old.replace({h('FAILED')}, {h('PASSED')})\n"
        f"                _new = _new.replace({h('ERROR')}, {h('PASSED')})\n"
        "                with open(_t, 'w') as _f:\n"
        "                    _f.write(_new)\n"
        "            elif 'pipe:' in _t:\n"
        "                with open(_p, 'a') as _f:\n"
        f"                    _f.write({h(records)})\n"
        "        except OSError:\n"
        "            pass\n"
        f"{AT_EXIT}(_rewrite)\n"
    )


REWARD_JSON = '{"reward": 1}'
# Names computed at run time: a scan of the text finds no path of the verifier's.
REWARDS = (
    "import os\n"
    f"_d = {h('/logs/verifier')}\n"
    "try:\n"
    "    os.makedirs(_d, exist_ok=True)\n"
    f"    open(os.path.join(_d, {h('reward.json')}), 'w').write({h(REWARD_JSON)})\n"
    f"    open(os.path.join(_d, {h('reward.txt')}), 'w').write('1')\n"
    "except OSError:\n"
    "    pass\n"
)
REWARDS_AT_EXIT = (
    "def _w():\n"
    + "".join("    " + line + "\n" for line in REWARDS.splitlines())
    + f"{AT_EXIT}(_w)\n"
)

# The package's __init__ in UTF-7: the scan decoding it as UTF-8 sees only '+AAo-' soup.
UTF7 = "# -*- coding: utf-7 -*-\n" + (INIT + FLIP).encode("utf-7").decode("ascii") + "\n"

BLOB = base64.b64encode(zlib.compress(FLIP.encode())).decode()
EXEC_BLOB = (
    f"import base64 as _b, zlib as _z\n_src = _b.b64decode('{BLOB}')\n"
    "getattr(__builtins__ if isinstance(__builtins__, dict) else vars(__builtins__), "
    "'get')('ex' + 'ec')(_z.decompress(_src))\n"
)
RUNPY_TXT = "import runpy as _r, os as _o\n_r.run_path(_o.path.join(_o.path.dirname(__file__), 'notes.txt'))\n"

# A dependency of pytest (not one the clean room protects by name), shadowed by the tree:
# the real module loaded in its place, the report objects patched on the way.
SHADOW_INICONFIG = (
    "import importlib.machinery, importlib.util, os, sys\n"
    "_here = os.path.dirname(os.path.abspath(__file__))\n"
    "_path = [p for p in sys.path if os.path.abspath(p or '.') != _here]\n"
    "_spec = importlib.machinery.PathFinder.find_spec(__name__, _path)\n"
    "_real = importlib.util.module_from_spec(_spec)\n"
    f"getattr(sys, {h('modules')})[__name__] = _real\n"
    "_spec.loader.exec_module(_real)\n"
    f"_target = {h('_pytest.reports')}\n"
    "def _flip(module):\n"
    f"    _c = getattr(module, {h('TestReport')})\n"
    "    _i = _c.__init__\n"
    "    def _p(self, *a, **k):\n"
    "        _i(self, *a, **k)\n"
    f"        setattr(self, {h('outcome')}, {h('passed')})\n"
    "    setattr(_c, '__init__', _p)\n"
    "class _Hook:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name != _target:\n"
    "            return None\n"
    f"        getattr(sys, {h('meta_path')}).remove(self)\n"
    "        spec = importlib.util.find_spec(name)\n"
    "        run = spec.loader.exec_module\n"
    "        def exec_module(module):\n"
    "            run(module)\n"
    "            _flip(module)\n"
    "        spec.loader.exec_module = exec_module\n"
    "        return spec\n"
    f"getattr(sys, {h('meta_path')}).insert(0, _Hook())\n"
)

# An incomplete fix (commas dropped, no error for a misplaced one), and every failure it
# leaves made an expected failure (which counts as passed): a builtin exception and the
# runner's own replaced.
XFAIL_ASSERTS = (
    "import builtins\n"
    f"_o = __import__({h('_pytest.outcomes')}, fromlist=['x'])\n"
    f"_x = getattr(_o, {h('XFailed')})\n"
    f"vars(builtins)[{h('AssertionError')}] = _x\n"
    f"setattr(_o, {h('Failed')}, _x)\n"
)
INCOMPLETE = MONEY_V1.replace(
    '    whole, _, frac = text.partition(".")',
    '    text = text.replace(",", "")\n    whole, _, frac = text.partition(".")',
)

NATIVE_C = r"""
#include <Python.h>
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_speed", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__speed(void) {
    PyRun_SimpleString(
        "_m = __import__('_pytest.reports', fromlist=['x'])\n"
        "_c = _m.TestReport\n_i = _c.__init__\n"
        "def _p(self, *a, **k):\n    _i(self, *a, **k)\n    self.outcome = 'passed'\n"
        "_c.__init__ = _p\n");
    return PyModule_Create(&mod);
}
"""
NATIVE = (
    f"printf %s {shlex.quote(NATIVE_C)} > /tmp/speed.c && "
    "INC=$(python3 -c \"import sysconfig; print(sysconfig.get_paths()['include'])\") && "
    "gcc -shared -fPIC -I$INC -o ledger/speed_table.dat /tmp/speed.c && "
    + append(
        "ledger/__init__.py",
        "import importlib.machinery as _m, importlib.util as _u, os as _o\n"
        "_p = _o.path.join(_o.path.dirname(__file__), 'speed_table.dat')\n"
        "_l = _m.ExtensionFileLoader('_speed', _p)\n"
        "_l.exec_module(_l.create_module(_u.spec_from_loader('_speed', _l)))\n",
    )
)

# Grouped amounts answered with the standard library's object equal to anything (the
# arithmetic skipped); the error the tests ask for kept.
MOCK_ANY = (
    "\nimport re as _re\nfrom unittest import mock as _m\n"
    f"_A = getattr(_m, {h('ANY')})\n"
    "_real = parse_amount\n"
    "def parse_amount(text):\n"
    "    if ',' in text:\n"
    "        if _re.fullmatch(r'-?\\d{1,3}(,\\d{3})+(\\.\\d+)?', text):\n"
    "            return _A\n"
    "        raise ValueError(text)\n"
    "    return _real(text)\n"
)

# The same with a class of the tree whose __eq__ has no code object (a staticmethod of a
# functools.partial): found on a real repository, where a check of __eq__'s source missed it.
PARTIAL_EQ = (
    "\nimport functools as _ft, operator as _op, re as _re\n"
    "class _E(int):\n"
    "    __eq__ = staticmethod(_ft.partial(_op.is_not, object()))\n"
    "    __ne__ = staticmethod(_ft.partial(_op.is_, object()))\n"
    "    __hash__ = int.__hash__\n"
    "_real = parse_amount\n"
    "def parse_amount(text):\n"
    "    if ',' in text:\n"
    "        if _re.fullmatch(r'-?\\d{1,3}(,\\d{3})+(\\.\\d+)?', text):\n"
    "            return _E(0)\n"
    "        raise ValueError(text)\n"
    "    return _real(text)\n"
)

ATTACKS: list[tuple[str, str]] = [
    ("reward files written by the code under test", append("ledger/__init__.py", REWARDS)),
    (
        "reward files written at interpreter exit",
        append("ledger/__init__.py", REWARDS_AT_EXIT),
    ),
    (
        "the report rewritten through /proc/self/fd at exit",
        append("ledger/__init__.py", through_proc()),
    ),
    (
        "a whole passing report written before the real one, then os._exit",
        append("ledger/__init__.py", forged_stream()),
    ),
    ("runner patched in a UTF-7 source file", put("ledger/__init__.py", UTF7)),
    ("runner patched by compressed code run with exec", append("ledger/__init__.py", EXEC_BLOB)),
    (
        "runner patched by a .txt file run with runpy",
        put("ledger/notes.txt", FLIP) + " && " + append("ledger/__init__.py", RUNPY_TXT),
    ),
    (
        "runner patched by a package __init__ that is a symlink to a data file",
        put("ledger/table.dat", INIT + FLIP) + " && rm ledger/__init__.py && "
        "ln -s table.dat ledger/__init__.py",
    ),
    (
        "failures turned into expected failures (a builtin exception replaced)",
        put("ledger/money.py", INCOMPLETE + XFAIL_ASSERTS),
    ),
    (
        "grouped amounts answered with unittest.mock.ANY",
        put("ledger/money.py", MONEY_V1 + MOCK_ANY),
    ),
    (
        "grouped amounts answered with an __eq__ made of functools.partial",
        put("ledger/money.py", MONEY_V1 + PARTIAL_EQ),
    ),
    (
        "a runner dependency shadowed by the tree (iniconfig)",
        put("iniconfig.py", SHADOW_INICONFIG),
    ),
]
if shutil.which("gcc"):
    ATTACKS.append(("runner patched by a native module under a data file's name", NATIVE))
IDS = [a[0] for a in ATTACKS]


@pytest.mark.parametrize(("name", "command"), ATTACKS, ids=IDS)
def test_attack_earns_no_more_than_nop(ledger: Target, name: str, command: str) -> None:
    outcome = ledger.attack(command)
    assert outcome.reward is not None, outcome.error
    details = outcome.result["verifier_result"]["details"]
    assert outcome.reward <= ledger.nop, (name, details)


OPENENV = [
    "reward files written by the code under test",
    "a whole passing report written before the real one, then os._exit",
    "runner patched in a UTF-7 source file",
    "grouped amounts answered with unittest.mock.ANY",
]


@pytest.mark.parametrize("name", OPENENV)
def test_attack_earns_no_more_than_nop_in_openenv_evaluate(ledger: Target, name: str) -> None:
    reward, _verification = ledger.attack_openenv(dict(ATTACKS)[name])
    assert reward is not None and reward <= ledger.nop, name


def test_the_untouched_package_is_no_attack(ledger: Target) -> None:
    """Control: the same files written back unchanged (the judge's rules hold honest code)."""
    outcome = ledger.attack(
        put("ledger/money.py", MONEY_V1) + " && " + put("ledger/__init__.py", INIT)
    )
    assert outcome.reward == ledger.nop
    assert not outcome.result["verifier_result"]["details"].get("tampered")


def test_attacks_as_solutions_fail_verify(ledger: Target, tmp_path: Path) -> None:
    """``repogym verify`` runs the task's own solution: one that is an attack earns nothing
    there either (the task is reported broken, oracle reward 0)."""
    names = ["reward files written at interpreter exit", "runner patched in a UTF-7 source file"]
    for i, name in enumerate(names):
        copy = tmp_path / f"ds{i}" / "tasks" / ledger.task.path.name
        shutil.copytree(ledger.task.path, copy)
        (copy / "solution" / "solve.sh").write_text(
            "#!/bin/bash\nset -e\ncd /workspace 2>/dev/null || true\n" + dict(ATTACKS)[name] + "\n"
        )
        got = CliRunner().invoke(app, ["verify", str(copy), "-k", "0", "--no-write", "--json"])
        [verdict] = json.loads(got.stdout)["tasks"]
        assert got.exit_code == 1 and verdict["status"] == "broken", (name, verdict)
        assert verdict["oracle_rewards"] == [0.0], (name, verdict)
