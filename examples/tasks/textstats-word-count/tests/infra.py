#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP031, UP032, UP035, UP045  (runs under the task's Python, maybe 3.6)
"""What counts as test infrastructure in a repository (standard library only, Python 3.6+).

One rule for both sides: the pipelines use it on the host to split patches and to write the
manifests of a task, and the verifier (a copy of this file in the task's ``tests/``) uses it to
reset what an agent did to the tests. Test infrastructure is:

* test files and test data: :func:`repogym.shipped.testfiles.is_test_path` (a folder named
  ``test``, ``tests``, ``__tests__``, ``spec``, … anywhere in the path, or a file named like a
  test); in a task that module ships beside this one as ``testfiles.py``;
* runner configuration: ``pytest.ini``, ``tox.ini``, ``setup.cfg``, ``pyproject.toml``,
  ``noxfile.py``, ``package.json``, jest/vitest/vite/babel/karma configs, jest setup files,
  ``.mocharc*``, ``.babelrc*``, ``.cargo/``; build configs a replayed pre-test build reads
  (``tsconfig*.json``, rollup/webpack/tsup/esbuild configs, ``.swcrc``): tests that run from a
  build's output must not be rebuilt by the agent's own build rules;
* the build definitions of compiled languages, which decide what code runs when the tests are
  built and run, beside the code under test: ``Cargo.toml``/``Cargo.lock``, ``build.rs``
  (a build script runs before any test), ``rust-toolchain*``, ``go.mod``/``go.sum``/
  ``go.work`` (a ``replace`` into the tree would swap a test dependency), ``pom.xml``,
  ``.mvn/`` (core extensions), ``junit-platform.properties`` (JUnit 5's configuration: the
  autodetection of extensions), ``META-INF/services/`` registrations (test listeners and
  extensions found by the service loader), Gradle build and settings scripts,
  ``CMakeLists.txt``, ``*.cmake`` and CMake presets (test definitions), ``meson.build``;
* interpreter start-up hooks: ``sitecustomize.py``, ``usercustomize.py``, ``*.pth``, installed
  metadata (``*.egg-info``, ``*.dist-info``, ``*.egg-link``), and modules at the top of the tree
  (or of ``src/``) named like the test runner (``pytest``, ``_pytest``, ``pluggy``, ``py``,
  ``unittest``, ``site``), which would shadow it on ``sys.path``.

``manifest(root)`` lists files with their sha256, skipping VCS folders, caches and installed
dependencies (``node_modules``, ``site-packages``, virtualenvs).
"""

import hashlib
import os
import re
import sys
from typing import Callable, Dict, Optional, Union

_HERE = os.path.dirname(os.path.abspath(__file__))
TYPE_CHECKING = False
if TYPE_CHECKING or __package__:  # repogym.shipped.infra, on the host
    from repogym.shipped.testfiles import is_test_path
else:  # in a task: the copy shipped beside this file (never a repogym the agent could edit)
    if sys.path[:1] != [_HERE]:  # first, so no folder earlier on the path can shadow it
        sys.path.insert(0, _HERE)
    from testfiles import is_test_path

