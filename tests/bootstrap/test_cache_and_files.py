"""The recipe cache, repository snapshots, ref export, and the cached bootstrap flow."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.bootstrap import (
    CheckResult,
    ExportError,
    Recipe,
    RecipeCache,
    UnsupportedRepo,
    bootstrap,
    bootstrap_ref,
    cache_root,
    export_ref,
    service,
    snapshot_repo,
    write_build_context,
)

from .conftest import git_commit

MakeRepo = Callable[..., Path]


def _recipe(tag: str = "") -> Recipe:
    return Recipe(
        "python", "pytest", "python:3.12-slim", f"FROM python:3.12-slim\n{tag}", "t", "c", "s"
    )


def test_cache_root_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REPOGYM_CACHE", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    assert RecipeCache().root == tmp_path / "c" / "recipes"
    monkeypatch.delenv("REPOGYM_CACHE")
    assert cache_root() == Path.home() / ".cache" / "repogym"


def test_cache_put_get_find(tmp_path: Path) -> None:
    cache = RecipeCache(tmp_path)
    recipe, other = _recipe(), _recipe("RUN true\n")
    assert cache.get("gh/x", "abc", recipe.hash) is None
    assert cache.find("gh/x", "abc") is None
    check = CheckResult(ok=True, tests_collected=3, timings={"build_s": 1.0})
    cache.put("gh/x", "abc", recipe, check, {"language": "python"})
    hit = cache.get("gh/x", "abc", recipe.hash)
    assert hit is not None and hit.recipe == recipe and hit.check == check
    assert hit.detection == {"language": "python"}
    assert cache.get("gh/x", "abc", other.hash) is None
    assert cache.get("gh/x", "def", recipe.hash) is None
    assert cache.get("gh/y", "abc", recipe.hash) is None
    cache.put("gh/x", "abc", other)
    found = cache.find("gh/x", "abc")
    assert found is not None and found.recipe == other and found.check is None
    path = cache.path_for("gh/x", "abc", recipe.hash)
    assert path.is_relative_to(tmp_path) and json.loads(path.read_text())["recipe_hash"]


def test_cache_ignores_corrupt_and_stale_entries(tmp_path: Path) -> None:
    cache = RecipeCache(tmp_path)
    recipe = _recipe()
    cache.put("r", "ref", recipe)
    path = cache.path_for("r", "ref", recipe.hash)
    data = json.loads(path.read_text())
    data["bootstrap_version"] = "0-old"
    path.write_text(json.dumps(data))
    assert cache.get("r", "ref", recipe.hash) is None
    path.write_text("{not json")
    assert cache.get("r", "ref", recipe.hash) is None
    assert cache.find("r", "ref") is None


def test_a_changed_language_detector_changes_the_generator(tmp_path: Path) -> None:
    """The detectors in subpackages (``native/java.py``) shape recipes as much as the package's
    own modules: changing one invalidates cached recipes; the survey's reporting does not."""
    from repogym.bootstrap.cache import code_digest

    root = tmp_path / "bootstrap"
    (root / "native").mkdir(parents=True)
    (root / "detect.py").write_text("A = 1\n")
    (root / "survey.py").write_text("B = 1\n")
    (root / "native" / "java.py").write_text("C = 1\n")
    (root / "native" / "Helper.java").write_text("class Helper {}\n")
    first = code_digest(root)
    (root / "survey.py").write_text("B = 2\n")
    assert code_digest(root) == first
    for rel in ("native/java.py", "native/Helper.java", "detect.py"):
        (root / rel).write_text((root / rel).read_text() + "// changed\n")
        assert code_digest(root) != first, rel
        first = code_digest(root)


