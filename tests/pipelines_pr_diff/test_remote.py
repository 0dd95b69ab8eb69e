"""pr_diff over a GitHub API stub (the hosted ``widgets`` repository of the remote-generate tests):
merged PRs from the API, the draft and tiny-diff filters counted, remote provenance, and the
emitted tasks graded in the real sandbox."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.run.agents import NopAgent, OracleAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.taskdir import load_task
from tests.pipelines_remote.remote_fixtures import Hosted, HostedGitHub, build_hosted, isolate

pytestmark = pytest.mark.slow

_JUDGE = ("REPOGYM_JUDGE_URL", "REPOGYM_JUDGE_MODEL", "REPOGYM_JUDGE_API_KEY")


@pytest.fixture(scope="module")
def hosted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosted]:
    mp = pytest.MonkeyPatch()
    isolate(mp, _JUDGE)
    try:
        yield build_hosted(tmp_path_factory.mktemp("hosted"))
    finally:
        mp.undo()


def test_github_pr_diff(hosted: Hosted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, _JUDGE)
    monkeypatch.setenv("REPOGYM_CLONE_CACHE", str(tmp_path / "clones"))
    out = tmp_path / "out"
    with HostedGitHub(hosted) as gh:
        monkeypatch.setenv("REPOGYM_GITHUB_API", gh.url)
        res = CliRunner().invoke(
            app,
            ["generate", "--pipeline", "pr_diff", "--repo", "acme/widgets"]
            + ["--out", str(out), "--json"],
        )
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    kept = sorted(o["task_id"] for o in report["outcomes"] if o["kept"])
    assert kept == ["acme__widgets-8", "acme__widgets-9"]
    # #7 is a draft; #5 changes one line (2 changed lines < min_changed_lines 3).
    assert report["yield"]["dropped"] == {"draft": 1, "tiny diff": 1}

    task = load_task(out / "tasks" / "acme__widgets-8")
    prov = task.config.metadata["repo2env"]
    assert prov["pipeline"] == "pr_diff" and prov["repo"] == "acme/widgets"
    assert prov["reference"] == "https://github.com/acme/widgets/pull/8"
    assert prov["source_access"] == "public"
    assert prov["pr_diff"]["head_commit"] == hosted.shas["pr8"]
    assert "triangle" in task.instruction()
    assert "def triangle" in (task.path / "tests/oracle.patch").read_text()
    runner = TrialRunner(get_backend("local"))
    assert runner.run(task, OracleAgent()).reward == 1.0
    assert runner.run(task, NopAgent()).reward == 0.0
