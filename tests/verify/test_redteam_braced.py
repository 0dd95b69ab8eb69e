"""Red-team ``raise`` and ``exit`` candidates in Go, Rust, Java, C and C++: each one is compiled by the language's own compiler here; calling a rewritten function fails
(``raise``) or ends the process with status 0 (``exit``)."""

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
GO_HEAD = """package geo // the shapes

import (
\t"os"
\t"strings"
)

var _ = os.Getpid

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


def _by_kind(case) -> dict:  # type: ignore[no-untyped-def]
    return {c.kind: c for c in build_candidates(case.gold, case.read_base)}


def _candidate_text(case, patch: str, path: str, tmp: Path) -> str:  # type: ignore[no-untyped-def]
    work = tmp / "cand"
    case.export_base(work)
    assert git_apply(work, patch).returncode == 0
    data = _read(work, path)
    assert data is not None
    return data.decode()


def _go_test(work: Path, text: str) -> subprocess.CompletedProcess[str]:
    work.mkdir()
    (work / "go.mod").write_text("module example.com/geo\n\ngo 1.19\n")
    (work / "geo.go").write_text(text)
    (work / "geo_test.go").write_text(GO_MAIN)
    return subprocess.run(
        ["go", "test", "-vet=off", "./..."], cwd=work, capture_output=True, text=True, timeout=300
    )


@pytest.mark.skipif(shutil.which("go") is None, reason="no go toolchain")
def test_go(tmp_path: Path) -> None:
    case = make_case(tmp_path, {"geo.go": GO_BASE}, {"geo.go": GO_HEAD})
    kinds = _by_kind(case)
    assert set(kinds) == {"raise", "exit"}
    assert set(kinds["raise"].functions) == {"geo.go:Label", "geo.go:Area"}
    raises = _candidate_text(case, kinds["raise"].patch, "geo.go", tmp_path)
    done = _go_test(tmp_path / "raise", raises)
    assert done.returncode != 0 and "not implemented" in done.stdout, done.stdout + done.stderr
    # The exit candidate imports os a second time under its own name, beside the file's.
    exits = _candidate_text(case, kinds["exit"].patch, "geo.go", tmp_path / "exit")
    assert exits.startswith('package geo // the shapes\n\nimport repogym_exit_ "os"\n')
    done = _go_test(tmp_path / "exit-mod", exits)
    # It compiles, and Go's test binary fails a test that ends the process with status 0.
    assert done.returncode != 0 and "os.Exit(0)" in done.stdout, done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("cargo") is None, reason="no Rust toolchain")
def test_rust(tmp_path: Path) -> None:
    case = make_case(tmp_path, {"src/lib.rs": RUST_BASE}, {"src/lib.rs": RUST_HEAD})
    kinds = _by_kind(case)
    assert set(kinds) == {"raise", "exit"}
    cand = kinds["raise"]
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
    exits = _candidate_text(case, kinds["exit"].patch, "src/lib.rs", tmp_path / "exit")
    (work / "src" / "lib.rs").write_text(exits)
    done = subprocess.run(
        ["cargo", "test", "--offline"], cwd=work, capture_output=True, text=True, timeout=600
    )
    # the test harness ends with status 0 before it reports the test
    assert done.returncode == 0 and "labels ... " not in done.stdout, done.stdout + done.stderr


def _compile_and_run(folder: Path, text: str) -> subprocess.CompletedProcess[str]:
    """``Geo.java`` holding ``text``, compiled by javac and run."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Geo.java").write_text(text)
    built = subprocess.run(
        ["javac", "-d", str(folder / "out"), "Geo.java"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    return subprocess.run(
        ["java", "-cp", str(folder / "out"), "Geo"], capture_output=True, text=True, timeout=120
    )


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK")
def test_java(tmp_path: Path) -> None:
    case = make_case(tmp_path, {"Geo.java": JAVA_BASE}, {"Geo.java": JAVA_HEAD})
    kinds = _by_kind(case)
    assert set(kinds) == {"raise", "exit"}
    cand = kinds["raise"]
    # The constructor keeps its body (it has no return type).
    assert cand.functions == ("Geo.java:label", "Geo.java:main")
    ran = _compile_and_run(tmp_path, _candidate_text(case, cand.patch, "Geo.java", tmp_path))
    assert ran.returncode != 0 and "UnsupportedOperationException" in ran.stderr
    exits = _candidate_text(case, kinds["exit"].patch, "Geo.java", tmp_path / "exit")
    ran = _compile_and_run(tmp_path / "exit", exits)
    assert ran.returncode == 0 and ran.stdout == ""  # ended before it printed


CPP_BASE = """#include <string>

namespace geo {

std::string label(const std::string& s) {
    return s;
}

}  // namespace geo
"""
CPP_HEAD = """#include <string>
#include <cctype>

namespace geo {

class Box {
public:
    Box(int w, int h) : w_(w), h_{h} {
        area_ = w * h;
    }
    int area() const noexcept {
        return w_ * h_ + 0;
    }
private:
    int w_;
    int h_;
    int area_;
};

std::string label(const std::string& s) {
    std::string out = s;
    for (auto& c : out) c = static_cast<char>(std::toupper(c));
    return out;
}

int twice(int x) { return 2 * x + 0; }

}  // namespace geo

int main() {
    return geo::label("a") == "A" ? 0 : 1;
}
"""
C_HEAD = """#include <string.h>

static int count(const char *s) {
    size_t n = strlen(s);
    return (int)n + 0;
}

int main(void) {
    return count("ab") == 2 ? 0 : 1;
}
"""


STRICT_C = {"gcc": ["-std=c89", "-pedantic", "-Wdeclaration-after-statement"]}
"""C89 code takes no statement before a block's declarations: the guards are declarations."""


def _build_c(folder: Path, compiler: str, src: str) -> Path:
    """``src`` compiled with warnings as errors (C89 rules for C); the program's path."""
    exe = folder / (src + ".bin")
    built = subprocess.run(
        [compiler, "-Wall", "-Werror", *STRICT_C.get(compiler, []), "-o", str(exe), src],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    return exe


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
def test_cpp_and_c(tmp_path: Path) -> None:
    case = make_case(tmp_path / "cpp", {"geo.cpp": CPP_BASE}, {"geo.cpp": CPP_HEAD})
    kinds = _by_kind(case)
    cand = kinds["raise"]
    # constructors with initializer lists and const noexcept methods too; a body opened and
    # closed on one line (twice) is left alone
    assert set(cand.functions) == {"geo.cpp:Box", "geo.cpp:area", "geo.cpp:label", "geo.cpp:main"}
    text = _candidate_text(case, cand.patch, "geo.cpp", tmp_path / "cpp")
    assert text.count("__builtin_trap()") == 4
    (tmp_path / "geo.cpp").write_text(text)
    c = make_case(
        tmp_path / "c", {"count.c": "int main(void) { return 0; }\n"}, {"count.c": C_HEAD}
    )
    c_kinds = _by_kind(c)
    c_cand = c_kinds["raise"]
    (tmp_path / "count.c").write_text(_candidate_text(c, c_cand.patch, "count.c", tmp_path / "c"))
    (tmp_path / "exit.cpp").write_text(
        _candidate_text(case, kinds["exit"].patch, "geo.cpp", tmp_path / "cpp-exit")
    )
    (tmp_path / "exit.c").write_text(
        _candidate_text(c, c_kinds["exit"].patch, "count.c", tmp_path / "c-exit")
    )
    for compiler, src in (("g++", "exit.cpp"), ("gcc", "exit.c")):
        exe = _build_c(tmp_path, compiler, src)
        assert subprocess.run([str(exe)], timeout=60).returncode == 0, src
    for compiler, src in (("g++", "geo.cpp"), ("gcc", "count.c")):
        exe = _build_c(tmp_path, compiler, src)
        ran = subprocess.run([str(exe)], capture_output=True, timeout=60)
        assert ran.returncode < 0, (src, ran.returncode)  # killed by the trap's signal
