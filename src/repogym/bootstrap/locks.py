"""Exact versions a repository pins: its lock file, or fully pinned requirement files.

Read with ``tomllib`` / ``json`` (nothing is executed): ``uv.lock``, ``poetry.lock``,
``pdm.lock``, ``Pipfile.lock``. Every registry package becomes a ``name==version`` constraint;
a package locked at several versions (one per Python or platform) keeps each version with the
lock's environment marker. Packages from git, URLs or local paths are left out (a version
constraint cannot say "this commit") and listed as skipped. The constraints apply to every
install step of the recipe (see :mod:`repogym.bootstrap.pin`), so the project's own pins win
over the date cap's newest-at-the-time choice.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import read_text
from repogym.bootstrap.python.requirements import RequirementFile, normalize

LOCK_FILES = ("uv.lock", "poetry.lock", "pdm.lock", "Pipfile.lock")
"""Looked for in this order at the repository root; the first one present is used."""

_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
_MARKER = re.compile(r"^[\w\s.'\"<>=!~(),*/+-]+$")
_PINNED_LINE = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*===?\s*(?P<version>[^\s;,]+)"
    r"\s*(;\s*(?P<marker>.+))?$"
)


@dataclass(frozen=True)
class Pin:
    """One exact version (for the environments ``marker`` selects; empty: all)."""

    name: str
    version: str
    marker: str = ""

    def line(self) -> str:
        return f"{self.name}=={self.version}" + (f" ; {self.marker}" if self.marker else "")


@dataclass
class LockPins:
    """What a lock (or pinned requirement files) fixes."""

    source: str
    """The file(s) the pins come from, e.g. ``uv.lock``."""
    pins: list[Pin] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """``name (why)`` of locked packages that could not become constraints."""
    error: str = ""

    def constraints(self) -> list[str]:
        """Constraint lines, sorted by name."""
        return [p.line() for p in sorted(self.pins, key=lambda p: (p.name, p.version, p.marker))]


def _either(markers: Iterable[str]) -> str:
    parts = [m.strip() for m in markers if m and m.strip()]
    if len(parts) == 1:
        return parts[0]
    return " or ".join(f"({m})" for m in parts)


def _collect(
    source: str, entries: list[tuple[str, str, str | None]], skipped: list[str], own: Iterable[str]
) -> LockPins:
    """``(name, version, marker or None)`` entries → pins; several versions need markers."""
    own = {normalize(o) for o in own}
    by_name: dict[str, dict[str, str | None]] = {}
    for name, version, marker in entries:
        name = normalize(name)
        if name in own:
            continue
        if not _VERSION.match(version):
            skipped.append(f"{name} (unreadable version {version!r})")
            continue
        if marker is not None and (not _MARKER.match(marker) or "\n" in marker):
            marker = None
        elif marker is not None:
            marker = marker.replace("'", '"')  # PEP 508 allows both; simpler shell quoting
        versions = by_name.setdefault(name, {})
        if version in versions and versions[version] and marker:
            versions[version] = _either([versions[version] or "", marker])
        else:
            versions.setdefault(version, marker)
    pins: list[Pin] = []
    for name, versions in sorted(by_name.items()):
        if len(versions) == 1:
            pins.append(Pin(name, next(iter(versions))))
        elif all(versions.values()):
            pins += [Pin(name, v, m or "") for v, m in sorted(versions.items())]
        else:
            skipped.append(f"{name} (locked at {len(versions)} versions without markers)")
    return LockPins(source, pins, skipped)


def _toml(text: str, source: str) -> tuple[dict[str, Any], str]:
    try:
        return tomllib.loads(text), ""
    except tomllib.TOMLDecodeError as exc:
        return {}, f"{source}: invalid TOML ({exc}); not used"


def _packages(data: dict[str, Any]) -> list[dict[str, Any]]:
    items = data.get("package")
    return [p for p in items if isinstance(p, dict)] if isinstance(items, list) else []


def _uv_kind(pkg: dict[str, Any]) -> str:
    source = pkg.get("source")
    return next(iter(source), "registry") if isinstance(source, dict) else "registry"


def _uv_reachable(
    packages: list[dict[str, Any]], own: set[str], extras: Iterable[str], groups: Iterable[str]
) -> set[tuple[str, str]] | None:
    """``(name, version)`` of the packages the project's dependencies, ``extras`` and
    ``groups`` reach in a ``uv.lock`` graph (None: no root package found)."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for pkg in packages:
        by_name.setdefault(normalize(str(pkg.get("name"))), []).append(pkg)
    roots = [
        p for name in own for p in by_name.get(name, []) if _uv_kind(p) in ("editable", "virtual")
    ]
    if not roots:
        return None
    todo: list[dict[str, Any]] = []
    for root in roots:
        todo += _edges(root.get("dependencies"))
        optional, dev = root.get("optional-dependencies") or {}, root.get("dev-dependencies") or {}
        for extra in extras:
            todo += _edges(optional.get(extra)) if isinstance(optional, dict) else []
        for group in groups:
            todo += _edges(dev.get(group)) if isinstance(dev, dict) else []
    seen: set[tuple[str, str]] = set()
    expanded: set[tuple[str, str, str]] = set()
    while todo:
        edge = todo.pop()
        name, version = normalize(str(edge.get("name"))), edge.get("version")
        for pkg in by_name.get(name, []):
            if version is not None and pkg.get("version") != version:
                continue
            key = (name, str(pkg.get("version")))
            seen.add(key)
            wanted = [""] + [str(e) for e in edge.get("extra") or []]
            optional = pkg.get("optional-dependencies") or {}
            for extra in wanted:
                if (*key, extra) in expanded:
                    continue
                expanded.add((*key, extra))
                more = pkg.get("dependencies") if not extra else optional.get(extra)
                todo += _edges(more)
    return seen


