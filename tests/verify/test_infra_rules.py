"""Compiled languages' build definitions are test infrastructure, by the same rule on both
sides: the task's verifier (``shipped/infra.is_infra``) and the clean room's protected paths
(``taskdir.verification.RUNTIME_PROTECTED``)."""

from __future__ import annotations

import pytest

from repogym.shipped.infra import is_infra
from repogym.taskdir.verification import RUNTIME_PROTECTED, Matcher

INFRA = [
    "Cargo.toml",
    "crates/core/Cargo.toml",
    "Cargo.lock",
    "build.rs",
    "crates/sys/build.rs",
    "rust-toolchain.toml",
    "go.mod",
    "tools/go.sum",
    "go.work",
    "pom.xml",
    "module-a/pom.xml",
    ".mvn/extensions.xml",
    "src/main/resources/META-INF/services/org.junit.platform.launcher.TestExecutionListener",
    "src/main/resources/junit-platform.properties",
    "build.gradle.kts",
    "CMakeLists.txt",
    "src/CMakeLists.txt",
    "cmake/Warnings.cmake",
    "meson.build",
]
SOURCE = [
    "src/lib.rs",
    "src/build/mod.rs",
    "main.go",
    "internal/gomod/parse.go",
    "src/main/java/org/demo/Pom.java",
    "src/main/resources/app.properties",
    "src/cmake_parser.cpp",
    "include/demo/build.h",
]


@pytest.mark.parametrize("path", INFRA)
def test_build_definitions_are_infrastructure(path: str) -> None:
    assert is_infra(path)
    assert Matcher(RUNTIME_PROTECTED).match(path), path


@pytest.mark.parametrize("path", SOURCE)
def test_sources_are_not(path: str) -> None:
    assert not is_infra(path)
    assert Matcher(RUNTIME_PROTECTED).match(path) is None, path


@pytest.mark.parametrize(
    ("path", "output"),
    [
        ("target/debug/deps/demo-1234", True),
        ("target/classes/demo/Money.class", True),
        ("core/target/test-classes/demo/MoneyTest.class", True),
        ("target/surefire-reports/TEST-demo.MoneyTest.xml", True),
        ("src/main/java/demo/target/Money.java", False),
        ("target/lib.rs", False),
    ],
)
def test_build_output_is_the_runners_own(path: str, output: bool) -> None:
    """Cargo's and Maven's build output: never scanned as planted code, and never carried into
    the clean room (both rules agree)."""
    from repogym.shipped.infra import is_build_output

    assert is_build_output(path) is output
    assert bool(Matcher(RUNTIME_PROTECTED).match(path)) is output, path