CONFIG_NAMES = frozenset(
    {
        "pytest.ini",
        ".pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        "noxfile.py",
        "package.json",
        "setupTests.js",
        "setupTests.ts",
        "sitecustomize.py",
        "usercustomize.py",
        # compiled languages: what decides how the tests are built and run
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "rust-toolchain",
        "rust-toolchain.toml",
        "go.mod",
        "go.sum",
        "go.work",
        "go.work.sum",
        "pom.xml",
        "junit-platform.properties",  # JUnit 5's own configuration (extension autodetection)
        "build.gradle",
        "build.gradle.kts",
        "settings.gradle",
        "settings.gradle.kts",
        "CMakeLists.txt",
        "CMakePresets.json",
        "CTestCustom.cmake",
        "meson.build",
        "meson_options.txt",
    }
)
CONFIG_RE = re.compile(
    r"^(?:(?:jest|vitest|vite|vitest\.workspace|babel|karma|rollup|webpack|tsup|esbuild)\.config\..+"
    r"|tsconfig(?:\.[\w-]+)*\.json|\.swcrc"
    r"|(?:jest|vitest|test)\.setup\..+|(?:jest|test)-setup\..+|\.mocharc.*|\.babelrc.*"
    r"|.+\.pth|.+\.egg-link)$"
)
META_DIR_RE = re.compile(r"^.+\.(?:egg-info|dist-info)$")
SHADOW_NAMES = frozenset({"pytest", "_pytest", "pluggy", "py", "unittest", "site"})
#: Compiled modules an import can load: their code cannot be scanned.
COMPILED_EXT = (".so", ".pyd", ".dylib", ".pyc", ".pyo", ".node")
#: Build output in the tree: Cargo's at its top (``target/debug``, ``target/release``) and
#: Maven's in every module (``target/classes``, ``target/test-classes`` …; a class file starts
#: like a Mach-O fat binary). The image holds what was built from the base, the runner rebuilds
#: what changed. The clean room drops an agent's changes there
#: (``taskdir.verification.ARTEFACTS``), so the code found there is the runner's own, never
#: scanned as a planted module.
BUILD_OUTPUT_RE = re.compile(
    r"^target/(?:debug/|release/|CACHEDIR\.TAG$|\.rustc_info\.json$)"
    r"|^(?:.+/)?target/(?:classes|test-classes|generated-sources|generated-test-sources"
    r"|maven-status|maven-archiver|surefire-reports|surefire)/"
)
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        "site-packages",
        ".tox",
        ".nox",
        ".pytest_cache",
        ".mypy_cache",
    }
)


def is_infra(path: str) -> bool:
    """True when ``path`` is test infrastructure (tests, runner configuration, start-up hooks)."""
    parts = path.strip("/").split("/")
    if is_test_path(path):
        return True
    name = parts[-1]
    if name in CONFIG_NAMES or CONFIG_RE.match(name):
        return True
    if (
        ".cargo" in parts[:-1]
        or ".mvn" in parts[:-1]
        or any(META_DIR_RE.match(p) for p in parts[:-1])
    ):
        return True
    if "META-INF" in parts[:-1] and "services" in parts[:-1] or name.endswith(".cmake"):
        return True
    top = parts[1:] if parts[0] == "src" and len(parts) > 1 else parts
    head = top[0][:-3] if len(top) == 1 and top[0].endswith(".py") else top[0]
    return head in SHADOW_NAMES and (len(top) > 1 or top[0].endswith(".py"))


def is_build_output(path: str) -> bool:
    """True when ``path`` is the test runner's own build output (:data:`BUILD_OUTPUT_RE`)."""
    return bool(BUILD_OUTPUT_RE.match(path.strip("/")))


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
    return h.hexdigest()


def walk(root: "Union[str, os.PathLike[str]]") -> Dict[str, str]:
    """``{relative path: absolute path}`` of the files and symlinks under ``root``."""
    out = {}  # type: Dict[str, str]
    root = os.path.abspath(root)
    for current, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        rel_dir = os.path.relpath(current, root)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(current, d))]:
            rel = name if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/" + name
            out[rel] = os.path.join(current, name)
    return out


NATIVE_MAGIC = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"MZ")
"""How native code starts (ELF, Mach-O 64/32, a fat binary, a Windows image): a loader can run
such a file whatever its name."""


def is_native(path: str) -> bool:
    """Whether the file at ``path`` (symlinks followed) holds native code, by its content."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return any(head.startswith(magic) for magic in NATIVE_MAGIC)


def digest(path: str) -> str:
    """sha256 of a file's bytes, ``link:<target>`` for a symlink (never followed)."""
    if os.path.islink(path):
        return "link:" + os.readlink(path)
    return sha256_file(path)


def manifest(
    root: "Union[str, os.PathLike[str]]", select: Optional[Callable[[str], bool]] = None
) -> Dict[str, str]:
    """``{relative path: digest}`` of the files under ``root`` for which ``select(rel)`` holds."""
    out = {}  # type: Dict[str, str]
    for rel, path in sorted(walk(root).items()):
        if select is None or select(rel):
            try:
                out[rel] = digest(path)
            except OSError:
                continue
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(manifest(sys.argv[1], is_infra), indent=1, sort_keys=True))
