"""Procedural mutants of Go, Rust, Java and C/C++ files (``bug_synth`` in compiled languages):
function bodies found by the lexer, operators applied on tokens only — never inside comments,
strings or a Rust file's test items — and the order and ids the harness relies on."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from repogym.bootstrap.native.compile import covered_lines
from repogym.pipelines._synthesis.braced_mutants import braced_mutants
from repogym.pipelines._synthesis.native import go_module, inline_tests, under_test
from repogym.spec import BUG_OPERATORS
from repogym.verify.braced_lex import LexError, functions, tokens

GO = """package calc

import "strings"

// Clamp keeps n within [lo, hi]; "a < b" in a comment is never touched.
func Clamp(n, lo, hi int) int {
\tif n < lo {
\t\treturn lo
\t}
\tif n > hi {
\t\treturn hi
\t}
\treturn n
}

type Stack struct{ items []int }

func (s *Stack) Push(v int) {
\ts.items = append(s.items, v)
}

func Map[T any](xs []T, f func(T) T) []T {
\tout := make([]T, 0, len(xs))
\tfor i := 0; i < len(xs); i++ {
\t\tout = append(out, f(xs[i]))
\t}
\treturn out
}

func Words(s string) map[string]interface{} {
\tm := map[string]interface{}{}
\tfor _, w := range strings.Fields(s) {
\t\tm[w] = `raw < string == true`
\t}
\treturn m
}
"""

RUST = """/// Largest of two; `a < b` in docs.
pub fn max2(a: i64, b: i64) -> i64 {
    if a >= b { a } else { b }
}

impl Counter {
    pub fn bump<'a>(&'a mut self, by: u32) -> &'a mut Self {
        self.n += by;
        let s = r#"x == y && true"#;
        let c = '{';
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_larger() {
        assert_eq!(max2(1, 2), 2);
        assert!(1 < 2 && true);
    }
}
"""

JAVA = """package demo;

import java.util.List;

@SuppressWarnings("unused")
public class Ranges {
    private final int lo;

    public Ranges(int lo) {
        this.lo = lo;
    }

    /** True when {@code n >= lo}. */
    public boolean contains(int n) throws IllegalStateException {
        if (n < 0) return false;
        return n >= lo && n != 99;
    }

    public List<String> names() {
        Runnable r = new Runnable() {
            @Override
            public void run() {
                System.out.println("a == b");
            }
        };
        String block = \"\"\"
            x < y
            \"\"\";
        return List.of(block);
    }
}

record Point(int x, int y) {
    int sum() {
        return x + y;
    }
}
"""

CPP = """#include <string>
#define TWICE(x) ((x) + (x))

