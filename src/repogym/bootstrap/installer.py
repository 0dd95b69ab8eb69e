"""How a Python recipe installs packages: uv, capped at the commit's date.

Why uv. A recipe should resolve dependencies as the project's CI did on the commit's date, not
as today's index would. pip can cap by upload time only from pip 26 (``--uploaded-prior-to``),
and pip 26 needs Python ≥ 3.10; the interpreters repogym maps ``python:3.X`` images onto (and the
official images of older Pythons) ship pip 23–25. uv's ``--exclude-newer`` has capped by upload
time for years, applies to build dependencies as well, and uv installs into every Python ≥ 3.8.
So each recipe first installs one pinned uv release with the image's pip (:data:`UV_VERSION`,
never capped: it is the tool, not a dependency), then every install step is
``uv pip install --system --exclude-newer <commit date>``. pip stays in the image (``pip freeze``
records what was resolved, see :mod:`repogym.bootstrap.pin`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

UV_VERSION = "0.13.9"
INSTALLER_STEP = ["python", "-m", "pip", "install", f"uv=={UV_VERSION}"]
"""The RUN step that puts uv into the image (pip of any age can install its wheel)."""
UV_INSTALL = ["uv", "pip", "install", "--system"]
"""Every dependency install starts with these words (the image's interpreter, no venv)."""
UV_ENV = {
    "UV_NO_CACHE": "1",
    "UV_LINK_MODE": "copy",
    "UV_SYSTEM_CERTS": "1",
    "UV_COMPILE_BYTECODE": "1",
}
"""No cache in the image's layers; copy files (no cache to link from); the system's CA store,
like pip, so TLS-intercepting proxies configured there work for uv too; bytecode compiled at
install time as pip does — otherwise an old dependency's compile-time warnings (invalid escape
sequences) fire on import, where ``filterwarnings = error`` turns them into errors."""


@dataclass(frozen=True)
class EditableFloor:
    """The oldest release of a build backend that builds editable wheels (PEP 660).

    uv installs an editable project only through ``build_editable``; pip used to fall back to
    ``setup.py develop``. A commit older than the backend's PEP 660 support still gets that
    release: for this one package the date cap moves to :attr:`date`.
    """

    package: str
    requirement: str
    date: str


EDITABLE_FLOORS = {
    "setuptools": EditableFloor("setuptools", "setuptools>=64", "2022-09-01T00:00:00Z"),
    "poetry.core": EditableFloor("poetry-core", "poetry-core>=1.0.8", "2022-03-15T00:00:00Z"),
    "flit_core": EditableFloor("flit-core", "flit_core>=3.4", "2021-10-15T00:00:00Z"),
}
"""Build backend (module prefix) → its floor. The python images of 3.8/3.9 ship setuptools
56/58, so the setuptools floor is needed whatever the date."""


def editable_floor(backend: str | None) -> EditableFloor | None:
    """The floor of a build backend such as ``setuptools.build_meta`` (None: none needed)."""
    for prefix, floor in EDITABLE_FLOORS.items():
        if (backend or "").startswith(prefix):
            return floor
    return None


LEGACY_EDITABLE = ("setuptools", "2022-09-01T00:00:00Z")
"""A ``setup.py`` project on setuptools whose commit predates PEP 660 support (setuptools 64,
August 2022) is installed as its CI did then: ``pip install -e`` runs ``setup.py develop`` with
the setuptools of the day (uv has no such fallback); its dependencies then come from uv."""
PROJECT_REQUIREMENTS = "/usr/lib/repogym/project-requirements.txt"
_REQUIRES_SCRIPT = (
    "import importlib.metadata as m,re,sys;"
    "from pip._vendor.packaging.requirements import Requirement as R;"
    'n=lambda s:re.sub(r"[-_.]+","-",s).lower();'
    'd=[x for x in m.distributions() if n(x.metadata["Name"] or "")==n(sys.argv[1])][0];'
    'e=[""]+sys.argv[2:];'
    'print("\\n".join([r.name+("["+",".join(sorted(r.extras))+"]" if r.extras else "")'
    "+str(r.specifier) for r in map(R,d.requires or [])"
    ' if r.marker is None or any(r.marker.evaluate({"extra":x}) for x in e)]'
    '+[d.metadata["Name"]+"=="+d.version]))'
)


def project_requirements_step(name: str, extras: list[str]) -> list[str]:
    """Shell words writing the installed project's requirements (for ``extras``, markers
    evaluated here) to :data:`PROJECT_REQUIREMENTS`, one a line, for uv to install — and the
    project at its installed version, so that dependents needing another version of it are
    resolved to ones that accept it (as pip's one resolution did) instead of replacing it."""
    return [
        "mkdir",
        "-p",
        PROJECT_REQUIREMENTS.rsplit("/", 1)[0],
        "&&",
        "python",
        "-c",
        shlex.quote(_REQUIRES_SCRIPT),
        shlex.quote(name),
        *(shlex.quote(e) for e in extras),
        ">",
        PROJECT_REQUIREMENTS,
    ]


REUPLOADED = {"atomicwrites": "2022-07-10T00:00:00Z"}
"""Packages whose files were all uploaded again long after their releases (atomicwrites, a
dependency of pytest 3–5, in July 2022): by upload time no release of theirs existed before,
so for older commits their cap moves to just after the re-upload."""


def install_words(
    commit_date: str | None,
    constraints: list[str] | None = None,
    floor: EditableFloor | None = None,
) -> list[str]:
    """``uv pip install --system [--exclude-newer DATE] [-c FILE]...`` (words, unquoted).

    With ``floor`` (and a commit older than it) that package alone is capped at the floor's
    date instead (``--exclude-newer-package``); so are the :data:`REUPLOADED` packages.
    """
    words = list(UV_INSTALL)
    if commit_date:
        words += ["--exclude-newer", commit_date]
        later = dict(REUPLOADED)
        if floor is not None:
            later[floor.package] = floor.date
        for package, date in sorted(later.items()):
            if commit_date < date:
                words += ["--exclude-newer-package", f"{package}={date}"]
    for path in constraints or []:
        words += ["-c", path]
    return words
