"""``repogym generate`` over GitHub and GitLab stubs in the real sandbox: task ids and
provenance from the remote, linked-issue instructions, drafts skipped, commits off every branch
fetched, API errors (private repository, rate limit) refused before anything is written, and
unsupported (source, pipeline) pairs refused up front."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.taskdir import load_task
from tests.pipelines_remote.remote_fixtures import (
    ISSUE_BODY,
    ISSUE_TITLE,
    Hosted,
    HostedGitHub,
    HostedGitLab,
)
from tests.sources_remote.stub_github import rate_limited

cli = CliRunner()


def generate(*args: str) -> tuple[int, str, str]:
    res = cli.invoke(app, ["generate", "--pipeline", "pr_runtime", *args])
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.slow
def test_github_pr_runtime(hosted: Hosted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with HostedGitHub(hosted) as gh:
        monkeypatch.setenv("REPOGYM_GITHUB_API", gh.url)
        gh.faults.append(("/repos/acme/widgets/pulls", rate_limited(1)))  # waited out
        code, stdout, stderr = generate("--repo", "acme/widgets", "--out", str(out), "--json")
    assert code == 0, stderr
    report = json.loads(stdout)
    kept = sorted(o["task_id"] for o in report["outcomes"] if o["kept"])
    assert kept == ["acme__widgets-5", "acme__widgets-8", "acme__widgets-9"]
    assert report["yield"]["dropped"] == {"draft": 1}
    assert report["repo_id"] == "acme/widgets" and report["source_access"] == "public"
    assert report["source"]["kind"] == "github" and report["source"]["cache"] == "cloned"
    assert any(p.startswith("/repos/acme/widgets/pulls") for _, p, _ in gh.requests[:3])

    task = load_task(out / "tasks" / "acme__widgets-5")
    prov = task.config.metadata["repo2env"]
    assert prov["repo"] == "acme/widgets"
    assert prov["reference"] == "https://github.com/acme/widgets/pull/5"
    assert prov["source_access"] == "public" and prov["synthesis_llm"] == "none"
    assert prov["ref"] == hosted.shas["init"]
    assert prov["pr_runtime"]["head_commit"] == hosted.shas["pr5"]
    assert prov["pr_runtime"]["fail_to_pass"] == ["tests/test_area.py::test_rectangle"]
    text = task.instruction()
    assert text.startswith(f"# {ISSUE_TITLE}\n")
    assert ISSUE_BODY in text and "The sides were summed." in text
    assert "#3" not in text and "width * height" not in text
    # The commit reachable only through refs/pull/8/head became a task too.
    t8 = load_task(out / "tasks" / "acme__widgets-8")
    assert t8.config.metadata["repo2env"]["pr_runtime"]["head_commit"] == hosted.shas["pr8"]
    res = cli.invoke(app, ["validate", str(out), "--json"])
    assert res.exit_code == 0, res.output


@pytest.mark.slow
def test_gitlab_pr_runtime(hosted: Hosted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "out"
    token = "glpat-test-token-1234"
    monkeypatch.setenv("GITLAB_TOKEN", token)
    with HostedGitLab(hosted, token=token) as gl:
        monkeypatch.setenv("REPOGYM_GITLAB_URL", gl.url)
        code, stdout, stderr = generate(
            "--repo", "gitlab:group/widgets", "--out", str(out), "--limit", "1", "--json"
        )
    assert code == 0, stderr
    report = json.loads(stdout)
    assert [o["task_id"] for o in report["outcomes"] if o["kept"]] == ["group__widgets-5"]
    task = load_task(out / "tasks" / "group__widgets-5")
    prov = task.config.metadata["repo2env"]
    assert prov["repo"] == "group/widgets" and prov["source_access"] == "private"
    assert prov["reference"] == "https://gitlab.example/group/widgets/-/merge_requests/5"
    assert ISSUE_TITLE in task.instruction() and ISSUE_BODY in task.instruction()
    assert token not in stdout + stderr
    assert not any(token.encode() in p.read_bytes() for p in out.rglob("*") if p.is_file())


def test_private_repository_without_token(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clean_env: Path
) -> None:
    out = tmp_path / "out"
    with HostedGitHub(hosted) as gh:
        monkeypatch.setenv("REPOGYM_GITHUB_API", gh.url)
        code, stdout, stderr = generate("--repo", "acme/vault", "--out", str(out))
    assert code == 2
    assert "repository acme/vault not found or private: set GITHUB_TOKEN" in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not out.exists() and not clean_env.exists()


def test_rate_limit_far_away_is_one_clear_line(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with HostedGitHub(hosted) as gh:
        monkeypatch.setenv("REPOGYM_GITHUB_API", gh.url)
        # The repository answers, then listing pull requests hits the limit: still no output.
        gh.faults.append(("/repos/acme/widgets/pulls", rate_limited(3600)))
        code, _, stderr = generate("--repo", "acme/widgets", "--out", str(out))
    assert code == 2, stderr
    line = stderr.strip()
    assert "\n" not in line and "rate limit exceeded (limit 60/h)" in line, stderr
    assert "resets at 20" in line, stderr
    assert not out.exists()


def test_unsupported_pairing_refused_up_front(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from repogym import pipelines
    from repogym.pipelines.commit_runtime import CommitRuntime

    class LocalOnly(CommitRuntime):
        name = "local_only"
        sources = frozenset({"local"})
        sources_note = "it reads reflog entries only a local clone has"
        llm_rewrite = False

    pipelines.register(LocalOnly())
    out = tmp_path / "out"
    try:
        with HostedGitHub(hosted) as gh:
            monkeypatch.setenv("REPOGYM_GITHUB_API", gh.url)
            res = cli.invoke(
                app, ["generate", "-p", "local_only", "--repo", "acme/widgets", "--out", str(out)]
            )
            assert res.exit_code == 2
            line = " ".join(res.stderr.split())
            assert "pipeline local_only cannot read github repositories (it reads: local)" in line
            assert "it reads reflog entries only a local clone has" in line
            assert gh.requests == []  # refused before any API call
            # --llm is refused for a pipeline without an instruction rewrite.
            res = cli.invoke(
                app,
                ["generate", "-p", "local_only", "--repo", str(hosted.bare), "--llm", "openai/m"],
            )
            assert res.exit_code == 2 and "has no instruction rewrite" in res.stderr
    finally:
        pipelines.unregister("local_only")
    assert not out.exists()


def test_bad_repo_arguments(tmp_path: Path) -> None:
    code, _, stderr = generate("--repo", "https://bitbucket.org/a/b", "--out", str(tmp_path / "o"))
    assert code == 2 and "unsupported repository host" in stderr
    code, _, stderr = generate("--repo", "acme/widgets", "--llm", "nope", "--out", str(tmp_path))
    assert code == 2 and "provider/model" in stderr
    out = tmp_path / "o2"
    code, _, stderr = generate("--repo", "acme/widgets", "--llm", "openai/m", "--out", str(out))
    line = " ".join(stderr.split())
    assert code == 2 and "no API key; set OPENAI_API_KEY (or REPOGYM_LLM_API_KEY)" in line
    code, _, stderr = generate(
        "--repo", "acme/widgets", "--llm-endpoint", "http://x", "--out", str(out)
    )
    assert code == 2 and "--llm-endpoint needs --llm" in " ".join(stderr.split())
    assert not out.exists()


@pytest.mark.slow
def test_commit_runtime_on_github(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with HostedGitHub(hosted) as gh:
        monkeypatch.setenv("REPOGYM_GITHUB_API", gh.url)
        res = cli.invoke(
            app,
            ["generate", "--repo", "acme/widgets", "--out", str(out), "--limit", "1", "--json"],
        )
    assert res.exit_code == 0, res.stderr
    sha = hosted.shas["pr9"]  # the default branch's newest commit
    task = load_task(out / "tasks" / f"acme__widgets-{sha[:12]}")
    prov = task.config.metadata["repo2env"]
    assert prov["repo"] == "acme/widgets" and prov["source_access"] == "public"
    assert prov["reference"] == f"https://github.com/acme/widgets/commit/{sha}"


@pytest.mark.slow
def test_api_error_mid_run_keeps_finished_tasks_and_resumes(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with HostedGitHub(hosted) as gh:
        monkeypatch.setenv("REPOGYM_GITHUB_API", gh.url)
        gh.pulls = [p for p in gh.pulls if p["number"] in (9, 5)]
        # #9 is under way when reading #5's linked issue hits a long rate limit.
        gh.faults.append(("/repos/acme/widgets/issues/3", rate_limited(3600)))
        code, _, stderr = generate("--repo", "acme/widgets", "--out", str(out))
        assert code == 2
        line = " ".join(stderr.split())
        assert "rate limit exceeded" in line and "rerun with --resume" in line
        assert sorted(p.name for p in (out / "tasks").iterdir()) == ["acme__widgets-9"]
        state = json.loads((out / ".repogym" / "pr_runtime-state.json").read_text())
        assert state["pr-9"] == {"status": "kept", "task_id": "acme__widgets-9"}

        code, stdout, stderr = generate(
            "--repo", "acme/widgets", "--out", str(out), "--resume", "--json"
        )
    assert code == 0, stderr
    report = json.loads(stdout)
    assert [o["task_id"] for o in report["outcomes"] if o["kept"]] == ["acme__widgets-5"]
    assert report["source"]["cache"] == "fetched"
    assert sorted(p.name for p in (out / "tasks").iterdir()) == [
        "acme__widgets-5",
        "acme__widgets-9",
    ]
