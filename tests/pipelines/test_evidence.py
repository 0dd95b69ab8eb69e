"""Instruction evidence without a sandbox: residue of squash merges and PR templates, test
statements (parametrised groups, docstrings, failures), the how-not-what filter, word-run
leaks, spec coverage and the solvability rule."""

from __future__ import annotations

from pathlib import Path

from repogym.pipelines._instructions.evidence import (
    behaviour_section,
    changed_first,
    clean_message,
    drop_how,
    group_tests,
    strip_residue,
)
from repogym.pipelines._instructions.text import Evidence, clean_text, compose, repair
from repogym.taskdir.instruction_checks import (
    leaked_ngrams,
    mentioned,
    min_words,
    spec_coverage,
    underspecified,
)

GOLD = """\
--- a/pkg/size.py
+++ b/pkg/size.py
@@ -1,4 +1,8 @@
 def parse(text):
-    if not text:
+    if text is None:
         return 0
+    return convert_units_to_bytes_with_the_table(text, table=UNITS, strict=True)
"""

SQUASH = """\
Add parse_size for human-readable sizes (#41)

* Add parse_size

* Apply suggestions from code review

Co-authored-by: Bob Reviewer <bob@example.org>

* fix lint

* Update size.py

* Merge branch 'main' into sizes

---------

Co-authored-by: Bob Reviewer <bob@example.org>
"""

TEMPLATE = """\
## Description

Sizes such as "10 KB" could not be read.

<!-- Please describe your change -->

## Checklist

- [x] I have added tests
- [ ] I have updated the docs

## Type of change

Bug fix
"""


def test_squash_residue_is_removed() -> None:
    text = clean_text(SQUASH.split("\n", 1)[1])
    assert text == "* Add parse_size"
    for residue in ("suggestions", "Co-authored", "lint", "Update size.py", "Merge", "---"):
        assert residue not in text


def test_process_bullets_of_a_squash_list_are_removed() -> None:
    body = (
        "* Allow $ref when the schema is not a dict\n\n* Run right version of black\n\n"
        "* Force recreate tox env for CI\n\n* Fix PR comments\n\n* Add prepend test\n\n"
        "* - Add docstring to prepend()\n\n* maintain 100% coverage\n\n"
        "* [pre-commit.ci] auto fixes from pre-commit.com hooks\n\n"
        "for more information, see https://pre-commit.ci\n"
    )
    assert strip_residue(body) == "* Allow $ref when the schema is not a dict"


def test_many_groups_with_one_failure_are_condensed() -> None:
    ids = [f"tests/test_m.py::TestCache::test_case_{i}" for i in range(9)]
    failure = "TypeError: cached() got an unexpected keyword argument 'info'"
    section = behaviour_section(group_tests(ids, failures=dict.fromkeys(ids, failure)))
    assert section.count(failure) == 1
    assert "- 9 tests in `tests/test_m.py` (Cache: case 0, " in section
    assert "and 1 more). Now each fails with" in section


def test_pr_template_sections_and_checklists_are_removed() -> None:
    text = strip_residue(TEMPLATE)
    assert 'Sizes such as "10 KB" could not be read.' in text
    for residue in ("Checklist", "[x]", "Type of change", "Bug fix", "<!--"):
        assert residue not in text


def test_parametrised_ids_form_one_group_with_docstring_and_failure(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_size.py").write_text(
        "import pytest\n\n"
        "class TestParse:\n"
        "    @pytest.mark.parametrize('text', ['1 KB', '2 KB'])\n"
        "    def test_units(self, text):\n"
        '        """Sizes with a unit are read in bytes."""\n'
        "        assert parse(text)\n\n"
        "def test_empty_is_zero():\n    assert parse('') == 0\n"
    )
    f2p = [
        "tests/test_size.py::TestParse::test_units[1 KB]",
        "tests/test_size.py::TestParse::test_units[2 KB]",
        "tests/test_size.py::test_empty_is_zero",
    ]
    failures = {
        f2p[0]: "ValueError: invalid literal for int() with base 10: '1 KB'\n+ where x = f()",
        f2p[1]: "ValueError: invalid literal for int() with base 10: '2 KB'",
        f2p[2]: "\x1b[31mAssertionError: assert None == 0\x1b[0m",
    }
    groups = group_tests(f2p, tmp_path, failures)
    assert [g.name for g in groups] == ["Parse: units", "empty is zero"]
    assert groups[0].doc == "Sizes with a unit are read in bytes."
    assert len(groups[0].ids) == 2 and len(groups[0].failures) == 2
    assert groups[1].failures == ["AssertionError: assert None == 0"]  # ANSI gone
    section = behaviour_section(groups)
    assert "Sizes with a unit are read in bytes. (2 cases) (`tests/test_size.py`)" in section
    assert "`AssertionError: assert None == 0`" in section
    assert "+ where" not in section and "assert parse(text)" not in section


