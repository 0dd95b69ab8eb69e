"""C and C++ (CMake + CTest): detection from the CMake files, the recipe, and a real build.

Detection tests pin the host's CMake and GCC versions; the sandbox test builds a small GoogleTest
project with the host's toolchain (GoogleTest from Debian) and runs its recipe's commands.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repogym.bootstrap import detect, guess_language, make_recipe
from repogym.bootstrap.commit import CommitInfo
from repogym.bootstrap.native import cmake
from repogym.shipped.parsers import FAILED, PASSED, SKIPPED, parse_log

from .conftest import git_commit, local_backend_with_private_cache

MakeRepo = Callable[..., Path]

GTEST_CMAKE = """
    cmake_minimum_required(VERSION 3.16)
    project(demo CXX)
    set(CMAKE_CXX_STANDARD 17)
    option(DEMO_BUILD_TESTS "Build the tests" OFF)
    option(DEMO_BUILD_BENCHMARKS "Build the benchmarks" OFF)
    add_library(demo src/demo.cpp)
    target_include_directories(demo PUBLIC src)
    if(DEMO_BUILD_TESTS)
      enable_testing()
      find_package(GTest REQUIRED)
      include(GoogleTest)
      add_executable(demo_test tests/demo_test.cpp)
      target_link_libraries(demo_test demo GTest::gtest_main)
      gtest_discover_tests(demo_test)
      add_executable(plain_check tests/plain_check.cpp)
      target_link_libraries(plain_check demo)
      add_test(NAME plain_check COMMAND plain_check)
    endif()
"""
GTEST_PROJECT = {
    "CMakeLists.txt": GTEST_CMAKE,
    "src/demo.h": "int add(int a, int b);\n",
    "src/demo.cpp": '#include "demo.h"\nint add(int a, int b) { return a + b; }\n',
    "tests/demo_test.cpp": """
        #include <gtest/gtest.h>
        #include "demo.h"
        TEST(Add, Works) { EXPECT_EQ(add(1, 2), 3); }
        TEST(Add, Fails) { EXPECT_EQ(add(2, 2), 5); }
        TEST(Add, Skipped) { GTEST_SKIP() << "not today"; }
        class AddParam : public ::testing::TestWithParam<int> {};
        TEST_P(AddParam, Zero) { EXPECT_EQ(add(GetParam(), 0), GetParam()); }
        INSTANTIATE_TEST_SUITE_P(Small, AddParam, ::testing::Values(1, 2));
    """,
    "tests/plain_check.cpp": """
        #include "demo.h"
        int main() { return add(2, 3) == 5 ? 0 : 1; }
    """,
    "tools/format.py": "print('a helper script')\n",
}


@pytest.fixture(autouse=True)
def fake_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pin the host's CMake and GCC so detection does not depend on this machine."""
    monkeypatch.setattr(cmake, "host_cmake", lambda: "3.25.1")
    monkeypatch.setattr(cmake, "host_gcc", lambda: ("/usr/bin/g++", "12.2.0"))


def _cmake_repo(make_repo: MakeRepo, cmakelists: str, **files: str) -> Path:
    return make_repo(
        {"CMakeLists.txt": cmakelists, "src/a.cpp": "int a() { return 1; }\n", **files}
    )


# ------------------------------------------------------------------------------ language guess


def test_cmakelists_wins_over_python_tooling(make_repo: MakeRepo) -> None:
    repo = make_repo(GTEST_PROJECT)
    assert guess_language(repo) == ("cpp", ["cpp: CMakeLists.txt"])
    with_tooling = make_repo({**GTEST_PROJECT, "pyproject.toml": "[tool.ruff]\nline-length = 99\n"})
    assert guess_language(with_tooling)[0] == "cpp"
    with_requirements = make_repo({**GTEST_PROJECT, "requirements.txt": "pytest\n"})
    assert guess_language(with_requirements)[0] == "cpp"


