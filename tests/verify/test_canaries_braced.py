"""Go and Rust canaries: found in formatter layout, named like their neighbours, and — planted
into real test files and run by ``go test`` / ``cargo test`` here — failing while the test they
copy passes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from repogym.shipped import parsers
from repogym.verify import canaries

GO_TEST = """package demo

import "testing"

func TestAdd(t *testing.T) {
\tif got := Add(1, 2); got != 3 {
\t\tt.Errorf("got %d", got)
\t}
\twant := "ab"
\tif Join("a", "b") != want {
\t\tt.Fatal("join")
\t}
}

func TestRune(t *testing.T) {
\tif 'a' != 97 { // a rune: left alone
\t\tt.Fatal("rune")
\t}
}
"""
GO_SRC = """package demo

func Add(a, b int) int { return a + b }

func Join(a, b string) string { return a + b }
"""
RUST_SRC = """pub fn add(a: u8, b: u8) -> u8 {
    a + b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_small() {
        assert_eq!(add(1, 2), 3);
        assert_eq!(format!("{}", add(0, 0)), "0");
    }

    #[test]
    #[should_panic]
    fn overflows() {
        add(255, 1);
    }
}
"""


def plant(text: str, cand: canaries.Candidate, name: str) -> str:
    lines = text.splitlines(keepends=True)
    code = cand.code.replace(canaries.MARK, name)
    lines[cand.after : cand.after] = ["\n", code]
    return "".join(lines)


def test_go_candidates() -> None:
    pool = canaries.build({"demo_test.go": GO_TEST.encode()}, ["TestAdd"], ["TestRune"], "go")
    changes = {c.change for c in pool.pool}
    # the last literal of each comparison or expectation line; the gate keeps those that fail
    assert changes == {"3 -> 4", '"ab" -> "abb"', '"b" -> "bb"'}
    assert all(c.title == "TestAdd" and c.match == "suffix" for c in pool.pool)
    assert all(c.code.startswith("func \x00(t *testing.T) {") for c in pool.pool)
    names = pool.pool[0].names
    assert names and all(n.startswith("TestAdd_") for n in names)
    assert "TestAdd_rune" in names  # a word of a neighbour's name comes first


def test_rust_candidates_skip_should_panic() -> None:
    ids = ["tests::adds_small", "tests::overflows"]
    pool = canaries.build({"src/lib.rs": RUST_SRC.encode()}, ids, [], "cargo")
    assert {c.title for c in pool.pool} == {"adds_small"}
    assert {c.change for c in pool.pool} == {"3 -> 4", '"0" -> "00"'}
    assert all(c.code.startswith("    #[test]\n    fn \x00() {") for c in pool.pool)


def _outcomes(log: str, runner: str) -> dict[str, str]:
    return dict(parsers.parse_log(log, runner).tests)


def _go_outcomes(folder: Path, files: dict[str, str]) -> dict[str, str]:
    """``go test -json`` outcomes of a module made of ``files`` in ``folder``."""
    (folder / "go.mod").write_text("module example.com/demo\n\ngo 1.19\n")
    for name, text in files.items():
        (folder / name).write_text(text)
    done = subprocess.run(
        ["go", "test", "-json", "-vet=off", "./..."],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return _outcomes(done.stdout, "go")


@pytest.mark.skipif(shutil.which("go") is None, reason="no go toolchain")
def test_go_canary_fails_where_its_original_passes(tmp_path: Path) -> None:
    pool = canaries.build({"demo_test.go": GO_TEST.encode()}, ["TestAdd"], [], "go")
    text = GO_TEST
    assert len(pool.pool) == 3
    for cand, name in zip(pool.pool, ("TestAdd_one", "TestAdd_two", "TestAdd_six"), strict=True):
        text = plant(text, cand, name)
    tests = _go_outcomes(tmp_path, {"demo.go": GO_SRC, "demo_test.go": text})
    assert tests["TestAdd"] == "PASSED" and tests["TestRune"] == "PASSED", tests
    assert {tests[n] for n in ("TestAdd_one", "TestAdd_two", "TestAdd_six")} == {"FAILED"}, tests


GO_TABLE_TEST = """package demo

import "testing"

