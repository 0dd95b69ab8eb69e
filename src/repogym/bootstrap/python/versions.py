"""Installed CPython interpreters and ``requires-python`` matching.

Interpreters are discovered under ``$PYENV_ROOT/versions`` (default ``~/.pyenv/versions``): one
folder per final release named ``X.Y.Z`` with a ``bin/python3``. The local sandbox maps
``FROM python:X.Y-*`` to the same folders, so the choice made here is the one that runs.

Version constraints are evaluated with :mod:`packaging`: PEP 440 specifiers
(``>=3.8,!=3.9.*,<4``) directly, Poetry constraints (``^3.8``, ``~3.9``, ``>=3.8 <4``,
``a || b``) translated to PEP 440 first, which covers what projects write for their Python
requirement.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion
from packaging.version import Version as _Version

from repogym.errors import RepogymError

MIN_PYTHON = (3, 8)
"""Oldest interpreter offered: current pip and pytest no longer install on older ones."""

Version = tuple[int, ...]

_DIR_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_CLAUSE_RE = re.compile(r"^(===|~=|==|!=|<=|>=|<|>|\^|~|=)?\s*v?(\d+(?:\.\d+)*)(\.\*)?")


class SpecifierError(RepogymError, ValueError):
    """A version constraint this module cannot read."""


@dataclass(frozen=True)
class PythonInstall:
    """One installed interpreter."""

    version: tuple[int, int, int]
    prefix: Path

    @property
    def minor(self) -> str:
        """``"3.12"``: what the image tag uses."""
        return f"{self.version[0]}.{self.version[1]}"

    @property
    def image(self) -> str:
        return f"python:{self.minor}-slim"

    def __str__(self) -> str:
        return ".".join(map(str, self.version))


EXTRA_ROOTS = ("/usr/local/pyenv/versions", "/opt/pyenv/versions")


def pythons_roots() -> list[Path]:
    """Where interpreter folders are looked for: ``$PYENV_ROOT/versions``, ``~/.pyenv/versions``,
    then the shared pyenv locations the local sandbox also maps from."""
    roots = [Path(os.environ["PYENV_ROOT"]) / "versions"] if os.environ.get("PYENV_ROOT") else []
    roots += [Path.home() / ".pyenv" / "versions", *map(Path, EXTRA_ROOTS)]
    return list(dict.fromkeys(roots))


def installed_pythons(root: Path | list[Path] | None = None) -> list[PythonInstall]:
    """Final CPython releases ≥ :data:`MIN_PYTHON`, newest last, the newest patch per minor."""
    roots = pythons_roots() if root is None else [root] if isinstance(root, Path) else root
    best: dict[tuple[int, int], PythonInstall] = {}
    for base in roots:
        try:
            entries = sorted(base.iterdir())
        except OSError:
            continue
        for entry in entries:
            m = _DIR_RE.match(entry.name)
            if not m or not entry.is_dir():
                continue
            version = (int(m[1]), int(m[2]), int(m[3]))
            if version[:2] < MIN_PYTHON:
                continue
            if not (entry / "bin" / f"python{version[0]}.{version[1]}").exists():
                continue
            key = version[:2]
            if key not in best or best[key].version < version:
                best[key] = PythonInstall(version, entry)
    return sorted(best.values(), key=lambda p: p.version)


def parse_version(text: str) -> Version:
    """The release segment of a version string (``"3.8.0rc1"`` → ``(3, 8, 0)``)."""
    try:
        return _Version(text.strip()).release
    except InvalidVersion:
        pass
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)  # a release followed by anything else
    if not m:
        raise SpecifierError(f"not a version: {text!r}")
    return tuple(int(x) for x in m[1].split("."))


def _bump(release: Version, index: int) -> Version:
    """``release[:index+1]`` with its last component incremented."""
    head = list(release[: index + 1]) or [0]
    head[-1] += 1
    return tuple(head)


def _clauses(group: str) -> list[tuple[str, Version, bool, str]]:
    """``(operator, release, wildcard, version text)`` of each clause; the text keeps a
    pre/post/dev suffix (``20.8b1``) that comparisons of interpreters never need."""
    out = []
    # PEP 440 separates with commas; Poetry also with spaces (">=3.8 <4").
    text = re.sub(r"(===|~=|==|!=|<=|>=|<|>|\^|~)\s+", r"\1", group.strip())
    for raw in re.split(r"[,\s]+", text):
        if not raw or raw == "*":
            continue
        m = _CLAUSE_RE.match(raw)
        # Anything after the release must be a pre/post/dev/local suffix ("rc1", ".post2").
        if not m or not re.fullmatch(r"[a-zA-Z0-9.+!-]*", raw[m.end() :]):
            raise SpecifierError(f"cannot read version constraint {raw!r}")
        release = tuple(int(x) for x in m[2].split("."))
        suffix = "" if m[3] else raw[m.end() :]
        out.append((m[1] or "", release, bool(m[3]), m[2] + suffix))
    return out


def _specifier_set(group: str) -> SpecifierSet:
    """One ``||`` alternative as a PEP 440 :class:`SpecifierSet` (Poetry syntax translated)."""
    try:
        return SpecifierSet(group)
    except InvalidSpecifier:
        pass
    try:
        return SpecifierSet(poetry_to_pep440(group) or "")
    except InvalidSpecifier as exc:
        raise SpecifierError(f"cannot read version constraint {group.strip()!r}: {exc}") from None


def satisfies(version: Version, spec: str | None) -> bool:
    """Whether ``version`` meets ``spec`` (PEP 440 or Poetry syntax; empty ⇒ True).

    PEP 440 is evaluated by :mod:`packaging`; Poetry constraints (``^``, ``~``, spaces between
    clauses, ``||``) are translated to it first. Raises :class:`SpecifierError` for text it
    cannot read.
    """
    if not spec or not spec.strip():
        return True
    candidate = _Version(".".join(map(str, version)))
    return any(
        _specifier_set(alternative).contains(candidate, prereleases=True)
        for alternative in spec.split("||")
    )


def poetry_to_pep440(constraint: str) -> str | None:
    """A Poetry dependency constraint as a PEP 440 specifier (``""`` = any; None = unsupported)."""
    text = constraint.strip()
    if not text or text == "*":
        return ""
    if "||" in text:
        return None
    parts = []
    for op, release, wildcard, exact in _clauses(text):
        rel = ".".join(map(str, release))
        if wildcard:
            parts.append(f"{'!=' if op == '!=' else '=='}{rel}.*")
        elif op == "^":
            nonzero = next((i for i, x in enumerate(release) if x), len(release) - 1)
            upper = ".".join(map(str, _bump(release, nonzero)))
            parts += [f">={exact}", f"<{upper}"]
        elif op == "~":
            upper = ".".join(map(str, _bump(release, 0 if len(release) == 1 else 1)))
            parts += [f">={exact}", f"<{upper}"]
        elif op in ("", "="):
            parts.append(f"=={exact}")
        else:
            parts.append(f"{op}{exact}")
    return ",".join(parts)


PYTHON_RELEASES = {
    (3, 8): "2019-10-14",
    (3, 9): "2020-10-05",
    (3, 10): "2021-10-04",
    (3, 11): "2022-10-24",
    (3, 12): "2023-10-02",
    (3, 13): "2024-10-07",
    (3, 14): "2025-10-07",
}
"""Release dates of CPython 3.X.0 (python.org)."""
RELEASE_LAG_DAYS = 60
"""How long after a Python release its wheels are taken to be common (numpy, lxml, …)."""


def python_usable_from(minor: tuple[int, int]) -> str | None:
    """When a Python minor became usable: its release plus :data:`RELEASE_LAG_DAYS` (UTC RFC
    3339); None for a minor not in :data:`PYTHON_RELEASES`."""
    from datetime import date as _date
    from datetime import timedelta

    released = PYTHON_RELEASES.get(minor)
    if released is None:
        return None
    day = _date.fromisoformat(released) + timedelta(days=RELEASE_LAG_DAYS)
    return f"{day.isoformat()}T00:00:00Z"


def newest_python_at(date: str) -> tuple[int, int] | None:
    """The newest Python minor released :data:`RELEASE_LAG_DAYS` before ``date`` (ISO 8601).

    A commit's CI ran on Pythons of its day; a newer interpreter often lacks wheels for the
    versions resolved at that date (and building them from source fails). Dates before that
    give the oldest listed minor; None for an unreadable date.
    """
    from datetime import date as _date
    from datetime import timedelta

    try:
        day = _date.fromisoformat(date[:10])
    except ValueError:
        return None
    fitting = [
        minor
        for minor, released in PYTHON_RELEASES.items()
        if _date.fromisoformat(released) + timedelta(days=RELEASE_LAG_DAYS) <= day
    ]
    return max(fitting) if fitting else min(PYTHON_RELEASES)


@dataclass(frozen=True)
class PythonChoice:
    """The interpreter picked for a project, or why none fits."""

    install: PythonInstall | None
    notes: tuple[str, ...]
    reason: str = ""


def choose_python(
    requires: str | None,
    installs: list[PythonInstall],
    *,
    prefer_at_most: tuple[int, int] | None = None,
    prefer_reason: str = "",
) -> PythonChoice:
    """The newest installed interpreter meeting ``requires``.

    ``prefer_at_most`` (from classifiers, tox envs, distutils use) steers the choice to the newest
    fitting interpreter not newer than that minor version, or to the oldest fitting one when
    none is that old.
    """
    notes: list[str] = []
    if not installs:
        return PythonChoice(
            None,
            (),
            f"no CPython ≥ {'.'.join(map(str, MIN_PYTHON))} found under "
            + ", ".join(str(r) for r in pythons_roots()),
        )
    fitting = installs
    if requires:
        try:
            fitting = [p for p in installs if satisfies(p.version, requires)]
        except SpecifierError as exc:
            notes.append(f"ignored unreadable requires-python {requires!r}: {exc}")
            fitting = installs
    found = ", ".join(p.minor for p in installs)
    if not fitting:
        return PythonChoice(
            None,
            tuple(notes),
            f"requires-python {requires!r} matches none of the installed interpreters ({found})",
        )
    chosen = fitting[-1]
    if prefer_at_most is not None:
        capped = [p for p in fitting if p.version[:2] <= prefer_at_most]
        why = f" ({prefer_reason})" if prefer_reason else ""
        cap = f"{prefer_at_most[0]}.{prefer_at_most[1]}"
        if capped and capped[-1] is not chosen:
            chosen = capped[-1]
            notes.append(
                f"python {chosen.minor}: newest fitting interpreter not newer than {cap}{why}"
            )
        elif not capped and fitting[0] is not chosen:
            chosen = fitting[0]  # none that old: the closest one
            notes.append(
                f"python {chosen.minor}: no fitting interpreter as old as {cap}{why}; the oldest"
            )
    if requires and not notes:
        notes.append(f"python {chosen.minor}: newest installed interpreter meeting {requires!r}")
    elif not requires and not notes:
        notes.append(f"python {chosen.minor}: no requires-python declared; newest installed")
    return PythonChoice(chosen, tuple(notes))