def test_a_python_package_with_cmake_stays_python(make_repo: MakeRepo) -> None:
    pyproject = '[project]\nname = "x"\nversion = "1"\n[build-system]\nrequires = ["x"]\n'
    repo = make_repo({**GTEST_PROJECT, "pyproject.toml": pyproject})
    assert guess_language(repo)[0] == "python"
    assert guess_language(make_repo({**GTEST_PROJECT, "setup.py": "x = 1\n"}))[0] == "python"


def test_c_only_sources_make_a_c_project(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "CMakeLists.txt": "project(c C)\nenable_testing()\nadd_executable(t t.c)\n"
            "add_test(NAME t COMMAND t)\n",
            "t.c": "int main(void) { return 0; }\n",
        }
    )
    d = detect(repo)
    assert (d.language, d.runner, d.base_image, d.supported) == ("c", "ctest", "gcc:12", True)
    assert make_recipe(repo, d).language == "c"


# ------------------------------------------------------------------------------ detection


def test_gtest_project_recipe(make_repo: MakeRepo) -> None:
    repo = make_repo(GTEST_PROJECT)
    d = detect(repo)
    assert d.supported, d.reason
    project = d.native
    assert isinstance(project, cmake.CMakeProject)
    assert (project.cmake_minimum, project.cxx_standard) == ("3.16", 17)
    assert project.test_options == ["DEMO_BUILD_TESTS", "BUILD_TESTING"]  # not the benchmarks
    assert project.frameworks == ["googletest", "add_test"]
    assert project.apt_packages == ["libgtest-dev"]
    recipe = make_recipe(repo, d)
    lines = recipe.dockerfile.splitlines()
    assert lines[2:4] == ["FROM gcc:12", "WORKDIR /workspace"]
    assert "ninja-build libgtest-dev" in recipe.dockerfile
    assert "-DDEMO_BUILD_TESTS=ON" in recipe.dockerfile
    assert "-DDEMO_BUILD_BENCHMARKS" not in recipe.dockerfile
    assert f"-B {cmake.BUILD_DIR} -G Ninja -DCMAKE_BUILD_TYPE=Debug" in recipe.dockerfile
    assert recipe.dockerfile.rstrip().endswith(
        f"RUN cmake --build {cmake.BUILD_DIR} -j2\nRUN chmod -R a+rwX {cmake.BUILD_DIR}"
    )
    assert recipe.runner == "ctest" and recipe.collect_command.endswith("-N")
    assert "C++17 with GCC 12.2.0" in recipe.notes


def test_minimum_version_above_host_cmake_takes_cmake_from_pypi(make_repo: MakeRepo) -> None:
    repo = _cmake_repo(make_repo, "cmake_minimum_required(VERSION 3.28...3.30)\nadd_test(a b)\n")
    d = detect(repo)
    assert d.supported, d.reason
    assert isinstance(d.native, cmake.CMakeProject) and d.native.cmake_pip == "cmake>=3.28,<4"
    assert "CMake from PyPI (cmake>=3.28,<4); the host has 3.25.1" in " ".join(d.notes)
    recipe = make_recipe(repo, d)
    venv = cmake.PIP_CMAKE
    assert "python3-venv" in recipe.dockerfile.split("COPY")[0]
    assert f"RUN python3 -m venv {venv} && {venv}/bin/pip install" in recipe.dockerfile
    assert "'cmake>=3.28,<4'" in recipe.dockerfile
    assert f"RUN {venv}/bin/cmake -S . -B {cmake.BUILD_DIR}" in recipe.dockerfile
    assert f'export PATH="{venv}/bin:$PATH"' in recipe.test_command
    assert recipe.collect_command.startswith(f"{venv}/bin/ctest ")
    four = _cmake_repo(make_repo, "cmake_minimum_required(VERSION 4.1)\nadd_test(a b)\n")
    assert getattr(detect(four).native, "cmake_pip", None) == "cmake>=4.1"
    ok = _cmake_repo(make_repo, "cmake_minimum_required(VERSION 3.14...3.30)\nadd_test(a b)\n")
    host = make_recipe(ok)
    assert "venv" not in host.dockerfile and "PATH" not in host.test_command


