"""C and C++ projects built with CMake, tested with CTest: detection and recipe.

Supported where the host toolchain can do it: the local sandbox maps ``gcc:N`` onto the host base
with its own GCC (12 on Debian 12) and the host's CMake, Ninja and CTest. What decides:

* ``cmake_minimum_required`` above the host's CMake, or a C++/C standard GCC 12 cannot compile
  (C++26), make the repository unsupported;
* tests must be CTest tests (``enable_testing``/``include(CTest)`` with ``add_test``,
  ``gtest_discover_tests``, ``catch_discover_tests``, ``doctest_discover_tests``); options that
  switch them on (``BUILD_TESTING``, ``<PROJ>_BUILD_TESTS``…) are set ``ON`` at configure time;
* test frameworks and ``find_package(… REQUIRED)`` dependencies with a known Debian package are
  installed with ``apt-get`` (Debian's archive is reachable from the build);
* code downloaded at configure time cannot be (no GitHub here): a GoogleTest ``FetchContent``
  declaration is pointed at Debian's GoogleTest sources (``FETCHCONTENT_SOURCE_DIR_<NAME>``), a
  declaration with ``FIND_PACKAGE_ARGS`` of a package installed here is found with
  ``find_package``, anything else (and CPM.cmake) makes the repository unsupported, as does a
  git submodule the build uses but the snapshot lacks.

The build directory is :data:`BUILD_DIR`, outside the working tree: what an agent changes there
is never carried into a verifier's clean room, and the test command rebuilds before it runs.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from repogym.bootstrap._files import walk_files
from repogym.bootstrap.commit import CommitInfo
from repogym.bootstrap.model import WORKDIR, DockerfileWriter, Recipe
from repogym.bootstrap.native import cmake_guards as guards
from repogym.bootstrap.native import cmake_scan as scan
from repogym.bootstrap.native.project import NativeProject, tool_version, version_tuple
from repogym.bootstrap.submodules import declared, is_present

BUILD_DIR = "/opt/repogym-build"
JUNIT_FILE = f"{BUILD_DIR}/repogym-ctest-junit.xml"
JUNIT_BEGIN = "REPOGYM-CTEST-JUNIT-BEGIN"
JUNIT_END = "REPOGYM-CTEST-JUNIT-END"
BUILD_FAILED = "REPOGYM-CTEST-BUILD-FAILED"
PIP_CMAKE = "/opt/repogym-cmake"
"""Where a newer CMake from PyPI is installed (a virtual environment) when the host's is too old."""
"""Marker lines of the test command's output, read by ``shipped/parsers/_log_ctest.py``."""
GCC_IMAGE_MAJOR = "12"
MAX_CXX = {12: 23, 13: 23, 14: 26}
"""Newest C++ standard each GCC major compiles (``-std=c++23`` is GCC 11+, ``c++26`` GCC 14+)."""
MAX_C = 23
DEFAULT_CXX = 17
"""The standard given to a project that asks its builder for one (GCC 12's own default)."""
BUILD_JOBS = 2

# find_package name (lower case) → Debian packages (bookworm, the gcc:12 image's release).
DEBIAN_PACKAGES = {
    "gtest": ["libgtest-dev"],
    "googletest": ["libgtest-dev"],
    "gmock": ["libgmock-dev"],
    "catch2": ["catch2"],
    "doctest": ["doctest-dev"],
    "benchmark": ["libbenchmark-dev"],
    "zlib": ["zlib1g-dev"],
    "bzip2": ["libbz2-dev"],
    "openssl": ["libssl-dev"],
    "curl": ["libcurl4-openssl-dev"],
    "pkgconfig": ["pkg-config"],
    "boost": ["libboost-dev"],
    "fmt": ["libfmt-dev"],
    "spdlog": ["libspdlog-dev"],
    "nlohmann_json": ["nlohmann-json3-dev"],
    "yaml-cpp": ["libyaml-cpp-dev"],
    "protobuf": ["libprotobuf-dev", "protobuf-compiler"],
    "libxml2": ["libxml2-dev"],
    "png": ["libpng-dev"],
    "jpeg": ["libjpeg-dev"],
    "sqlite3": ["libsqlite3-dev"],
    "eigen3": ["libeigen3-dev"],
    "tbb": ["libtbb-dev"],
    "expat": ["libexpat1-dev"],
    "lz4": ["liblz4-dev"],
    "zstd": ["libzstd-dev"],
    "libuv": ["libuv1-dev"],
}
NEEDS_NOTHING = {"threads", "python", "python3", "pythoninterp", "git", "doxygen", "sphinx"}
"""find_package names the image already satisfies or that only build documentation."""
GOOGLETEST_SOURCES = "/usr/src/googletest"
"""Debian's ``googletest`` package: GoogleTest + GoogleMock sources (CMake project)."""
WERROR = re.compile(r"WERROR", re.I)
DOCS_OPTION = re.compile(
    r"^(?!.*INSTALL).*(^|_)(DOCS?|DOCUMENTATION|DOXYGEN|SPHINX|MAN(PAGES?)?)$", re.I
)
"""Options switched ``OFF`` whatever their default: ``-Werror`` and documentation builds."""
BINDING_MIN_SOURCES = 20
BINDING_RATIO = 5
CATCH_MIN_BYTES = 4000
"""A vendored Catch2 header is bigger (the single header is ~600 kB, ``catch_all.hpp`` ~5 kB);
a smaller ``catch.hpp`` is a project's wrapper around the installed one."""
_CXX_SOURCES = (".cpp", ".cc", ".cxx", ".c++", ".hpp", ".hh", ".hxx")


