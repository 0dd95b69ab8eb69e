"""Recipes and their check outcomes, cached by (repository, ref, recipe hash).

Files live under ``$REPOGYM_CACHE/recipes`` (default ``~/.cache/repogym/recipes``), one JSON
file per key, written atomically. A ref should name a commit: the cache trusts that the same
(repository, ref) always means the same files. Entries also record which recipe generator wrote
them (:func:`generator_id`); entries of other generator code are ignored.

With ``$REPOGYM_SHARED_CACHE`` set, entries are also uploaded to ``<url>/recipes/…`` and a local
miss is looked up there (:mod:`repogym.sandbox.shared_cache`), so the nodes of a cluster
detect each repository once.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.atomic import atomic_write
from repogym.bootstrap.check import CheckResult
from repogym.bootstrap.model import BOOTSTRAP_VERSION, Recipe
from repogym.sandbox import shared_cache

_NOT_GENERATORS = frozenset({"__init__", "cache", "check", "render", "service", "survey"})
"""Modules of this package that do not shape recipes; every other one enters generator_id."""


_GENERATOR_SUFFIXES = frozenset({".py", ".java", ".js", ".json", ".toml"})


def code_digest(root: Path) -> str:
    """A digest of the recipe-generating code under ``root`` (this package): every module and
    data file of its subpackages (the language detectors: ``native/``, ``python/``, ``node/``)
    and of the package itself but :data:`_NOT_GENERATORS`."""
    digest = hashlib.sha256()
    files = sorted(
        p
        for p in root.rglob("*")
        if p.suffix in _GENERATOR_SUFFIXES and "__pycache__" not in p.parts
    )
    for path in files:
        rel = path.relative_to(root)
        if len(rel.parts) == 1 and path.stem in _NOT_GENERATORS:
            continue
        with contextlib.suppress(OSError):
            digest.update(rel.as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def generator_id() -> str:
    """:data:`BOOTSTRAP_VERSION` plus a digest of the recipe-generating code.

    Entries written by other code are ignored, so a changed detector never serves stale recipes.
    """
    return f"{BOOTSTRAP_VERSION}+{code_digest(Path(__file__).parent)}"


def cache_root() -> Path:
    """``$REPOGYM_CACHE`` or ``~/.cache/repogym``."""
    env = os.environ.get("REPOGYM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "repogym"


def _slug(text: str, keep: int = 60) -> str:
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:keep] or "x"
    return f"{readable}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


@dataclass
class CacheEntry:
    repo_id: str
    ref: str
    recipe: Recipe
    check: CheckResult | None
    detection: dict[str, Any] | None
    created_at: float
    bootstrap_version: str = ""

    def __post_init__(self) -> None:
        self.bootstrap_version = self.bootstrap_version or generator_id()

    def to_json(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "ref": self.ref,
            "recipe_hash": self.recipe.hash,
            "bootstrap_version": self.bootstrap_version,
            "created_at": self.created_at,
            "recipe": self.recipe.to_json(),
            "check": self.check.to_json() if self.check else None,
            "detection": self.detection,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CacheEntry:
        check = data.get("check")
        return cls(
            repo_id=data["repo_id"],
            ref=data["ref"],
            recipe=Recipe.from_json(data["recipe"]),
            check=CheckResult.from_json(check) if check else None,
            detection=data.get("detection"),
            created_at=float(data.get("created_at", 0)),
            bootstrap_version=str(data.get("bootstrap_version") or "unknown"),
        )


class RecipeCache:
    """A folder of cached recipes keyed by (repository id, ref, recipe hash)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else cache_root() / "recipes"
        # Recipes other nodes made ($REPOGYM_SHARED_CACHE); None (no calls at all) when unset.
        self.shared = shared_cache.from_env(self.root.parent)

    def _dir(self, repo_id: str, ref: str) -> Path:
        return self.root / _slug(repo_id) / _slug(ref)

    def _shared_rel(self, path: Path) -> str:
        return "recipes/" + path.relative_to(self.root).as_posix()

    def _parse(self, data: bytes) -> CacheEntry | None:
        """A shared entry usable here (None: written by other generator code)."""
        entry = CacheEntry.from_json(json.loads(data))
        return entry if entry.bootstrap_version == generator_id() else None

    def _fetch(self, path: Path) -> bool:
        assert self.shared is not None
        return self.shared.fetch_file(self._shared_rel(path), path, self._parse, "recipes")

    def path_for(self, repo_id: str, ref: str, recipe_hash: str) -> Path:
        return self._dir(repo_id, ref) / f"{recipe_hash}.json"

    def _load(self, path: Path) -> CacheEntry | None:
        try:
            entry = CacheEntry.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable or stale-format entries count as misses
        return entry if entry.bootstrap_version == generator_id() else None

    def get(self, repo_id: str, ref: str, recipe_hash: str) -> CacheEntry | None:
        """The entry for exactly this key, or None."""
        path = self.path_for(repo_id, ref, recipe_hash)
        entry = self._load(path)
        if entry is None and self.shared is not None and self._fetch(path):
            entry = self._load(path)
        if entry and (entry.repo_id, entry.ref, entry.recipe.hash) == (repo_id, ref, recipe_hash):
            return entry
        return None

    def find(self, repo_id: str, ref: str) -> CacheEntry | None:
        """The newest entry for (repository, ref) whatever its recipe hash (skips detection)."""
        folder = self._dir(repo_id, ref)
        if self.shared is not None and not any(
            self._load(p) for p in (folder.glob("*.json") if folder.is_dir() else ())
        ):
            for name in self.shared.list_files(self._shared_rel(folder)):
                if name.endswith(".json"):
                    self._fetch(folder / name)
        entries = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            entry = self._load(path)
            if entry and (entry.repo_id, entry.ref) == (repo_id, ref):
                entries.append(entry)
        return max(entries, key=lambda e: e.created_at) if entries else None

    def put(
        self,
        repo_id: str,
        ref: str,
        recipe: Recipe,
        check: CheckResult | None = None,
        detection: dict[str, Any] | None = None,
    ) -> CacheEntry:
        """Store (atomically) and return the entry."""
        entry = CacheEntry(repo_id, ref, recipe, check, detection, time.time())
        path = self.path_for(repo_id, ref, recipe.hash)
        data = json.dumps(entry.to_json(), indent=2, sort_keys=True)
        atomic_write(path, data)
        if self.shared is not None:
            self.shared.put_file(self._shared_rel(path), data.encode(), "recipes")
        return entry
