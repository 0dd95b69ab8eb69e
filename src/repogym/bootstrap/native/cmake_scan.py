"""Reading a CMake project's files without running CMake: the facts :mod:`.cmake` decides on.

Everything here is a static, tolerant reading of ``CMakeLists.txt`` / ``*.cmake`` text (comments
removed, commands matched by name, case-insensitively as CMake does). Conditions are not
evaluated: an ``option()`` or ``FetchContent_Declare`` counts wherever it appears, except in
folders that only build documentation, examples, benchmarks or fuzzers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from repogym.bootstrap._files import read_text, walk_files

MAX_CMAKE_FILES = 400
_SIDE_DIRS = re.compile(
    r"^(docs?|examples?|samples?|bench(mark)?s?|fuzz(ing|ers?)?|website|packaging)$", re.I
)
_FOREIGN_DIRS = re.compile(
    r"^(third[_-]?party|3rd[_-]?party|external|extern|vendor(ed)?|deps|contrib|subprojects)$"
    r"|^[A-Za-z][\w.+]*?-v?\d+(\.\d+)+$",  # an unpacked release: googletest-1.16.0
    re.I,
)

_BRACKET_COMMENT = re.compile(r"#\[(=*)\[.*?\]\1\]", re.S)
_LINE_COMMENT = re.compile(r'#[^\n]*|("(?:[^"\\]|\\.)*")', re.S)


def strip_comments(text: str) -> str:
    """CMake text without ``# …`` line comments and ``#[[ … ]]`` bracket comments (quoted
    strings keep their ``#``)."""
    text = _BRACKET_COMMENT.sub("", text)
    return _LINE_COMMENT.sub(lambda m: m.group(1) or "", text)


def commands(text: str, name: str) -> list[str]:
    """The argument text of every ``name(...)`` call (case-insensitive; nested parentheses
    allowed one level deep, as in ``if()`` conditions and generator expressions)."""
    pattern = re.compile(
        r"(?<![\w$])" + re.escape(name) + r"\s*\(((?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\)", re.I
    )
    return [m.group(1) for m in pattern.finditer(text)]


@dataclass
class CMakeFiles:
    """The CMake files of a repository, comment-free, by relative path (root file first).

    ``texts`` are the project's own files; ``foreign`` those of vendored code (``third_party/``,
    ``external/``, an unpacked ``googletest-1.16.0/``, git submodules): they are built too, but
    their options, tests and dependencies are not the project's."""

    texts: dict[str, str] = field(default_factory=dict)
    foreign: dict[str, str] = field(default_factory=dict)

    @property
    def all_text(self) -> str:
        return "\n".join(self.texts.values())

    def calls(self, name: str, *, foreign: bool = False) -> list[tuple[str, str]]:
        """``(file, arguments)`` of every call of ``name`` in the project's files (and in the
        vendored ones with ``foreign``)."""
        texts = {**self.texts, **self.foreign} if foreign else self.texts
        return [(path, args) for path, text in texts.items() for args in commands(text, name)]


def read_cmake_files(repo: Path, vendored: tuple[str, ...] = ()) -> CMakeFiles:
    """``CMakeLists.txt`` and ``*.cmake`` files (at most :data:`MAX_CMAKE_FILES`), skipping
    build output and documentation/example/benchmark folders; files under ``vendored`` paths
    (e.g. git submodules) or third-party folders are :attr:`CMakeFiles.foreign`."""
    files = CMakeFiles()
    root = read_text(repo / "CMakeLists.txt")
    if root is not None:
        files.texts["CMakeLists.txt"] = strip_comments(root)
    count = 0
    for rel in walk_files(repo):
        if count >= MAX_CMAKE_FILES:
            break
        if rel.name != "CMakeLists.txt" and rel.suffix != ".cmake":
            continue
        folders = rel.parts[:-1]
        if str(rel) == "CMakeLists.txt" or any(_SIDE_DIRS.match(p) for p in folders):
            continue
        text = read_text(repo / rel)
        if text is None:
            continue
        count += 1
        under = rel.as_posix()
        outside = any(_FOREIGN_DIRS.match(p) for p in folders) or any(
            under.startswith(v.rstrip("/") + "/") for v in vendored
        )
        (files.foreign if outside else files.texts)[str(rel)] = strip_comments(text)
    return files


def project_name(root_text: str) -> str | None:
    """The root ``project(NAME …)``'s name."""
    for args in commands(root_text, "project"):
        words = args.split()
        if words:
            return words[0].strip('"')
    return None