def test_jest_and_unittest_ids_read_as_statements() -> None:
    groups = group_tests(
        ["src/size.test.js > parse > reads kilobytes", "pkg.tests.test_size.TestParse.test_mb"]
    )
    assert [g.name for g in groups] == ["parse: reads kilobytes", "Parse: mb"]
    assert groups[0].file == "src/size.test.js"


def test_junit_and_gtest_ids_name_no_python_file() -> None:
    """Surefire ``pkg.Class#method`` and GoogleTest ``Suite.Name`` ids are no Python modules."""
    groups = group_tests(
        [
            "org.apache.commons.codec.CharsetsTest#testToCharset",
            "demo.CalcTest$Inner#identity(int)[1]",
            "Money.ParseThousands",
        ]
    )
    assert [(g.file, g.name) for g in groups] == [
        ("", "Charsets: To charset"),
        ("", "Calc: Inner: identity"),
        ("", "Money: Parse thousands"),
    ]


def test_message_is_one_trimmed_line() -> None:
    msg = clean_message("E" * 500 + "\nsecond line")
    assert "\n" not in msg and len(msg) <= 160 and msg.endswith("…")


def test_implementation_sentences_are_dropped() -> None:
    body = (
        "Empty strings were read as zero bytes. "
        "Replace the truthiness guards with 'is None' checks.\n"
        "Use `convert_units_to_bytes_with_the_table` for the conversion."
    )
    text, removed = drop_how(body, GOLD, visible="def test_x(): parse('')")
    assert text == "Empty strings were read as zero bytes."
    assert len(removed) == 2
    # A name the tests use is specification, not a hint: it stays.
    kept, removed = drop_how(
        "Use `convert_units_to_bytes_with_the_table` for it.",
        GOLD,
        visible="convert_units_to_bytes_with_the_table(x)",
    )
    assert removed == [] and "convert_units" in kept


def test_word_runs_of_the_fix_are_leaks_unless_the_tests_show_them() -> None:
    text = (
        "Write: if text is None, return convert_units_to_bytes_with_the_table(text, table=UNITS)."
    )
    runs = leaked_ngrams(text, GOLD)
    assert runs[0] == "if text is none return convert_units_to_bytes_with_the_table text table"
    assert leaked_ngrams(text, GOLD, exempt=text) == []
    assert leaked_ngrams("Sizes like 10 KB are read in bytes by parse.", GOLD) == []


def test_spec_coverage_and_mentions() -> None:
    assert mentioned("pkg.size.parse_size", "Add `parse_size(text)`")
    assert not mentioned("parse", "parse_size only")
    assert mentioned("--human", "a new `--human` option")
    assert spec_coverage("nothing", []) == (1.0, [])
    assert spec_coverage("uses tz", ["tz", "unit"]) == (0.5, ["unit"])


def test_underspecified_names_the_missing_and_the_size() -> None:
    assert min_words(0) == 6 and min_words(10) == 8 and min_words(1000) == 40
    reasons = underspecified("# Fix sizes\n\nThe repository is checked out at", GOLD, ["unit"])
    assert reasons[0] == "does not name unit, which the hidden tests need"
    assert reasons[1].startswith("states the change in 2 word(s); a 3-line change needs 6")
    assert underspecified("# Fix\n\n" + "word " * 20, GOLD, []) == []


