"""One call for callers (CLI, pipelines): cached detect → recipe → check."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import export_ref, head_commit, repo_identity
from repogym.bootstrap.cache import RecipeCache
from repogym.bootstrap.check import CheckResult, check_recipe
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
) -> BootstrapResult:
    """Detect, make the recipe and (optionally) check it, reusing cached outcomes.

    ``ref`` should be the commit the files of ``repo_dir`` come from; without it a clean git
    work tree uses its HEAD commit and anything else is not cached. Raises
    :class:`UnsupportedRepo` when no recipe fits.
    """
    repo_dir = Path(repo_dir)
    repo_id = repo_id or repo_identity(repo_dir)
    if ref is None:
        head, clean = head_commit(repo_dir)
        ref = head if clean else None
    store = (cache or RecipeCache()) if use_cache and ref else None
    if store is not None and not refresh:
        hit = store.find(repo_id, ref)  # type: ignore[arg-type]
        if hit and (not check or (hit.check and hit.check.sandbox == sandbox)):
            return BootstrapResult(hit.recipe, None, hit.check, True, repo_id, ref)
    detection = detect(repo_dir)
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

    Raises :class:`~repogym.bootstrap.ExportError` for an unknown ref or a non-git folder.
    """
    repo_dir = Path(repo_dir)
    kwargs.setdefault("repo_id", repo_identity(repo_dir))
    with tempfile.TemporaryDirectory(prefix="repogym-ref-") as tmp:
        sha = export_ref(repo_dir, ref, Path(tmp))
        return bootstrap(Path(tmp), ref=sha, **kwargs)
