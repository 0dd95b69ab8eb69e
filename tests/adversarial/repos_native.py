"""Small repositories in compiled languages for the attack suites, built in code."""

from __future__ import annotations

from tests.sources.conftest import GitRepo


def _merged_pr(repo: GitRepo, files: dict[str, str], title: str) -> GitRepo:
    """``files`` written on a branch and merged into ``main`` as pull request #7 (so that
    both ``commit_runtime`` and ``pr_runtime`` find the change)."""
    repo.checkout("-b", "thousands")
    for path, text in files.items():
        repo.write(path, text)
    repo.commit(f'{title}\n\n"1,234.50" was rejected.\n')
    repo.checkout("main")
    repo.merge("thousands", "Merge pull request #7 from ada/thousands", title)
    return repo


GO_MOD = "module example.com/money\n\ngo 1.19\n"
GO_MONEY_V1 = """package money

import (
\t"strconv"
\t"strings"
)

// ParseAmount reads "12.34" as 1234 cents.
func ParseAmount(text string) (int, error) {
\twhole, frac, _ := strings.Cut(strings.TrimSpace(text), ".")
\tw, err := strconv.Atoi(whole)
\tif err != nil {
\t\treturn 0, err
\t}
\tf := 0
\tif frac != "" {
\t\tif f, err = strconv.Atoi(frac); err != nil {
\t\t\treturn 0, err
\t\t}
\t}
\treturn w*100 + f, nil
}

// FormatAmount writes 1234 cents as "12.34".
func FormatAmount(cents int) string {
\treturn strconv.Itoa(cents/100) + "." + pad(cents%100)
}

func pad(n int) string {
\tif n < 10 {
\t\treturn "0" + strconv.Itoa(n)
\t}
\treturn strconv.Itoa(n)
}
"""
# The fix: thousands separators ("1,234.50") are accepted.
GO_MONEY_V2 = GO_MONEY_V1.replace(
    '\twhole, frac, _ := strings.Cut(strings.TrimSpace(text), ".")\n',
    "\ttext = strings.TrimSpace(text)\n"
    '\tif strings.Contains(text, ",") {\n'
    '\t\ttext = strings.ReplaceAll(text, ",", "")\n'
    "\t}\n"
    '\twhole, frac, _ := strings.Cut(text, ".")\n',
)
GO_TEST_V1 = """package money

import "testing"

func TestParsePlain(t *testing.T) {
\tgot, err := ParseAmount("12.34")
\tif err != nil || got != 1234 {
\t\tt.Fatalf("got %d, %v", got, err)
\t}
}

func TestParseWhole(t *testing.T) {
\tif got, _ := ParseAmount("7"); got != 700 {
\t\tt.Fatalf("got %d", got)
\t}
}

func TestFormat(t *testing.T) {
\tif got := FormatAmount(1205); got != "12.05" {
\t\tt.Fatalf("got %q", got)
\t}
}

func TestFormatWhole(t *testing.T) {
\tif got := FormatAmount(300); got != "3.00" {
\t\tt.Fatalf("got %q", got)
\t}
}
"""
GO_TEST_V2 = (
    GO_TEST_V1
    + """
func TestParseThousands(t *testing.T) {
\tgot, err := ParseAmount("1,234.50")
\tif err != nil || got != 123450 {
\t\tt.Fatalf("got %d, %v", got, err)
\t}
}

func TestParseMillions(t *testing.T) {
\tif got, _ := ParseAmount("2,000,000"); got != 200000000 {
\t\tt.Fatalf("got %d", got)
\t}
}
"""
)


def go_money_repo(repo: GitRepo) -> GitRepo:
    """A Go module whose merged pull request #7 accepts thousands separators, with two new
    tests."""
    repo.write("go.mod", GO_MOD)
    repo.write("money.go", GO_MONEY_V1)
    repo.write("money_test.go", GO_TEST_V1)
    repo.commit("Money amounts")
    files = {"money.go": GO_MONEY_V2, "money_test.go": GO_TEST_V2}
    return _merged_pr(repo, files, "Accept thousands separators in ParseAmount")


