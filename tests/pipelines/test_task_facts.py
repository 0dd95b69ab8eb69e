"""Facts a runtime task records about its change: category, difficulty, de-duplication key."""

from __future__ import annotations

import pytest

from repogym.pipelines._harness.emit import (
    INLINE_IDS_BYTES,
    category,
    change_hash,
    code_lines,
    difficulty,
    ids_or_count,
)

GOLD = """\
diff --git a/pkg/mod.py b/pkg/mod.py
index 1111111..2222222 100644
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,2 +1,3 @@
 def f(x):
-    return x
+    if x is None:
+        return 0
+    return x
"""
CHANGELOG = """\
diff --git a/CHANGELOG.md b/CHANGELOG.md
index 3333333..4444444 100644
--- a/CHANGELOG.md
+++ b/CHANGELOG.md
@@ -1,1 +1,40 @@
 # Changes
""" + "".join(f"+- entry {i}\n" for i in range(39))
TESTS = """\
diff --git a/tests/test_mod.py b/tests/test_mod.py
index 5555555..6666666 100644
--- a/tests/test_mod.py
+++ b/tests/test_mod.py
@@ -1 +1,2 @@
 from pkg.mod import f
+assert f(None) == 0
"""


@pytest.mark.parametrize(
    ("title", "body", "want"),
    [
        ("fix: handle None in f", "", "bugfix"),
        ("feat(api): stream results", "", "feature"),
        ("refactor: split the parser", "", "refactor"),
        ("docs: explain the cache", "", "docs"),
        ("Crash when the input is empty", "", "bugfix"),
        ("Add support for YAML input", "", "feature"),
        ("Rename internal helpers and simplify the loop", "", "refactor"),
        ("Fix typo in docstring", "", "docs"),
        ("Update f", "Raises a TypeError for None.", "bugfix"),
    ],
)
def test_category_from_words(title: str, body: str, want: str) -> None:
    assert category(title, body, GOLD) == want


def test_category_from_the_shape_of_the_change() -> None:
    added_only = GOLD.replace("-    return x\n", "")
    assert category("Update f", "", added_only) == "feature"
    assert category("Update f", "", GOLD) == "bugfix"


def test_release_notes_do_not_count_towards_size_or_difficulty() -> None:
    assert len(code_lines(GOLD)) == 4
    assert len(code_lines(GOLD + CHANGELOG)) == 4
    assert difficulty(GOLD + CHANGELOG) == "easy"
    assert difficulty(GOLD + "".join(f"+x{i}\n" for i in range(70))) == "medium"
    assert difficulty(GOLD + "".join(f"+x{i}\n" for i in range(80))) == "hard"


def test_difficulty_counts_files_and_tests() -> None:
    """points = changed lines + 10 × (files − 1) + 2 × (F2P test functions − 1)."""
    assert difficulty(GOLD) == "easy"  # 4 points
    assert difficulty(GOLD, f2p=7) == "medium"  # 4 + 12
    second = GOLD.replace("pkg/mod.py", "pkg/other.py")
    assert difficulty(GOLD + second) == "medium"  # 8 + 10


def test_change_hash_ignores_blob_ids_headers_and_release_notes() -> None:
    base = change_hash(GOLD, TESTS)
    other_blobs = GOLD.replace("1111111..2222222", "abcdef0..1234567")
    assert change_hash(other_blobs, TESTS) == base
    assert change_hash(GOLD + CHANGELOG, TESTS) == base
    assert change_hash(GOLD, TESTS.replace("== 0", "== 1")) != base
    assert change_hash(GOLD.replace("return 0", "return 1"), TESTS) != base


def test_a_huge_id_list_is_written_as_its_count() -> None:
    """commons-codec's suite has 18,955 parameterised tests: listed, task.toml would take
    1.9 MB, over the 1 MiB its readers accept; the ids stay in tests/p2p.json."""
    small = [f"pkg.CodecTest#test{i}" for i in range(100)]
    assert ids_or_count(small) == small
    huge = [f"org.example.codec.Base64Test#roundTrip(String)[{i}]" for i in range(20000)]
    assert len(str(huge)) > INLINE_IDS_BYTES and ids_or_count(huge) == 20000
