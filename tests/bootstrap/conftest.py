"""Fixtures for bootstrap tests: repositories written file by file, fake interpreter lists."""

from __future__ import annotations

import os
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repogym.bootstrap.python.versions import PythonInstall

FAKE_PYTHONS = [
    PythonInstall((3, minor, patch), Path(f"/fake/pyenv/3.{minor}.{patch}"))
    for minor, patch in ((8, 18), (9, 18), (10, 13), (11, 7), (12, 1), (13, 0))
]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative path → text, dedented) under ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def checked_project(repo: Path, files: dict[str, str]):  # type: ignore[no-untyped-def]
    """``files`` written under ``repo`` as they are, detected, and the recipe built and checked
    on the local sandbox; the check's result, which must be ok."""
    from repogym.bootstrap import check_recipe, detect, make_recipe

    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    found = detect(repo)
    assert found.supported, found.reason
    result = check_recipe(repo, make_recipe(repo, found))
    assert result.ok, (result.failed_step, result.reason, result.log_tail)
    return result


def git_commit(repo: Path, message: str = "init") -> str:
    """Init (if needed), add everything and commit; returns the commit sha."""
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin",
        "HOME": str(repo),
    }
    if not (repo / ".git").exists():
        subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", message], check=True, env=env)
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, env=env
    )
    return out.stdout.strip()


@pytest.fixture
def make_repo(tmp_path: Path) -> Callable[..., Path]:
    counter = iter(range(1000))

    def _make(files: dict[str, str], name: str | None = None) -> Path:
        return write_tree(tmp_path / (name or f"repo{next(counter)}"), files)

    return _make


@pytest.fixture
def pythons() -> list[PythonInstall]:
    return list(FAKE_PYTHONS)


def local_backend_with_private_cache(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[None]:
    """Skip without the local sandbox backend; point ``REPOGYM_CACHE`` at a fresh folder for
    the duration (module-scoped fixtures of build tests delegate here)."""
    from repogym.sandbox.local import LocalSandbox

    ok, why = LocalSandbox.available()
    if not ok:
        pytest.skip(why)
    old = os.environ.get("REPOGYM_CACHE")
    os.environ["REPOGYM_CACHE"] = str(tmp_path_factory.mktemp(name))
    yield
    if old is None:
        os.environ.pop("REPOGYM_CACHE", None)
    else:
        os.environ["REPOGYM_CACHE"] = old
