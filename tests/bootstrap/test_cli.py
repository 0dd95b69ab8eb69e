"""``repogym bootstrap``: output, exit codes (0 ok, 1 check failed, 2 bad input)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app

from .conftest import git_commit

MakeRepo = Callable[..., Path]

PROJECT = {
    "pyproject.toml": '[project]\nname = "clip"\nversion = "1"\nrequires-python = ">=3.8"\n',
    "clip/__init__.py": "",
    "tests/__init__.py": "",
    "tests/test_clip.py": "import unittest\n\nclass T(unittest.TestCase):\n"
    "    def test_a(self):\n        pass\n",
}


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPOGYM_CACHE", str(tmp_path / "cache"))


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["bootstrap", *args])
    return result.exit_code, result.output


def test_prints_recipe_without_check(make_repo: MakeRepo) -> None:
    code, out = run("--repo", str(make_repo(PROJECT)), "--no-check")
    assert code == 0, out
    assert "FROM python:" in out and "COPY repo/ /workspace/" in out
    assert "test command" in out and "python -m unittest discover" in out
    assert "notes" in out and "not checked" in out


def test_json_output(make_repo: MakeRepo) -> None:
    code, out = run("--repo", str(make_repo(PROJECT)), "--no-check", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["exit_code"] == 0 and data["check"] is None
    assert data["recipe"]["runner"] == "unittest"
    assert len(data["recipe"]["hash"]) == 64
    assert data["detection"]["language"] == "python"


def test_ref_is_exported(make_repo: MakeRepo) -> None:
    repo = make_repo(PROJECT)
    sha = git_commit(repo)
    (repo / "pyproject.toml").unlink()  # the work tree no longer matters with --ref
    code, out = run("--repo", str(repo), "--ref", "HEAD", "--no-check", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["ref"] == sha
    assert data["detection"]["details"]["name"] == "clip"


def test_bad_input_exits_2(make_repo: MakeRepo, tmp_path: Path) -> None:
    assert run("--repo", str(tmp_path / "missing"))[0] == 2
    code, out = run("--repo", str(make_repo({"README.md": "hi"})))
    assert code == 2 and "no Python, Node, Rust, Go, Java or C/C++" in out
    repo = make_repo(PROJECT)
    code, out = run("--repo", str(repo), "--ref", "HEAD")
    assert code == 2 and "not a git repository" in out
    git_commit(repo)
    code, out = run("--repo", str(repo), "--ref", "does-not-exist")
    assert code == 2 and "unknown ref" in out
    code, out = run("--repo", str(repo), "--sandbox", "nope")
    assert code == 2 and "unknown sandbox backend" in out


@pytest.mark.slow
def test_check_ok_and_failed(make_repo: MakeRepo) -> None:
    from repogym.sandbox.local import LocalSandbox

    ok, why = LocalSandbox.available()
    if not ok:
        pytest.skip(why)
    code, out = run("--repo", str(make_repo(PROJECT)))
    assert code == 0, out
    assert "check ok" in out and "1 tests collected" in out
    broken = make_repo({**PROJECT, "requirements.txt": "no such thing ===\n"})
    code, out = run("--repo", str(broken))
    assert code == 1, out
    assert "check FAILED" in out and "install" in out and "-r requirements.txt" in out
    assert "reason:" in out
