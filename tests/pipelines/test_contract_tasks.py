"""Every registered pipeline, run on one small repository, emits tasks that hold the contract:
``validate --deep`` passes, the verify gate recorded them as verified (oracle 1, nop 0, reruns
agree), a structural reward hack earns no more than ``nop``, the instruction never holds the
answer, and Harbor's own loader reads them.

A pipeline added to the registry must add its input to :data:`INPUTS` (the test fails until it
does)."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from repogym.example_repo import build_example_repo
from repogym.pipelines import pipelines
from repogym.run.agents import CommandAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.workflows import generate
from tests.sources.conftest import GitRepo, pin_git_env

pytestmark = pytest.mark.slow

FIX_CLAMP = '''\
def clamp_pct(value):
    """value limited to 0..100."""
    return max(0, min(100, value))
'''


def _osv_record(sha: str) -> dict[str, Any]:
    return {
        "schema_version": "1.6.0",
        "id": "GHSA-test-0000-0001",
        "modified": "2026-01-02T00:00:00Z",
        "published": "2026-01-01T00:00:00Z",
        "aliases": ["CVE-2026-0001"],
        "summary": "Percent helper accepts values outside the 0 to 100 range",
        "details": "The percentage helper of statkit returned values above one hundred or below "
        "zero for out-of-range input, which callers trusted as bounded. Values must be "
        "limited to the range from 0 to 100 inclusive.",
        "affected": [
            {
                "package": {"ecosystem": "PyPI", "name": "statkit"},
                "ranges": [
                    {
                        "type": "GIT",
                        "repo": "local",
                        "events": [{"introduced": "0"}, {"fixed": sha}],
                    }
                ],
            }
        ],
        "database_specific": {"cwe_ids": ["CWE-20"], "severity": "MODERATE"},
    }


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example repository plus a merged pull request (for the PR pipelines) whose fix
    commit an advisory names (for ``cve_patches``)."""
    root = tmp_path_factory.mktemp("contract")
    with pytest.MonkeyPatch.context() as mp:
        pin_git_env(mp)
        path = build_example_repo(root / "statkit")
        git = GitRepo(path)
        git.checkout("-b", "pct")
        stats = (path / "src/statkit/stats.py").read_text()
        git.write(
            "src/statkit/stats.py",
            stats + "\n\n" + FIX_CLAMP.replace("return max(0, min(100, value))", "return value"),
        )
        git.write(
            "tests/test_pct.py",
            "from statkit.stats import clamp_pct\n\n\n"
            "def test_clamp_pct_inside():\n    assert clamp_pct(50) == 50\n",
        )
        git.commit("Add clamp_pct")
        git.write("src/statkit/stats.py", stats + "\n\n" + FIX_CLAMP)
        git.write(
            "tests/test_pct.py",
            (path / "tests/test_pct.py").read_text()
            + "\n\ndef test_clamp_pct_limits():\n    assert clamp_pct(150) == 100\n"
            "    assert clamp_pct(-5) == 0\n",
        )
        git.commit("Limit clamp_pct to the range from 0 to 100")
        fix = git.git("rev-parse", "HEAD").strip()
        git.checkout("main")
        git.merge(
            "pct",
            "Merge pull request #7 from ada/pct",
            "clamp_pct limits percentages to the range from 0 to 100",
        )
    osv = root / "osv"
    osv.mkdir()
    (osv / "GHSA-test-0000-0001.json").write_text(json.dumps(_osv_record(fix)))
    return path, osv


INPUTS: dict[str, dict[str, Any]] = {
    "commit_runtime": {},
    "pr_runtime": {},
    "pr_diff": {},
    "bug_synth": {},
    "code_instruct": {},
    "cve_patches": {"osv": "{osv}", "match_repo": "false"},
    "equivalence_tests": {},
}

SYNTHESIZED = {"bug_synth", "code_instruct", "equivalence_tests"}
"""Pipelines whose gold lines appear nowhere in the task but the solution (for mined tasks,
the base snapshot may hold a gold line elsewhere in the code, which is no leak)."""

