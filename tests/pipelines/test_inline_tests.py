"""Inline Rust unit tests split out of a commit (no sandbox): which changes count as test
changes, and the source and test patches each apply to the base on their own."""

from __future__ import annotations

import subprocess
from pathlib import Path

from repogym.pipelines._harness.runtime import line_bound
from repogym.pipelines._mined.candidates import candidate_from_change
from repogym.pipelines._mined.inline_tests import EXTRA_KEY
from repogym.sources.local import LocalGitSource
from repogym.sources.patches import file_diff, parse_patch
from repogym.spec import RuntimeOptions

LIB = """\
pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero() {
        assert_eq!(add(0, 0), 0);
    }
}
"""
NEW_TEST = "\n    #[test]\n    fn adds() {\n        assert_eq!(add(1, 2), 3);\n    }\n"


def with_test(lib: str) -> str:
    return lib[: lib.rfind("}")] + NEW_TEST.lstrip("\n") + "}\n"


def candidate(repo, base: str, head: str):  # type: ignore[no-untyped-def]
    with LocalGitSource(repo.path) as source:
        return candidate_from_change(
            source,
            key=head,
            task_id="t",
            kind="commit",
            base=base,
            head=head,
            title="Fix add",
            body="",
            reference=head,
            number=None,
            options=RuntimeOptions(),
        )


def applies(repo, base: str, patch: str, tmp: Path) -> str:  # type: ignore[no-untyped-def]
    """The file after applying ``patch`` onto a fresh checkout of ``base``."""
    work = tmp / f"apply-{abs(hash(patch))}"
    subprocess.run(["git", "worktree", "add", "-q", str(work), base], cwd=repo.path, check=True)
    (work / "p.diff").write_text(patch)
    subprocess.run(["git", "apply", "p.diff"], cwd=work, check=True)
    return (work / "src/lib.rs").read_text()


def test_code_and_inline_test_change_split(make_repo, tmp_path: Path) -> None:
    repo = make_repo("crate")
    repo.write("Cargo.toml", '[package]\nname = "c"\nversion = "0.1.0"\n')
    repo.write("src/lib.rs", LIB)
    base = repo.commit("init")
    head_text = with_test(LIB.replace("a - b", "a + b"))
    repo.write("src/lib.rs", head_text)
    head = repo.commit("fix")
    cand, why = candidate(repo, base, head)
    assert cand is not None, why
    assert cand.extra[EXTRA_KEY]["src/lib.rs"].startswith("#[cfg(test)]\nmod tests {")
    assert "fn adds" in cand.extra[EXTRA_KEY]["src/lib.rs"]
    assert "fn adds" not in cand.source_patch and "+    a + b" in cand.source_patch
    assert [f.path for f in parse_patch(cand.test_patch)] == ["src/lib.rs"]
    gold = applies(repo, base, cand.source_patch, tmp_path)
    assert gold == LIB.replace("a - b", "a + b")
    before = applies(repo, base, cand.test_patch, tmp_path)
    assert before == with_test(LIB)


def test_test_only_and_code_only_changes(make_repo) -> None:
    repo = make_repo("crate")
    repo.write("src/lib.rs", LIB)
    base = repo.commit("init")
    repo.write("src/lib.rs", with_test(LIB))
    tests_only = repo.commit("more tests")
    assert candidate(repo, base, tests_only) == (None, "tests only")
    repo.write("src/lib.rs", with_test(LIB).replace("a - b", "a + b"))
    code_only = repo.commit("fix")
    assert candidate(repo, tests_only, code_only) == (None, "no test change")


def test_file_diff_new_and_no_newline(tmp_path: Path) -> None:
    assert file_diff("a.rs", "x\n", "x\n") == ""
    new = file_diff("src/a.rs", None, "fn f() {}\n")
    assert new.startswith("diff --git a/src/a.rs b/src/a.rs\nnew file mode 100644\n--- /dev/null\n")
    edit = file_diff("a.rs", "x", "y")
    assert edit.count("\\ No newline at end of file") == 2
    (tmp_path / "a.rs").write_text("x")
    (tmp_path / "p.diff").write_text(edit)
    subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, check=True)
    assert (tmp_path / "a.rs").read_text() == "y"


def test_doctests_of_edited_files_are_line_bound() -> None:
    ids = [
        "src/lib.rs - EMPTY_HEADER (line 791)",
        "src/lib.rs - Request (line 482) - compile",
        "src/iter.rs - Bytes (line 12)",
        "tests::utf8_in_path_ok",
        "uri::urltest_001",
    ]
    assert line_bound(ids, ["src/lib.rs"]) == ids[:2]
    assert line_bound(ids, ["crates/core/src/iter.rs"]) == [ids[2]]
    assert line_bound(ids, ["README.md"]) == []


def test_a_flaky_test_elsewhere_is_not_why_a_change_is_dropped() -> None:
    """Only a flaky id that could have been fail-to-pass is reported as flaky: a test of the
    suite that fails now and then after the fix says nothing about the change."""
    from types import SimpleNamespace

    from repogym.pipelines._harness.runtime import classify

    recipe = SimpleNamespace(language="cargo")
    before = [{"tests": {"a": "PASSED", "b": "PASSED", "c": "FAILED"}}] * 2
    after = [
        {"tests": {"a": "PASSED", "b": "PASSED", "c": "PASSED"}},
        {"tests": {"a": "PASSED", "b": "FAILED", "c": "FAILED"}},
    ]
    f2p, p2p, flaky, passing = classify(recipe, before, after, {})  # type: ignore[arg-type]
    assert (f2p, p2p, passing) == ([], ["a"], True)
    assert flaky == {"c"}  # "b" passed before the fix: never fail-to-pass
    steady = [{"tests": {"a": "PASSED", "b": "PASSED", "c": "FAILED"}}] * 2
    assert classify(recipe, before, steady, {})[2] == set()  # type: ignore[arg-type]
