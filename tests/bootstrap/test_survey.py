"""``repogym bootstrap --repos FILE``: setup success as a number over many repositories.

The repositories are built here and need nothing from the network: a good unittest project,
one whose tests import a module that does not exist (collects 0 tests), and one no recipe fits.
``--years-back`` is checked on a history with backdated commits (``GIT_COMMITTER_DATE``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from repogym.bootstrap import survey
from repogym.bootstrap.survey import At, RepoResult, normalise, pick_commit, read_repo_list
from repogym.cli import app

from .conftest import write_tree

GOOD = {
    "calc.py": "def mul(a, b):\n    return a * b\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": """
        import unittest
        from calc import mul


        class T(unittest.TestCase):
            def test_mul(self):
                self.assertEqual(mul(2, 3), 6)

            def test_zero(self):
                self.assertEqual(mul(0, 3), 0)
    """,
}
BROKEN_IMPORT = {
    **GOOD,
    "tests/test_calc.py": "import unittest\nimport no_such_module_here\n\n\n"
    "class T(unittest.TestCase):\n    def test_a(self):\n        pass\n",
}
UNSUPPORTED = {"README.md": "# just words\n"}


def git(repo: Path, *args: str, date: str = "2024-06-01T12:00:00+00:00") -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": os.environ["PATH"],
        "HOME": str(repo),
    }
    res = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return res.stdout.strip()


def commit(repo: Path, message: str, date: str = "2024-06-01T12:00:00+00:00") -> str:
    if not (repo / ".git").exists():
        git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message, "--allow-empty", date=date)
    return git(repo, "rev-parse", "HEAD")


def git_repo(root: Path, files: dict[str, str]) -> Path:
    write_tree(root, files)
    commit(root, "init")
    return root


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPOGYM_CACHE", str(tmp_path / "cache"))


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, ["bootstrap", *args])
    return res.exit_code, res.stdout, res.stderr


def local_sandbox() -> None:
    from repogym.sandbox.local import LocalSandbox

    ok, why = LocalSandbox.available()
    if not ok:
        pytest.skip(why)


# ------------------------------------------------------------------------ without a sandbox


def test_repo_list_file(tmp_path: Path) -> None:
    listing = tmp_path / "repos.txt"
    listing.write_text(
        "# my survey\n\n  ./a  \nowner/name  # a comment\nhttps://github.com/o/n#x\n./a\n"
    )
    assert read_repo_list(listing) == ["./a", "owner/name", "https://github.com/o/n#x"]


@pytest.mark.parametrize(
    ("step", "reason", "expected"),
    [
        (
            "build: RUN python -m pip install -r requirements.txt 'setuptools>=61' wheel "
            "(exit 1; Dockerfile line 8)",
            "ERROR: No matching distribution found for nosuch==1.0",
            ("build", "pip install failed: No matching distribution"),
        ),
        (
            "build: RUN npm ci (exit 1; Dockerfile line 6)",
            "npm ERR! code ERESOLVE",
            ("build", "npm install failed: dependency conflict"),
        ),
        (
            "build: RUN cargo fetch (exit 101; Dockerfile line 6)",
            "error: failed to get `serde` as a dependency of package `x`",
            ("build", "cargo failed: network unreachable"),
        ),
        (
            "collect: no tests collected",
            "ModuleNotFoundError: No module named 'nope'",
            ("collect", "0 tests: ModuleNotFoundError"),
        ),
        (
            "collect: no tests collected",
            "exit 5, no test ids in the output",
            ("collect", "0 tests"),
        ),
        (
            "collect: exit 2 (3 tests collected)",
            "error collecting tests/test_a.py: ImportError: cannot import name 'x'",
            ("collect", "errors while collecting: ImportError"),
        ),
        (
            "collect: timed out after 600s",
            "the collect command did not finish",
            ("collect", "timed out"),
        ),
    ],
)
def test_normalised_causes(step: str, reason: str, expected: tuple[str, str]) -> None:
    assert normalise(step, reason) == expected


def test_two_packages_missing_group_together() -> None:
    step = "build: RUN python -m pip install -r requirements.txt (exit 1; Dockerfile line {})"
    a = normalise(step.format(7), "ERROR: No matching distribution found for aaa==1")
    b = normalise(step.format(9), "ERROR: Could not find a version that satisfies bbb>=2.0")
    assert a == b


def test_years_back_picks_the_last_commit_old_enough(tmp_path: Path) -> None:
    """The last first-parent commit whose committer date is at least N years before HEAD's."""
    from repogym.sources import LocalGitSource

    repo = tmp_path / "old"
    write_tree(repo, GOOD)
    shas = {"2019": commit(repo, "a", "2019-03-01T10:00:00+00:00")}
    (repo / "calc.py").write_text("def mul(a, b):\n    return b * a\n")
    shas["2021"] = commit(repo, "b", "2021-05-01T10:00:00+00:00")
    shas["2022-05-20"] = commit(repo, "c", "2022-05-20T10:00:00+00:00")
    # A side branch with a commit dated just before the cutoff, merged later: not mainline.
    git(repo, "checkout", "-q", "-b", "side")
    (repo / "side.txt").write_text("x\n")
    shas["side"] = commit(repo, "side", "2022-05-30T10:00:00+00:00")
    git(repo, "checkout", "-q", "main")
    (repo / "main.txt").write_text("y\n")
    shas["2023"] = commit(repo, "d", "2023-08-01T10:00:00+00:00")
    git(
        repo,
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "merge side",
        "side",
        date="2024-06-01T10:00:00+00:00",
    )
    head = git(repo, "rev-parse", "HEAD")
    with LocalGitSource(repo) as source:
        assert pick_commit(source, At()) == (head, "2024-06-01T10:00:00+00:00")
        assert pick_commit(source, At(years_back=2)) == (
            shas["2022-05-20"],
            "2022-05-20T10:00:00+00:00",
        )
        assert pick_commit(source, At(years_back=3))[0] == shas["2021"]
        assert pick_commit(source, At(years_back=0.5))[0] == shas["2023"]
        assert pick_commit(source, At(ref=shas["2023"], years_back=2))[0] == shas["2021"]
        with pytest.raises(LookupError, match="no commit 10 years before HEAD"):
            pick_commit(source, At(years_back=10))
    # The same through the command, which reports the commit and its date per repository.
    listing = tmp_path / "repos.txt"
    listing.write_text(f"{repo}\n")
    seen: list[tuple[str, str | None]] = []

    def fake_check(folder: Path, result: RepoResult, **kwargs: Any) -> None:
        seen.append((kwargs["ref"], (folder / "calc.py").read_text()))
        result.ok, result.tests_collected = True, 2

    import repogym.bootstrap.survey as mod

    mp = pytest.MonkeyPatch()
    mp.setattr(mod, "_check", fake_check)
    try:
        code, stdout, _ = run("--repos", str(listing), "--years-back", "2", "--json")
        assert code == 0, stdout
        data = json.loads(stdout)
        [entry] = data["repos"]
        assert (entry["ref"], entry["commit_date"]) == (
            shas["2022-05-20"],
            "2022-05-20T10:00:00+00:00",
        )
        assert data["at"] == "HEAD~2y"
        assert seen == [(shas["2022-05-20"], "def mul(a, b):\n    return b * a\n")]
        code, stdout, _ = run("--repos", str(listing), "--years-back", "10", "--json")
        assert code == 1
        [entry] = json.loads(stdout)["repos"]
        assert entry["cause"] == "source: history too short"
    finally:
        mp.undo()


