"""Mutants of Go, Rust, Java and C/C++ gold patches: every one is compiled by the language's
own compiler on this host (the operator must compile by construction), and the conditions it
must leave alone (Go init statements, Rust ``if let``, C++ declarations) are left alone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from repogym.verify.mutants import build_mutants, default_is_code
from tests.verify.test_mutants import check_mutants, make_case, mutant_text

GO_BASE = """package geo

func Clamp(x, lo, hi int) int {
\treturn x
}
"""
GO_HEAD = """package geo

func Clamp(x, lo, hi int) int {
\tif x < lo {
\t\treturn lo
\t} else if x > hi && label("x") != "y" {
\t\treturn hi
\t}
\tif v := x * 2; v < 0 {
\t\treturn 0
\t}
\tif label("(") == "" {
\t\treturn 1
\t}
\treturn x
}

func label(s string) string { return s }
"""
RUST_BASE = """pub fn clamp(x: i32, lo: i32, hi: i32) -> i32 {
    x
}
"""
RUST_HEAD = """pub fn clamp(x: i32, lo: i32, hi: i32) -> i32 {
    if let Some(v) = Some(x).filter(|v| *v < lo) {
        return v.max(lo);
    }
    if x > hi {
        return hi;
    }
    x
}
"""
JAVA_BASE = """public class Geo {
    public static int clamp(int x, int lo, int hi) {
        return x;
    }
}
"""
JAVA_HEAD = """public class Geo {
    public static int clamp(int x, int lo, int hi) {
        if (x < lo) {
            return lo;
        } else if ((x > hi)) return hi;
        return x;
    }
}
"""
CPP_BASE = """int clamp(int x, int lo, int hi) {
    return x;
}
"""
CPP_HEAD = """int half(int x) { return x / 2; }

int clamp(int x, int lo, int hi) {
    if (int h = half(x)) {
        x += h - h;
    }
    while (x > hi)
        x--;
    if (x < lo) return lo;
    return x;
}
"""


def _compiler(path: str, work: Path) -> list[str] | None:
    if path.endswith(".go") and shutil.which("go"):
        (work / "go.mod").write_text("module example.com/geo\n\ngo 1.19\n")
        return ["go", "build", "./..."]
    if path.endswith(".rs") and shutil.which("rustc"):
        return ["rustc", "--edition", "2021", "--crate-type", "lib", "--emit", "metadata", path]
    if path.endswith(".java") and shutil.which("javac"):
        return ["javac", "-d", str(work / "out"), path]
    if path.endswith(".cpp") and shutil.which("g++"):
        return ["g++", "-std=c++17", "-fsyntax-only", path]
    return None


@pytest.mark.parametrize(
    ("path", "base", "head", "negated", "untouched"),
    [
        (
            "geo/geo.go",
            GO_BASE,
            GO_HEAD,
            ["if !(x < lo) {", '} else if !(x > hi && label("x") != "y") {'],
            ["if v := x * 2; v < 0 {", 'if label("(") == "" {'],
        ),
        ("src/lib.rs", RUST_BASE, RUST_HEAD, ["if !(x > hi) {"], ["if let Some(v)"]),
        (
            "Geo.java",
            JAVA_BASE,
            JAVA_HEAD,
            ["if (!(x < lo)) {", "} else if (!((x > hi))) return hi;"],
            [],
        ),
        (
            "geo.cpp",
            CPP_BASE,
            CPP_HEAD,
            ["while (!(x > hi))", "if (!(x < lo)) return lo;"],
            ["if (int h = half(x))"],
        ),
    ],
)
def test_negated_conditions_compile(
    tmp_path: Path, path: str, base: str, head: str, negated: list[str], untouched: list[str]
) -> None:
    assert default_is_code(path)
    case = make_case(tmp_path, {path: base}, {path: head})
    mutants = build_mutants(case.gold, case.read_base)
    check_mutants(case, mutants)
    conditions = [m for m in mutants if m.kind == "negate_condition"]
    texts = [(mutant_text(case, m) or b"").decode() for m in conditions]
    for line in negated:
        assert any(line in t for t in texts), (line, texts)
    for line in untouched:
        assert all(line in t for t in texts), line
    for n, text in enumerate(texts):
        work = tmp_path / f"compile-{n}"
        (work / Path(path).parent).mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
        argv = _compiler(path, work)
        if argv is None:
            continue
        done = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (text, done.stderr)