def _edges(value: Any) -> list[dict[str, Any]]:
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def parse_uv_lock(
    text: str, own: Iterable[str] = (), extras: Iterable[str] = (), groups: Iterable[str] = ()
) -> LockPins:
    """``uv.lock``: ``[[package]]`` with ``source = { registry = … }`` are pinned.

    A package locked at several versions (Python forks, conflicting groups) is pinned at the
    version the project's dependencies, ``extras`` and ``groups`` reach in the lock's graph;
    several reachable versions keep their ``resolution-markers`` unless those name groups.
    """
    data, error = _toml(text, "uv.lock")
    if error:
        return LockPins("uv.lock", error=error)
    own = {normalize(o) for o in own}
    packages = _packages(data)
    entries, skipped = [], []
    counts: dict[str, set[str]] = {}
    for pkg in packages:
        if _uv_kind(pkg) == "registry" and isinstance(pkg.get("version"), str):
            counts.setdefault(normalize(str(pkg.get("name"))), set()).add(pkg["version"])
    several = {n for n, versions in counts.items() if len(versions) > 1}
    reachable = _uv_reachable(packages, own, extras, groups) if several else None
    # With declared conflicts, uv's per-package markers drop the group part and may overlap.
    conflicts = bool(data.get("conflicts"))
    for pkg in packages:
        name, version, kind = pkg.get("name"), pkg.get("version"), _uv_kind(pkg)
        if not isinstance(name, str) or kind in ("editable", "virtual"):
            continue  # the project and its workspace members
        if kind != "registry" or not isinstance(version, str):
            skipped.append(f"{normalize(name)} ({kind} source)")
            continue
        marker = None
        if normalize(name) in several:
            if reachable is not None and (normalize(name), version) not in reachable:
                continue  # a version only other groups or environments install
            markers = pkg.get("resolution-markers")
            marker = _either(markers) if isinstance(markers, list) and markers else None
            if marker and (re.search(r"\bextra\b", marker) or conflicts):
                marker = None  # conflicting-group markers say nothing about this install
        entries.append((name, version, marker))
    return _collect("uv.lock", entries, skipped, own)


