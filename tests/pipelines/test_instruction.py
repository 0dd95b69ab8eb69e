"""Instructions from commit/PR text: references, links, SHAs, trailers, diffs and leaks removed."""

from __future__ import annotations

from repogym.pipelines._instructions.text import build_instruction, clean_text, clean_title

GOLD = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-    return a\n+    return compute_total(items, strict=True)\n"


def test_title_keeps_calls_and_drops_references() -> None:
    assert clean_title("Make mean() accept empty input (#4)") == "Make mean() accept empty input"
    assert (
        clean_title("Fix #218: Fix and document cache_key handling.")
        == "Fix and document cache_key handling"
    )
    assert clean_title("Merge pull request #5 from ada/fix") == ""
    # Conventional-commit types are for changelogs, not for the agent.
    assert clean_title("fix: JSON Schema: allow $ref (#41)") == "JSON Schema: allow $ref"
    assert clean_title("feat(parser)!: read sizes") == "read sizes"


def test_body_scrubbed() -> None:
    body = (
        "Fixes #34. See https://example.org/issue and commit 1a2b3c4d5e6f.\n\n"
        "```diff\n-a\n+b\n```\n"
        "The function counted strings (see GH-99) since v1.2 and f() works (cf. #12, #13).\n\n"
        "Signed-off-by: Ada <ada@example.org>\nCo-authored-by: Bob <bob@example.org>\n"
        "(cherry picked from commit 0123456789abcdef0123456789abcdef01234567)\n"
        "diff --git a/x b/x\n"
    )
    text = clean_text(body)
    assert text == "The function counted strings since v1.2 and f() works."


def test_machine_trailers_of_the_last_paragraph_are_dropped() -> None:
    body = (
        "Make the file system's watch service poll less often.\n\n"
        "Fixes #12\n\nRELNOTES=n/a\nPiperOrigin-RevId: 5012345\n"
        "COPYBARA_INTEGRATE_REVIEW=https://example.org/pull/12 from ada:poll 1a2b3c4\n"
    )
    assert clean_text(body) == "Make the file system's watch service poll less often."
    # Only a last paragraph made of trailers goes; keys in prose stay.
    kept = "Read NAME=value pairs.\n\nRead-only: files open without write access.\nAnd faster."
    assert clean_text(kept) == kept
    assert clean_text("MODE=fast is the default now.") == "MODE=fast is the default now."


def test_leaked_lines_removed_or_dropped() -> None:
    body = "Use this:\n    return compute_total(items, strict=True)\nso totals are strict about bad input."
    instruction, why = build_instruction(
        "Make totals strict", body, workdir="/workspace", gold_patch=GOLD
    )
    assert why is None and instruction
    assert "compute_total(items, strict=True)" not in instruction
    assert "/workspace" in instruction


def test_too_vague() -> None:
    assert build_instruction("fix (#3)", "", workdir="/w", gold_patch=GOLD) == (
        None,
        "instruction too vague",
    )


def test_spacing_before_method_names_is_kept() -> None:
    assert clean_title("Make .configureOutput() write to stderr") == (
        "Make .configureOutput() write to stderr"
    )
    assert clean_text("Load the .env file, then call .run() .") == (
        "Load the .env file, then call .run()."
    )