# ------------------------------------------------------------------------------ versions


def minimum_version(root_text: str) -> str | None:
    """``cmake_minimum_required(VERSION 3.14...3.28)`` → ``"3.14"`` (the lower bound)."""
    for args in commands(root_text, "cmake_minimum_required"):
        m = re.search(r"\bVERSION\s+\"?(\d+(?:\.\d+){0,3})", args, re.I)
        if m:
            return m.group(1)
    return None


_CXX_STD = (
    re.compile(r"\bCMAKE_CXX_STANDARD\s+\"?(\d+)\b"),
    re.compile(r"\bCXX_STANDARD\s+\"?(\d+)\b"),
    re.compile(r"\bcxx_std_(\d+)\b"),
    re.compile(r"-std=(?:c|gnu)\+\+(\d+|[0-9][a-z])\b"),
)
_C_STD = (
    re.compile(r"\bCMAKE_C_STANDARD\s+\"?(\d+)\b"),
    re.compile(r"\bC_STANDARD\s+\"?(\d+)\b"),
    re.compile(r"\bc_std_(\d+)\b"),
)
# Draft names GCC accepts for a coming standard (-std=c++2a is C++20).
_DRAFTS = {"0x": 11, "1y": 14, "1z": 17, "2a": 20, "2b": 23, "2c": 26}


def _year_rank(value: str, old: int) -> tuple[int, int]:
    """A standard number as a sortable (rank, number): 98 and 90/99 come before 03/11/…"""
    number = _DRAFTS.get(value) or int(value)
    return (0 if number >= old else 1, number)


def cxx_standard(text: str) -> int | None:
    """The newest C++ standard the files ask for (``CMAKE_CXX_STANDARD``, ``cxx_std_NN``…)."""
    found = [v for pattern in _CXX_STD for v in pattern.findall(text)]
    if not found:
        return None
    best = max(found, key=lambda v: _year_rank(v, 98))
    return _DRAFTS.get(best) or int(best)


def c_standard(text: str) -> int | None:
    """The newest C standard the files ask for (``CMAKE_C_STANDARD``, ``c_std_NN``)."""
    found = [v for pattern in _C_STD for v in pattern.findall(text)]
    if not found:
        return None
    return int(max(found, key=lambda v: _year_rank(v, 89)))


# ------------------------------------------------------------------------------ tests

TEST_COMMANDS = (
    "enable_testing",
    "add_test",
    "gtest_discover_tests",
    "gtest_add_tests",
    "catch_discover_tests",
    "doctest_discover_tests",
)
_TEST_OPTION = re.compile(r"(^|_)(UNIT_?)?TESTS?(ING)?($|_)|(^|_)CTEST($|_)", re.I)
_NOT_TEST_OPTION = re.compile(
    r"BENCH|FUZZ|COVER|INSTALL|SANITI|(^|_)[ALMTU]?B?SAN($|_)|ASAN|UBSAN|TSAN|MSAN|LSAN|VALGRIND|MEMCHECK|HEADER|DOCS?($|_)|EXAMPLE|SAMPLE|"
    r"(^|_)NO($|_)|WITHOUT|DISABLE|SKIP|SLOW|PERF|WERROR|STRESS|COMPILE_FAIL|EXPORT|(^|_)ONLY($|_)|"
    r"CUDA|HIP($|_)|SYCL|OPENCL|MPI($|_)|PYTHON|JAVA|NETWORK|ONLINE|INTERNET",
    re.I,
)


_COSTLY = re.compile(r"\b(expensive|slow|long[- ]running|takes? (a )?long)\b", re.I)
"""An option's help text that warns it is costly (not switched on)."""


def test_commands(files: CMakeFiles) -> list[str]:
    """Which of the commands that define CTest tests the files use (``include(CTest)``
    counts as ``enable_testing``)."""
    used = [name for name in TEST_COMMANDS if files.calls(name)]
    includes = " ".join(args for _, args in files.calls("include"))
    if re.search(r"\bCTest\b", includes) and "enable_testing" not in used:
        used.insert(0, "enable_testing")
    return used


@dataclass(frozen=True)
class Option:
    name: str
    default: str
    """``ON``/``OFF`` or the expression given (``${PROJECT_IS_TOP_LEVEL}``); ``OFF`` when none."""
    help: str = ""
    depends: str = ""
    """A ``cmake_dependent_option``'s condition list (``"A;NOT B"``): unmet, the option is
    forced to its fallback whatever ``-D`` says."""