def test_snapshot_uses_git_files(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo(
        {
            ".gitignore": "ignored.txt\nnode_modules/\n",
            "a.py": "A",
            "sub/b.txt": "B",
            "ignored.txt": "no",
            "node_modules/x/index.js": "no",
        }
    )
    git_commit(repo)
    (repo / "untracked.py").write_text("U")
    (repo / "a.py").write_text("A2")  # uncommitted edits are part of the work tree
    dest = tmp_path / "snap"
    snapshot_repo(repo, dest)
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == [".gitignore", "a.py", "sub/b.txt", "untracked.py"]
    assert (dest / "a.py").read_text() == "A2"


def test_snapshot_without_git(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({"a.py": "", "__pycache__/a.pyc": "", ".venv/bin/python": "", "d/e.txt": ""})
    dest = tmp_path / "snap"
    snapshot_repo(repo, dest)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == [
        "a.py",
        "d/e.txt",
    ]


def test_snapshot_without_git_keeps_source_folders_named_like_build_output(
    make_repo: MakeRepo, tmp_path: Path
) -> None:
    """A commit exported without .git keeps ``build``/``dist``/``env`` folders that are sources
    (commons-io's ``org/apache/commons/io/build`` package), and drops real build output and
    virtualenvs."""
    java = "src/main/java/org/apache/commons/io"
    repo = make_repo(
        {
            "pom.xml": "<project/>",
            f"{java}/build/AbstractSupplier.java": "class AbstractSupplier {}",
            "target/classes/Old.class": "",
            "app/env/__init__.py": "",
            "app/dist/notes.txt": "",
            "venv/pyvenv.cfg": "",
            "venv/lib/x.py": "",
            "web/package.json": "{}",
            "web/dist/bundle.js": "",
            "a.egg-info/PKG-INFO": "",
        }
    )
    dest = tmp_path / "snap"
    snapshot_repo(repo, dest)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == [
        "app/dist/notes.txt",
        "app/env/__init__.py",
        "pom.xml",
        f"{java}/build/AbstractSupplier.java",
        "web/package.json",
    ]


def test_export_ref(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({"a.py": "one"})
    first = git_commit(repo, "one")
    (repo / "a.py").write_text("two")
    (repo / "b.py").write_text("")
    git_commit(repo, "two")
    assert export_ref(repo, first, tmp_path / "out") == first
    assert (tmp_path / "out" / "a.py").read_text() == "one"
    assert not (tmp_path / "out" / "b.py").exists()
    assert not (tmp_path / "out" / ".git").exists()
    with pytest.raises(ExportError, match="unknown ref"):
        export_ref(repo, "no-such-ref", tmp_path / "x")
    with pytest.raises(ExportError, match="not a git repository"):
        export_ref(tmp_path / "out", "HEAD", tmp_path / "y")


def test_write_build_context(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({"a.py": ""})
    ctx = write_build_context(repo, _recipe(), tmp_path / "environment")
    assert (ctx / "Dockerfile").read_text().startswith("FROM python:3.12-slim")
    assert (ctx / "repo" / "a.py").is_file()


PROJECT = {
    "pyproject.toml": '[project]\nname = "c"\nversion = "1"\n',
    "tests/test_c.py": "def test_c():\n    pass\n",
}


def test_bootstrap_caches_by_ref(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def fake_check(repo_dir: Path, recipe: Recipe, sandbox: str = "local") -> CheckResult:
        calls.append(sandbox)
        return CheckResult(ok=True, tests_collected=1, sandbox=sandbox)

    monkeypatch.setattr(service, "check_recipe", fake_check)
    repo = make_repo(PROJECT)
    sha = git_commit(repo)
    cache = RecipeCache(tmp_path / "cache")
    first = bootstrap(repo, cache=cache)
    assert first.ref == sha and not first.cached and first.check and first.check.ok
    again = bootstrap(repo, cache=cache)
    assert again.cached and again.detection is None and again.recipe == first.recipe
    assert calls == ["local"]
    # Another sandbox is checked again; --refresh ignores the cache.
    bootstrap(repo, cache=cache, sandbox="docker")
    bootstrap(repo, cache=cache, refresh=True)
    assert calls == ["local", "docker", "local"]
    # A dirty work tree has no ref: nothing is cached.
    (repo / "new.py").write_text("")
    dirty = bootstrap(repo, cache=cache, check=False)
    assert dirty.ref is None and not dirty.cached
    # An exported ref reuses the entry of its commit.
    via_ref = bootstrap_ref(repo, "HEAD", cache=cache, repo_id=first.repo_id)
    assert via_ref.cached and via_ref.ref == sha


def test_bootstrap_unsupported(make_repo: MakeRepo, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedRepo):
        bootstrap(make_repo({"README.md": ""}), cache=RecipeCache(tmp_path), check=False)
