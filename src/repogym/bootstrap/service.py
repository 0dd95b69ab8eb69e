"""One call for callers (CLI, pipelines): cached detect → recipe → check."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import export_ref, head_commit, repo_identity
from repogym.bootstrap.cache import RecipeCache
from repogym.bootstrap.check import CheckResult, check_recipe
from repogym.bootstrap.commit import (
    CommitInfo,
    git_commit_date,
    git_version,
    normalize_date,
    read_commit,
)
from repogym.bootstrap.detect import Detection, UnsupportedRepo, detect, make_recipe
from repogym.bootstrap.model import Recipe


@dataclass
class BootstrapResult:
    recipe: Recipe
    detection: Detection | None
    """None when the recipe came from the cache (detection was skipped)."""
    check: CheckResult | None
    cached: bool
    repo_id: str
    ref: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "ref": self.ref,
            "cached": self.cached,
            "detection": self.detection.to_json() if self.detection else None,
            "recipe": self.recipe.to_json(),
            "check": self.check.to_json() if self.check else None,
        }


def bootstrap(
    repo_dir: Path,
    *,
    repo_id: str | None = None,
    ref: str | None = None,
    check: bool = True,
    sandbox: str = "local",
    cache: RecipeCache | None = None,
    use_cache: bool = True,
    refresh: bool = False,
    commit_date: str | None = None,
    submodule_problems: dict[str, str] | None = None,
    version: str | None = None,
    commit: CommitInfo | None = None,
) -> BootstrapResult:
    """Detect, make the recipe and (optionally) check it, reusing cached outcomes.

    ``ref`` should be the commit the files of ``repo_dir`` come from; without it a clean git
    work tree uses its HEAD commit and anything else is not cached. ``commit_date`` (ISO 8601)
    caps dependency versions at that date; by default it is the committer date of ``ref`` when
    ``repo_dir`` is a git repository that has it (a snapshot without ``.git`` needs it passed).
    ``submodule_problems`` (path → why) explains submodule folders the caller could not fill;
    ``version`` is the release the commit builds on (default: ``git describe`` of ``ref``), the
    version a project versioned by git tags is built as. ``commit`` gives all three at once
    (see :func:`repogym.bootstrap.commit.read_commit`); the other three then must not be given.
    Raises :class:`UnsupportedRepo` when no recipe fits.
    """
    repo_dir = Path(repo_dir)
    repo_id = repo_id or repo_identity(repo_dir)
    if ref is None:
        head, clean = head_commit(repo_dir)
        ref = head if clean else None
    if commit is not None:
        if commit_date is not None or submodule_problems is not None or version is not None:
            raise TypeError("bootstrap(): give commit or its parts, not both")
    else:
        if commit_date is not None:
            commit_date = normalize_date(commit_date)
        elif ref is not None:
            commit_date = git_commit_date(repo_dir, ref)
        if version is None and ref is not None:
            version = git_version(repo_dir, ref)
        commit = CommitInfo(commit_date, dict(submodule_problems or {}), version)
    store = (cache or RecipeCache()) if use_cache and ref else None
    if store is not None and not refresh:
        hit = store.find(repo_id, ref)  # type: ignore[arg-type]
        if hit and (not check or (hit.check and hit.check.sandbox == sandbox)):
            return BootstrapResult(hit.recipe, None, hit.check, True, repo_id, ref)
    detection = detect(repo_dir, commit=commit)
    if not detection.supported:
        raise UnsupportedRepo(detection.reason)
    recipe = make_recipe(repo_dir, detection)
    if store is not None and not refresh:
        hit = store.get(repo_id, ref, recipe.hash)  # type: ignore[arg-type]
        if hit and (not check or (hit.check and hit.check.sandbox == sandbox)):
            return BootstrapResult(recipe, detection, hit.check, True, repo_id, ref)
    result = check_recipe(repo_dir, recipe, sandbox) if check else None
    if store is not None and (result is not None or store.get(repo_id, ref, recipe.hash) is None):  # type: ignore[arg-type]
        store.put(repo_id, ref, recipe, result, detection.to_json())  # type: ignore[arg-type]
    return BootstrapResult(recipe, detection, result, False, repo_id, ref)


def bootstrap_ref(repo_dir: Path, ref: str, **kwargs: Any) -> BootstrapResult:
    """:func:`bootstrap` of a git ref, exported with ``git archive`` into a temporary folder.

    Submodules are filled in from the repository's git data where it has their commits (see
    :func:`repogym.bootstrap.submodules.populate`); the commit date caps dependency versions.
    Raises :class:`~repogym.bootstrap.ExportError` for an unknown ref or a non-git folder.
    """
    repo_dir = Path(repo_dir)
    kwargs.setdefault("repo_id", repo_identity(repo_dir))
    with tempfile.TemporaryDirectory(prefix="repogym-ref-") as tmp:
        sha = export_ref(repo_dir, ref, Path(tmp))
        if not {"commit", "commit_date", "version", "submodule_problems"} & kwargs.keys():
            kwargs["commit"] = read_commit(repo_dir, sha, Path(tmp))
        return bootstrap(Path(tmp), ref=sha, **kwargs)