def test_options(files: CMakeFiles) -> list[Option]:
    """``option()`` / ``cmake_dependent_option()`` switches that turn tests on, in file order
    (names like ``BUILD_TESTING``, ``<PROJ>_BUILD_TESTS``, ``ENABLE_<X>_TEST``,
    ``gtest_build_tests``)."""
    return [
        o
        for o in options(files)
        if _TEST_OPTION.search(o.name)
        and not _NOT_TEST_OPTION.search(o.name)
        and not _COSTLY.search(o.help)
    ]


def options(files: CMakeFiles) -> list[Option]:
    """Every ``option()`` / ``cmake_dependent_option()`` of the project's files, in file order
    (the first declaration of a name wins)."""
    found: dict[str, Option] = {}
    for command in ("option", "cmake_dependent_option"):
        for _, args in files.calls(command):
            words = re.findall(r'"(?:[^"\\]|\\.)*"|\S+', args)
            if not words:
                continue
            name = words[0]
            if not re.fullmatch(r"[A-Za-z_][\w-]*", name):
                continue
            default = words[2] if len(words) > 2 else "OFF"
            help_text = words[1].strip('"') if len(words) > 1 else ""
            depends = words[3].strip('"') if command != "option" and len(words) > 3 else ""
            found.setdefault(name, Option(name, default.strip('"'), help_text, depends))
    return list(found.values())


# ------------------------------------------------------------------------------ dependencies


@dataclass(frozen=True)
class Fetch:
    """One ``FetchContent_Declare`` (or ``ExternalProject_Add``) that downloads."""

    name: str
    url: str
    file: str
    find_package_args: bool = False
    """The declaration names ``FIND_PACKAGE_ARGS`` (CMake ≥ 3.24 tries ``find_package`` first)."""


_REMOTE = re.compile(r"(?:https?|git|ssh)://\S+|git@[\w.-]+:\S+", re.I)


def remote_fetches(files: CMakeFiles) -> list[Fetch]:
    """Declarations whose ``GIT_REPOSITORY`` / ``URL`` is a network address."""
    found = []
    for command in ("FetchContent_Declare", "ExternalProject_Add"):
        for path, args in files.calls(command, foreign=True):
            words = args.split()
            if not words:
                continue
            m = re.search(r"\b(?:GIT_REPOSITORY|URL)\s+\"?([^\s\")]+)", args)
            if not m or not _REMOTE.match(m.group(1)):
                continue
            found.append(Fetch(words[0], m.group(1), path, "FIND_PACKAGE_ARGS" in args))
    return found


def downloaders(files: CMakeFiles) -> list[str]:
    """Other ways the files download code at configure time (CPM.cmake, ``file(DOWNLOAD)``
    of a ``.cmake`` script), as one-line descriptions."""
    found = []
    for path, _ in files.calls("CPMAddPackage", foreign=True)[:1]:
        found.append(f"CPM.cmake (CPMAddPackage in {path})")
    for path, args in files.calls("file", foreign=True):
        if re.match(r"\s*DOWNLOAD\s", args) and _REMOTE.search(args):
            url = _REMOTE.search(args)
            found.append(f"file(DOWNLOAD {url.group(0) if url else ''}) in {path}")
    return found


def find_packages(files: CMakeFiles) -> list[tuple[str, bool, str]]:
    """``(package, required, version)`` of every ``find_package`` call (first one per name)."""
    seen: dict[str, tuple[str, bool, str]] = {}
    for _, args in files.calls("find_package"):
        words = args.split()
        if not words or not re.fullmatch(r"[A-Za-z][\w.+-]*", words[0]):
            continue
        version = words[1] if len(words) > 1 and re.fullmatch(r"\d[\w.]*", words[1]) else ""
        entry = (words[0], "REQUIRED" in words, version)
        old = seen.get(words[0].lower())
        if old is None or (entry[1] and not old[1]):
            seen[words[0].lower()] = entry
    return list(seen.values())


def subdirectories(files: CMakeFiles) -> list[str]:
    """The folders named by ``add_subdirectory(…)`` (relative to the file that names them)."""
    found = []
    for path, args in files.calls("add_subdirectory", foreign=True):
        words = args.split()
        if not words or "$" in words[0]:
            continue
        base = Path(path).parent
        found.append(str((base / words[0].strip('"')).as_posix()).removeprefix("./"))
    return found
