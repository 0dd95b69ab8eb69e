"""C and C++ (CMake) offline builds: downloads and missing submodules behind ``if()`` blocks are
left out by switching an option, missing submodules Debian ships are stood in for, and options
that would switch tests *off* or turn sanitizers on are never set ``ON``."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repogym.bootstrap import detect, make_recipe
from repogym.bootstrap.native import cmake, cmake_guards

from .conftest import git_commit, local_backend_with_private_cache

MakeRepo = Callable[..., Path]


@pytest.fixture(autouse=True)
def fake_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cmake, "host_cmake", lambda: "3.25.1")
    monkeypatch.setattr(cmake, "host_gcc", lambda: ("/usr/bin/g++", "12.2.0"))


def _project(make_repo: MakeRepo, text: str, **files: str) -> cmake.CMakeProject:
    repo = make_repo({"CMakeLists.txt": text, "src/a.cpp": "int a() { return 1; }\n", **files})
    d = detect(repo)
    assert isinstance(d.native, cmake.CMakeProject)
    return d.native


@pytest.mark.parametrize(
    ("condition", "values", "truth"),
    [
        ("FOO", {"FOO": "ON"}, True),
        ("NOT FOO", {"FOO": "ON"}, False),
        ("${FOO} AND ${CMAKE_VERSION} VERSION_GREATER 3.15", {"FOO": "OFF"}, False),
        ("FOO AND CMAKE_VERSION VERSION_GREATER 3.15", {"FOO": "ON"}, None),
        ("FOO OR BAR", {"FOO": "OFF", "BAR": "1"}, True),
        ("NOT (FOO OR BAR)", {"FOO": "OFF"}, None),
        ("DEFINED FOO", {"FOO": "ON"}, None),
        ("UNKNOWN_VARIABLE", {}, None),
        ("FOO", {"FOO": "${PROJECT_IS_TOP_LEVEL}"}, None),
        ("FOO", {"FOO": "Foo-NOTFOUND"}, False),
    ],
)
def test_conditions_in_three_values(
    condition: str, values: dict[str, str], truth: bool | None
) -> None:
    assert cmake_guards.evaluate(condition, values) is truth


def test_guards_follow_if_blocks_and_add_subdirectory(make_repo: MakeRepo) -> None:
    files = cmake.scan.read_cmake_files(
        make_repo(
            {
                "CMakeLists.txt": "if(A)\n  add_subdirectory(tests)\nendif()\n",
                "tests/CMakeLists.txt": (
                    "if(B)\n add_test(one x)\nelseif(C)\n add_test(two x)\nelse()\n"
                    " add_test(three x)\nendif()\nadd_test(four x)\n"
                ),
            }
        )
    )
    calls = {
        c.args.split()[0]: c.guards for c in cmake_guards.GuardedFiles(files).calls("add_test")
    }
    assert calls == {
        "one": (("A", True), ("B", True)),
        "two": (("A", True), ("B", False), ("C", True)),
        "three": (("A", True), ("B", False), ("C", False)),
        "four": (("A", True),),
    }


OPTIONAL_FETCHES = """
    cmake_minimum_required(VERSION 3.16)
    project(demo CXX)
    option(DEMO_TESTS "tests" ON)
    option(DEMO_SANITIZERS "sanitizers" OFF)
    option(SYSTEM_DOCTEST "use the system's doctest" OFF)
    option(DEMO_SUPPLEMENTAL_TESTS "more tests with downloaded data" ON)
    option(DEMO_WITHOUT_TESTS "no tests" OFF)
    option(DEMO_TEST_WITH_ASAN "asan" OFF)
    include(FetchContent)
    if(DEMO_SANITIZERS AND ${CMAKE_VERSION} VERSION_GREATER "3.15")
      FetchContent_Declare(sanitizers GIT_REPOSITORY https://github.com/a/sanitizers-cmake.git)
    endif()
    if(NOT SYSTEM_DOCTEST)
      FetchContent_Declare(doctest GIT_REPOSITORY https://github.com/a/doctest.git)
    else()
      find_package(doctest REQUIRED)
    endif()
    if(DEMO_TESTS)
      enable_testing()
      add_subdirectory(tests)
    endif()
"""


def test_downloads_behind_options_are_switched_off(make_repo: MakeRepo) -> None:
    tests = (
        "if(DEMO_SUPPLEMENTAL_TESTS)\n"
        "  FetchContent_Declare(data GIT_REPOSITORY https://github.com/a/data.git)\n"
        "  add_test(NAME supplemental COMMAND s)\n"
        "endif()\n"
        "add_test(NAME basic COMMAND b)\n"
    )
    p = _project(make_repo, OPTIONAL_FETCHES, **{"tests/CMakeLists.txt": tests})
    assert not p.problem, p.problem
    assert p.switches == {"SYSTEM_DOCTEST": "ON", "DEMO_SUPPLEMENTAL_TESTS": "OFF"}
    assert p.test_options == ["DEMO_TESTS", "BUILD_TESTING"]  # never WITHOUT_TESTS or ASAN
    assert "doctest-dev" in p.apt_packages
    no_find = _project(
        make_repo,
        OPTIONAL_FETCHES.replace("find_package(doctest REQUIRED)", ""),
        **{"tests/CMakeLists.txt": tests},
    )
    assert no_find.switches["SYSTEM_DOCTEST"] == "ON" and "doctest-dev" in no_find.apt_packages
    assert (
        "-DSYSTEM_DOCTEST=ON leaves out FetchContent doctest (https://github.com/a/doctest.git)"
        in p.notes
    )
    args = cmake.configure_args(p)
    assert "-DDEMO_SUPPLEMENTAL_TESTS=OFF" in args and "-DDEMO_SUPPLEMENTAL_TESTS=ON" not in args
    assert not any("sanitizers" in n for n in p.notes)  # its option is OFF already


def test_a_download_that_every_test_needs_is_still_refused(make_repo: MakeRepo) -> None:
    tests = (
        "if(DEMO_SUPPLEMENTAL_TESTS)\n"
        "  FetchContent_Declare(data GIT_REPOSITORY https://github.com/a/data.git)\n"
        "  add_test(NAME supplemental COMMAND s)\n"
        "endif()\n"
    )
    p = _project(make_repo, OPTIONAL_FETCHES, **{"tests/CMakeLists.txt": tests})
    assert p.problem.startswith(
        "FetchContent/ExternalProject downloads data from https://github.com/a/data.git"
    )


SUBMODULES = """
    project(demo CXX)
    option(DEMO_BUILD_TESTS "tests" ON)
    option(DEMO_BUILD_BENCHMARKS "benchmarks" ON)
    if(DEMO_BUILD_TESTS)
      enable_testing()
      add_subdirectory("third_party/googletest")
      add_executable(t t.cc)
      target_link_libraries(t gtest_main)
      add_test(NAME t COMMAND t)
    endif()
    if(DEMO_BUILD_BENCHMARKS)
      add_subdirectory("third_party/benchmark")
    endif()
"""
GITMODULES = (
    '[submodule "g"]\n\tpath = third_party/googletest\n'
    "\turl = https://github.com/google/googletest.git\n"
    '[submodule "b"]\n\tpath = third_party/benchmark\n'
    "\turl = https://github.com/google/benchmark.git\n"
)


def test_missing_submodules_stand_in_or_switch_off(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {"CMakeLists.txt": SUBMODULES, "t.cc": "int main() {}\n", ".gitmodules": GITMODULES}
    )
    d = detect(repo)
    assert d.supported, d.reason
    p = d.native
    assert isinstance(p, cmake.CMakeProject)
    assert p.switches == {"DEMO_BUILD_BENCHMARKS": "OFF"}
    assert "googletest" in p.apt_packages
    recipe = make_recipe(repo, d)
    copy = (
        "RUN mkdir -p third_party/googletest && cp -a /usr/src/googletest/. third_party/googletest/"
    )
    assert copy in recipe.dockerfile
    # After the snapshot is copied in, before CMake configures.
    assert recipe.dockerfile.index("COPY") < recipe.dockerfile.index(copy)
    assert recipe.dockerfile.index(copy) < recipe.dockerfile.index("RUN cmake -S")
    assert (
        "git submodule third_party/googletest missing (not in the snapshot): Debian's googletest"
        in d.notes
    )


def test_a_submodule_every_test_needs_without_stand_in_is_refused(make_repo: MakeRepo) -> None:
    text = SUBMODULES.replace('add_subdirectory("third_party/googletest")', "") + (
        "if(DEMO_BUILD_TESTS)\n  add_subdirectory(third_party/benchmark)\nendif()\n"
    )
    repo = make_repo({"CMakeLists.txt": text, ".gitmodules": GITMODULES})
    d = detect(repo)
    assert not d.supported
    assert d.reason.startswith("git submodule third_party/benchmark (https://github.com/google/")
    assert d.reason.endswith("and Debian has no stand-in for it")


def test_a_meson_only_project_is_refused_by_name(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "meson.build": "project('x', 'c')\ntest('t', executable('t', 't.c'))\n",
            "t.c": "int main(void) { return 0; }\n",
            "tools/gen.py": "print('helper')\n",
        }
    )
    d = detect(repo)
    assert (d.language, d.supported) == ("c", False)
    assert d.reason == (
        "Meson project (meson.build, no CMakeLists.txt): repogym builds C and C++ with CMake only"
    )


def test_a_bundled_dependency_debian_installs_is_switched_off(make_repo: MakeRepo) -> None:
    text = """
        project(demo CXX)
        option(DEMO_USE_BUNDLED_GTEST "fetch our own GoogleTest" ON)
        option(DEMO_USE_BUNDLED_FOO "our own foo" ON)
        enable_testing()
        find_package(GTest REQUIRED)
        add_executable(t t.cc)
        target_link_libraries(t GTest::gtest_main)
        add_test(NAME t COMMAND t)
    """
    p = _project(make_repo, text)
    assert p.switches == {"DEMO_USE_BUNDLED_GTEST": "OFF"}  # foo: no Debian package known
    assert "-DDEMO_USE_BUNDLED_GTEST=OFF" in cmake.configure_args(p)


def test_tests_only_meson_builds_are_named(make_repo: MakeRepo) -> None:
    p = _project(
        make_repo,
        "project(x CXX)\nadd_library(x src/a.cpp)\n",
        **{
            "meson.build": "project('x', 'cpp')\nsubdir('tests')\n",
            "tests/meson.build": ("t = executable('t', 't.cpp')\ntest('t', t)\n"),
        },
    )
    assert p.problem.endswith(
        "; its tests are built by Meson (test() in meson.build), not supported"
    )


@pytest.fixture(scope="module")
def sandbox_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield from local_backend_with_private_cache(tmp_path_factory, "cmake-offline-cache")


@pytest.mark.slow
@pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake and ninja"
)
def test_pypi_cmake_and_googletest_standin_in_the_sandbox(
    make_repo: MakeRepo, sandbox_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project that needs CMake 3.28 (newer than Debian 12's) and whose GoogleTest submodule
    is missing builds and collects its tests: CMake from PyPI, GoogleTest from Debian."""
    from repogym.bootstrap import check_recipe

    monkeypatch.undo()  # the host's real CMake and GCC
    text = SUBMODULES.replace(
        "project(demo CXX)", "cmake_minimum_required(VERSION 3.28)\nproject(demo CXX)"
    )
    test = "#include <gtest/gtest.h>\nTEST(A, B) { EXPECT_EQ(1, 1); }\n"
    repo = make_repo({"CMakeLists.txt": text, "t.cc": test, ".gitmodules": GITMODULES})
    git_commit(repo)
    d = detect(repo)
    assert d.supported, d.reason
    recipe = make_recipe(repo, d)
    result = check_recipe(repo, recipe)
    assert result.ok, (result.failed_step, result.reason, result.log_tail)
    assert result.tests_collected == 1


def test_package_json_for_npm_metadata_leaves_a_cmake_project_cpp(make_repo: MakeRepo) -> None:
    from repogym.bootstrap import guess_language

    placeholder = (
        '{"name": "x", "scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}'
    )
    files = {"CMakeLists.txt": "project(x)\nenable_testing()\nadd_test(a b)\n", "a.cpp": ""}
    assert guess_language(make_repo({**files, "package.json": placeholder}))[0] == "cpp"
    assert guess_language(make_repo({**files, "package.json": '{"name": "x"}'}))[0] == "cpp"
    real = '{"name": "x", "scripts": {"test": "jest"}}'
    assert guess_language(make_repo({**files, "package.json": real}))[0] == "node"


def test_catch2_wrapper_header_is_not_a_vendored_catch2(make_repo: MakeRepo) -> None:
    text = """
        project(x CXX)
        enable_testing()
        find_package(Catch2 CONFIG QUIET)
        if(Catch2_VERSION VERSION_LESS 3)
          target_link_libraries(t PUBLIC Catch2::Catch2)
        else()
          add_library(catch_main ALIAS Catch2::Catch2WithMain)
        endif()
        add_test(NAME t COMMAND t)
    """
    wrapper = "#pragma once\n#include <catch2/catch.hpp>\n"
    p = _project(make_repo, text, **{"tests/catch.hpp": wrapper})
    assert not p.problem and p.apt_packages == ["catch2"]  # 2 or 3: Debian's 2.13 will do
    real = _project(make_repo, text, **{"tests/catch.hpp": "// Catch v2.13\n" + "x" * 5000})
    assert real.apt_packages == [] and "Catch2 vendored (tests/catch.hpp)" in real.notes
    only3 = _project(make_repo, text.replace("Catch2::Catch2)", "other)"))
    assert only3.problem.startswith("the tests need Catch2 3")


def test_dependent_test_options_werror_and_costly_options(make_repo: MakeRepo) -> None:
    text = """
        project(x CXX)
        option(X_DEVELOPMENT_BUILD "Build tests, enable warnings" OFF)
        option(X_WERROR "warnings are errors" ON)
        cmake_dependent_option(X_BUILD_TESTING "Build the tests" ON "X_DEVELOPMENT_BUILD" OFF)
        cmake_dependent_option(X_ENABLE_CONFIGURE_TESTS "WARNING: VERY EXPENSIVE" OFF
            "X_DEVELOPMENT_BUILD" OFF)
        cmake_dependent_option(X_ENABLE_WERROR "Werror" ON "X_DEVELOPMENT_BUILD" OFF)
        option(X_BUILD_DOCS "Build API documentation (requires Doxygen)" ON)
        option(X_MAN "man pages" ${X_MASTER_PROJECT})
        option(X_INSTALL_DOCS "install the documentation" ON)
        option(X_ENABLE_DOXYGEN "Doxygen" OFF)
        enable_testing()
        add_test(NAME t COMMAND t)
    """
    p = _project(make_repo, text)
    assert p.test_options == ["X_BUILD_TESTING", "X_DEVELOPMENT_BUILD", "BUILD_TESTING"]
    assert p.switches == {
        "X_WERROR": "OFF",
        "X_BUILD_DOCS": "OFF",
        "X_MAN": "OFF",
        "X_ENABLE_WERROR": "OFF",
    }


def test_a_standard_left_to_the_builder_is_given(make_repo: MakeRepo) -> None:
    text = """
        project(x CXX)
        if(NOT DEFINED CMAKE_CXX_STANDARD)
          message(FATAL_ERROR "CMAKE_CXX_STANDARD is not defined.")
        endif()
        set(CMAKE_CXX_STANDARD_REQUIRED ON)
        enable_testing()
        add_test(NAME t COMMAND t)
    """
    p = _project(make_repo, text)
    assert p.switches == {"CMAKE_CXX_STANDARD": "17"}
    assert "-DCMAKE_CXX_STANDARD=17" in cmake.configure_args(p)
    own = _project(
        make_repo, text.replace("project(x CXX)", "project(x CXX)\nset(CMAKE_CXX_STANDARD 14)")
    )
    assert "CMAKE_CXX_STANDARD" not in own.switches
    fallback = text.replace('message(FATAL_ERROR "CMAKE_CXX_STANDARD is not defined.")', "")
    assert "CMAKE_CXX_STANDARD" not in _project(make_repo, fallback).switches


def test_a_cpp_library_with_python_bindings_stays_cpp(make_repo: MakeRepo) -> None:
    from repogym.bootstrap import guess_language

    pyproject = '[project]\nname = "x"\nversion = "1"\n[build-system]\nrequires = ["setuptools"]\n'
    sources = {f"src/f{n}.cc": f"int f{n}() {{ return {n}; }}\n" for n in range(25)}
    files = {
        "CMakeLists.txt": "project(x)\nenable_testing()\nadd_test(a b)\n",
        "pyproject.toml": pyproject,
        "setup.py": "import setuptools\n",
        "bindings/python/x/__init__.py": "",
        **sources,
    }
    assert guess_language(make_repo(files))[0] == "cpp"
    scripts = {f"x/m{n}.py": "" for n in range(6)}  # 25 < 5 x 7: a Python package with C++
    assert guess_language(make_repo({**files, **scripts}))[0] == "python"


def test_boost_components_install_their_libraries(make_repo: MakeRepo) -> None:
    text = """
        project(x CXX)
        find_package(Boost 1.70 COMPONENTS unit_test_framework program_options REQUIRED)
        enable_testing()
        add_test(NAME t COMMAND t)
    """
    p = _project(make_repo, text)
    assert p.apt_packages == ["libboost-dev", "libboost-test-dev", "libboost-program-options-dev"]