func TestEven(t *testing.T) {
\tcases := []struct {
\t\tn    int
\t\twant bool
\t}{
\t\t{2, true},
\t\t{
\t\t\t3,
\t\t\tfalse,
\t\t},
\t}
\tfor _, tc := range cases {
\t\tif got := Even(tc.n); got != tc.want {
\t\t\tt.Errorf("Even(%d) = %v", tc.n, got)
\t\t}
\t}
}
"""


@pytest.mark.skipif(shutil.which("go") is None, reason="no go toolchain")
def test_table_driven_go_tests_get_canaries_from_their_rows(tmp_path: Path) -> None:
    """A test whose expectations live in its case table (most Go tests) still has canaries:
    a row's literal changed; here every candidate fails where the test passes."""
    pool = canaries.build({"even_test.go": GO_TABLE_TEST.encode()}, ["TestEven"], [], "go")
    assert {c.change for c in pool.pool} == {"2 -> 3", "3 -> 4", "false -> true"}
    text = GO_TABLE_TEST
    names = ("TestEven_two", "TestEven_three", "TestEven_flag")
    for cand, name in zip(sorted(pool.pool, key=lambda c: c.change), names, strict=True):
        text = plant(text, cand, name)
    even = "package demo\n\nfunc Even(n int) bool { return n%2 == 0 }\n"
    tests = _go_outcomes(tmp_path, {"even.go": even, "even_test.go": text})
    assert tests["TestEven"] == "PASSED", tests
    assert {tests[n] for n in names} == {"FAILED"}, tests


