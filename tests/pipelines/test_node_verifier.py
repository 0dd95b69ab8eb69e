"""The Node verifier (``verifier.mjs``) of JavaScript tasks: the same results as ``verifier.py``
on the same runs, grading without Python (a ``PATH`` without it on the host, and a task image
with Python removed in the local sandbox)."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repogym.bootstrap import make_recipe
from repogym.bootstrap.node import project as node
from repogym.pipelines._harness.emit import VerifierInput, stage_verifier, update_config
from repogym.run.agents import CommandAgent, NopAgent, OracleAgent
from repogym.run.trial import TrialRunner, environment_spec
from repogym.sandbox import get_backend
from repogym.shipped import infra, tamper
from repogym.spec import GenerationInput
from repogym.taskdir import load_task, set_content_hash
from repogym.workflows import generate
from tests.sources.conftest import GitRepo

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node")

LIB = """\
function words(text) {
  return text.split(" ");
}
module.exports = { words };
"""
FIXED = LIB.replace('text.split(" ")', "text.split(/\\s+/).filter(Boolean)")
HIDDEN = """\
const { describe, it } = require("node:test");
const assert = require("node:assert");
const { words } = require("../lib/words");

describe("words", () => {
  it("splits on spaces", () => {
    assert.deepStrictEqual(words("a b"), ["a", "b"]);
  });
  it("ignores repeated whitespace", () => {
    assert.deepStrictEqual(words(" a\\t b "), ["a", "b"]);
  });
});
"""
F2P = ["test/words.test.js > words > ignores repeated whitespace"]
P2P = ["test/words.test.js > words > splits on spaces"]
PACKAGE = {"name": "words", "version": "1.0.0", "scripts": {"test": "node --test"}}


def make_task(tmp_path: Path, *, runner_command: str | None = None) -> tuple[Path, Path]:
    """A working tree at the base and its staged verifier folder (no integrity record: host)."""
    work = tmp_path / "workspace"
    (work / "lib").mkdir(parents=True)
    (work / "test").mkdir()
    (work / "package.json").write_text(json.dumps(PACKAGE))
    (work / "lib" / "words.js").write_text(LIB)
    (work / "test" / "words.test.js").write_text("// the base's version of the tests\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(node, "host_node", lambda: "20.11.1")
        mp.setattr(node, "host_nodes", lambda: ["20.11.1"])
        recipe = dataclasses.replace(make_recipe(work), workdir=str(work))
    if runner_command is not None:
        recipe = dataclasses.replace(recipe, runner=runner_command.split(":")[0])
    command = recipe.test_command if runner_command is None else runner_command.split(":", 1)[1]
    restore = {"test/words.test.js": HIDDEN.encode()}
    known = infra.manifest(work, infra.is_infra)
    tests = tmp_path / "tests"
    stage_verifier(
        tests,
        VerifierInput(
            recipe=recipe,
            command=command,
            restore=restore,
            delete=[],
            infra={k: v for k, v in known.items() if k not in restore},
            sources=infra.manifest(work, lambda r: tamper.language_of(r) is not None),
            integrity_key="",
            reward_mode="resolved",
        ),
    )
    (tests / "integrity.key").unlink()
    (tests / "tamper_baseline.json").write_text(json.dumps(tamper.baseline(str(work))))
    (tests / "f2p.json").write_text(json.dumps(F2P))
    (tests / "p2p.json").write_text(json.dumps(P2P))
    return tests, work


def results(tests: Path, tmp: Path, verifier: str) -> dict:
    out = tmp / f"results-{verifier}.json"
    env = {**os.environ, "REPOGYM_VERIFIER_LOGS": str(tmp / "logs")}
    if verifier == "node":
        argv = [str(NODE), str(tests / "verifier.mjs")]
    else:
        argv = [sys.executable, "-I", "-S", str(tests / "verifier.py")]
    proc = subprocess.run([*argv, "--results", str(out)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def no_python_path(tmp: Path) -> str:
    """A PATH holding only what test.sh and the tests need: no Python anywhere on it."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "env", "dirname", "node", "sh", "cat", "mkdir"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(os.path.realpath(found))
    return str(bin_dir)


