"""Red-team ``raise`` candidates in Go, Rust and Java: each one is compiled by the language's
own compiler here, and calling a rewritten function fails."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from repogym.verify.redteam import build_candidates
from tests.verify.test_mutants import _read, git_apply, make_case

GO_BASE = """package geo

import "strings"

func Label(s string) string {
\treturn s
}
"""
GO_HEAD = """package geo

import "strings"

func Label(s string) string {
\treturn strings.ToUpper(s)
}

func (b Box) Area() (n int, err error) {
\treturn b.W * b.H, nil
}

type Box struct{ W, H int }
"""
GO_MAIN = """package geo

import "testing"

func TestLabel(t *testing.T) {
\tif Label("a") != "A" {
\t\tt.Fatal("label")
\t}
}
"""
RUST_BASE = "pub fn label(s: &str) -> String {\n    s.to_string()\n}\n"
RUST_HEAD = """pub fn label(s: &str) -> String {
    let upper = s.to_uppercase();
    upper
}

#[cfg(test)]
mod tests {
    #[test]
    fn labels() {
        assert_eq!(super::label("a"), "A");
    }
}
"""
JAVA_BASE = """public class Geo {
    public static String label(String s) {
        return s;
    }
}
"""
JAVA_HEAD = """public class Geo {
    private final int w;

    public Geo(int w) {
        this.w = w + 0;
    }

    public static String label(String s) {
        return s.toUpperCase();
    }

    public static void main(String[] args) {
        System.out.println(label("a"));
    }
}
"""


def _candidate_text(case, patch: str, path: str, tmp: Path) -> str:  # type: ignore[no-untyped-def]
    work = tmp / "cand"
    case.export_base(work)
    assert git_apply(work, patch).returncode == 0
    data = _read(work, path)
    assert data is not None
    return data.decode()


@pytest.mark.skipif(shutil.which("go") is None, reason="no go toolchain")
def test_go(tmp_path: Path) -> None:
    case = make_case(tmp_path, {"geo.go": GO_BASE}, {"geo.go": GO_HEAD})
    [cand] = build_candidates(case.gold, case.read_base)
    assert cand.kind == "raise" and set(cand.functions) == {"geo.go:Label", "geo.go:Area"}
    work = tmp_path / "mod"
    work.mkdir()
    (work / "go.mod").write_text("module example.com/geo\n\ngo 1.19\n")
    (work / "geo.go").write_text(_candidate_text(case, cand.patch, "geo.go", tmp_path))
    (work / "geo_test.go").write_text(GO_MAIN)
    done = subprocess.run(
        ["go", "test", "-vet=off", "./..."], cwd=work, capture_output=True, text=True, timeout=300
    )
    assert done.returncode != 0 and "not implemented" in done.stdout, done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("cargo") is None, reason="no Rust toolchain")
def test_rust(tmp_path: Path) -> None:
    case = make_case(tmp_path, {"src/lib.rs": RUST_BASE}, {"src/lib.rs": RUST_HEAD})
    [cand] = build_candidates(case.gold, case.read_base)
    assert cand.functions == ("src/lib.rs:label",)  # the test function is not rewritten
    work = tmp_path / "crate"
    (work / "src").mkdir(parents=True)
    (work / "Cargo.toml").write_text(
        '[package]\nname = "geo"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    (work / "src" / "lib.rs").write_text(_candidate_text(case, cand.patch, "src/lib.rs", tmp_path))
    done = subprocess.run(
        ["cargo", "test", "--offline"], cwd=work, capture_output=True, text=True, timeout=600
    )
    assert "not implemented" in done.stdout + done.stderr and "FAILED" in done.stdout, (
        done.stdout + done.stderr
    )
    assert "error[" not in done.stderr


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK")
def test_java(tmp_path: Path) -> None:
    case = make_case(tmp_path, {"Geo.java": JAVA_BASE}, {"Geo.java": JAVA_HEAD})
    [cand] = build_candidates(case.gold, case.read_base)
    # The constructor keeps its body (it has no return type).
    assert cand.functions == ("Geo.java:label", "Geo.java:main")
    text = _candidate_text(case, cand.patch, "Geo.java", tmp_path)
    (tmp_path / "Geo.java").write_text(text)
    built = subprocess.run(
        ["javac", "-d", str(tmp_path / "out"), "Geo.java"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    ran = subprocess.run(
        ["java", "-cp", str(tmp_path / "out"), "Geo"], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode != 0 and "UnsupportedOperationException" in ran.stderr