@lru_cache(maxsize=1)
def host_cmake() -> str | None:
    """The host's CMake version (``"3.25.1"``), None without ``cmake``."""
    text = tool_version(shutil.which("cmake"), "--version")
    m = re.search(r"cmake version (\d+\.\d+\.\d+)", text or "")
    return m.group(1) if m else None


@lru_cache(maxsize=1)
def host_gcc() -> tuple[str, str] | None:
    """``(g++ path, version "12.2.0")`` of the host base's compiler, None without one."""
    gxx = "/usr/bin/g++" if Path("/usr/bin/g++").exists() else shutil.which("g++")
    text = tool_version(gxx, "-dumpfullversion")
    return (gxx, text) if gxx and text and re.match(r"\d+\.\d+", text) else None


def cmake_over_package_json(repo: Path) -> bool:
    """A root ``CMakeLists.txt`` beside a ``package.json`` that only describes the package for
    npm (no test script, or ``npm init``'s ``Error: no test specified`` placeholder)."""
    if not (repo / "CMakeLists.txt").is_file():
        return False
    try:
        scripts = json.loads((repo / "package.json").read_text(errors="replace")).get("scripts")
    except (OSError, ValueError, AttributeError):
        return False
    test = scripts.get("test") if isinstance(scripts, dict) else None
    return not isinstance(test, str) or "no test specified" in test


def cmake_over_python(repo: Path) -> bool:
    """A root ``CMakeLists.txt`` in a C/C++ library whose Python package is a binding: at least
    :data:`BINDING_MIN_SOURCES` C/C++ files and :data:`BINDING_RATIO` times as many as ``*.py``."""
    if not (repo / "CMakeLists.txt").is_file():
        return False
    native = python = 0
    for rel in walk_files(repo, max_files=20000):
        suffix = rel.suffix.lower()
        native += suffix in _CXX_SOURCES or suffix in (".c", ".h")
        python += suffix == ".py"
    return native >= BINDING_MIN_SOURCES and native >= BINDING_RATIO * python


def source_language(repo: Path) -> str:
    """``"cpp"`` when the repository has C++ sources, else ``"c"``."""
    for rel in walk_files(repo, max_files=5000):
        if rel.suffix.lower() in _CXX_SOURCES:
            return "cpp"
    return "c"


@dataclass
class CMakeProject(NativeProject):
    """A CMake repository: what the recipe configures, installs and runs."""

    cmake_minimum: str | None = None
    cxx_standard: int | None = None
    c_standard: int | None = None
    test_commands: list[str] = field(default_factory=list)
    test_options: list[str] = field(default_factory=list)
    """Options set ``ON`` at configure time (``-D<name>=ON``)."""
    frameworks: list[str] = field(default_factory=list)
    apt_packages: list[str] = field(default_factory=list)
    cmake_defines: dict[str, str] = field(default_factory=dict)
    """Other ``-D`` definitions (FetchContent redirections)."""
    switches: dict[str, str] = field(default_factory=dict)
    """Options set to leave out what cannot be built here (a download, a missing submodule)."""
    cmake_pip: str | None = None
    """A PyPI requirement for a newer CMake than the host's (``cmake>=3.29,<4``)."""
    standins: list[tuple[str, str]] = field(default_factory=list)
    """``(submodule path, shell command)``: Debian's copy of a missing submodule's code."""