def _evidence() -> Evidence:
    groups = group_tests(
        ["tests/test_size.py::test_unit[a]", "tests/test_size.py::test_unit[b]"],
        failures={
            "tests/test_size.py::test_unit[a]": "TypeError: parse() got an unexpected "
            "keyword argument 'unit'"
        },
    )
    interface = "## Required interface\n\n- `pkg.size.parse`: new keyword argument `unit`\n"
    return Evidence(groups, interface, ["unit"], "parse(x, unit='kb')\n" + interface)


def test_compose_evidence_title_and_tdd() -> None:
    body = "Sizes can now carry a unit.\nReplace the truthiness guards with 'is None' checks."
    ev = _evidence()
    out = compose("Support units in parse (#7)", body, workdir="/w", gold_patch=GOLD, evidence=ev)
    assert out.text.startswith("# Support units in parse\n\nSizes can now carry a unit.\n")
    assert "is None" not in out.text and len(out.removed) == 1
    assert "## Expected behaviour" in out.text and "(2 cases)" in out.text
    assert "unexpected keyword argument 'unit'" in out.text
    assert "## Required interface" in out.text
    assert out.spec_coverage == 1.0 and out.missing == []
    assert out.record(["unit"])["mode"] == "evidence"

    title = compose(
        "Support units in parse", "", workdir="/w", gold_patch=GOLD, evidence=ev, mode="title"
    )
    assert title.spec_coverage == 0.0 and title.missing == ["unit"]
    fixed = repair(title, ev, "/w")
    assert fixed.spec_coverage == 1.0 and "## Expected behaviour" in fixed.text
    assert fixed.text.rstrip().endswith("do not rely on editing tests.")
    again = repair(fixed, ev, "/w")  # nothing to add twice
    assert again.text.count("## Expected behaviour") == 1
    assert again.text.count("## Required interface") == 1

    ev.test_files = ["tests/test_size.py"]
    tdd = compose("Support units", "", workdir="/w", gold_patch=GOLD, evidence=ev, mode="tdd")
    assert "## Tests to make pass" in tdd.text and "`tests/test_size.py`" in tdd.text
    assert "restored to their given content before grading" in tdd.text


def test_changed_tests_lead_the_evidence() -> None:
    """A new symbol breaks a Go package's build: every test of it is fail-to-pass, and the
    tests the change adds or edits come first (the section lists only the first groups)."""
    patch = (
        "diff --git a/uuid_test.go b/uuid_test.go\n--- a/uuid_test.go\n+++ b/uuid_test.go\n"
        "@@ -10,6 +10,9 @@ func TestParse(t *testing.T) {\n"
        '+\tif _, err := Parse("x"); err == nil {\n'
        "@@ -40,0 +43,5 @@\n+func TestNewV6WithTime(t *testing.T) {\n"
        "diff --git a/src/lib.rs b/src/lib.rs\n@@ -1 +1 @@\n+    fn parses_pairs() {\n"
    )
    f2p = [
        "FuzzParse/seed#0",
        "TestAlpha",
        "TestNewV6WithTime/with_nil",
        "TestParse",
        "tests::counts_words",
        "tests::parses_pairs",
        "tests/test_a.py::test_x[1]",
    ]
    assert changed_first(f2p, patch) == [
        "TestNewV6WithTime/with_nil",
        "TestParse",
        "tests::parses_pairs",
        "FuzzParse/seed#0",
        "TestAlpha",
        "tests::counts_words",
        "tests/test_a.py::test_x[1]",
    ]
    assert changed_first(f2p, "") == f2p
    # A test appended after another one: the hunk's heading names the one before, unchanged.
    appended = (
        "@@ -27,3 +27,8 @@ func FuzzAdd(f *testing.F) {\n \t})\n }\n+\n"
        "+func TestClamp(t *testing.T) {\n+\tClamp(1, 2, 3)\n+}\n"
    )
    ids = ["FuzzAdd", "FuzzAdd/seed#0", "TestAdd", "TestClamp"]
    assert changed_first(ids, appended) == ["TestClamp", "FuzzAdd", "FuzzAdd/seed#0", "TestAdd"]
