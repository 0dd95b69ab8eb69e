"""The test-file rules per ecosystem (Java/Kotlin, C/C++, Rust beside Python/JS/Go), and the
agreement of :func:`is_test_path` with the globs a clean room protects."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repogym.shipped.testfiles import TEST_PATH_GLOBS, is_test_path, is_test_source
from repogym.taskdir.verification import Matcher

TESTS = [
    # Java / Kotlin: by test source root (Maven, Gradle, Android, the Maven invoker plugin)
    "src/test/java/org/acme/FooTest.java",
    "core/src/test/kotlin/acme/BarTests.kt",
    "src/test/resources/data.json",
    "app/src/androidTest/java/acme/UiTest.java",
    "lib/src/integrationTest/java/acme/DbIT.java",
    "src/testFixtures/java/acme/Fakes.java",
    "src/jvmTest/kotlin/acme/X.kt",
    "src/it/simple/pom.xml",
    # C / C++
    "src/foo_test.cc",
    "absl/strings/str_cat_test.cc",
    "lib/parse_unittest.cpp",
    "src/util_tests.cpp",
    "test_queue.c",
    "src/test_list.cpp",
    "test/main.c",
    "tests/CMakeLists.txt",
    # Rust
    "tests/parse.rs",
    "crates/core/tests/it.rs",
    "src/tests.rs",
    "src/parser/tests.rs",
    "src/lexer_tests.rs",
]

NOT_TESTS = [
    "src/main/java/org/acme/TestUtils.java",
    "src/main/java/org/acme/FooTest.java",  # Maven compiles it as code, surefire never runs it
    "src/main/java/org/acme/Latest.java",
    "src/main/kotlin/acme/Contest.kt",
    "src/Test.java",
    "src/foo.cc",
    "src/testing_util.h",
    "src/attest.c",
    "src/latest_test_data.h",
    "src/contest.cpp",
    "benches/parse.rs",
    "examples/demo.rs",
    "src/lib.rs",
    "src/test.rs",
    "src/testing.rs",
    "src/it.rs",
    "docs/it/index.md",
    "src/main/it/x.java",
]


@pytest.mark.parametrize("path", TESTS)
def test_test_paths_of_compiled_languages(path: str) -> None:
    assert is_test_path(path) and is_test_source(path)
    assert Matcher(TEST_PATH_GLOBS).match(path), path


@pytest.mark.parametrize("path", NOT_TESTS)
def test_code_of_compiled_languages_is_not_a_test(path: str) -> None:
    assert not is_test_path(path)
    assert Matcher(TEST_PATH_GLOBS).match(path) is None, path


@pytest.mark.parametrize(
    ("path", "skip"),
    [
        ("src/main/java/acme/FooTest.java", True),
        ("src/main/java/acme/DbIT.java", True),
        ("src/main/kotlin/acme/FooTests.kt", True),
        ("src/main/java/acme/Latest.java", False),
        ("src/main/java/acme/TestUtils.java", False),
        ("src/lib.rs", False),
    ],
)
def test_source_scans_skip_jvm_test_classes_anywhere(path: str, skip: bool) -> None:
    assert is_test_source(path) is skip


SEGMENTS = st.sampled_from(
    [
        "src", "main", "java", "lib", "pkg", "test", "tests", "Test", "Tests", "spec",
        "testing", "testdata", "__tests__", "__snapshots__", "__mocks__", "it", "androidTest",
        "integrationTest", "testFixtures", "MyLib.Tests", "benches", "examples", "crates",
    ]
)  # fmt: skip
NAMES = st.sampled_from(
    [
        "a.py", "test_a.py", "a_test.py", "conftest.py", "tests.py", "a_test.go", "a.go",
        "a.test.ts", "a.spec.js", "a_spec.rb", "a.rb", "a_test.cc", "a_unittest.cpp",
        "a_tests.c", "test_a.cxx", "a.cc", "lib.rs", "tests.rs", "a_tests.rs", "a_test.rs",
        "FooTest.java", "TestUtils.java", "Foo.kt", "it", "Latest.java",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(SEGMENTS, max_size=4), NAMES)
def test_globs_protect_every_test_path(folders: list[str], name: str) -> None:
    """What the pipelines hide (is_test_path) a clean room protects (TEST_PATH_GLOBS), and the
    globs protect nothing the rule calls code (both directions, over the usual spellings)."""
    path = "/".join([*folders, name])
    assert bool(Matcher(TEST_PATH_GLOBS).match(path)) is is_test_path(path), path
