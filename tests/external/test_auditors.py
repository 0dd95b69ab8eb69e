"""Third-party grader auditors from PyPI, each in a venv of its own, against real repogym trials.

Each tool builds submissions a correct grader must not pay for (hollow programs, planted pytest
hooks, deleted tests, a written reward file, null answers, broken mutants, ...) and asks a grader
for its reward. Here the grader is always a real ``repogym run TASK --agent command:'…' --json``
trial (``trials.py``: the agent lays the submission down in the task's sandbox and the task's own
verifier decides), on two tasks: the ``ledger`` task that the adversarial suite generates with the
real pipeline (pytest, reward mode ``resolved``) and a copy of the ``textstats-word-count`` example
(unittest, reward mode as the example declares it). Before any tool runs, the ``nop`` agent's
reward is taken on each task (the bar) and the fixed file is submitted the same way (it must earn
1.0, so a tool's zeros mean something). The invariant: no submission a tool builds earns more than
``nop``. Two kinds of submission may do part of the work, and are held to the task's reward mode
instead: gameability's broken mutants of the fixed file and falsepass's paid leads (texts it calls
wrong, such as the fixed file with " (this is wrong)" appended), which are first run against an
oracle that does not ask the grader (the fixed file's results on every literal call in the tests):
a lead that behaves like the fixed file is a correct answer and dismissed; a wrong one must earn no
more than ``nop`` under ``resolved`` and less than 1.0 under ``graded`` (partial credit by design,
docs/reward-contract.md). Each tool's own verdict is printed (run with ``-s`` to see it).

The tools, and how each is pointed at a trial (none calls a model or needs Docker):

- ``gradecheck run DIR`` with a ``gradecheck.toml`` whose grade command is ``trials.py grade``:
  gradecheck copies the starting tree, mutates the copy, and the difference from the starting
  tree is what the trial's agent writes.
- ``bohrin``: a library (its command line has only ``power``, ``verify`` and ``conformance``); its
  ``battery()`` builds the candidates in bohrin's venv (``bohrin_candidates.py``), workspace
  templates with parameters such as ``{test_root}`` or ``{reward_path}`` that bohrin leaves to the
  caller to fill. They are filled here for a repogym task and each is submitted to a trial, in
  the task's own verification mode and in ``in_place`` mode (the verifier in the agent's
  container). bohrin's ``coverage_score`` is printed for the results.
- ``gameability``: ``probe_env`` (the body of ``gameability probe``) on a stand-in environment whose
  rubric is a trial, and ``engine.audit`` (the body of ``gameability check`` for one problem)
  whose broken mutants of the fixed file are each submitted to a trial
  (``gameability_driver.py``).
- ``falsepass init FILE.py --dataset ROWS.jsonl`` + ``falsepass audit``: its TRL-style reward
  function mode, with a reward function that runs a trial whose agent writes the completion as
  the file the fix edits. falsepass runs the audit in a ``uv run`` environment of its own.

Venvs are cached under ``~/.cache/repogym-tests/`` (or ``$REPOGYM_TEST_CACHE``), keyed by the
tool's version; a tool that cannot be installed (no network) is skipped with the reason.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES
from tests.external import trials

pytestmark = [pytest.mark.slow, pytest.mark.external]

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("REPOGYM_TEST_CACHE", Path.home() / ".cache" / "repogym-tests"))
TOOLS = {"bohrin": "0.4.2", "gradecheck": "0.1.0", "gameability": "0.3.1", "falsepass": "0.11.0"}
# The interpreter of every tool venv (and of falsepass's own `uv run` environment): repogym's.
BASE_PYTHON = Path(getattr(sys, "_base_executable", sys.executable)).resolve()


# ------------------------------------------------------------------ the tools' venvs


def tool_venv(tool: str) -> Path:
    """A cached venv holding ``tool==TOOLS[tool]`` (and nothing of repogym's)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("the external auditor tests need uv")
    venv = CACHE / f"auditor-{tool}-{TOOLS[tool]}"
    python = venv / "bin" / "python"
    probe = [str(python), "-c", f"import importlib.metadata as m; print(m.version({tool!r}))"]
    if (
        python.exists()
        and subprocess.run(probe, capture_output=True, text=True).stdout.strip() == TOOLS[tool]
    ):
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([uv, "venv", "-q", "-p", str(BASE_PYTHON), str(venv)], check=True)
    install = subprocess.run(
        [uv, "pip", "install", "-q", "-p", str(python), f"{tool}=={TOOLS[tool]}"],
        capture_output=True,
        text=True,
    )
    if install.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        reason = (install.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"cannot install {tool}=={TOOLS[tool]} (no network?): {reason}")
    return venv


# ------------------------------------------------------------------ the tasks under audit


@dataclass
class Target:
    """A repogym task, and what the tools need to know about it."""

    id: str
    dir: Path
    prompt: str = field(repr=False)
    pristine: Path  # the starting tree, as the agent finds it in /workspace
    source_path: str  # the one source file the gold patch changes
    reference: str = field(repr=False)  # its text after the patch
    entry: str  # the function the patch changes
    # argument lists of calls to `entry` with literal arguments, from the tests
    calls: list[str] = field(repr=False)
    test_roots: list[str]  # folders holding the tests, relative to the working tree ("" = its root)
    mode: str  # the task's reward mode: "resolved" (all or nothing) or "graded" (partial credit)
    # every function of the fixed file -> its literal calls in the tests
    probes: dict[str, list[str]] = field(repr=False)
    nop: float = 0.0

    def spec(self) -> dict:
        return {
            "id": self.id,
            "dir": str(self.dir),
            "prompt": self.prompt,
            "source_path": self.source_path,
            "reference": self.reference,
            "entry": self.entry,
            "calls": self.calls,
        }


def _functions(source: str) -> dict[str, str]:
    tree = ast.parse(source)
    return {n.name: ast.dump(n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def _literal_calls(files: list[Path], name: str) -> list[str]:
    """The argument lists (as source) of the calls ``name(...)`` with literal arguments only."""
    calls: list[str] = []
    for path in files:
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == name
            ):
                values = [*node.args, *(k.value for k in node.keywords)]
                if not values or any(k.arg is None for k in node.keywords):
                    continue
                try:
                    [ast.literal_eval(v) for v in values]
                except ValueError:
                    continue
                args = [ast.get_source_segment(text, a) or "" for a in node.args]
                args += [f"{k.arg}={ast.get_source_segment(text, k.value)}" for k in node.keywords]
                if ", ".join(args) not in calls:
                    calls.append(", ".join(args))
    return calls


def describe(task_dir: Path, work: Path) -> Target:
    """What the tools need to know about a runtime task: its starting tree, the file its gold
    patch fixes (before and after), the changed function and the calls its tests make to it."""
    pristine = task_dir / "environment" / "repo"
    patch = (task_dir / "solution" / "patch.diff").read_text()
    changed = [line[len("+++ b/") :] for line in patch.splitlines() if line.startswith("+++ b/")]
    sources = [p for p in changed if p.endswith(".py") and not p.startswith("tests/")]
    assert len(sources) == 1, changed
    fixed = work / f"{task_dir.name}-fixed"
    shutil.copytree(pristine, fixed)
    subprocess.run(
        ["patch", "-s", "-p1", "-d", str(fixed), "-i", str(task_dir / "solution" / "patch.diff")],
        check=True,
    )
    reference = (fixed / sources[0]).read_text()
    before, after = _functions((pristine / sources[0]).read_text()), _functions(reference)
    entry = next(name for name, dump in after.items() if before.get(name) != dump)
    tests = sorted((task_dir / "tests" / "files").rglob("*.py")) + sorted(
        pristine.rglob("test*.py")
    )
    roots = sorted(
        {p.relative_to(pristine).parent.as_posix() for p in pristine.rglob("test*.py")} | {""}
    )
    config = json.loads((task_dir / "tests" / "config.json").read_text())
    return Target(
        id=task_dir.name,
        dir=task_dir,
        prompt=(task_dir / "instruction.md").read_text(),
        pristine=pristine,
        source_path=sources[0],
        reference=reference,
        entry=entry,
        calls=[c for c in _literal_calls(tests, entry) if "=" not in c],
        test_roots=[r if r != "." else "" for r in roots],
        mode=config.get("reward_mode", "resolved"),
        probes={name: _literal_calls(tests, name) for name in after},
    )


def _controls(target: Target) -> Target:
    """The nop agent's reward (the bar) and the reference file's (1.0: the mapping works)."""
    nop = trials.submit(target.dir, {})
    gold = trials.submit(target.dir, {target.source_path: target.reference})
    assert nop["reward"] is not None and gold["reward"] == 1.0, (nop, gold)
    target.nop = nop["reward"]
    return target


@pytest.fixture(scope="module")
def ledger_target(ledger, tmp_path_factory: pytest.TempPathFactory) -> Target:  # type: ignore[no-untyped-def]
    return _controls(describe(ledger.task.path, tmp_path_factory.mktemp("ledger-ref")))


@pytest.fixture(scope="module")
def textstats_target(tmp_path_factory: pytest.TempPathFactory) -> Target:
    work = tmp_path_factory.mktemp("textstats")
    task = work / "textstats-word-count"
    shutil.copytree(EXAMPLES / "textstats-word-count", task)
    return _controls(describe(task, work))


# The generated task in every run; the graded example too with REPOGYM_EXTERNAL_ALL=1 (each
# target adds minutes of trials to the suite's budget).
TARGETS = ["ledger", "textstats"] if os.environ.get("REPOGYM_EXTERNAL_ALL") else ["ledger"]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Target:
    return request.getfixturevalue(f"{request.param}_target")


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _over_nop(target: Target, rows: list[dict], what: str) -> list[str]:
    """Every submission that errored or earned more than nop, said in one line each."""
    bad = []
    for row in rows:
        if row["reward"] is None:
            bad.append(f"{what}: {row.get('label', '')} errored: {row.get('error')}")
        elif row["reward"] > target.nop:
            shown = json.dumps({k: v for k, v in row.items() if k not in ("reward",)})[:3000]
            bad.append(f"{what}: reward {row['reward']} > nop {target.nop}: {shown}")
    return bad


BEHAVIOUR = """
import json, sys
spec = json.load(sys.stdin)
ns = {"__name__": "candidate"}
try:
    exec(compile(spec["source"], "candidate.py", "exec"), ns)
except BaseException as exc:
    print(json.dumps({"load": type(exc).__name__})); raise SystemExit
out = {}
for name, calls in spec["probes"].items():
    for args in calls:
        try:
            out[f"{name}({args})"] = ["ok", repr(eval(f"{name}({args})", dict(ns)))]
        except BaseException as exc:
            out[f"{name}({args})"] = ["exc", type(exc).__name__]
print(json.dumps(out))
"""


def behaves_like_reference(target: Target, source: str, tmp_path: Path) -> bool:
    """Whether ``source`` gives the fixed file's results (or exceptions) on every literal call the
    task's tests make to its functions: an oracle that does not ask the grader under test. A
    file that passes it is a correct answer, whatever a text probe called it."""

    def run(text: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", BEHAVIOUR],
            input=json.dumps({"source": text, "probes": target.probes}),
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip
        return proc.stdout

    return run(source) == run(target.reference)


def within_bound(target: Target, reward: float) -> bool:
    """A wrong answer's reward: no more than nop under ``resolved``; under ``graded`` (partial
    credit, f2p_rate x p2p_rate, docs/reward-contract.md) less than the full reward."""
    return reward <= target.nop if target.mode == "resolved" else reward < 1.0


# ------------------------------------------------------------------ gradecheck


def test_gradecheck(target: Target, tmp_path: Path) -> None:
    """``gradecheck run``: noop, empty-source, test-deletion (deleted, emptied), answer-leak,
    hollow-implementation (strings the verifier checks for, written where it looks)."""
    venv = tool_venv("gradecheck")
    log = tmp_path / "grades.jsonl"
    shutil.copytree(target.pristine, tmp_path / "workspace", symlinks=True)
    grade = [
        sys.executable, str(HERE / "trials.py"), "grade", "--task", str(target.dir),
        "--pristine", str(target.pristine), "--workspace", "{workspace}", "--log", str(log),
    ]  # fmt: skip
    folder = Path(target.source_path).parent.as_posix()
    sources = "**/*.py" if folder == "." else f"{folder}/**/*.py"
    (tmp_path / "gradecheck.toml").write_text(
        "[env]\n"
        f'name = "{target.id}"\n'
        'workspace = "workspace"\n'
        f'source_globs = ["{sources}"]\n'
        "\n[grade]\n"
        f"cmd = {json.dumps(' '.join(grade))}\n"
        "timeout = 900\n"
        'pass_marker = "RESULT: PASS"\n'
        "score = [{ regex = 'REWARD:\\s*(\\d+)\\s*/\\s*(\\d+)' }]\n"
        f"source = {json.dumps([str(target.dir / 'tests' / 'verifier.py'), str(target.dir / 'tests' / 'test.sh')])}\n"
    )
    start = time.monotonic()
    run = subprocess.run(
        [str(venv / "bin" / "gradecheck"), "run", str(tmp_path), "--no-color", "--quiet"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    print(
        f"\n=== gradecheck {TOOLS['gradecheck']} on {target.id} ({time.monotonic() - start:.0f}s, exit {run.returncode})"
    )
    print(run.stdout.strip())
    graded = _read_jsonl(log)
    for row in graded:
        print(
            f"  trial: wrote {row['written'][:6]}{'…' if len(row['written']) > 6 else ''} deleted {row['deleted']}"
            f" -> reward {row['reward']} {row.get('details', {})}"
        )
    assert len(graded) >= 5, run.stderr
    assert "ERROR" not in run.stdout and "FOOLED" not in run.stdout, run.stdout
    assert run.returncode == 0, run.stdout + run.stderr
    assert not _over_nop(target, graded, "gradecheck")


# ------------------------------------------------------------------ bohrin


def _fillings(target: Target, parameter: str) -> list[str]:
    """Values for a bohrin workspace parameter, for this task (relative: under /workspace)."""
    return {
        "source_path": [target.source_path],
        "test_root": target.test_roots,
        # The Harbor reward file the verifier writes.
        "reward_path": ["/logs/verifier/reward.txt"],
        # What turns test output into a verdict: repogym's judge and parsers live in the hidden
        # /tests folder, mounted only for verification; the agent may plant files there first.
        "parser_path": ["/tests/parsers.py", "/tests/verifier.py"],
        # Programs the verifier runs: the interpreter it records and the checksum tool.
        "tool_path": ["/usr/local/bin/python3", "/usr/bin/sha256sum"],
        # No grader here measures time; the verifier is the nearest thing to a measurement.
        "measurement_path": ["/tests/verifier.py"],
    }[parameter]


def _fill(template: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


def _fill_path(template: str, values: dict[str, str]) -> str:
    """A filled workspace path: absolute when its first parameter's value is (a file outside the
    working tree), else relative to the working tree (``{test_root}`` may be "", its root)."""
    filled = _fill(template, values)
    first = template[1 : template.index("}")] if template.startswith("{") else ""
    return filled if values.get(first, "").startswith("/") else filled.lstrip("/")


def _instances(
    target: Target, cand: dict
) -> Iterator[tuple[dict, dict[str, str | None], list[str]]]:
    """Every filling of a candidate: (the values chosen, files to write, commands to run)."""
    if "source" in cand:  # a program: the file the fix edits
        yield {}, {target.source_path: cand["source"]}, []
        return
    choices: list[dict[str, str]] = [{}]
    for name in cand["parameters"]:
        choices = [{**c, name: v} for c in choices for v in _fillings(target, name)]
    for values in choices:
        files = {_fill_path(path, values): text for path, text in cand["files"].items()}
        yield values, files, [_fill(c, values) for c in cand["commands"]]


@pytest.mark.timeout(1200)
def test_bohrin(target: Target, tmp_path: Path) -> None:
    """bohrin's battery: hollow programs (constant, ``pass``, ``raise NotImplementedError``,
    ``sys.exit(0)``, equality spoofing) and harness tampering (a conftest that marks every test
    passed or deselects them all, the result parser replaced, a verifier tool hijacked, the
    reward file written, the measurement tampered with), each beside the hollow program."""
    venv = tool_venv("bohrin")
    driver = [str(venv / "bin" / "python"), str(HERE / "bohrin_candidates.py")]
    task = json.dumps({"id": target.id, "prompt": target.prompt, "reference": target.reference})
    made = subprocess.run(
        [*driver, "battery"], input=task, capture_output=True, text=True, check=True
    )
    battery = json.loads(made.stdout)
    assert battery["candidates"], "bohrin built no candidate"
    start = time.monotonic()
    rows: list[dict] = []
    accepted: dict[str, bool] = {}
    for cand in battery["candidates"]:
        best = 0.0
        for values, files, commands in _instances(target, cand):
            modes = ["task"] if "source" in cand else ["task", "in_place"]
            for mode in modes:
                res = trials.submit(
                    target.dir, files, commands, verification=None if mode == "task" else mode
                )
                row = {
                    "label": f"{cand['shape']}/{cand['operator']} {values} [{mode}]",
                    "operator": cand["operator"],
                    "ground": cand["ground"],
                    "files": files,
                    "commands": commands,
                    **res,
                }
                rows.append(row)
                best = max(best, res["reward"] or 0.0)
        accepted[cand["key"]] = best >= 1.0
    scored = subprocess.run(
        [*driver, "score"], input=json.dumps({**json.loads(task), "accepted": accepted}),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    print(
        f"\n=== bohrin {battery['bohrin']} (battery {battery['battery_version']}) on {target.id}: "
        f"{len(battery['candidates'])} candidates, {len(rows)} trials ({time.monotonic() - start:.0f}s)"
    )
    for row in rows:
        print(f"  {row['label']}: reward {row['reward']} {row.get('details', {})}")
    print("  " + scored.stdout.strip())
    assert not _over_nop(target, rows, "bohrin")


# ------------------------------------------------------------------ gameability


def _gameability(mode: str, targets: list[Target], tmp_path: Path) -> tuple[str, dict, list[dict]]:
    venv = tool_venv("gameability")
    spec = tmp_path / "spec.json"
    log = tmp_path / "trials.jsonl"
    spec.write_text(
        json.dumps(
            {
                "python": sys.executable,
                "trials": str(HERE / "trials.py"),
                "log": str(log),
                "tasks": [t.spec() for t in targets],
            }
        )
    )
    run = subprocess.run(
        [str(venv / "bin" / "python"), str(HERE / "gameability_driver.py"), mode, str(spec)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    text, _, result = run.stdout.rpartition("RESULT ")
    return text.strip(), json.loads(result), _read_jsonl(log)


@pytest.mark.timeout(1200)
def test_gameability_probe(ledger_target: Target, textstats_target: Target, tmp_path: Path) -> None:
    """``probe_env``: the correct file (in four answer formats) as the control, then an empty
    answer, a refusal, the prompt echoed back, a wrong answer in each format and filler text;
    the most common answer on every row is reported, not counted."""
    targets = [ledger_target, textstats_target]
    start = time.monotonic()
    text, res, rows = _gameability("probe", targets, tmp_path)
    print(
        f"\n=== gameability {res['gameability']} probe on repogym trials ({time.monotonic() - start:.0f}s)"
    )
    print(text)
    for row in rows:
        print(f"  {row['task']}: {row['completion'][:60]!r}… -> reward {row['reward']}")
    # The correct files earn the full reward: a real control.
    assert res["status"] == "MEASURED", res
    assert res["gameable"] is False and not res["gameable_probes"], res
    by_task = {t.id: t for t in targets}
    # The reference in one of gameability's answer formats is its control (such a text may even
    # parse: 'Answer: """docstring"""' is an annotation); every other completion (empty, refusal,
    # prompt, "0" in each format, filler, another task's file) must earn no more than nop.
    controls = {(t.id, f.format(t.reference)) for t in targets for f in res["formats"]}
    assert all(r["reward"] is not None for r in rows), rows
    paid = [
        r
        for r in rows
        if (r["task"], r["completion"]) not in controls and r["reward"] > by_task[r["task"]].nop
    ]
    assert not paid, "\n\n".join(
        f"{r['task']}: reward {r['reward']} for:\n{r['completion']}" for r in paid
    )


@pytest.mark.timeout(1200)
def test_gameability_mutants(
    ledger_target: Target, textstats_target: Target, tmp_path: Path
) -> None:
    """``engine.audit``: single-site mutants of the fixed file, each proven wrong by gameability's
    oracle on fresh inputs, each submitted to a trial."""
    targets = [ledger_target, textstats_target]
    start = time.monotonic()
    text, res, rows = _gameability("mutants", targets, tmp_path)
    print(
        f"\n=== gameability {res['gameability']} mutants on repogym trials ({time.monotonic() - start:.0f}s)"
    )
    print(text)
    for row in rows:
        first = next((ln for ln in row["completion"].splitlines() if ln.strip()), "")
        print(
            f"  {row['task']} {row['label']}: reward {row['reward']} {row.get('details', {})} ({first[:50]}…)"
        )
    assert any(r["status"] == "ok" for r in res["rows"]), res["rows"]
    by_task = {t.id: t for t in targets}
    assert all(r["reward"] is not None for r in rows), rows
    paid = [r for r in rows if not within_bound(by_task[r["task"]], r["reward"])]
    assert not paid, "\n\n".join(
        f"{r['task']} {r['label']}: reward {r['reward']} for:\n{r['completion']}" for r in paid
    )


# ------------------------------------------------------------------ falsepass

REWARDS = '''\
"""A repogym trial as a TRL-style reward function (written by repogym's tests for falsepass).

The completion is the new text of the file the task's fix edits: a ``command:`` agent writes it
in the task's sandbox and the task's own verifier decides the reward."""

import json
import os
import subprocess
import tempfile

PYTHON = {python!r}
TRIALS = {trials!r}
LOG = {log!r}


def repogym_trial(completions, answer, task_dir, source_path, **kwargs):
    rewards = []
    for completion, task, path in zip(completions, task_dir, source_path):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump({{"files": {{path: text}}}}, fh)
        proc = subprocess.run([PYTHON, TRIALS, "submit", "--task", task, "--changes", fh.name],
                              capture_output=True, text=True, timeout=900)
        os.unlink(fh.name)
        res = json.loads(proc.stdout)
        with open(LOG, "a") as log:
            log.write(json.dumps({{"task": task, "completion": text, **res}}) + "\\n")
        rewards.append(res["reward"])
    return rewards
'''


@pytest.mark.timeout(1200)
def test_falsepass(target: Target, tmp_path: Path) -> None:
    """falsepass's probes for a reward function with a reference answer: the reference and
    harmless variations of it (the control), empty, prompt echoed, shotgun lists, a wrong answer
    in format, confident wrong answers, the answer retracted or denied, malformed output,
    determinism, answer-free sprays."""
    venv = tool_venv("falsepass")
    log = tmp_path / "trials.jsonl"
    rewards = tmp_path / "repogym_rewards.py"
    rewards.write_text(
        REWARDS.format(python=sys.executable, trials=str(HERE / "trials.py"), log=str(log))
    )
    row = {
        "prompt": target.prompt,
        "answer": target.reference,
        "task_dir": str(target.dir),
        "source_path": target.source_path,
    }
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "UV_PYTHON_DOWNLOADS": "never",  # only the registries are reachable; use the local Python
    }
    falsepass = str(venv / "bin" / "falsepass")
    init = subprocess.run(
        [falsepass, "init", str(rewards), "--dataset", str(tmp_path / "rows.jsonl"), "--answer-column", "answer",
         "--dir", str(tmp_path / "audits"), "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert init.returncode == 0, init.stdout + init.stderr
    folder = Path(json.loads(init.stdout)["folder"])
    # The interpreter of falsepass's `uv run` (its default, 3.12, would be downloaded).
    with (folder / "env.toml").open("a") as fh:
        fh.write(f"python = {json.dumps(str(BASE_PYTHON))}\n")
    start = time.monotonic()
    audit = subprocess.run(
        [falsepass, "audit", str(folder), "--jobs", "1"], capture_output=True, text=True, env=env, cwd=tmp_path,
        timeout=1800,
    )  # fmt: skip
    results = folder / "probe-results.json"
    said = [ln for ln in audit.stderr.splitlines() if ln.startswith("falsepass:")]
    if not results.exists() and not said:  # `uv run` failed before falsepass ran (no network?)
        last = (audit.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"falsepass could not build its `uv run` audit environment: {last}")
    assert results.exists(), audit.stdout + audit.stderr[-3000:]
    print(
        f"\n=== falsepass {TOOLS['falsepass']} on {target.id} ({time.monotonic() - start:.0f}s, exit {audit.returncode})"
    )
    print((folder / "summary.md").read_text().strip())
    payload = json.loads(results.read_text())
    completions = json.loads((folder / "completions.json").read_text())
    scored = [r for r in payload["results"] if r.get("score") is not None]
    control = [r for r in scored if r["probe"] == "P1"]
    # The reference earns 1: a real control.
    assert control and all(r["score"] == 1.0 for r in control), control
    raised = [r for r in payload["results"] if r["probe"] != "P12" and r.get("score") is None]
    assert not raised, [(r["probe"], r["variant"], r["detail"]) for r in raised]
    # falsepass's known-bad completions are leads (its README: reproduce a lead before calling
    # it a defect): a paid one is a false pass only when it is in fact a wrong file. The
    # reference with a prefix that is still Python (`not """docstring"""`) is a correct answer.
    leads = [r for r in scored if r["expected"] == "zero" and r["score"] > target.nop]
    wrong = []
    for r in leads:
        text = completions.get(r.get("completion_id")) or r.get("completion")
        correct = isinstance(text, str) and behaves_like_reference(target, text, tmp_path)
        verdict = (
            "a correct file (dismissed)" if correct else f"a wrong file ({target.mode} reward)"
        )
        print(
            f"  lead {r['probe']} {r['name']}/{r['variant']}: reward {r['score']} > nop: {verdict}"
        )
        if not correct:
            wrong.append((r, text))
    failed = [(r, text) for r, text in wrong if not within_bound(target, r["score"])]
    assert not failed, "\n\n".join(
        f"{r['probe']} {r['name']}/{r['variant']}: reward {r['score']} (nop {target.nop}, {target.mode}) for:\n{text}"
        for r, text in failed
    )