def detect_cmake(
    repo: Path, language: str = "cpp", commit: CommitInfo | None = None
) -> CMakeProject:
    project = CMakeProject(language, manifests=["CMakeLists.txt"])
    gcc, cmake = host_gcc(), host_cmake()
    if gcc is None or cmake is None:
        project.problem = "CMake project, but this host lacks " + (
            "g++" if gcc is None else "cmake"
        )
        return project
    project.toolchain, project.toolchain_version = gcc
    if not (repo / "CMakeLists.txt").is_file():
        project.problem = (
            "Meson project (meson.build, no CMakeLists.txt): "
            "repogym builds C and C++ with CMake only"
            if (repo / "meson.build").is_file()
            else "no CMakeLists.txt at the repository's root"
        )
        return project
    subs = tuple(sub.path for sub in declared(repo))
    files = scan.read_cmake_files(repo, subs)
    inputs = _Inputs(
        repo,
        files,
        files.texts.get("CMakeLists.txt", ""),
        files.all_text,
        commit,
        cmake,
        guards.GuardedFiles(files),
        {o.name: o.default for o in scan.options(files)},
    )
    for check in (_versions, _tests, _dependencies, _bundled, _fetches, _submodules):
        if project.problem:
            break
        check(project, inputs)
    return project


@dataclass(frozen=True)
class _Inputs:
    """What the detection steps read."""

    repo: Path
    files: scan.CMakeFiles
    root: str
    """The root ``CMakeLists.txt`` without comments."""
    text: str
    """Every CMake file's text, without comments."""
    commit: CommitInfo | None
    cmake: str
    """The host's CMake version."""
    guarded: guards.GuardedFiles
    options: dict[str, str]
    """Every ``option()`` with its default."""


def _versions(p: CMakeProject, i: _Inputs) -> None:
    p.cmake_minimum = scan.minimum_version(i.root)
    if p.cmake_minimum and version_tuple(p.cmake_minimum) > version_tuple(i.cmake):
        # CMake's own wheels on PyPI (a registry the build reaches); 3.x keeps old projects'
        # vendored code (cmake_minimum_required < 3.5) configurable.
        p.cmake_pip = f"cmake>={p.cmake_minimum}" + (
            ",<4" if version_tuple(p.cmake_minimum) < (4,) else ""
        )
        p.notes.append(
            f"cmake_minimum_required(VERSION {p.cmake_minimum}): CMake from PyPI "
            f"({p.cmake_pip}); the host has {i.cmake}"
        )
    gcc_major = version_tuple(p.toolchain_version or "0")[0]
    p.cxx_standard, p.c_standard = scan.cxx_standard(i.text), scan.c_standard(i.text)
    best = MAX_CXX.get(gcc_major, 23 if gcc_major > 14 else 20)
    if p.cxx_standard and _order(p.cxx_standard) > best:
        p.problem = (
            f"the project asks for C++{p.cxx_standard}; the host's GCC {p.toolchain_version} "
            f"compiles up to C++{best}"
        )
    elif p.c_standard and _order(p.c_standard) > MAX_C:
        p.problem = f"the project asks for C{p.c_standard}; GCC {p.toolchain_version} stops at C23"
    elif p.cxx_standard or p.c_standard:
        std = f"C++{p.cxx_standard}" if p.cxx_standard else f"C{p.c_standard}"
        p.notes.append(f"{std} with GCC {p.toolchain_version}")
    sets_standard = any(
        re.match(r"\s*CMAKE_CXX_STANDARD\b", args) for args in scan.commands(i.text, "set")
    )
    stops = any(
        re.match(r"\s*FATAL_ERROR\b", call.args)
        and any(
            wanted and re.fullmatch(r"NOT\s+DEFINED\s+CMAKE_CXX_STANDARD", cond.strip())
            for cond, wanted in call.guards
        )
        for call in i.guarded.calls("message")
    )
    if stops and not sets_standard:  # the project leaves the standard to its builder
        p.switches["CMAKE_CXX_STANDARD"] = str(p.cxx_standard or DEFAULT_CXX)
        p.notes.append(
            f"CMAKE_CXX_STANDARD left to the builder: {p.switches['CMAKE_CXX_STANDARD']}"
        )