CARGO_TOML = '[package]\nname = "money"\nversion = "0.1.0"\nedition = "2021"\n'
RUST_MONEY_V1 = """/// Reads "12.34" as 1234 cents.
pub fn parse_amount(text: &str) -> Option<i64> {
    let text = text.trim();
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let w: i64 = whole.parse().ok()?;
    let f: i64 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    Some(w * 100 + f)
}

/// Writes 1234 cents as "12.34".
pub fn format_amount(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}
"""
# The fix: thousands separators ("1,234.50") are accepted.
RUST_MONEY_V2 = RUST_MONEY_V1.replace(
    "    let text = text.trim();\n",
    "    let cleaned = text.trim().replace(',', \"\");\n    let text = cleaned.as_str();\n",
)
RUST_TEST_V1 = """use money::{format_amount, parse_amount};

#[test]
fn parse_plain() {
    assert_eq!(parse_amount("12.34"), Some(1234));
}

#[test]
fn parse_whole() {
    assert_eq!(parse_amount("7"), Some(700));
}

#[test]
fn format_cents() {
    assert_eq!(format_amount(1205), "12.05");
}

#[test]
fn format_whole() {
    assert_eq!(format_amount(300), "3.00");
}
"""
RUST_TEST_V2 = (
    RUST_TEST_V1
    + """
#[test]
fn parse_thousands() {
    assert_eq!(parse_amount("1,234.50"), Some(123450));
}

#[test]
fn parse_millions() {
    assert_eq!(parse_amount("2,000,000"), Some(200000000));
}
"""
)


def rust_money_repo(repo: GitRepo) -> GitRepo:
    """A crate (no dependencies) whose merged pull request #7 accepts thousands separators,
    with two new integration tests."""
    repo.write("Cargo.toml", CARGO_TOML)
    repo.write("src/lib.rs", RUST_MONEY_V1)
    repo.write("tests/money.rs", RUST_TEST_V1)
    repo.commit("Money amounts")
    files = {"src/lib.rs": RUST_MONEY_V2, "tests/money.rs": RUST_TEST_V2}
    return _merged_pr(repo, files, "Accept thousands separators in parse_amount")


CMAKE_LISTS = """cmake_minimum_required(VERSION 3.16)
project(money CXX)
set(CMAKE_CXX_STANDARD 17)
enable_testing()
find_package(GTest REQUIRED)
include(GoogleTest)
add_library(money src/money.cpp)
target_include_directories(money PUBLIC include)
add_executable(money_test tests/money_test.cpp)
target_link_libraries(money_test money GTest::gtest_main)
gtest_discover_tests(money_test)
"""
CPP_HEADER = """#pragma once
#include <string>

long parse_amount(const std::string& text);
std::string format_amount(long cents);
"""
CPP_MONEY_V1 = """#include "money.h"

#include <cstdio>

long parse_amount(const std::string& input) {
  std::string text = input;
  auto dot = text.find('.');
  long whole = std::stol(text.substr(0, dot));
  long frac = dot == std::string::npos ? 0 : std::stol(text.substr(dot + 1));
  return whole * 100 + frac;
}

std::string format_amount(long cents) {
  char out[32];
  std::snprintf(out, sizeof out, "%ld.%02ld", cents / 100, cents % 100);
  return out;
}
"""
# The fix: thousands separators ("1,234.50") are accepted.
CPP_MONEY_V2 = CPP_MONEY_V1.replace(
    "  std::string text = input;\n",
    "  std::string text;\n  for (char c : input) {\n    if (c != ',') text += c;\n  }\n",
)
CPP_TEST_V1 = """#include <gtest/gtest.h>

#include "money.h"

TEST(Money, ParsePlain) {
  EXPECT_EQ(parse_amount("12.34"), 1234);
}

TEST(Money, ParseWhole) {
  EXPECT_EQ(parse_amount("7"), 700);
}

TEST(Money, FormatCents) {
  EXPECT_EQ(format_amount(1205), "12.05");
}

TEST(Money, FormatWhole) {
  EXPECT_EQ(format_amount(300), "3.00");
}
"""
CPP_TEST_V2 = (
    CPP_TEST_V1
    + """
TEST(Money, ParseThousands) {
  EXPECT_EQ(parse_amount("1,234.50"), 123450);
}

TEST(Money, ParseMillions) {
  EXPECT_EQ(parse_amount("2,000,000"), 200000000);
}
"""
)


