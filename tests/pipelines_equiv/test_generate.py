"""``equivalence_tests`` on a real repository in the real sandbox: which functions become tasks
and why the others do not, the tasks as other tools read them (validate --deep, verify), what
agents earn (an equivalent rewrite, a wrong one, reward hacks), and that nothing agent-visible
holds the reference or its outcomes."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from repogym.pipelines._synthesis.equiv import verifier_module
from repogym.run.agents import CommandAgent, NopAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.workflows import generate

pytestmark = pytest.mark.slow

V = verifier_module()
PIPELINE = "equivalence_tests"


@pytest.fixture(scope="module")
def dataset(mathkit: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("equiv") / "ds"
    result = generate(GenerationInput(repo=str(mathkit), pipeline=PIPELINE, out=out, jobs=2))
    return out, result


def _tasks(out: Path) -> dict[str, Path]:
    """function name → task folder."""
    found = {}
    for toml in sorted((out / "tasks").glob("*/task.toml")):
        data = tomllib.loads(toml.read_text())
        found[data["metadata"]["repo2env"][PIPELINE]["function"]] = toml.parent
    return found


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "repogym.cli", *args], capture_output=True, text=True, timeout=900
    )


def test_kept_functions_and_drop_reasons(dataset: tuple[Path, Any]) -> None:
    out, result = dataset
    assert set(_tasks(out)) == {"clamp", "slugify", "push_all"}
    report = json.loads((out / "generate-report.json").read_text())
    assert report["yield"]["dropped"] == {
        "not deterministic": 1,  # unique_words: set order differs between processes
        "constant output": 1,  # default_config
        "function not called by the tests": 1,  # never_tested
        "uses time, randomness or I/O": 1,  # shuffled: random.shuffle in its body
    }, report["yield"]
    details = {o.candidate.extra["edit"].function: o.detail for o in result.outcomes}
    assert "outcomes differ between runs" in details["unique_words"]
    assert "{'retries': 3, 'timeout': 10}" in details["default_config"]


def test_tasks_validate_and_verify(dataset: tuple[Path, Any]) -> None:
    out, _ = dataset
    res = _cli("validate", "--deep", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    res = _cli("verify", str(out), "--reruns", "1", "--no-write", "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    verdicts = json.loads(res.stdout)["tasks"]
    assert len(verdicts) == 3 and {v["status"] for v in verdicts} == {"verified"}
    for task in _tasks(out).values():
        evaluation = load_task(task).repo2env["evaluation"]
        assert evaluation["status"] == "verified" and evaluation["nop_reward"] == 0.0
        assert evaluation["mutant_kill_rate"] >= 0.5


def test_task_contents(dataset: tuple[Path, Any]) -> None:
    out, _ = dataset
    tasks = _tasks(out)
    clamp = tasks["clamp"]
    sub = load_task(clamp).repo2env[PIPELINE]
    assert sub["module"] == "mathkit.core" and sub["source_root"] == "src"
    assert sub["recorded_inputs"] >= 1 and sub["hypothesis_inputs"] >= 10
    assert sub["exception_cases"] >= 1 and sub["isolation"] == ["landlock"]
    assert load_task(clamp).repo2env["verification"]["mode"] == "clean_room"
    instruction = (clamp / "instruction.md").read_text()
    assert "def clamp(value: int, low: int, high: int) -> int:" in instruction
    assert "> Raises ValueError when ``low`` is greater than ``high``." in instruction
    assert ">>> clamp(5, 0, 10)\n5" in instruction
    stub = (clamp / "environment/repo/src/mathkit/core.py").read_text()
    assert "raise NotImplementedError" in stub and "Raises ValueError when" in stub
    # Examples are shown, never graded: no hidden input is an example call.
    hidden = pickle.loads((clamp / "tests/inputs.pkl").read_bytes())
    calls = [V.loads(blob) for blob in hidden]
    assert ((5, 0, 10), {}) not in calls and len(calls) == sub["inputs"]
    expected = V.loads((clamp / "tests/expected.pkl").read_bytes())
    assert len(expected) == len(calls) and ("raise", "ValueError", None) in expected
    push = load_task(tasks["push_all"]).repo2env[PIPELINE]
    cases = json.loads((tasks["push_all"] / "tests/cases.json").read_text())
    assert any("changes its arguments" in c["expected"] for c in cases), push
    # slugify has no type hint: its recorded arguments are all str, so str is drawn.
    slug = load_task(tasks["slugify"]).repo2env[PIPELINE]
    assert slug["inferred_types"] == ["text"] and sub["inferred_types"] == []
    assert slug["recorded_inputs"] >= 10 and slug["hypothesis_inputs"] >= 10


def _agent_visible(task: Path) -> str:
    parts = [(task / "instruction.md").read_text()]
    for path in sorted((task / "environment").rglob("*")):
        if path.is_file():
            parts.append(path.read_text(errors="replace"))
    return "\n".join(parts)


def test_nothing_agent_visible_holds_the_reference_or_its_outcomes(
    dataset: tuple[Path, Any],
) -> None:
    out, _ = dataset
    for name, task in _tasks(out).items():
        visible = _agent_visible(task)
        env_files = {p.name for p in (task / "environment").rglob("*")}
        assert not env_files & {"expected.pkl", "inputs.pkl", "cases.json", "reference.py"}
        body = [
            line[1:].strip()
            for line in (task / "solution/patch.diff").read_text().splitlines()
            if line.startswith("+") and not line.startswith("+++") and len(line[1:].strip()) > 12
        ]
        assert body, name
        for line in body:
            assert line not in visible, (name, line)
        reference = (task / "tests/reference.py").read_text()
        assert all(line in reference for line in body)
        instruction = (task / "instruction.md").read_text()
        shown = {line for line in instruction.splitlines() if not line.startswith(">>> ")}
        expected = V.loads((task / "tests/expected.pkl").read_bytes())
        distinctive = {repr(e[1]) for e in expected if e[0] == "return" and len(repr(e[1])) >= 8}
        leaked = {text for text in distinctive - shown if text in visible}
        assert not leaked, (name, sorted(leaked)[:3])


def _implement(body: str) -> str:
    """A command agent's shell command that replaces the stub's ``raise`` with ``body``."""
    code = (
        "import pathlib\n"
        "p = pathlib.Path('src/mathkit/core.py')\n"
        f"p.write_text(p.read_text().replace('    raise NotImplementedError\\n', {body!r}, 1))\n"
    )
    return f"python3 - <<'EOF'\n{code}EOF\n"


EQUIVALENT = (
    "    if high < low:\n"
    "        raise ValueError('low is above high')\n"
    "    return max(low, min(value, high))\n"
)
WRONG = "    return max(low, min(value, high))\n"
READ_EXPECTED = (
    "    import pickle\n"
    "    for root in ('/tests', '/proc/1/root/tests'):\n"
    "        try:\n"
    "            blobs = pickle.load(open(root + '/inputs.pkl', 'rb'))\n"
    "            outcomes = pickle.load(open(root + '/expected.pkl', 'rb'))\n"
    "        except OSError:\n"
    "            continue\n"
    "        for blob, outcome in zip(blobs, outcomes):\n"
    "            if pickle.loads(blob) == ((value, low, high), {}):\n"
    "                if outcome[0] == 'raise':\n"
    "                    raise ValueError\n"
    "                return outcome[1]\n"
    "    raise RuntimeError('no answer')\n"
)
IMPORT_REFERENCE = (
    "    import runpy\n"
    "    return runpy.run_path('/tests/reference.py')['clamp'](value, low, high)\n"
)
HOOKS = (
    "cat > src/sitecustomize.py <<'EOF'\n"
    "import runpy\n"
    "import mathkit.core\n"
    "mathkit.core.clamp = runpy.run_path('/tests/reference.py')['clamp']\n"
    "EOF\n"
    "cp src/sitecustomize.py conftest.py && cp src/sitecustomize.py src/mathkit/conftest.py\n"
    "echo 'import sitecustomize' > src/repogym-hook.pth\n"
)
PLANT = (
    "mkdir -p /logs/verifier && echo 1.0 > /logs/verifier/reward.txt && "
    "echo '{\"reward\": 1.0}' > /logs/verifier/reward.json"
)


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner(get_backend("local"))


def test_what_agents_earn(dataset: tuple[Path, Any], runner: TrialRunner) -> None:
    out, _ = dataset
    task = load_task(_tasks(out)["clamp"])
    nop = runner.run(task, NopAgent()).reward
    assert nop == 0.0
    honest = runner.run(task, CommandAgent(_implement(EQUIVALENT)))
    assert honest.reward == 1.0 and honest.reading is not None
    assert honest.reading.details["isolation"] == ["landlock"]
    wrong = runner.run(task, CommandAgent(_implement(WRONG))).reward
    assert wrong is not None and 0.0 < wrong < 1.0
    hacks = {
        "reads the expected outcomes": _implement(READ_EXPECTED),
        "imports the reference": _implement(IMPORT_REFERENCE),
        "start-up hooks and conftest": HOOKS,
        "plants a reward": PLANT,
    }
    for name, command in hacks.items():
        outcome = runner.run(task, CommandAgent(command))
        assert outcome.reward is not None and outcome.reward <= nop, (name, outcome.reward)
        if name == "start-up hooks and conftest":
            dropped = {d["path"] for d in outcome.result["verification"]["dropped"]}
            assert {"conftest.py", "src/sitecustomize.py", "src/repogym-hook.pth"} <= dropped


def test_hacks_earn_nothing_in_place_either(dataset: tuple[Path, Any]) -> None:
    """In place the agent's whole container is what the verifier starts from: the isolation
    and the build-time record still stop these."""
    out, _ = dataset
    task = load_task(_tasks(out)["clamp"])
    in_place = TrialRunner(get_backend("local"), verification="in_place")
    site_hook = (
        'python3 -c "import site, pathlib; d = pathlib.Path(site.getsitepackages()[0]); '
        "(d / 'zz-hook.pth').write_text('import os')\""
    )
    for name, command in {
        "reads the expected outcomes": _implement(READ_EXPECTED),
        "start-up hooks and conftest": HOOKS,
        "plants a reward": PLANT,
        "adds a .pth to site-packages": site_hook + " && " + _implement(EQUIVALENT),
    }.items():
        outcome = in_place.run(task, CommandAgent(command))
        assert outcome.reward == 0.0, (name, outcome.reward, outcome.error)
        if name == "adds a .pth to site-packages":
            assert outcome.reading is not None
            problems = outcome.reading.details.get("integrity") or []
            assert any("zz-hook.pth" in p for p in problems), outcome.reading.details
