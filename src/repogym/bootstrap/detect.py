"""Language and toolchain detection, and the recipe made from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import read_toml
from repogym.bootstrap.commit import CommitInfo
from repogym.bootstrap.model import Recipe
from repogym.bootstrap.native.cmake import (
    CMakeProject,
    cmake_over_package_json,
    cmake_over_python,
    cmake_recipe,
    detect_cmake,
    source_language,
)
from repogym.bootstrap.native.go import detect_go, go_recipe
from repogym.bootstrap.native.java import JavaProject, detect_java, java_markers, java_recipe
from repogym.bootstrap.native.maven_root import maven_folders
from repogym.bootstrap.native.project import NativeProject
from repogym.bootstrap.native.rust import detect_rust, rust_recipe
from repogym.bootstrap.node.project import NodeProject, detect_node, node_recipe
from repogym.bootstrap.python.project import PythonProject, detect_python
from repogym.bootstrap.python.recipe import python_recipe
from repogym.bootstrap.python.versions import PythonInstall
from repogym.errors import RepogymError
from repogym.plugins import PluginError, Registry, instance_of

LANGUAGES = ("python", "node", "rust", "go", "java", "cpp", "c")
_STRONG_PYTHON = ("pyproject.toml", "setup.py", "setup.cfg")
_WEAK_PYTHON = ("tox.ini", "noxfile.py", "requirements.txt", "pytest.ini")


class UnsupportedRepo(RepogymError, ValueError):
    """No recipe can be made for the repository here; the message says why (one line)."""


@dataclass
class Detection:
    """What a repository is and which toolchain runs it."""

    language: str | None
    runner: str | None = None
    base_image: str | None = None
    toolchain: str | None = None
    """The host toolchain the local sandbox will use (e.g. ``CPython 3.12.1``)."""
    supported: bool = True
    reason: str = ""
    """Why no recipe can be made here (empty when supported)."""
    manifests: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    python: PythonProject | None = None
    node: NodeProject | None = None
    native: NativeProject | None = None

    def to_json(self) -> dict[str, Any]:
        details = self.python or self.node or self.native
        return {
            "language": self.language,
            "runner": self.runner,
            "base_image": self.base_image,
            "toolchain": self.toolchain,
            "supported": self.supported,
            "reason": self.reason,
            "manifests": self.manifests,
            "notes": self.notes,
            "details": details.to_json() if details else None,
        }


def _has_python_files(repo: Path) -> bool:
    for pattern in ("*.py", "*/*.py", "*/*/*.py"):
        if next(repo.glob(pattern), None) is not None:
            return True
    return False


def _tooling_only(repo: Path) -> bool:
    """A CMake project whose ``pyproject.toml`` declares no package (no ``[project]`` or
    ``[build-system]``: tool settings only)."""
    if not (repo / "CMakeLists.txt").is_file():
        return False
    data, _ = read_toml(repo / "pyproject.toml")
    return data is not None and not ({"project", "build-system"} & set(data))


def guess_language(repo: Path) -> tuple[str | None, list[str]]:
    """The repository's primary language and the evidence (strongest markers first).

    Build-system markers come before any ``*.py`` fallback: a pom.xml (or a Gradle build) wins
    over Python and Node markers, except that pyproject.toml/setup.py/setup.cfg beside a pom.xml
    win when no Java sources are in the usual layout (``src/main/java``, ``*/src/test/java``).
    Maven projects one folder down (no build at the root) come after every root marker but the
    weak Python ones (:mod:`.native.maven_root`).
    """
    present = {name for name in (*_STRONG_PYTHON, *_WEAK_PYTHON) if (repo / name).is_file()}
    strong = sorted(present & set(_STRONG_PYTHON))
    if strong == ["pyproject.toml"] and _tooling_only(repo):
        strong = []  # a C/C++ project's formatter or linter settings, not a Python package
    java = java_markers(repo, beside_python=bool(strong))
    if java:
        return "java", [f"java: {', '.join(java)}"]
    if strong and not cmake_over_python(repo):
        return "python", [f"python: {', '.join(strong)}"]
    if (repo / "package.json").is_file() and not cmake_over_package_json(repo):
        return "node", ["node: package.json"]
    if (repo / "Cargo.toml").is_file():
        return "rust", ["rust: Cargo.toml"]
    if (repo / "go.mod").is_file():
        return "go", ["go: go.mod"]
    if (repo / "CMakeLists.txt").is_file():  # before any *.py: C/C++ repos carry Python tools
        language = source_language(repo)
        return language, [f"{language}: CMakeLists.txt"]
    if (repo / "meson.build").is_file():  # refused by name in the CMake detection
        language = source_language(repo)
        return language, [f"{language}: meson.build"]
    folders = maven_folders(repo)  # a Maven project one folder down, nothing at the root
    if folders and not present:
        return "java", [f"java: {', '.join(f'{f}/pom.xml' for f in folders)}"]
    if present:
        return "python", [f"python: {', '.join(sorted(present))}"]
    if _has_python_files(repo):
        return "python", ["python: .py files (no manifest)"]
    return None, []


def detect(
    repo_dir: Path,
    *,
    language: str | None = None,
    pythons: list[PythonInstall] | None = None,
    commit: CommitInfo | None = None,
) -> Detection:
    """Detect a repository's language, toolchain and test runner (no code is run).

    ``language`` forces one of :data:`LANGUAGES`; ``pythons`` replaces interpreter discovery;
    ``commit`` says what the files do not (the commit's date, missing submodules).
    """
    repo_dir = Path(repo_dir)
    if not repo_dir.is_dir():
        return Detection(None, supported=False, reason=f"{repo_dir}: not a directory")
    notes: list[str] = []
    if language is None:
        language, evidence = guess_language(repo_dir)
        notes += [f"language {e}" for e in evidence]
    elif language not in LANGUAGE_REGISTRY:
        return Detection(
            None, supported=False, reason=f"unknown language {language!r} ({', '.join(LANGUAGES)})"
        )
    if language is None:
        return Detection(
            None,
            supported=False,
            reason="no Python, Node, Rust, Go, Java or C/C++ project markers found "
            "(pyproject.toml, setup.py, package.json, Cargo.toml, go.mod, pom.xml, "
            "CMakeLists.txt, *.py)",
        )
    try:
        kind = LANGUAGE_REGISTRY.get(language)
    except PluginError as exc:
        return Detection(None, supported=False, reason=str(exc))
    return kind.detect(language, repo_dir, pythons, commit, notes)


def _detect_python(
    language: str,
    repo_dir: Path,
    pythons: list[PythonInstall] | None,
    commit: CommitInfo | None,
    notes: list[str],
) -> Detection:
    py = detect_python(repo_dir, pythons, commit)
    inst = py.install
    return Detection(
        "python",
        runner=py.runner,
        base_image=inst.image if inst else None,
        toolchain=f"CPython {inst} ({inst.prefix})" if inst else None,
        supported=not py.problem,
        reason=py.problem,
        manifests=list(py.manifests),
        notes=notes + py.notes,
        python=py,
    )


def _detect_node(
    language: str,
    repo_dir: Path,
    pythons: list[PythonInstall] | None,
    commit: CommitInfo | None,
    notes: list[str],
) -> Detection:
    nd = detect_node(repo_dir, before=commit.date if commit else None)
    major = nd.image_major or (nd.node_version or "").split(".")[0]
    return Detection(
        "node",
        runner=nd.runner,
        base_image=f"node:{major}-slim" if major else None,
        toolchain=f"Node {nd.node_version}" if nd.node_version else None,
        supported=not nd.problem,
        reason=nd.problem,
        manifests=list(nd.manifests),
        notes=notes + nd.notes,
        node=nd,
    )


def _native_fields(project: NativeProject, notes: list[str]) -> dict[str, Any]:
    """The :class:`Detection` fields every compiled language's project fills the same way."""
    return {
        "supported": not project.problem,
        "reason": project.problem,
        "manifests": list(project.manifests),
        "notes": notes + project.notes,
        "native": project,
    }


def _detect_native(
    language: str,
    repo_dir: Path,
    pythons: list[PythonInstall] | None,
    commit: CommitInfo | None,
    notes: list[str],
) -> Detection:
    date = commit.date if commit else None
    native = (detect_rust if language == "rust" else detect_go)(repo_dir, date)
    minor = ".".join((native.toolchain_version or "").split(".")[:2])
    image = None
    if minor:
        image = f"rust:{minor}-slim" if language == "rust" else f"golang:{minor}"
    return Detection(
        language,
        runner="cargo" if language == "rust" else "go",
        base_image=image,
        toolchain=f"{native.toolchain} {native.toolchain_version}" if native.toolchain else None,
        **_native_fields(native, notes),
    )


def _detect_cmake(
    language: str,
    repo_dir: Path,
    pythons: list[PythonInstall] | None,
    commit: CommitInfo | None,
    notes: list[str],
) -> Detection:
    project = detect_cmake(repo_dir, language, commit)
    return Detection(
        language,
        runner="ctest",
        base_image="gcc:12",
        toolchain=f"{project.toolchain} {project.toolchain_version}" if project.toolchain else None,
        **_native_fields(project, notes),
    )


def _cmake_recipe(detection: Detection) -> Recipe:
    if not isinstance(detection.native, CMakeProject):
        raise UnsupportedRepo(detection.reason or "nothing detected")
    return cmake_recipe(detection.native)


def _detect_java(
    language: str,
    repo_dir: Path,
    pythons: list[PythonInstall] | None,
    commit: CommitInfo | None,
    notes: list[str],
) -> Detection:
    java = detect_java(repo_dir)
    jdk = java.toolchain_version
    return Detection(
        "java",
        runner="maven" if java.build == "maven" else None,
        base_image=f"eclipse-temurin:{jdk}" if jdk else None,
        toolchain=f"JDK {jdk} ({java.toolchain}), Maven {java.maven_version}" if jdk else None,
        **_native_fields(java, notes),
    )


def _java_recipe(detection: Detection) -> Recipe:
    if not isinstance(detection.native, JavaProject):
        raise UnsupportedRepo(detection.reason or "nothing detected")
    return java_recipe(detection.native)


def _python_recipe(detection: Detection) -> Recipe:
    if detection.python is None:
        raise UnsupportedRepo(detection.reason or "nothing detected")
    return python_recipe(detection.python)


def _node_recipe(detection: Detection) -> Recipe:
    if detection.node is None:
        raise UnsupportedRepo(detection.reason or "nothing detected")
    return node_recipe(detection.node)


def _native_recipe(detection: Detection) -> Recipe:
    if detection.native is None:
        raise UnsupportedRepo(detection.reason or "nothing detected")
    if detection.language == "rust":
        return rust_recipe(detection.native)
    return go_recipe(detection.native)


@dataclass(frozen=True)
class Language:
    """How one language is detected and made into a recipe (no code of the repository runs)."""

    detect: Callable[
        [str, Path, list[PythonInstall] | None, CommitInfo | None, list[str]], Detection
    ]
    """``detect(language, repo_dir, pythons, commit, notes)``."""
    recipe: Callable[[Detection], Recipe]


LANGUAGE_REGISTRY: Registry[Language] = Registry(
    "language",
    group="repogym.languages",
    builtins={
        "python": Language(_detect_python, _python_recipe),
        "node": Language(_detect_node, _node_recipe),
        "rust": Language(_detect_native, _native_recipe),
        "go": Language(_detect_native, _native_recipe),
        "cpp": Language(_detect_cmake, _cmake_recipe),
        "c": Language(_detect_cmake, _cmake_recipe),
        "java": Language(_detect_java, _java_recipe),
    },
    check=instance_of(Language, "a repogym.bootstrap.detect.Language"),
)
"""Languages :func:`detect` and :func:`make_recipe` handle; :data:`LANGUAGES` is the order
:func:`guess_language` tries them in. Plug-ins: entry points of ``repogym.languages`` naming a
:class:`Language` (chosen with ``language=``)."""


def make_recipe(repo_dir: Path, detection: Detection | None = None) -> Recipe:
    """The deterministic recipe for a repository; raises :class:`UnsupportedRepo` when none fits."""
    detection = detection or detect(Path(repo_dir))
    if not detection.supported:
        raise UnsupportedRepo(detection.reason or "unsupported repository")
    if detection.language is None or detection.language not in LANGUAGE_REGISTRY:
        raise UnsupportedRepo(detection.reason or "nothing detected")
    try:
        recipe = LANGUAGE_REGISTRY.get(detection.language).recipe(detection)
    except PluginError as exc:
        raise UnsupportedRepo(str(exc)) from None
    except ValueError as exc:
        if isinstance(exc, UnsupportedRepo):
            raise
        raise UnsupportedRepo(str(exc)) from None
    lang_notes = [n for n in detection.notes if n.startswith("language ")]
    recipe.notes[:0] = lang_notes
    return recipe