def test_bad_input(tmp_path: Path) -> None:
    listing = tmp_path / "repos.txt"
    listing.write_text("# nothing\n")
    assert run("--repos", str(listing))[0] == 2
    assert run("--repos", str(tmp_path / "missing.txt"))[0] == 2
    listing.write_text(f"{tmp_path}\n")
    assert run("--repos", str(listing), "--ref", "HEAD")[0] == 2
    assert run("--repos", str(listing), "--no-check")[0] == 2
    assert run("--repos", str(listing), "--repo", str(tmp_path))[0] == 2
    assert run("--repos", str(listing), "--sandbox", "nope")[0] == 2
    assert run()[0] == 2
    assert run("--repo", str(tmp_path), "--years-back", "2")[0] == 2


def test_one_repository_crashing_costs_only_that_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good, other = git_repo(tmp_path / "good", GOOD), git_repo(tmp_path / "other", GOOD)

    def fake_check(folder: Path, result: RepoResult, **kwargs: Any) -> None:
        if result.repo == str(other):
            raise ValueError("unknown runner 'node'\nmore")
        result.ok, result.tests_collected = True, 2

    monkeypatch.setattr(survey, "_check", fake_check)
    results = tmp_path / "results.jsonl"
    report = survey.run_survey([str(good), str(other)], At(), results_file=results)
    assert [r.ok for r in report.results] == [True, False]
    bad = report.results[1]
    assert (bad.failed_step, bad.cause, bad.detail) == (
        "internal",
        "internal: ValueError",
        "ValueError: unknown runner 'node'",
    )
    assert report.errors_log is not None and "Traceback" in report.errors_log.read_text()