@pytest.mark.parametrize(
    ("text", "standard", "supported"),
    [
        ("set(CMAKE_CXX_STANDARD 20)", 20, True),
        ("target_compile_features(x PUBLIC cxx_std_23)", 23, True),
        ("set(CMAKE_CXX_FLAGS -std=c++2a)", 20, True),
        ("set(CMAKE_CXX_STANDARD 98)\n# set(CMAKE_CXX_STANDARD 26)", 98, True),
        ("set(CMAKE_CXX_STANDARD 11)\ntarget_compile_features(x PRIVATE cxx_std_26)", 26, False),
    ],
)
def test_cxx_standard(make_repo: MakeRepo, text: str, standard: int, supported: bool) -> None:
    repo = _cmake_repo(make_repo, f"project(x)\n{text}\nenable_testing()\nadd_test(a b)\n")
    d = detect(repo)
    assert isinstance(d.native, cmake.CMakeProject) and d.native.cxx_standard == standard
    assert d.supported is supported
    if not supported:
        assert d.reason == "the project asks for C++26; the host's GCC 12.2.0 compiles up to C++23"


def test_no_ctest_tests_is_unsupported(make_repo: MakeRepo) -> None:
    repo = _cmake_repo(make_repo, "project(x)\nadd_library(a src/a.cpp)\n# add_test(a b)\n")
    d = detect(repo)
    assert not d.supported and d.reason.startswith("CMake project without CTest tests")


def test_test_options_and_ctest_module(make_repo: MakeRepo) -> None:
    repo = _cmake_repo(
        make_repo,
        """
        project(x)
        include(CTest)
        option(gtest_build_tests "Build all of gtest's own tests." OFF)
        cmake_dependent_option(FOO_TESTS "tests" ON "NOT FOO_MINIMAL" OFF)
        option(FOO_ENABLE_FUZZ_TESTS "fuzz" OFF)
        option(FOO_INSTALL "install" ON)
        option(ENABLE_TESTING "tests" ${PROJECT_IS_TOP_LEVEL})
        add_subdirectory(test)
        """,
        **{"test/CMakeLists.txt": 'option(FOO_UNIT_TESTS "u" OFF)\nadd_test(NAME t COMMAND t)\n'},
    )
    d = detect(repo)
    assert isinstance(d.native, cmake.CMakeProject)
    assert d.native.test_options == [
        "gtest_build_tests",
        "ENABLE_TESTING",
        "FOO_UNIT_TESTS",
        "FOO_TESTS",  # cmake_dependent_option() lines come after option() lines
        "BUILD_TESTING",
    ]
    assert "ENABLE_TESTING (default ${PROJECT_IS_TOP_LEVEL})" in d.notes[-2]


def test_fetchcontent_googletest_uses_debian_sources(make_repo: MakeRepo) -> None:
    repo = _cmake_repo(
        make_repo,
        """
        include(FetchContent)
        FetchContent_Declare(
          googletest
          URL https://github.com/google/googletest/archive/03597a01ee50ed33e9dfd640b249b4be3799d395.zip
        )
        FetchContent_MakeAvailable(googletest)
        enable_testing()
        add_executable(t t.cc)
        target_link_libraries(t GTest::gtest_main)
        include(GoogleTest)
        gtest_discover_tests(t)
        """,
    )
    d = detect(repo)
    assert d.supported, d.reason
    recipe = make_recipe(repo, d)
    assert "-DFETCHCONTENT_SOURCE_DIR_GOOGLETEST=/usr/src/googletest" in recipe.dockerfile
    assert "-DFETCHCONTENT_FULLY_DISCONNECTED=ON" in recipe.dockerfile
    assert "googletest" in recipe.dockerfile.split("COPY")[0]  # the sources' Debian package
    assert "libgtest-dev" not in recipe.dockerfile


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "FetchContent_Declare(json GIT_REPOSITORY https://github.com/nlohmann/json.git"
            " GIT_TAG v3.11.2)",
            "FetchContent/ExternalProject downloads json from https://github.com/nlohmann/json.git",
        ),
        (
            'file(DOWNLOAD "https://github.com/cpm-cmake/CPM.cmake/releases/download/v0.38.1/'
            'CPM.cmake" ${CPM_PATH})\nCPMAddPackage("gh:fmtlib/fmt#9.1.0")',
            "downloads code at configure time: CPM.cmake (CPMAddPackage in CMakeLists.txt)",
        ),
        (
            "find_package(Catch2 3 REQUIRED)\ncatch_discover_tests(t)",
            "the tests need Catch2 3; Debian 12 (the gcc:12 base) has Catch2 2.13",
        ),
    ],
)
def test_offline_refusals(make_repo: MakeRepo, text: str, reason: str) -> None:
    repo = _cmake_repo(make_repo, f"project(x)\nenable_testing()\nadd_test(a b)\n{text}\n")
    d = detect(repo)
    assert not d.supported
    assert d.reason.startswith(reason), d.reason