def _order(standard: int) -> int:
    """Standards in time order: 98 (C++98, C99) comes before 11."""
    return standard - 100 if standard >= 89 else standard


def _tests(p: CMakeProject, i: _Inputs) -> None:
    p.test_commands = scan.test_commands(i.files)
    defining = [c for c in p.test_commands if c != "enable_testing"]
    if not defining:
        p.problem = (
            "CMake project without CTest tests (no add_test, gtest_discover_tests, "
            "catch_discover_tests or doctest_discover_tests in its CMake files)"
        )
        if _meson_tests(i.repo):
            p.problem += "; its tests are built by Meson (test() in meson.build), not supported"
        return
    options = scan.test_options(i.files)
    p.test_options = [o.name for o in options]
    for option in options:  # cmake_dependent_option(X_TESTS … "X_DEVELOPER_BUILD" OFF)
        for condition in option.depends.split(";"):
            need = condition.strip()
            if (
                need in i.options
                and need not in p.test_options
                and guards.evaluate(i.options[need], {}) is not True
            ):
                p.test_options.append(need)
    for name, default in i.options.items():
        # A newer GCC's warnings must not fail the build; documentation needs tools (Doxygen,
        # Sphinx) the image lacks and no test needs.
        if (WERROR.search(name) or DOCS_OPTION.search(name)) and guards.evaluate(
            default, {}
        ) is not False:
            p.switches[name] = "OFF"
    if "enable_testing" in p.test_commands and "BUILD_TESTING" not in p.test_options:
        p.test_options.append("BUILD_TESTING")  # include(CTest)'s switch; harmless otherwise
    shown = ", ".join(f"{o.name} (default {o.default})" for o in options)
    p.notes.append(
        f"CTest tests ({', '.join(defining)})" + (f"; switched on: {shown}" if shown else "")
    )


def _meson_tests(repo: Path) -> bool:
    """Whether a ``meson.build`` of the repository declares tests (``test(…)``)."""
    for rel in walk_files(repo, max_files=5000):
        if rel.name == "meson.build":
            text = (repo / rel).read_text(errors="replace")
            if re.search(r"(?m)^\s*(\w+\s*=\s*)?test\s*\(", text):
                return True
    return False


def _uses(text: str, *patterns: str) -> bool:
    return any(re.search(pattern, text, re.I) for pattern in patterns)


def _vendored(repo: Path, names: tuple[str, ...], min_bytes: int = 0) -> str | None:
    """The first file among ``names`` (file names) in the repository, as a relative path;
    with ``min_bytes`` only one at least that big (not a wrapper that includes the real one)."""
    for rel in walk_files(repo):
        if rel.name in names and (not min_bytes or (repo / rel).stat().st_size >= min_bytes):
            return str(rel)
    return None


BOOST_TEST = ("unit_test_framework", "test_exec_monitor", "prg_exec_monitor")


def boost_components(files: scan.CMakeFiles) -> list[str]:
    """Debian packages of the compiled Boost libraries ``find_package(Boost … COMPONENTS …
    REQUIRED)`` asks for (``libboost-dev`` has the headers only)."""
    packages = []
    for _, args in files.calls("find_package"):
        words = args.split()
        if not words or words[0] != "Boost" or "REQUIRED" not in words:
            continue
        after = words[words.index("COMPONENTS") + 1 :] if "COMPONENTS" in words else []
        for word in after:
            if not re.fullmatch(r"[a-z][a-z0-9_]*", word):
                break
            name = "test" if word in BOOST_TEST else word.replace("_", "-")
            packages.append(f"libboost-{name}-dev")
    return packages