def test_a_killed_survey_loses_nothing_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each result is in the file when its repository finishes; --resume runs only the rest."""
    repos = [git_repo(tmp_path / f"r{i}", GOOD) for i in range(3)]
    listing = tmp_path / "repos.txt"
    listing.write_text("".join(f"{r}\n" for r in repos))
    calls: list[str] = []

    def fake_check(folder: Path, result: RepoResult, **kwargs: Any) -> None:
        calls.append(result.repo)
        if result.repo == str(repos[1]) and len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the second repository runs
        result.ok, result.tests_collected = True, 2

    monkeypatch.setattr(survey, "_check", fake_check)
    code, _, stderr = run("--repos", str(listing))
    assert code == 130 and "--resume" in stderr
    results = listing.with_name("repos.txt.survey.jsonl")
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert [d["repo"] for d in lines] == [str(repos[0])]
    calls.clear()
    code, stdout, _ = run("--repos", str(listing), "--resume", "--json")
    assert code == 0
    assert calls == [str(repos[1]), str(repos[2])]
    data = json.loads(stdout)
    assert data["resumed"] == 1 and data["totals"]["ok"] == 3
    assert [r["repo"] for r in data["repos"]] == [str(r) for r in repos]
    assert len(results.read_text().splitlines()) == 3


# ---------------------------------------------------------------------------- in the sandbox


@pytest.mark.slow
def test_survey_totals_and_grouped_causes(tmp_path: Path) -> None:
    local_sandbox()
    good = git_repo(tmp_path / "good", GOOD)
    broken = git_repo(tmp_path / "broken", BROKEN_IMPORT)
    words = git_repo(tmp_path / "words", UNSUPPORTED)
    listing = tmp_path / "repos.txt"
    listing.write_text(f"# three repositories\n{good}\n{broken}  # tests do not import\n{words}\n")
    code, stdout, stderr = run("--repos", str(listing), "--json", "--jobs", "2")
    assert code == 1, stderr
    data = json.loads(stdout)
    totals = data["totals"]
    assert {k: totals[k] for k in ("repos", "ok", "failed", "success_rate")} == {
        "repos": 3,
        "ok": 1,
        "failed": 2,
        "success_rate": 0.3333,
    }
    assert totals["causes"] == {
        "collect: 0 tests: ModuleNotFoundError": 1,
        "unsupported repository": 1,
    }
    assert totals["steps"] == {"collect": 1, "detect": 1}
    assert totals["tests_collected"] == 2
    by_repo = {r["repo"]: r for r in data["repos"]}
    ok = by_repo[str(good)]
    assert ok["ok"] and ok["tests_collected"] == 2 and ok["failed_step"] == ""
    assert ok["ref"] == git(good, "rev-parse", "HEAD") and ok["commit_date"].startswith(
        "2024-06-01"
    )
    assert ok["seconds"] > 0 and ok["runner"] == "unittest"
    bad = by_repo[str(broken)]
    assert (bad["ok"], bad["failed_step"], bad["reason"]) == (
        False,
        "collect",
        "0 tests: ModuleNotFoundError",
    )
    assert "no_such_module_here" in bad["detail"]
    assert by_repo[str(words)]["failed_step"] == "detect"
    assert "[3/3]" in stderr and "FAIL" in stderr
    # The human summary says the same.
    code, stdout, _ = run("--repos", str(listing))
    assert code == 1
    assert "1/3 ok (33.3%)" in stdout
    assert "collect: 0 tests: ModuleNotFoundError" in stdout and "unsupported repository" in stdout