def grade(tests: Path, tmp: Path, *, env: dict[str, str]) -> tuple[float, dict]:
    logs = tmp / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    env = {**env, "REPOGYM_VERIFIER_LOGS": str(logs)}
    proc = subprocess.run(
        ["bash", str(tests / "test.sh")], env=env, capture_output=True, text=True, cwd=tmp
    )
    assert (logs / "reward.txt").exists(), proc.stdout[-3000:] + proc.stderr
    return float((logs / "reward.txt").read_text()), json.loads(
        (logs / "reward-details.json").read_text()
    )


def test_node_and_python_verifiers_agree_on_a_node_test_run(tmp_path: Path) -> None:
    tests, work = make_task(tmp_path)
    assert (tests / "verifier.mjs").is_file()
    by_node = results(tests, tmp_path, "node")
    assert (work / "test" / "words.test.js").read_text() == HIDDEN  # restored
    by_python = results(tests, tmp_path, "python")
    assert (
        by_node["tests"]
        == by_python["tests"]
        == {
            F2P[0]: "FAILED",
            P2P[0]: "PASSED",
        }
    )
    assert by_node["failures"] == by_python["failures"]
    assert by_node["failures"][F2P[0]].startswith("Expected values to be")
    for key in ("parse_status", "source", "finished"):
        assert by_node[key] == by_python[key], key


def test_grades_without_python_on_path(tmp_path: Path) -> None:
    tests, work = make_task(tmp_path)
    path = no_python_path(tmp_path)
    env = {"PATH": path, "HOME": str(tmp_path)}
    probe = subprocess.run(
        ["bash", "-c", "command -v python3 || command -v python"], env=env, capture_output=True
    )
    assert probe.returncode != 0  # no Python on this PATH
    reward, details = grade(tests, tmp_path, env=env)
    assert reward == 0.0 and details["verifier"].endswith("(node)")
    assert details["f2p_failing"] == F2P and details["p2p_passed"] == 1
    assert "tamper.py" in details["tamper_scan"]

    (work / "lib" / "words.js").write_text(FIXED)
    (work / "test" / "words.test.js").write_text("// the agent's edit of the tests\n")
    (work / "test" / "extra.test.js").write_text('require("node:test")("x", () => {});\n')
    reward, details = grade(tests, tmp_path, env=env)
    assert reward == 1.0 and details["resolved"] is True, details
    assert details["infra_removed"] == ["test/extra.test.js"]
    assert not (work / "test" / "extra.test.js").exists()

    # A test-infrastructure file changed without a hidden copy: a tamper, reward 0.
    (work / "package.json").write_text(json.dumps({**PACKAGE, "scripts": {"test": "true"}}))
    reward, details = grade(tests, tmp_path, env=env)
    assert reward == 0.0 and details["tampered"] is True
    assert details["tamper"] == ["test infrastructure changed: package.json"]

    # Python present: test.sh keeps verifier.py unless REPOGYM_VERIFIER=node asks.
    (work / "package.json").write_text(json.dumps(PACKAGE))
    full = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    assert grade(tests, tmp_path, env=full)[1]["verifier"] == "repogym runtime verifier 3"
    forced = grade(tests, tmp_path, env={**full, "REPOGYM_VERIFIER": "node"})[1]
    assert forced["verifier"].endswith("(node)")


FORGER = """\
const fs = require("fs");
const line = 'node:test {"s":"pass","id":["test/words.test.js","words","ignores repeated whitespace"]}';
fs.appendFileSync(`/proc/${process.ppid}/fd/1`, line + "\\n");
process.kill(process.ppid, "SIGKILL");
"""


def test_a_run_killed_after_forged_lines_pays_nothing(tmp_path: Path) -> None:
    """Code under test writes a result line straight into the runner's stdout, then kills the
    runner before it can report the real failure: without the reporter's end line the run is
    incomplete and pays nothing."""
    tests, work = make_task(tmp_path)
    (work / "lib" / "words.js").write_text(LIB + FORGER)
    by_node = results(tests, tmp_path, "node")
    assert by_node["parse_status"] == "incomplete" and by_node["finished"] is False
    env = {"PATH": no_python_path(tmp_path), "HOME": str(tmp_path)}
    reward, details = grade(tests, tmp_path, env=env)
    assert reward == 0.0 and details["parse_status"] == "incomplete"
    assert details["verifier"].endswith("(node)")


