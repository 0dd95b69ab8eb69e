"""Dependencies as of the commit: lock files become constraints, installs are date-capped."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.bootstrap import bootstrap, bootstrap_ref, detect, export_ref, make_recipe
from repogym.bootstrap.commit import (
    CommitInfo,
    changelog_version,
    git_commit_date,
    git_version,
    normalize_date,
    read_commit,
)
from repogym.bootstrap.locks import (
    parse_pdm_lock,
    parse_pipfile_lock,
    parse_poetry_lock,
    parse_uv_lock,
    pinned_files,
)
from repogym.bootstrap.pin import (
    CONSTRAINTS_PATH,
    LOCK_CONSTRAINTS_PATH,
    lock_constraints_step,
    pinned_dockerfile,
)
from repogym.bootstrap.python.requirements import parse_requirement_lines
from repogym.bootstrap.python.versions import PythonInstall, newest_python_at

from .conftest import write_tree

MakeRepo = Callable[..., Path]

UV_LOCK = """
version = 1
requires-python = ">=3.8"

[[package]]
name = "tiny"
version = "0.1.0"
source = { editable = "." }
dependencies = [
    { name = "numpy", version = "1.24.4", source = { registry = "https://pypi.org/simple" }, marker = "python_full_version < '3.9'" },
    { name = "numpy", version = "2.0.2", source = { registry = "https://pypi.org/simple" }, marker = "python_full_version >= '3.9'" },
]

[package.optional-dependencies]
crypto = [{ name = "cryptography", version = "42.0.0", source = { registry = "https://pypi.org/simple" } }]

[package.dev-dependencies]
oldcrypto = [{ name = "cryptography", version = "2.3", source = { registry = "https://pypi.org/simple" } }]

[[package]]
name = "cryptography"
version = "2.3"
source = { registry = "https://pypi.org/simple" }
resolution-markers = ["python_full_version >= '3.8' and extra == 'group-4-tiny-oldcrypto'"]

[[package]]
name = "cryptography"
version = "42.0.0"
source = { registry = "https://pypi.org/simple" }
resolution-markers = ["python_full_version >= '3.8' and extra != 'group-4-tiny-oldcrypto'"]

[[package]]
name = "pytest"
version = "7.4.4"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "numpy"
version = "1.24.4"
source = { registry = "https://pypi.org/simple" }
resolution-markers = ["python_full_version < '3.9'"]

[[package]]
name = "numpy"
version = "2.0.2"
source = { registry = "https://pypi.org/simple" }
resolution-markers = ["python_full_version >= '3.9'"]

[[package]]
name = "vendored"
version = "1.0"
source = { git = "https://example.invalid/vendored?rev=abc#abc" }
"""
POETRY_LOCK = """
[[package]]
name = "pytest"
version = "7.2.2"
optional = false
python-versions = ">=3.7"

[[package]]
name = "Typing_Extensions"
version = "4.5.0"
optional = false
python-versions = ">=3.7"
markers = "python_version < '3.11'"

[[package]]
name = "local-lib"
version = "0.0.1"
optional = false
python-versions = "*"

[package.source]
type = "directory"
url = "libs/local"
"""
PYPROJECT = """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tiny"
version = "0.1.0"
requires-python = ">=3.8"