namespace calc {

class Acc : public Base {
public:
    Acc(int start, int step) : total_(start), step_{step} {
        count_ = 0;
    }
    int add(int v) const noexcept {
        if (v == 0) {
            return total_;
        }
        return total_ + v * step_;
    }
private:
    int total_;
    int step_;
    int count_;
};

auto lambda = [](int x) { return x == 1; };

std::string name() {
    const char* s = R"(a == b && c)";
    return std::string(s, 1);
}

}  // namespace calc
"""


def _names(text: str, lang: str) -> list[str]:
    return [f.name for f in functions(text, lang)[1]]


def test_function_bodies_are_found_per_language() -> None:
    assert _names(GO, "go") == ["Clamp", "Push", "Map", "Words"]
    assert _names(RUST, "rust") == ["max2", "bump", "picks_larger"]
    # a record's methods are methods (the record's own parameter list is no function)
    assert _names(JAVA, "java") == ["Ranges", "contains", "names", "sum"]
    assert _names(CPP, "cpp") == ["Acc", "add", "name"]


def test_literals_and_comments_are_single_tokens() -> None:
    kinds = {(k, t) for k, t, _, _ in tokens(RUST, "rust")}
    assert ("string", 'r#"x == y && true"#') in kinds
    assert ("char", "'{'") in kinds and ("lifetime", "'a") in kinds
    assert ("string", '"""\n            x < y\n            """') in {
        (k, t) for k, t, _, _ in tokens(JAVA, "java")
    }
    assert ("string", 'R"(a == b && c)"') in {(k, t) for k, t, _, _ in tokens(CPP, "cpp")}
    # a preprocessor line is no code; C++14 digit separators are part of the number
    assert "TWICE" not in {t for _, t, _, _ in tokens(CPP, "cpp")}
    assert ("number", "100'000") in {(k, t) for k, t, _, _ in tokens("n = 100'000;", "cpp")}


@pytest.mark.parametrize(
    ("text", "lang"),
    [('x := "open', "go"), ("fn f() { /* open", "rust"), ("void f() { g(; }", "c")],
)
def test_unreadable_text_raises_and_gives_no_mutants(text: str, lang: str) -> None:
    with pytest.raises(LexError):
        functions(text, lang)
    ext = {"go": "go", "rust": "rs", "c": "c"}[lang]
    assert braced_mutants(text, f"x.{ext}") == []


@pytest.mark.parametrize(
    ("text", "path"), [(GO, "calc.go"), (RUST, "src/lib.rs"), (JAVA, "A.java"), (CPP, "a.cpp")]
)
def test_mutants_touch_code_only(text: str, path: str) -> None:
    mutants = braced_mutants(text, path)
    assert mutants
    lang = {"go": "go", "rs": "rust", "java": "java", "cpp": "cpp"}[path.rsplit(".", 1)[1]]
    literals = {t for k, t, _, _ in tokens(text, lang) if k in ("string", "char")}
    comments = [line for line in text.splitlines() if line.strip().startswith(("//", "/**"))]
    for m in mutants:
        assert m.text != text and m.operator in BUG_OPERATORS
        after = {t for k, t, _, _ in tokens(m.text, lang) if k in ("string", "char")}
        assert after <= literals, m.description  # none changed (a dropped line may drop one)
        for comment in comments:
            assert comment in m.text, m.description
    assert len({m.text for m in mutants}) == len(mutants)  # no two alike
    assert len({m.mutation_id for m in mutants}) == len(mutants)


def test_rust_test_items_are_never_mutated() -> None:
    for m in braced_mutants(RUST, "src/lib.rs"):
        assert m.function != "picks_larger"
        tail = m.text[m.text.index("#[cfg(test)]") :]
        assert tail == RUST[RUST.index("#[cfg(test)]") :]


def _edits(text: str, path: str, operator: str) -> set[tuple[str, str]]:
    """(removed line, added line) pairs of every mutant of one operator."""
    out = set()
    for m in braced_mutants(text, path, operators=[operator]):
        old = [ln for ln in text.splitlines() if ln not in m.text.splitlines()]
        new = [ln for ln in m.text.splitlines() if ln not in text.splitlines()]
        out.add((" ".join(s.strip() for s in old), " ".join(s.strip() for s in new)))
    return out


def test_each_operator_makes_its_edit() -> None:
    assert ("if n < lo {", "if n <= lo {") in _edits(GO, "calc.go", "compare")
    assert ("return n >= lo && n != 99;", "return n >= lo || n != 99;") in _edits(
        JAVA, "A.java", "boolean"
    )
    assert ("if n > hi {", "if !(n > hi) {") in _edits(GO, "calc.go", "negate_condition")
    assert ("for i := 0; i < len(xs); i++ {", "for i := 1; i < len(xs); i++ {") in _edits(
        GO, "calc.go", "off_by_one"
    )
    assert ("if (n < 0) return false;", "") in _edits(JAVA, "A.java", "remove_guard")
    guards = _edits(CPP, "a.cpp", "remove_guard")
    assert ("if (v == 0) { return total_; }", "") in guards
    assert ("s.items = append(s.items, v)", "") in _edits(GO, "calc.go", "remove_statement")
    assert ("self.n += by;", "") in _edits(RUST, "src/lib.rs", "remove_statement")
    assert ("return std::string(s, 1);", "return std::string(1, s);") in _edits(
        CPP, "a.cpp", "swap_args"
    )
    assert ("if a >= b { a } else { b }", "if a > b { a } else { b }") in _edits(
        RUST, "src/lib.rs", "compare"
    )


def test_generic_brackets_are_not_comparisons() -> None:
    for m in braced_mutants(JAVA, "A.java", operators=["compare"]):
        assert "List<String>" in m.text and "List.of" in m.text


def test_order_is_round_robin_over_functions_and_stable() -> None:
    first = braced_mutants(GO, "calc.go", per_function=2)
    assert [m.function for m in first[:3]] == ["Clamp", "Push", "Map"]
    assert max(sum(m.function == f for m in first) for f in ("Clamp", "Map")) == 2
    again = braced_mutants(GO, "calc.go", per_function=2)
    assert [m.mutation_id for m in first] == [m.mutation_id for m in again]


def test_inline_test_items_of_a_crate_are_what_the_verifier_splices(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "src").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "src" / "lib.rs").write_text(RUST)
    (tmp_path / "src" / "plain.rs").write_text("pub fn one() -> u8 { 1 }\n")
    (tmp_path / "src" / "broken.rs").write_text('#[cfg(test)]\nmod tests { const S: &str = "\n')
    (tmp_path / "tests" / "it.rs").write_text(RUST)
    files = ["src/lib.rs", "src/plain.rs", "src/broken.rs", "tests/it.rs"]
    found = inline_tests(tmp_path, files)
    assert list(found) == ["src/lib.rs"]  # a crate with only these tests still has tests
    assert found["src/lib.rs"].startswith("#[cfg(test)]") and "fn max2" not in found["src/lib.rs"]


@pytest.mark.parametrize(
    ("path", "tested"),
    [
        ("src/lib.rs", True),
        ("benches/average.rs", False),
        ("examples/demo.go", False),
        ("vendor/github.com/x/y/y.go", False),
        ("internal/parse/parse.go", True),
        ("src/main/java/demo/Money.java", True),
        ("module/src/main/java/com/example/demo/Money.java", True),
        ("examples/src/main/java/Demo.java", False),
        ("buildSrc/Plugin.java", False),
        ("third_party/zlib/inflate.c", False),
        ("lib/inflate.c", True),
    ],
)
def test_bug_synth_mutates_library_code_only(path: str, tested: bool) -> None:
    assert under_test(path) is tested


@pytest.mark.skipif(shutil.which("go") is None, reason="no go toolchain")
def test_go_line_coverage_says_which_lines_ran(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A genuine cover profile of ``go test -coverpkg=./...``: the lines of the called
    function ran, those of the uncalled one did not (an edit there would survive)."""
    (tmp_path / "go.mod").write_text("module example.com/cov\n\ngo 1.19\n")
    (tmp_path / "cov.go").write_text(
        "package cov\n\nfunc Used(n int) int {\n\tif n > 2 {\n\t\treturn 1\n\t}\n\treturn 0\n}\n"
        "\nfunc Unused(n int) int {\n\treturn n * 2\n}\n"
    )
    (tmp_path / "cov_test.go").write_text(
        'package cov\n\nimport "testing"\n\nfunc TestUsed(t *testing.T) {\n'
        "\tif Used(1) != 0 {\n\t\tt.Fatal(1)\n\t}\n}\n"
    )
    profile = tmp_path / "c.out"
    subprocess.run(
        ["go", "test", "-count=1", "-coverpkg=./...", f"-coverprofile={profile}", "./..."],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert go_module(tmp_path) == "example.com/cov"
    ran = covered_lines(profile.read_text(), "example.com/cov")["cov.go"]
    assert {3, 4, 7} <= ran  # Used: its signature's block, the condition, the fall-through
    assert 5 not in ran and 11 not in ran  # the branch not taken, and Unused's body