def test_fetchcontent_with_find_package_args(make_repo: MakeRepo) -> None:
    repo = _cmake_repo(
        make_repo,
        "FetchContent_Declare(doctest GIT_REPOSITORY https://github.com/doctest/doctest.git"
        " FIND_PACKAGE_ARGS)\nFetchContent_MakeAvailable(doctest)\nadd_test(a b)\n",
    )
    recipe = make_recipe(repo, detect(repo))
    assert "-DFETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS" in recipe.dockerfile
    assert "doctest-dev" in recipe.dockerfile


def test_examples_folder_is_not_read(make_repo: MakeRepo) -> None:
    fetch = "FetchContent_Declare(x GIT_REPOSITORY https://github.com/a/b.git)\n"
    repo = _cmake_repo(make_repo, "add_test(a b)\n", **{"examples/CMakeLists.txt": fetch})
    assert detect(repo).supported


def test_missing_submodule_used_by_the_build(make_repo: MakeRepo) -> None:
    gitmodules = '[submodule "sub"]\n\tpath = third_party/mylib\n\turl = ../mylib\n'
    text = "add_subdirectory(third_party/mylib)\nenable_testing()\nadd_test(a b)\n"
    repo = _cmake_repo(make_repo, text, **{".gitmodules": gitmodules})
    (repo / "third_party" / "mylib").mkdir(parents=True)
    commit = CommitInfo(submodule_problems={"third_party/mylib": "commit abc not found"})
    d = detect(repo, commit=commit)
    assert not d.supported
    assert d.reason == (
        "git submodule third_party/mylib (../mylib) is used by the build but missing"
        " (commit abc not found) and Debian has no stand-in for it"
    )
    unused = _cmake_repo(
        make_repo, "enable_testing()\nadd_test(a b)\n", **{".gitmodules": gitmodules}
    )
    d = detect(unused)
    assert d.supported and any("missing (not in the snapshot)" in n for n in d.notes)


def test_vendored_gtest_needs_no_package(make_repo: MakeRepo) -> None:
    repo = _cmake_repo(
        make_repo,
        "add_subdirectory(third_party/gtest)\nenable_testing()\nadd_executable(t t.cc)\n"
        "target_link_libraries(t gtest_main)\nadd_test(NAME t COMMAND t)\n",
        **{"third_party/gtest/src/gtest-all.cc": "// sources\n"},
    )
    d = detect(repo)
    assert isinstance(d.native, cmake.CMakeProject)
    assert d.native.apt_packages == [] and "GoogleTest vendored (third_party/gtest)" in d.notes


# ------------------------------------------------------------------------------ commands


def test_selection_escapes_cmake_regex_characters(make_repo: MakeRepo) -> None:
    recipe = make_recipe(make_repo(GTEST_PROJECT))
    command = recipe.test_command_for(["Add.Works", "Small/AddParam.Zero/1", "a (b)+c"])
    assert (
        command
        == recipe.select_command + " -R '^(Add\\.Works|Small/AddParam\\.Zero/1|a \\(b\\)\\+c)$'"
    )
    assert recipe.test_command_for([]) == recipe.test_command
    assert recipe.count_collected("Test project /b\n  Test #1: a\n\nTotal Tests: 1\n") == 1


# ------------------------------------------------------------------------------ real sandbox


@pytest.fixture(scope="module")
def sandbox_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield from local_backend_with_private_cache(tmp_path_factory, "cmake-sandbox-cache")