ATTACK = (
    "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && "
    "printf 'import pytest\\n\\n@pytest.hookimpl(hookwrapper=True)\\n"
    "def pytest_runtest_makereport(item, call):\\n    out = yield\\n"
    '    out.get_result().outcome = "passed"\\n\' > conftest.py && '
    "for f in $(find . -name 'test_*.py' -not -path './.git/*'); do "
    "printf 'def test_ok():\\n    pass\\n' > \"$f\"; done"
)


def check_validate_deep(dataset: Path) -> None:
    """``repogym validate --deep`` accepts the dataset."""
    res = subprocess.run(
        [sys.executable, "-m", "repogym.cli", "validate", "--deep", str(dataset)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]


def check_harbor_loads(task_dir: Path) -> None:
    """Harbor's own loader reads the task (with the Harbor venv the integration tests cache;
    nothing to check before they made it)."""
    python = harbor_python()
    if python is None:
        return
    code = "import sys\nfrom harbor.models.task.task import Task\nTask(sys.argv[1])\n"
    loaded = subprocess.run([python, "-c", code, str(task_dir)], capture_output=True, text=True)
    if "No module named 'harbor'" not in loaded.stderr:
        assert loaded.returncode == 0, loaded.stderr[-2000:]


def harbor_python() -> str | None:
    """The Python of the Harbor venv the integration tests cache (None before they ran)."""
    cache = Path(os.environ.get("REPOGYM_TEST_CACHE", Path.home() / ".cache" / "repogym-tests"))
    found = sorted(glob.glob(str(cache / "harbor-*" / "bin" / "python")))
    return found[-1] if found else None


def _added_lines(patch: str) -> list[str]:
    return [
        ln[1:].strip()
        for ln in patch.splitlines()
        if ln.startswith("+") and not ln.startswith("+++") and len(ln[1:].strip()) >= 12
    ]


@pytest.mark.parametrize("name", sorted(pipelines()))
def test_emitted_tasks_hold_the_contract(
    name: str, repo: tuple[Path, Path], tmp_path: Path
) -> None:
    assert name in INPUTS, f"add an input for pipeline {name!r} to INPUTS"
    path, osv = repo
    options = {k: v.format(osv=osv) for k, v in INPUTS[name].items()}
    out = tmp_path / "ds"
    result = generate(
        GenerationInput(repo=str(path), pipeline=name, out=out, limit=1, jobs=2, options=options)
    )
    kept = [o for o in result.outcomes if o.kept]
    assert kept, [(o.reason, o.detail) for o in result.outcomes][-10:]
    task_dir = kept[0].task_dir
    assert task_dir is not None
    task = load_task(task_dir)
    # the gate recorded it: oracle 1 (and its reruns), nop 0
    evaluation = task.repo2env["evaluation"]
    assert evaluation["status"] == "verified", evaluation
    check_validate_deep(out)
    # the answer is not in the instruction
    instruction = task.instruction()
    patch = (task_dir / "solution" / "patch.diff").read_text(errors="replace")
    for line in _added_lines(patch):
        assert line not in instruction, (name, line)
    # nor on its explorer page (sections and every file shown)
    from repogym.explorer import withhold
    from repogym.explorer.adapters.harbor import HarborAdapter

    doc = withhold.apply(HarborAdapter().open(str(out)).task(task_dir.name))
    shown = "\n".join(
        [sec.body for sec in doc.sections]
        + [f.data.decode("utf-8", "replace") for f in doc.files if f.data is not None]
    )
    shown_lines = {ln.strip() for ln in shown.splitlines()}
    for line in _added_lines(patch):
        if name in SYNTHESIZED:  # the environment (shown) holds the edited, not the original
            assert line not in shown_lines, (name, line)
    # a structural hack earns no more than doing nothing
    hacked = TrialRunner(get_backend("local")).run(task, CommandAgent(ATTACK))
    assert hacked.reward is not None, hacked.error
    assert hacked.reward <= 0.0, (name, hacked.result["verifier_result"])
    check_harbor_loads(task_dir)
