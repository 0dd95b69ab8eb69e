"""A Maven project one folder down: repositories with no build at the root.

Some repositories keep their Maven project in a folder (``jOOL/pom.xml``), sometimes beside a
second one for another Java release (``jOOL-java-8/pom.xml``), and their CI enters it
(``cd jOOL && mvn test``). The project is taken from that folder when it is the only one, else
when the CI names exactly one of them (``cd X``, ``mvn -f X/pom.xml``, ``working-directory:
X``); otherwise the repository is refused with the folders it holds.
"""

from __future__ import annotations

import re
from pathlib import Path

from repogym.bootstrap._files import read_text

CI_FILES = (
    ".travis.yml",
    ".gitlab-ci.yml",
    "azure-pipelines.yml",
    "appveyor.yml",
    ".circleci/config.yml",
    "Jenkinsfile",
)
"""CI files read besides ``.github/workflows/*.yml``."""


def maven_folders(repo: Path) -> list[str]:
    """Folders at the top of ``repo`` (not hidden) that hold a ``pom.xml``, sorted."""
    try:
        entries = list(repo.iterdir())
    except OSError:
        return []
    return sorted(
        p.name
        for p in entries
        if not p.name.startswith(".") and p.is_dir() and (p / "pom.xml").is_file()
    )


def _ci_texts(repo: Path) -> list[tuple[str, str]]:
    files = [repo / name for name in CI_FILES]
    workflows = repo / ".github" / "workflows"
    if workflows.is_dir():
        files += sorted(p for p in workflows.iterdir() if p.suffix in (".yml", ".yaml"))
    return [(p.relative_to(repo).as_posix(), t) for p in files for t in [read_text(p)] if t]


def _mentions(text: str, folder: str) -> int:
    """How often a CI text enters ``folder`` or points Maven at it."""
    name = re.escape(folder)
    pattern = (
        r"(?:\bcd\s+|(?:^|\s)(?:-f|--file)(?:=|\s+)|working-directory:\s*['\"]?)"
        rf"(?:\./)?{name}(?:/pom\.xml)?(?![\w.-])"
    )
    return len(re.findall(pattern, text, re.M))


def maven_subfolder(repo: Path) -> tuple[str | None, str]:
    """``(folder, note)`` of the Maven project to build when the root has no ``pom.xml``;
    ``(None, reason)`` when none can be chosen (``reason`` empty: no Maven project at all)."""
    folders = maven_folders(repo)
    if not folders:
        return None, ""
    if len(folders) == 1:
        return folders[0], f"Maven project in {folders[0]}/ (no pom.xml at the repository root)"
    counts = dict.fromkeys(folders, 0)
    where: dict[str, str] = {}
    for name, text in _ci_texts(repo):
        for folder in folders:
            hits = _mentions(text, folder)
            if hits:
                counts[folder] += hits
                where.setdefault(folder, name)
    named = [f for f, n in counts.items() if n]
    listed = ", ".join(f"{f}/" for f in folders)
    if len(named) == 1:
        folder = named[0]
        return folder, (
            f"Maven project in {folder}/, the one the CI builds ({where[folder]}); the root has"
            f" no pom.xml and these folders hold one: {listed}"
        )
    return None, (
        f"no pom.xml at the repository root, and {len(folders)} folders hold a Maven project"
        f" ({listed}) of which the CI builds {'several' if named else 'none'}"
    )


def maven_root(repo: Path) -> tuple[str | None, str]:
    """``("", "")`` when ``repo`` has a ``pom.xml`` at its root, else :func:`maven_subfolder`."""
    return ("", "") if (repo / "pom.xml").is_file() else maven_subfolder(repo)