def _dependencies(p: CMakeProject, i: _Inputs) -> None:
    packages = {name.lower(): (name, req, ver) for name, req, ver in scan.find_packages(i.files)}
    apt: list[str] = []
    fetched = {f.name.lower() for f in scan.remote_fetches(i.files)}
    gtest_src = _vendored(i.repo, ("gtest-all.cc", "gmock-gtest-all.cc"))
    if _uses(
        i.text, r"\bgtest_(discover|add)_tests\b", r"\bGTest::", r"\bgtest(_main)?\b", r"\bgmock"
    ):
        p.frameworks.append("googletest")
        if gtest_src:
            folder = Path(gtest_src).parent
            folder = folder.parent if folder.name == "src" else folder
            p.notes.append(f"GoogleTest vendored ({folder})")
        elif not fetched & {"googletest", "gtest"}:
            apt.append("libgtest-dev")
            if _uses(i.text, r"\bgmock\b", r"GTest::gmock", r"\bGMock\b"):
                apt.append("libgmock-dev")
    # Catch2 3 only: asked for by version, or its target used where Catch2 2's never is.
    catch3 = _uses(i.text, r"find_package\s*\(\s*Catch2\s+3") or (
        _uses(i.text, r"Catch2::Catch2WithMain") and not _uses(i.text, r"Catch2::Catch2\b(?!W)")
    )
    if _uses(i.text, r"\bcatch_discover_tests\b", r"\bCatch2\b"):
        p.frameworks.append("catch2")
        vendored = _vendored(
            i.repo, ("catch.hpp", "catch_amalgamated.hpp", "catch_all.hpp"), CATCH_MIN_BYTES
        )
        if vendored:
            p.notes.append(f"Catch2 vendored ({vendored})")
        elif "catch2" in packages and "catch2" not in fetched:
            if catch3:
                p.problem = "the tests need Catch2 3; Debian 12 (the gcc:12 base) has Catch2 2.13"
                return
            apt.append("catch2")
    if _uses(i.text, r"\bdoctest\b"):
        p.frameworks.append("doctest")
        if "doctest" in packages and not _vendored(i.repo, ("doctest.h",)):
            apt.append("doctest-dev")
    if "add_test" in p.test_commands:
        p.frameworks.append("add_test")
    unknown = []
    own = re.sub(r"[-_]", "", (scan.project_name(i.root) or "").lower())
    for key, (name, required, _) in sorted(packages.items()):
        if key in NEEDS_NOTHING or key in fetched or not required:
            continue
        if re.sub(r"[-_]", "", key) == own:  # an install test's find_package of the project
            continue
        if key in DEBIAN_PACKAGES:
            apt += DEBIAN_PACKAGES[key]
        else:
            unknown.append(name)
    apt += boost_components(i.files)
    if unknown:
        p.notes.append(f"find_package REQUIRED with no known Debian package: {', '.join(unknown)}")
    p.apt_packages = list(dict.fromkeys(apt))
    p.external = list(p.apt_packages)
    if p.apt_packages:
        p.notes.append(f"Debian packages: {', '.join(p.apt_packages)}")


def _bundled(p: CMakeProject, i: _Inputs) -> None:
    """Switch off ``<PROJ>_USE_BUNDLED_<DEP>``-style options (on by default; the project then
    fetches its own copy) when Debian's package of DEP is installed anyway."""
    for name, default in i.options.items():
        m = re.search(r"(?:^|_)(?:USE_)?(?:BUNDLED|DOWNLOAD(?:ED)?)_([A-Za-z0-9]+)$", name)
        if not m or guards.evaluate(default, {}) is not True:
            continue
        packages = DEBIAN_PACKAGES.get(m.group(1).lower(), [])
        if packages and set(packages) <= set(p.apt_packages):
            p.switches[name] = "OFF"
            p.notes.append(f"-D{name}=OFF: Debian's {', '.join(packages)} instead")


def _fetches(p: CMakeProject, i: _Inputs) -> None:
    others = scan.downloaders(i.files)
    if others:
        p.problem = f"downloads code at configure time: {others[0]} (no GitHub access here)"
        return
    for fetch in scan.remote_fetches(i.files):
        name = fetch.name.strip('"')
        if re.search(r"googletest|/gtest", fetch.url, re.I) or name.lower() in (
            "googletest",
            "gtest",
        ):
            var = "FETCHCONTENT_SOURCE_DIR_" + re.sub(r"[^A-Za-z0-9_]", "_", name).upper()
            p.cmake_defines[var] = GOOGLETEST_SOURCES
            p.apt_packages = list(dict.fromkeys([*p.apt_packages, "googletest"]))
            p.notes.append(f"FetchContent {name} ({fetch.file}): Debian's GoogleTest sources")
            continue
        if _left_out(p, i, _declaration(i, fetch), f"FetchContent {name} ({fetch.url})"):
            continue
        known = DEBIAN_PACKAGES.get(name.lower())
        if fetch.find_package_args and known and name.lower() not in ("catch2", "gtest"):
            p.cmake_defines["FETCHCONTENT_TRY_FIND_PACKAGE_MODE"] = "ALWAYS"
            p.apt_packages = list(dict.fromkeys([*p.apt_packages, *known]))
            p.notes.append(f"FetchContent {name}: found with find_package ({', '.join(known)})")
            continue
        p.problem = (
            f"FetchContent/ExternalProject downloads {name} from {fetch.url} ({fetch.file}); "
            "there is no GitHub access here and no offline stand-in for it"
        )
        return
    if p.cmake_defines:
        p.cmake_defines["FETCHCONTENT_FULLY_DISCONNECTED"] = "ON"