[project.optional-dependencies]
test = ["pytest"]
"""


def test_uv_lock_pins_become_constraints() -> None:
    lock = parse_uv_lock(UV_LOCK, ["tiny"])
    assert lock.constraints() == [
        'numpy==1.24.4 ; python_full_version < "3.9"',
        'numpy==2.0.2 ; python_full_version >= "3.9"',
        "pytest==7.4.4",
    ]
    assert lock.skipped == ["vendored (git source)"]  # cryptography: nothing installed reaches it
    # Versions only conflicting groups tell apart: the one the installed extras reach.
    assert (
        "cryptography==42.0.0" in parse_uv_lock(UV_LOCK, ["tiny"], extras=["crypto"]).constraints()
    )
    old = parse_uv_lock(UV_LOCK, ["tiny"], groups=["oldcrypto"]).constraints()
    assert "cryptography==2.3" in old and "cryptography==42.0.0" not in old
    both = parse_uv_lock(UV_LOCK, ["tiny"], extras=["crypto"], groups=["oldcrypto"])
    assert "cryptography (locked at 2 versions without markers)" in both.skipped
    assert parse_uv_lock("not = [toml").error.startswith("uv.lock: invalid TOML")


def test_other_lock_formats() -> None:
    poetry = parse_poetry_lock(POETRY_LOCK)
    assert poetry.constraints() == ["pytest==7.2.2", "typing-extensions==4.5.0"]
    assert poetry.skipped == ["local-lib (directory source)"]
    pdm = parse_pdm_lock(
        '[metadata]\nlock_version = "4.4"\n\n[[package]]\nname = "pytest"\nversion = "8.0.2"\n'
        '\n[[package]]\nname = "mine"\nversion = "0"\neditable = true\npath = "."\n'
    )
    assert pdm.constraints() == ["pytest==8.0.2"] and pdm.skipped == ["mine (editable)"]
    pipfile = parse_pipfile_lock(
        json.dumps(
            {
                "_meta": {},
                "default": {
                    "requests": {"version": "==2.31.0", "markers": "python_version >= '3.7'"}
                },
                "develop": {
                    "pytest": {"version": "==7.0.1"},
                    "me": {"editable": True, "path": "."},
                },
            }
        )
    )
    # One version: pinned for every environment (a constraint never installs anything).
    assert pipfile.constraints() == ["pytest==7.0.1", "requests==2.31.0"]
    pinned = pinned_files(
        [
            parse_requirement_lines(
                "attrs==23.1.0\npytest==7.3.1 ; python_version >= '3.8'\n", "a.txt"
            ),
            parse_requirement_lines("requests>=2\n", "b.txt"),
        ]
    )
    assert pinned is not None and pinned.source == "a.txt (fully pinned)"
    assert pinned.constraints() == ["attrs==23.1.0", "pytest==7.3.1"]


def test_lock_pins_in_the_recipe(make_repo: MakeRepo, pythons: list[PythonInstall]) -> None:
    repo = make_repo(
        {"pyproject.toml": PYPROJECT, "uv.lock": UV_LOCK, "tests/test_t.py": "def test_t(): pass\n"}
    )
    d = detect(repo, pythons=pythons)
    assert d.python is not None and d.python.lock_source == "uv.lock"
    recipe = make_recipe(repo, d)
    lines = recipe.dockerfile.splitlines()
    write = next(i for i, ln in enumerate(lines) if "printf" in ln)
    installs = [i for i, ln in enumerate(lines) if ln.startswith("RUN uv pip install")]
    assert len(installs) == 2 and write < installs[0]
    assert all(f"-c {LOCK_CONSTRAINTS_PATH}" in lines[i] + lines[i + 1] for i in installs)
    assert "pytest==7.4.4" in recipe.dockerfile
    assert "# the repository's own pins: 3 exact versions from uv.lock" in recipe.dockerfile
    assert any("not pinned from uv.lock: vendored (git source)" in n for n in recipe.notes)
    # poetry.lock works the same way.
    repo = make_repo({"pyproject.toml": PYPROJECT, "poetry.lock": POETRY_LOCK, "test_x.py": ""})
    recipe = make_recipe(repo, detect(repo, pythons=pythons))
    assert "pytest==7.2.2" in recipe.dockerfile


def test_lock_step_and_freeze_pinning_share_one_mechanism() -> None:
    words = lock_constraints_step(['b==2 ; python_version < "3.9"', "a==1", "a==1"])
    assert words[-2:] == [">", LOCK_CONSTRAINTS_PATH]
    assert words[words.index("printf") + 2 :][:2] == ["a==1", "'b==2 ; python_version < \"3.9\"'"]
    dockerfile = (
        "FROM python:3.12-slim\nRUN python -m pip install uv==0.13.9\n"
        f"RUN uv pip install --system --exclude-newer 2024-01-01T00:00:00Z -c {LOCK_CONSTRAINTS_PATH} x\n"
        "COPY repo/ /workspace/\nRUN uv pip install --system -e .\n"
    )
    pinned = pinned_dockerfile(dockerfile).splitlines()
    assert pinned[1] == "RUN python -m pip install uv==0.13.9"  # the installer pins itself
    assert pinned[3] == f"COPY repogym-constraints.txt {CONSTRAINTS_PATH}"
    installs = [ln for ln in pinned if "uv pip install" in ln]
    assert len(installs) == 2 and all(f"-c {CONSTRAINTS_PATH}" in ln for ln in installs)


def test_dates() -> None:
    assert normalize_date("2024-05-01T14:30:00+02:00") == "2024-05-01T12:30:00Z"
    assert normalize_date("2024-05-01") == "2024-05-01T23:59:59Z"
    assert normalize_date("1700000000") == "2023-11-14T22:13:20Z"
    with pytest.raises(ValueError):
        normalize_date("yesterday")
    assert newest_python_at("2023-01-01T00:00:00Z") == (3, 11)  # 3.11: 2022-10-24 (+60 days)
    assert newest_python_at("2022-12-01T00:00:00Z") == (3, 10)
    assert newest_python_at("2015-01-01") == (3, 8)
    assert newest_python_at("garbage") is None


def _commit_at(repo: Path, date: str, message: str = "c") -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": "2001-01-01T00:00:00Z",  # the committer date is what counts
        "GIT_COMMITTER_DATE": date,
    }
    if not (repo / ".git").exists():
        subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", message], check=True, env=env)
    res = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    return res.stdout.strip()


def test_installs_are_capped_at_the_commit_date(tmp_path: Path) -> None:
    repo = write_tree(
        tmp_path / "repo",
        {"pyproject.toml": PYPROJECT, "tests/test_t.py": "def test_t(): pass\n"},
    )
    old = _commit_at(repo, "2023-01-01T12:00:00+01:00")
    (repo / "tests" / "test_u.py").write_text("def test_u(): pass\n")
    _commit_at(repo, "2024-06-01T00:00:00Z")
    assert git_commit_date(repo, old) == "2023-01-01T11:00:00Z"
    cache = tmp_path / "cache"
    kwargs = {"check": False, "cache": None, "use_cache": False}
    # A ref of the repository: the date of that commit.
    recipe = bootstrap_ref(repo, old, **kwargs).recipe
    assert recipe.commit_date == "2023-01-01T11:00:00Z"
    installs = [ln for ln in recipe.dockerfile.splitlines() if ln.startswith("RUN uv pip install")]
    assert installs and all("--exclude-newer 2023-01-01T11:00:00Z" in ln for ln in installs)
    # A clean work tree: its HEAD's date; an explicit date wins; a dirty tree is not capped.
    assert bootstrap(repo, **kwargs).recipe.commit_date == "2024-06-01T00:00:00Z"
    given = bootstrap(repo, commit_date="2020-02-02", **kwargs).recipe
    assert given.commit_date == "2020-02-02T23:59:59Z"
    (repo / "new.py").write_text("x = 1\n")
    dirty = bootstrap(repo, **kwargs).recipe
    assert dirty.commit_date == "" and "--exclude-newer" not in dirty.dockerfile
    assert any("no commit date, uncapped" in n for n in dirty.notes)
    assert not cache.exists()


def test_commit_date_enters_the_recipe_hash(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    repo = make_repo({"pyproject.toml": PYPROJECT, "tests/test_t.py": "def test_t(): pass\n"})
    a = make_recipe(repo, detect(repo, pythons=pythons, commit=CommitInfo("2024-01-01T00:00:00Z")))
    b = make_recipe(repo, detect(repo, pythons=pythons, commit=CommitInfo("2024-02-01T00:00:00Z")))
    assert a.hash != b.hash and a.commit_date == "2024-01-01T00:00:00Z"
    # The interpreter is one of the commit's time: 3.13 came out in October 2024.
    assert a.base_image == "python:3.12-slim"
    old = detect(repo, pythons=pythons, commit=CommitInfo("2022-12-01T00:00:00Z"))
    assert old.base_image == "python:3.10-slim"
    assert any("released 60+ days before the commit" in n for n in old.notes)
    assert (
        "Installs: uv 0.13.9, resolved as of the commit date 2024-01-01T00:00:00Z." in a.dockerfile
    )


def test_editable_installs_of_commits_older_than_pep_660(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    # uv installs editable projects only through PEP 660 (setuptools >= 64, August 2022).
    # A setup.py project of before gets `setup.py develop` through pip, as its CI did ...
    repo = make_repo({"setup.py": "from setuptools import setup\nsetup(name='old')\n"})
    recipe = make_recipe(repo, detect(repo, pythons=pythons, commit=CommitInfo("2021-03-01")))
    flat = recipe.dockerfile.replace(" \\\n    ", " ")
    assert "--exclude-newer 2021-03-01T23:59:59Z" in flat
    assert "RUN python -m pip install --no-build-isolation --no-deps -e ." in flat
    assert "/usr/lib/repogym/project-requirements.txt" in flat and "setuptools>=64" not in flat
    # ... a setup.py-less one gets a setuptools that has it, capped at its own date.
    repo = make_repo({"pyproject.toml": PYPROJECT})
    recipe = make_recipe(repo, detect(repo, pythons=pythons, commit=CommitInfo("2021-03-01")))
    flat = recipe.dockerfile.replace(" \\\n    ", " ")
    assert "--exclude-newer-package setuptools=2022-09-01T00:00:00Z 'setuptools>=64'" in flat
    assert "--no-build-isolation-package tiny -e 'tiny[test] @ file:///workspace'" in flat
    new = make_recipe(repo, detect(repo, pythons=pythons, commit=CommitInfo("2024-03-01")))
    assert "--exclude-newer-package" not in new.dockerfile and "'setuptools>=64'" in new.dockerfile


def test_reuploaded_packages_and_old_interpreters(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    repo = make_repo({"requirements.txt": "pytest==4.0.0\n", "test_x.py": "def test_x(): pass\n"})
    d = detect(repo, pythons=pythons, commit=CommitInfo("2019-06-01T00:00:00Z"))
    # No Python of the day is installed here: the oldest one, not the newest; and releases
    # older than it rarely support it, so installs resolve as of its release (+60 days).
    assert d.base_image == "python:3.8-slim"
    assert d.python is not None and d.python.resolve_date == "2019-12-13T00:00:00Z"
    recipe = make_recipe(repo, d)
    assert recipe.commit_date == "2019-06-01T00:00:00Z"
    flat = recipe.dockerfile.replace(" \\\n    ", " ")
    assert "--exclude-newer 2019-12-13T00:00:00Z" in flat
    # atomicwrites (a pytest 3-5 dependency) has only files uploaded again in July 2022.
    assert "--exclude-newer-package atomicwrites=2022-07-10T00:00:00Z" in flat


def test_version_of_a_project_versioned_by_tags(tmp_path: Path) -> None:
    pyproject = PYPROJECT.replace('version = "0.1.0"', 'dynamic = ["version"]').replace(
        'requires = ["setuptools>=61"]', 'requires = ["setuptools>=61", "setuptools-scm>=7"]'
    )
    files = {"pyproject.toml": pyproject, "CHANGES.rst": "Changes\n=======\n\n2.4.1 (2024-01-02)\n"}
    repo = write_tree(tmp_path / "repo", {**files, "tests/test_t.py": "def test_t(): pass\n"})
    _commit_at(repo, "2024-02-01T00:00:00Z")
    subprocess.run(["git", "-C", str(repo), "tag", "v2.5.0"], check=True)
    (repo / "tests" / "test_u.py").write_text("def test_u(): pass\n")
    _commit_at(repo, "2024-03-01T00:00:00Z", "after the tag")
    assert git_version(repo, "HEAD") == "2.5.0"
    recipe = bootstrap(repo, check=False, use_cache=False).recipe
    assert recipe.env["SETUPTOOLS_SCM_PRETEND_VERSION"] == "2.5.0"
    # Without git (a snapshot), the changelog's newest release; else 0.0.0.
    assert changelog_version(repo) == ("2.4.1", "CHANGES.rst")
    snapshot = write_tree(tmp_path / "snapshot", files)
    project = detect(snapshot).python
    assert project is not None and project.scm_pretend == "2.4.1"
    (snapshot / "CHANGES.rst").unlink()
    project = detect(snapshot).python
    assert project is not None and project.scm_pretend == "0.0.0"


def test_read_commit_gives_a_snapshot_what_git_knew(tmp_path: Path) -> None:
    """Generation bootstraps an export without .git: date, release tag and submodules come
    from the repository through read_commit, and the recipe is the one of the checkout."""
    pyproject = PYPROJECT.replace('version = "0.1.0"', 'dynamic = ["version"]').replace(
        'requires = ["setuptools>=61"]', 'requires = ["setuptools>=61", "setuptools-scm>=7"]'
    )
    repo = write_tree(
        tmp_path / "repo", {"pyproject.toml": pyproject, "tests/test_t.py": "x = 1\n"}
    )
    _commit_at(repo, "2024-02-01T00:00:00Z")
    subprocess.run(["git", "-C", str(repo), "tag", "v3.1.0"], check=True)
    sha = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    snapshot = tmp_path / "snapshot"
    export_ref(repo, sha, snapshot)
    bare = detect(snapshot).python
    assert bare is not None and bare.commit_date is None and bare.scm_pretend == "0.0.0"
    commit = read_commit(repo, sha, snapshot)
    assert commit == CommitInfo("2024-02-01T00:00:00Z", {}, "3.1.0")
    recipe = bootstrap(snapshot, ref=sha, check=False, use_cache=False, commit=commit).recipe
    assert recipe.commit_date == "2024-02-01T00:00:00Z"
    assert recipe.env["SETUPTOOLS_SCM_PRETEND_VERSION"] == "3.1.0"
    assert recipe == bootstrap(repo, ref=sha, check=False, use_cache=False).recipe
    with pytest.raises(TypeError):
        bootstrap(snapshot, check=False, use_cache=False, commit=commit, version="1.0")