def cpp_money_repo(repo: GitRepo) -> GitRepo:
    """A CMake project tested with GoogleTest (one CTest test per TEST through
    gtest_discover_tests) whose merged pull request #7 accepts thousands separators."""
    repo.write("CMakeLists.txt", CMAKE_LISTS)
    repo.write("include/money.h", CPP_HEADER)
    repo.write("src/money.cpp", CPP_MONEY_V1)
    repo.write("tests/money_test.cpp", CPP_TEST_V1)
    repo.commit("Money amounts")
    files = {"src/money.cpp": CPP_MONEY_V2, "tests/money_test.cpp": CPP_TEST_V2}
    return _merged_pr(repo, files, "Accept thousands separators in parse_amount")


JAVA_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId>
  <artifactId>money</artifactId>
  <version>1.0</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>org.junit.jupiter</groupId>
      <artifactId>junit-jupiter</artifactId>
      <version>5.10.2</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
</project>
"""
JAVA_MONEY_V1 = """package demo;

public final class Money {
    private Money() {}

    /** Reads "12.34" as 1234 cents. */
    public static long parse(String input) {
        String text = input.trim();
        int dot = text.indexOf('.');
        long whole = Long.parseLong(dot < 0 ? text : text.substring(0, dot));
        long frac = dot < 0 ? 0 : Long.parseLong(text.substring(dot + 1));
        return whole * 100 + frac;
    }

    /** Writes 1234 cents as "12.34". */
    public static String format(long cents) {
        return String.format("%d.%02d", cents / 100, cents % 100);
    }
}
"""
# The fix: thousands separators ("1,234.50") are accepted.
JAVA_MONEY_V2 = JAVA_MONEY_V1.replace(
    "        String text = input.trim();\n",
    '        String text = input.trim().replace(",", "");\n',
)
JAVA_TEST_V1 = """package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class MoneyTest {
    @Test
    void parsesPlain() {
        assertEquals(1234, Money.parse("12.34"));
    }

    @Test
    void parsesWhole() {
        assertEquals(700, Money.parse("7"));
    }

    @Test
    void formatsCents() {
        assertEquals("12.05", Money.format(1205));
    }

    @Test
    void formatsWhole() {
        assertEquals("3.00", Money.format(300));
    }
}
"""
JAVA_TEST_V2 = (
    JAVA_TEST_V1.rstrip().removesuffix("}")
    + """
    @Test
    void parsesThousands() {
        assertEquals(123450, Money.parse("1,234.50"));
    }

    @Test
    void parsesMillions() {
        assertEquals(200000000, Money.parse("2,000,000"));
    }
}
"""
)


JAVA_FOLDER = "money"
"""The folder of the money Maven project: the root has no pom.xml, and a second project beside
it (for an older Java) is one the CI does not build, as in jOOQ/jOOL."""
JAVA_CI = """name: ci
on: [push]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: mvn -B test
        working-directory: money
"""


def java_money_repo(repo: GitRepo) -> GitRepo:
    """A Maven project (JUnit 5 from Maven Central) in ``money/`` whose merged pull request #7
    accepts thousands separators, with two new tests."""
    repo.write(f"{JAVA_FOLDER}/pom.xml", JAVA_POM)
    repo.write(f"{JAVA_FOLDER}-java-8/pom.xml", JAVA_POM)
    repo.write(".github/workflows/ci.yml", JAVA_CI)
    repo.write(f"{JAVA_FOLDER}/src/main/java/demo/Money.java", JAVA_MONEY_V1)
    repo.write(f"{JAVA_FOLDER}/src/test/java/demo/MoneyTest.java", JAVA_TEST_V1)
    repo.commit("Money amounts")
    files = {
        f"{JAVA_FOLDER}/src/main/java/demo/Money.java": JAVA_MONEY_V2,
        f"{JAVA_FOLDER}/src/test/java/demo/MoneyTest.java": JAVA_TEST_V2,
    }
    return _merged_pr(repo, files, "Accept thousands separators in Money.parse")