def _declaration(i: _Inputs, fetch: scan.Fetch) -> list[guards.Guarded]:
    """The guarded ``FetchContent_Declare``/``ExternalProject_Add`` call behind ``fetch``."""
    return [
        call
        for command in ("fetchcontent_declare", "externalproject_add")
        for call in i.guarded.calls(command, foreign=True)
        if call.file == fetch.file and call.args.split()[:1] == [fetch.name]
    ]


def _option_values(p: CMakeProject, i: _Inputs) -> dict[str, str]:
    return {**i.options, **{name: "ON" for name in p.test_options}, **p.switches}


def _tests_reached(i: _Inputs, values: dict[str, str]) -> bool:
    return any(
        guards.reached(call.guards, values) is not False
        for command in scan.TEST_COMMANDS[1:]
        for call in i.guarded.calls(command)
    )


def _left_out(p: CMakeProject, i: _Inputs, calls: list[guards.Guarded], what: str) -> bool:
    """Whether ``calls`` (all of them) stay out of the configuration: their conditions are
    false under the options chosen so far, or switching one option makes them so while some
    CTest tests remain (the switch is then kept, e.g. ``-DUSE_SYSTEM_DOCTEST=ON``)."""
    if not calls:
        return False
    for call in calls:
        values = _option_values(p, i)
        if guards.reached(call.guards, values) is False:
            continue
        for name, value in guards.switches(call.guards, values, set(i.options)):
            if _tests_reached(i, {**values, name: value}):
                p.switches[name] = value
                if value == "OFF" and name in p.test_options:
                    p.test_options.remove(name)
                p.notes.append(f"-D{name}={value} leaves out {what}")
                if value == "ON":  # SYSTEM_DOCTEST: the system's doctest, from Debian
                    words = name.lower().split("_")
                    known = [pkg for w in words for pkg in DEBIAN_PACKAGES.get(w, [])]
                    p.apt_packages = list(dict.fromkeys([*p.apt_packages, *known]))
                break
        else:
            return False
    return True


# Missing submodules whose code Debian ships: URL pattern → (package, copy into the path).
STANDINS = {
    r"/googletest(\.git)?$": (
        "googletest",
        "mkdir -p {path} && cp -a /usr/src/googletest/. {path}/",
    ),
    r"/doctest(\.git)?$": (
        "doctest-dev",
        "mkdir -p {path}/doctest && cp -a /usr/include/doctest/. {path}/doctest/",
    ),
    r"nlohmann/json(\.git)?$": (
        "nlohmann-json3-dev",
        "mkdir -p {path}/include {path}/single_include && cp -a /usr/include/nlohmann "
        "{path}/include/ && cp -a /usr/include/nlohmann {path}/single_include/",
    ),
}  # fmt: skip


def _submodules(p: CMakeProject, i: _Inputs) -> None:
    outside_calls = re.sub(r"(?i)\badd_subdirectory\s*\([^)]*\)", "", i.text)
    for sub in declared(i.repo):
        if is_present(i.repo, sub):
            p.notes.append(f"git submodule {sub.path}: checked out")
            continue
        why = (
            i.commit.submodule_problems.get(sub.path) if i.commit else None
        ) or "not in the snapshot"
        calls = i.guarded.calls_in("add_subdirectory", sub.path)
        mentioned = re.search(r"[\s/\"{}]" + re.escape(sub.path) + r"[\s/\")]", outside_calls)
        if mentioned or (calls and not _left_out(p, i, calls, f"git submodule {sub.path}")):
            standin = next((v for k, v in STANDINS.items() if re.search(k, sub.url)), None)
            if standin is None:
                p.problem = (
                    f"git submodule {sub.path} ({sub.url}) is used by the build but missing "
                    f"({why}) and Debian has no stand-in for it"
                )
                return
            package, command = standin
            p.apt_packages = list(dict.fromkeys([*p.apt_packages, package]))
            p.standins.append((sub.path, command.format(path=shlex.quote(sub.path))))
            p.notes.append(f"git submodule {sub.path} missing ({why}): Debian's {package}")
            continue
        p.notes.append(f"git submodule {sub.path} missing ({why}); the build does not use it")