GTEST_IDS = {
    "Add.Works": PASSED,
    "Add.Fails": FAILED,
    "Add.Skipped": SKIPPED,
    "Small/AddParam.Zero/1": PASSED,
    "Small/AddParam.Zero/2": PASSED,
    "plain_check": PASSED,
}


@pytest.mark.slow
@pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja") and Path("/usr/src/googletest").is_dir()),
    reason="needs cmake, ninja and Debian's GoogleTest on this host",
)
def test_gtest_project_in_the_sandbox(
    make_repo: MakeRepo, sandbox_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repogym.bootstrap import check_recipe
    from repogym.bootstrap.check import write_build_context
    from repogym.sandbox import EnvironmentSpec, get_backend

    monkeypatch.undo()  # the host's real CMake and GCC
    repo = make_repo(GTEST_PROJECT)
    git_commit(repo)
    recipe = make_recipe(repo, detect(repo))
    result = check_recipe(repo, recipe)
    assert result.ok, (result.failed_step, result.reason, result.log_tail)
    assert result.tests_collected == 6
    assert result.sample_ids == list(GTEST_IDS)

    context = make_repo({}, name="context")
    write_build_context(repo, recipe, context)
    backend = get_backend("local")
    spec = EnvironmentSpec(context_dir=context, workdir=recipe.workdir, network_mode="no-network")
    with backend.start(backend.build(spec), spec) as session:
        full = session.exec(recipe.test_command, timeout_s=300, cwd=recipe.workdir, network=False)
        some = session.exec(
            recipe.test_command_for(["Add.Works", "Small/AddParam.Zero/2"]),
            timeout_s=300,
            cwd=recipe.workdir,
            network=False,
        )
        session.exec(
            "printf 'int add(int a, int b) { return a + b + 1; }\\n' > src/demo.cpp",
            timeout_s=60,
            cwd=recipe.workdir,
        )
        changed = session.exec(recipe.test_command, timeout_s=300, cwd=recipe.workdir)
    assert full.exit_code != 0
    parsed = parse_log(full.stdout, "ctest")
    assert parsed.tests == GTEST_IDS
    assert parsed.failures == {
        "Add.Fails": "demo_test.cpp:4: Expected equality of these values: add(2, 2) Which is: 4 5"
    }
    assert parse_log(full.stdout).runner == "ctest"
    assert some.exit_code == 0
    assert parse_log(some.stdout, "ctest").tests == {
        "Add.Works": PASSED,
        "Small/AddParam.Zero/2": PASSED,
    }
    # The test command rebuilds: the agent's change is what the tests see.
    assert parse_log(changed.stdout, "ctest").tests == {
        "Add.Works": FAILED,
        "Add.Fails": PASSED,
        "Add.Skipped": SKIPPED,
        "Small/AddParam.Zero/1": FAILED,
        "Small/AddParam.Zero/2": FAILED,
        "plain_check": FAILED,
    }


def test_vendored_trees_keep_their_switches(make_repo: MakeRepo) -> None:
    repo = _cmake_repo(
        make_repo,
        "project(YAML_CPP)\noption(YAML_CPP_BUILD_TESTS on OFF)\n"
        "option(YAML_CPP_CUDA_TEST cuda OFF)\nadd_subdirectory(test)\n",
        **{
            "test/CMakeLists.txt": "add_subdirectory(googletest-1.16.0)\nadd_test(NAME t COMMAND t)\n",
            "test/googletest-1.16.0/CMakeLists.txt": (
                "option(gtest_build_tests x OFF)\nfind_package(absl REQUIRED)\nadd_test(g g)\n"
            ),
            "test/cmake/CMakeLists.txt": "find_package(yaml-cpp CONFIG REQUIRED)\n",
        },
    )
    d = detect(repo)
    assert isinstance(d.native, cmake.CMakeProject)
    assert d.native.test_options == ["YAML_CPP_BUILD_TESTS"]
    assert d.native.apt_packages == []
    assert not any("absl" in n or "yaml-cpp" in n for n in d.notes)