def _poetry_marker(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return _either(str(v) for v in value.values())
    return None


def parse_poetry_lock(text: str, own: Iterable[str] = ()) -> LockPins:
    """``poetry.lock``: packages without a ``[package.source]`` or from a ``legacy`` index."""
    data, error = _toml(text, "poetry.lock")
    if error:
        return LockPins("poetry.lock", error=error)
    entries, skipped = [], []
    for pkg in _packages(data):
        name, version = pkg.get("name"), pkg.get("version")
        if not isinstance(name, str) or not isinstance(version, str):
            continue
        source = pkg.get("source")
        kind = source.get("type") if isinstance(source, dict) else None
        if kind not in (None, "legacy"):
            skipped.append(f"{normalize(name)} ({kind} source)")
            continue
        entries.append((name, version, _poetry_marker(pkg.get("markers"))))
    return _collect("poetry.lock", entries, skipped, own)


def parse_pdm_lock(text: str, own: Iterable[str] = ()) -> LockPins:
    """``pdm.lock``: packages that are neither editable nor from a path, URL or VCS."""
    data, error = _toml(text, "pdm.lock")
    if error:
        return LockPins("pdm.lock", error=error)
    entries, skipped = [], []
    for pkg in _packages(data):
        name, version = pkg.get("name"), pkg.get("version")
        if not isinstance(name, str):
            continue
        kind = next((k for k in ("editable", "path", "url", "git", "revision") if k in pkg), None)
        if kind or not isinstance(version, str):
            skipped.append(f"{normalize(name)} ({kind or 'no version'})")
            continue
        marker = pkg.get("marker")
        entries.append((name, version, marker if isinstance(marker, str) else None))
    return _collect("pdm.lock", entries, skipped, own)


def parse_pipfile_lock(text: str, own: Iterable[str] = ()) -> LockPins:
    """``Pipfile.lock`` (JSON): the ``default`` and ``develop`` sections."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return LockPins("Pipfile.lock", error=f"Pipfile.lock: invalid JSON ({exc}); not used")
    entries, skipped = [], []
    for section in ("default", "develop"):
        table = data.get(section) if isinstance(data, dict) else None
        for name, spec in (table or {}).items() if isinstance(table, dict) else []:
            if not isinstance(spec, dict):
                continue
            kind = next((k for k in ("editable", "path", "file", "git") if k in spec), None)
            version = str(spec.get("version") or "")
            if kind or not version.startswith("=="):
                if kind != "editable":
                    skipped.append(f"{normalize(name)} ({kind or 'no exact version'})")
                continue
            marker = spec.get("markers")
            entries.append((name, version[2:], marker if isinstance(marker, str) else None))
    return _collect("Pipfile.lock", entries, skipped, own)


PARSERS = {
    "uv.lock": parse_uv_lock,
    "poetry.lock": parse_poetry_lock,
    "pdm.lock": parse_pdm_lock,
    "Pipfile.lock": parse_pipfile_lock,
}


def read_lock(
    repo: Path, own: Iterable[str] = (), extras: Iterable[str] = (), groups: Iterable[str] = ()
) -> LockPins | None:
    """The first lock file of :data:`LOCK_FILES` at the root of ``repo`` (None: none there).

    ``own`` holds the project's name(s), never pinned (it is installed from source);
    ``extras`` and ``groups`` are what the recipe installs (they settle ``uv.lock`` forks).
    """
    for name in LOCK_FILES:
        text = read_text(repo / name, limit=50_000_000)
        if text is None:
            continue
        if name == "uv.lock":
            return parse_uv_lock(text, own, extras, groups)
        return PARSERS[name](text, own)
    return None


def pinned_files(files: list[RequirementFile], own: Iterable[str] = ()) -> LockPins | None:
    """Pins of the requirement files whose every requirement is ``name==version`` (what
    ``pip-compile`` and ``uv pip compile`` write); None when no such file is among ``files``."""
    entries: list[tuple[str, str, str | None]] = []
    sources: list[str] = []
    for rf in files:
        matches = [_PINNED_LINE.match(r) for r in rf.requirements]
        if not matches or not all(matches) or rf.local:
            continue
        sources.append(rf.path)
        entries += [(m["name"], m["version"], m["marker"]) for m in matches if m]
    if not sources:
        return None
    return _collect(", ".join(sources) + " (fully pinned)", entries, [], own)