@pytest.mark.skipif(shutil.which("cargo") is None, reason="no Rust toolchain")
def test_rust_canary_fails_where_its_original_passes(tmp_path: Path) -> None:
    (tmp_path / "Cargo.toml").write_text(
        '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    pool = canaries.build({"src/lib.rs": RUST_SRC.encode()}, ["tests::adds_small"], [], "cargo")
    text = RUST_SRC
    for cand, name in zip(pool.pool, ("adds_small_one", "adds_small_two"), strict=True):
        text = plant(text, cand, name)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "lib.rs").write_text(text)
    done = subprocess.run(
        ["cargo", "test", "--offline", "--no-fail-fast"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CARGO_TERM_COLOR": "never"},
    )
    tests = _outcomes(done.stdout + done.stderr, "cargo")
    assert tests["tests::adds_small"] == "PASSED", json.dumps(tests)
    assert tests["tests::adds_small_one"] == "FAILED", tests
    assert tests["tests::adds_small_two"] == "FAILED", tests


GTEST_SRC = """#include <gtest/gtest.h>

static int add(int a, int b) { return a + b; }

TEST(Math, Adds) {
  EXPECT_EQ(add(1, 2), 3);
}

TEST(Math, AddsZero) {
  ASSERT_EQ(add(0, 0), 0);
}
"""
GTEST_CMAKE = """cmake_minimum_required(VERSION 3.14)
project(demo CXX)
enable_testing()
find_package(GTest REQUIRED)
include(GoogleTest)
add_executable(math_test math_test.cpp)
target_link_libraries(math_test GTest::gtest_main)
gtest_discover_tests(math_test)
"""


def test_gtest_candidates() -> None:
    ids = ["Math.Adds", "Math.AddsZero"]
    pool = canaries.build({"math_test.cpp": GTEST_SRC.encode()}, ids[:1], ids[1:], "ctest")
    assert [(c.source, c.change) for c in pool.pool] == [
        ("Math.Adds", "3 -> 4"),
        ("Math.AddsZero", "0 -> 1"),
    ]
    assert pool.pool[0].code.startswith("TEST(Math, \x00) {")


@pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ctest") and Path("/usr/include/gtest").is_dir()),
    reason="no cmake or GoogleTest",
)
def test_gtest_canary_fails_where_its_original_passes(tmp_path: Path) -> None:
    pool = canaries.build({"math_test.cpp": GTEST_SRC.encode()}, ["Math.Adds"], [], "ctest")
    [cand] = pool.pool
    (tmp_path / "math_test.cpp").write_text(plant(GTEST_SRC, cand, "Adds_again"))
    (tmp_path / "CMakeLists.txt").write_text(GTEST_CMAKE)
    build = tmp_path / "build"
    for argv in (
        ["cmake", "-S", str(tmp_path), "-B", str(build)],
        ["cmake", "--build", str(build)],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    run = subprocess.run(
        ["ctest", "--test-dir", str(build), "--output-on-failure"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    tests = _outcomes(run.stdout, "ctest")
    assert tests["Math.Adds"] == "PASSED" and tests["Math.AddsZero"] == "PASSED", tests
    assert tests["Math.Adds_again"] == "FAILED", tests


JUNIT_SRC = """package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class MoneyTest {
    @Test
    void parsesPlain() {
        assertEquals(1234, Money.parse("12.34"));
    }

    @Test
    @SuppressWarnings("unused")
    void formatsCents() {
        assertEquals("12.05", Money.format(1205));
    }

    class Nested {
        @Test
        void parsesWhole() {
            assertEquals(700, Money.parse("7"));
        }
    }
}
"""
# Stand-ins for JUnit's annotation and assertions (no jar is downloaded in a test), and a
# runner that calls every @Test method of the top-level class by reflection.
JUNIT_STUBS = {
    "org/junit/jupiter/api/Test.java": "package org.junit.jupiter.api;\n"
    "@java.lang.annotation.Retention(java.lang.annotation.RetentionPolicy.RUNTIME)\n"
    "public @interface Test {}\n",
    "org/junit/jupiter/api/Assertions.java": "package org.junit.jupiter.api;\n"
    "public class Assertions {\n"
    "  public static void assertEquals(Object a, Object b) {\n"
    '    if (!a.equals(b)) throw new AssertionError(a + " != " + b);\n  }\n'
    "  public static void assertEquals(long a, long b) {\n"
    '    if (a != b) throw new AssertionError(a + " != " + b);\n  }\n}\n',
    "demo/Money.java": "package demo;\nclass Money {\n"
    "  static long parse(String s) { return Math.round(Double.parseDouble(s) * 100); }\n"
    '  static String format(long c) { return String.format("%d.%02d", c / 100, c % 100); }\n}\n',
    "demo/Run.java": "package demo;\npublic class Run {\n"
    "  public static void main(String[] a) throws Exception {\n"
    "    for (var m : MoneyTest.class.getDeclaredMethods()) {\n"
    "      if (!m.isAnnotationPresent(org.junit.jupiter.api.Test.class)) continue;\n"
    "      m.setAccessible(true);\n"
    '      try { m.invoke(new MoneyTest()); System.out.println("PASS " + m.getName()); }\n'
    "      catch (java.lang.reflect.InvocationTargetException e) {\n"
    '        System.out.println("FAIL " + m.getName()); }\n    }\n  }\n}\n',
}


def test_junit_candidates() -> None:
    ids = [
        "demo.MoneyTest#parsesPlain",
        "demo.MoneyTest#formatsCents",
        "demo.MoneyTest$Nested#parsesWhole",
    ]
    pool = canaries.build(
        {"src/test/java/demo/MoneyTest.java": JUNIT_SRC.encode()}, ids, [], "maven"
    )
    assert {(c.source, c.change) for c in pool.pool} == {
        ("demo.MoneyTest#parsesPlain", "1234 -> 1235"),
        ("demo.MoneyTest#formatsCents", '"12.05" -> "12.055"'),
        ("demo.MoneyTest$Nested#parsesWhole", "700 -> 701"),
    }
    nested = next(c for c in pool.pool if "Nested" in c.source)
    assert nested.code.startswith("        @Test\n        void \x00() {")


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK")
def test_junit_canary_fails_where_its_original_passes(tmp_path: Path) -> None:
    rel = "demo/MoneyTest.java"
    pool = canaries.build({rel: JUNIT_SRC.encode()}, ["demo.MoneyTest#parsesPlain"], [], "maven")
    [cand] = pool.pool
    for path, text in {**JUNIT_STUBS, rel: plant(JUNIT_SRC, cand, "parsesPlain_again")}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    sources = [str(p) for p in tmp_path.rglob("*.java")]
    built = subprocess.run(
        ["javac", "-d", str(tmp_path / "out"), *sources],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    ran = subprocess.run(
        ["java", "-cp", str(tmp_path / "out"), "demo.Run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert set(ran.stdout.split("\n")) >= {
        "PASS parsesPlain",
        "PASS formatsCents",
        "FAIL parsesPlain_again",
    }, ran