# ------------------------------------------------------------------------------ recipe


def configure_args(project: CMakeProject) -> list[str]:
    """``cmake`` configure arguments (build directory, generator, test switches, redirections)."""
    args = ["-S", ".", "-B", BUILD_DIR, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Debug"]
    args += [f"-D{name}=ON" for name in project.test_options]
    args += [f"-D{name}={value}" for name, value in project.switches.items()]
    args += [f"-D{k}={v}" for k, v in project.cmake_defines.items()]
    return args


def test_script(pip_cmake: bool = False) -> str:
    """The shell program behind the test and select commands (test arguments: ``"$@"``).

    It rebuilds (the agent's change), then runs CTest and prints CTest's JUnit report between
    marker lines; when the build fails it prints the compiler's output and a marker, lists the
    tests it could not run (``ctest -N``) and fails. With ``pip_cmake`` the CMake from PyPI
    comes first on ``PATH`` (commands run in a login shell, which resets an image's ``PATH``).
    """
    path = f'export PATH="{PIP_CMAKE}/bin:$PATH"; ' if pip_cmake else ""
    build = f"cmake --build {BUILD_DIR} -j{BUILD_JOBS}"
    ctest = (
        f"ctest --test-dir {BUILD_DIR} --output-on-failure --test-output-size-passed 1024 "
        f"--test-output-size-failed 16384 --output-junit {JUNIT_FILE}"
    )
    return (
        f'{path}rm -f {JUNIT_FILE}; if {build}; then {ctest} "$@"; rc=$?; echo {JUNIT_BEGIN}; '
        f"cat {JUNIT_FILE} 2>/dev/null; echo; echo {JUNIT_END}; exit $rc; "
        f'else echo {BUILD_FAILED}; ctest --test-dir {BUILD_DIR} -N "$@"; exit 1; fi'
    )


def cmake_recipe(project: CMakeProject) -> Recipe:
    if project.problem:
        raise ValueError(project.problem)
    image = f"gcc:{GCC_IMAGE_MAJOR}"
    df = DockerfileWriter(
        "repogym bootstrap recipe: CMake + Ninja, GCC, CTest.\n"
        f"The build directory ({BUILD_DIR}) is outside the working tree; tests rebuild first."
    )
    df.from_(image)
    df.workdir(WORKDIR)
    packages = ["cmake", "ninja-build", *project.apt_packages]
    if project.cmake_pip:
        packages.append("python3-venv")
    df.run(
        ["apt-get", "update", "-qq", "&&", "DEBIAN_FRONTEND=noninteractive", "apt-get",
         "install", "-y", "-qq", "--no-install-recommends", *packages]
    )  # fmt: skip
    if project.cmake_pip:
        df.run(
            ["python3", "-m", "venv", PIP_CMAKE, "&&", f"{PIP_CMAKE}/bin/pip", "install", "-q",
             "--disable-pip-version-check", shlex.quote(project.cmake_pip)]
        )  # fmt: skip
    df.copy(["repo/"], f"{WORKDIR}/")
    for _, command in project.standins:
        df.run([command])
    bin_dir = f"{PIP_CMAKE}/bin/" if project.cmake_pip else ""
    df.run([f"{bin_dir}cmake", *(shlex.quote(a) for a in configure_args(project))])
    df.run([f"{bin_dir}cmake", "--build", BUILD_DIR, f"-j{BUILD_JOBS}"])
    # The verifier runs the tests as another user, and the test command rebuilds first.
    df.run(["chmod", "-R", "a+rwX", BUILD_DIR])
    command = f"bash -c {shlex.quote(test_script(bool(project.cmake_pip)))} ctest"
    return Recipe(
        language=project.language,
        runner="ctest",
        base_image=image,
        dockerfile=df.render(),
        test_command=command,
        collect_command=f"{bin_dir}ctest --test-dir {BUILD_DIR} -N",
        select_command=command,
        workdir=WORKDIR,
        env={"CTEST_OUTPUT_ON_FAILURE": "1"},
        notes=[*project.notes, "built in the image (Debug, Ninja); the test command rebuilds"],
    )