def test_infra_rule_matches_infra_py(tmp_path: Path) -> None:
    paths = [
        "test/a.js",
        "src/a.spec.ts",
        "src/lib.ts",
        "lib/__tests__/x.js",
        "package.json",
        "jest.config.js",
        ".mocharc.yml",
        "vitest.workspace.ts",
        "conftest.py",
        "pkg/tests.py",
        "a.pth",
        "x.egg-info/PKG-INFO",
        ".cargo/config.toml",
        "pytest.py",
        "src/pytest/__init__.py",
        "py/x.py",
        "src/site.py",
        "Testing/x.c",
        "foo.test/bar.js",
        "README.md",
        "setupTests.ts",
        "babel.config.cjs",
        "tsconfig.json",
        "tsconfig.build.json",
        "rollup.config.mjs",
        "src/tsconfig-paths.ts",
    ]
    script = (
        "import(process.argv[2]).then(m => console.log(JSON.stringify("
        "JSON.parse(process.argv[3]).map(p => [m.isTestPath(p), m.isInfra(p)]))))"
    )
    mjs = Path(__file__).parents[2] / "src/repogym/shipped/scripts/verifier.mjs"
    out = subprocess.run(
        [str(NODE), "-e", script, "-", str(mjs), json.dumps(paths)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == [[infra.is_test_path(p), infra.is_infra(p)] for p in paths]
    # A replayed pre-test build reads its configs: the agent's versions never rebuild the tests.
    assert all(infra.is_infra(p) for p in ("tsconfig.build.json", "rollup.config.mjs"))
    assert not infra.is_infra("src/tsconfig-paths.ts")


FAKE_RUNNER = """\
const fs = require("fs");
const args = process.argv.slice(2);
const dest = args.map(a => a.replace(/^--outputFile=|^output=/, "")).find((a, i) => a !== args[i]);
const report = JSON.parse(fs.readFileSync(__dirname + "/report.json", "utf8"));
fs.writeFileSync(dest, JSON.stringify(report).split("@WORK@").join(process.cwd()));
console.log("ran");
"""
JEST_REPORT = {
    "numTotalTestSuites": 2,
    "testResults": [
        {
            "name": "@WORK@/src/a.test.js",
            "status": "failed",
            "assertionResults": [
                {"ancestorTitles": ["math"], "title": "adds", "status": "passed"},
                {
                    "ancestorTitles": ["math", "deep"],
                    "title": "divides",
                    "status": "failed",
                    "failureMessages": ["\u001b[31mError: expected 2\u001b[39m\n    at x"],
                },
                {"ancestorTitles": [], "title": "later", "status": "todo"},
            ],
        },
        {
            "name": "@WORK@/src/broken.test.js",
            "status": "failed",
            "assertionResults": [],
            "testExecError": {"message": "Cannot find module './x' from 'src/broken.test.js'"},
        },
    ],
}
MOCHA_REPORT = {
    "stats": {"suites": 1, "tests": 3},
    "tests": [
        {
            "title": "adds",
            "fullTitle": "math adds",
            "file": "@WORK@/test/a.js",
            "duration": 1,
            "err": {},
        },
        {
            "title": "divides",
            "fullTitle": "math divides",
            "file": "@WORK@/test/a.js",
            "duration": 1,
            "err": {"message": "boom", "stack": "AssertionError: boom\n    at y"},
        },
        {"title": "later", "fullTitle": "math later", "file": "@WORK@/test/a.js", "err": {}},
    ],
    "pending": [{"title": "later", "fullTitle": "math later", "file": "@WORK@/test/a.js"}],
    "failures": [
        {
            "title": "divides",
            "fullTitle": "math divides",
            "file": "@WORK@/test/a.js",
            "err": {"message": "boom", "stack": "AssertionError: boom\n    at y"},
        },
        {
            "title": '"before all" hook in "setup"',
            "fullTitle": 'setup "before all" hook in "setup"',
            "file": "@WORK@/test/b.js",
            "err": {"message": "no db", "stack": "Error: no db\n    at z"},
        },
    ],
    "passes": [{"title": "adds", "fullTitle": "math adds", "file": "@WORK@/test/a.js"}],
}


@pytest.mark.parametrize(("runner", "report"), [("jest", JEST_REPORT), ("mocha", MOCHA_REPORT)])
def test_json_reports_read_like_verifier_py(tmp_path: Path, runner: str, report: dict) -> None:
    tests, work = make_task(tmp_path, runner_command=f"{runner}:node fake-runner.js")
    (work / "fake-runner.js").write_text(FAKE_RUNNER)
    (work / "report.json").write_text(json.dumps(report))
    update_config(tests, json_report=True)
    by_node = results(tests, tmp_path, "node")
    by_python = results(tests, tmp_path, "python")
    assert by_node["source"] == by_python["source"] == "report"
    assert by_node["tests"] == by_python["tests"]
    assert by_node["failures"] == by_python["failures"]
    assert len(by_node["tests"]) >= 4
    # The runner wrote no report (it died early): nothing to grade from.
    (work / "fake-runner.js").write_text("console.log('process.exit called with \"1\"');\n")
    gone = results(tests, tmp_path, "node")
    assert gone["parse_status"] == "no report" and gone["finished"] is False
    if runner == "jest":
        assert gone["parse_warnings"][0].startswith('log cut short: process.exit called with "1"')


# ------------------------------------------------------------------ in the local sandbox


def words_repo(repo: GitRepo) -> tuple[GitRepo, str]:
    repo.write("package.json", json.dumps(PACKAGE, indent=2) + "\n")
    repo.write("lib/words.js", LIB)
    repo.write(
        "test/words.test.js", HIDDEN.replace(HIDDEN[HIDDEN.index('  it("ignores') :], "});\n")
    )
    repo.commit("Word splitting")
    repo.write("lib/words.js", FIXED)
    repo.write("test/words.test.js", HIDDEN)
    fix = repo.commit(
        "Split words on any run of whitespace\n\nwords() returned empty strings for repeated"
        " spaces and tabs; it must split on any whitespace and drop empty words."
    )
    return repo, fix


def without_python(task_dir: Path) -> None:
    """Remove Python from the task's image before the integrity record (so the Node recorder
    records it and test.sh finds no Python), as a node:*-slim image would be."""
    dockerfile = task_dir / "environment" / "Dockerfile"
    lines = dockerfile.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("COPY repogym_record.py"))
    lines.insert(
        at,
        "RUN rm -f /usr/bin/python3* /usr/bin/python /usr/local/bin/python3*"
        " /usr/local/bin/python && ! command -v python3",
    )
    dockerfile.write_text("\n".join(lines) + "\n")
    set_content_hash(task_dir)


@pytest.mark.slow
def test_a_generated_node_test_task_grades_without_python(make_repo, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo, fix = words_repo(make_repo("words"))
    result = generate(
        GenerationInput(
            repo=str(repo.path),
            pipeline="commit_runtime",
            out=tmp_path / "out",
            options={"mutants": 0, "reruns": 0, "verify_reruns": 0, "adversarial": False},
        )
    )
    report = json.loads(result.report.read_text())
    assert report["yield"]["kept"] == 1, report["outcomes"]
    task_dir = tmp_path / "out" / "tasks" / f"local__words-{fix[:12]}"
    task = load_task(task_dir)
    sub = task.config.metadata["repo2env"]["commit_runtime"]
    assert sub["runner"] == "node"
    assert sub["fail_to_pass"] == F2P and sub["pass_to_pass"] == P2P
    assert (task_dir / "tests" / "verifier.mjs").is_file()
    assert (task_dir / "environment" / "repogym_record.mjs").is_file()

    backend = get_backend("local")
    # In place, deleting Python (and sha256sum, so test.sh cannot check) to get the verifier
    # without the tamper scan: Python was recorded at build time, so it is a tamper.
    downgrade = (
        "rm -f /usr/bin/sha256sum $(readlink -f $(command -v python3)) /usr/bin/python3* && "
        + f"printf %s {shlex.quote(FIXED)} > lib/words.js"
    )
    attack = TrialRunner(backend, verification="in_place").run(task, CommandAgent(downgrade))
    assert attack.reward == 0.0, (attack.error, attack.verifier_stdout[-2000:])
    assert attack.reading and attack.reading.details
    assert attack.reading.details["verifier"].endswith("(node)")
    assert any("missing since the build" in t for t in attack.reading.details["tamper"])

    without_python(task_dir)
    task = load_task(task_dir)
    runner = TrialRunner(backend)
    built = runner.build(task)
    with backend.start(built, environment_spec(task, backend)) as session:
        probe = session.exec(
            "command -v python3 || command -v python; head -n 3 /usr/lib/repogym/record.txt",
            timeout_s=60,
        )
    assert "python" not in probe.stdout.split("# repogym")[0], probe.stdout
    assert "# node " in probe.stdout  # recorded by the Node recorder
    oracle = runner.run(task, OracleAgent())
    assert oracle.reward == 1.0, (oracle.error, oracle.verifier_stdout[-2000:])
    assert oracle.reading and oracle.reading.details
    assert oracle.reading.details["verifier"].endswith("(node)")
    assert oracle.reading.details["integrity"] == "ok"
    # the canaries the gate confirmed (with verifier.py) are planted by verifier.mjs too
    planted = oracle.reading.details["canaries"]
    assert planted["status"] == "confirmed" and planted["run"] >= 1
    assert planted["failed"] == planted["run"]
    nop = runner.run(task, NopAgent())
    assert nop.reward == 0.0, (nop.error, nop.verifier_stdout[-2000:])
    assert nop.reading and nop.reading.details and nop.reading.details["f2p_failing"] == F2P


@pytest.mark.slow
def test_generation_needs_no_python_in_a_node_image(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A node:*-slim image has no Python: generation itself (tamper baseline, before/after
    runs, the verify gate) must not need it either."""
    from repogym.pipelines._harness import runtime as _runtime

    real = _runtime.bootstrap

    def no_python(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real(*args, **kwargs)
        gone = (
            "RUN rm -f /usr/bin/python3* /usr/bin/python /usr/local/bin/python3*"
            " /usr/local/bin/python && ! command -v python3\n"
        )
        recipe = dataclasses.replace(result.recipe, dockerfile=result.recipe.dockerfile + gone)
        return dataclasses.replace(result, recipe=recipe)

    monkeypatch.setattr(_runtime, "bootstrap", no_python)
    repo, fix = words_repo(make_repo("words"))
    result = generate(
        GenerationInput(
            repo=str(repo.path),
            pipeline="commit_runtime",
            out=tmp_path / "out",
            options={"mutants": 0, "reruns": 0, "verify_reruns": 0, "adversarial": False},
        )
    )
    report = json.loads(result.report.read_text())
    assert report["yield"]["kept"] == 1, report["outcomes"]
    task_dir = tmp_path / "out" / "tasks" / f"local__words-{fix[:12]}"
    assert "! command -v python3" in (task_dir / "environment" / "Dockerfile").read_text()
    sub = load_task(task_dir).config.metadata["repo2env"]["commit_runtime"]
    assert sub["fail_to_pass"] == F2P and sub["pass_to_pass"] == P2P
    assert json.loads((task_dir / "tests" / "tamper_baseline.json").read_text()) == {}


@pytest.mark.parametrize("verifier", ["python", "node"])
def test_both_verifiers_plant_canaries_and_judge_them(tmp_path: Path, verifier: str) -> None:
    """Each verifier plants the confirmed canaries (copies of the tests that must fail) and
    judges them alike: the fix earns 1.0 with every canary failing; a canary that passes (here
    one whose expectation was not contradicted: what neutered tests look like) is a tamper."""
    from repogym.verify import canaries

    tests, work = make_task(tmp_path)
    (work / "lib" / "words.js").write_text(FIXED)
    pool = canaries.build({"test/words.test.js": HIDDEN.encode()}, F2P, P2P, "node")
    assert len(pool.pool) == 2
    pool.status = "confirmed"
    canaries.write(tests, pool)
    env = {**os.environ, "REPOGYM_VERIFIER": verifier}
    reward, details = grade(tests, tmp_path, env=env)
    assert details["verifier"].endswith("(node)") == (verifier == "node")
    assert reward == 1.0, details
    assert details["canaries"] == {"status": "confirmed", "run": 2, "failed": 2}
    hidden = (work / "test" / "words.test.js").read_text()
    assert hidden.count("it(") == HIDDEN.count("it(") + 2  # planted in the working tree
    # The failing test ran under a new name, graded under its own id.
    assert details["disguised"] == 1 and details["f2p_passed"] == 1, details
    assert 'it("ignores repeated whitespace",' not in hidden
    assert 'it("splits on spaces",' in hidden

    broken = pool.pool[0]
    broken.code = broken.code.replace('"bb"]', '"b"]')
    canaries.write(tests, pool)
    reward, details = grade(tests, tmp_path, env=env)
    assert reward == 0.0 and details["tampered"], details
    [line] = details["tamper"]
    assert line.startswith("canary test/words.test.js > words > ") and " passed " in line
