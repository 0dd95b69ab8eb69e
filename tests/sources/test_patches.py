"""Patch parsing and splitting on hand-written diffs (no git needed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from repogym.sources.patches import (
    _unquote,
    added_lines,
    decode_patch,
    encode_patch,
    files_in_patch,
    is_test_path,
    parse_patch,
    split_patch,
)


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_x.py",
        "test/foo.c",
        "src/__tests__/a.js",
        "spec/models/user_spec.rb",
        "pkg/testing/helpers.py",
        "Tests/Data/x.json",
        "src/MyLib.Tests/FooTests.cs",
        "tests/fixtures/data/big.json",
        "go/pkg/testdata/input.txt",
        "web/__snapshots__/app.snap",
        "test_mod.py",
        "pkg/mod_test.py",
        "pkg/conftest.py",
        "app/tests.py",
        "server/handler_test.go",
        "ui/Button.test.tsx",
        "ui/Button.spec.js",
        "ui/util.test.mjs",
        "lib/user_test.rb",
    ],
)
def test_is_test_path_true(path: str) -> None:
    assert is_test_path(path)


@pytest.mark.parametrize(
    "path",
    [
        "src/app.py",
        "tests",  # a file named tests, not a directory
        "src/testutils.py",
        "src/contest.py",
        "src/attest/verify.py",
        "latest/notes.md",
        "docs/testing.md",
        "src/test.py",
        "pkg/Test_mod.py",
        "server/handler.go",
        "ui/Button.tsx",
        "fixtures/data.json",
    ],
)
def test_is_test_path_false(path: str) -> None:
    assert not is_test_path(path)


TRICKY = """\
diff --git a/schema.sql b/schema.sql
index 1111111..2222222 100644
--- a/schema.sql
+++ b/schema.sql
@@ -1,3 +1,3 @@
--- old comment
+++ new comment
 create table t (x int);
-- keep
diff --git a/tests/test_sql.py b/tests/test_sql.py
index 3333333..4444444 100644
--- a/tests/test_sql.py
+++ b/tests/test_sql.py
@@ -1 +1 @@
-x = 1
\\ No newline at end of file
+x = 2
\\ No newline at end of file
"""


def test_header_lookalikes_inside_hunks() -> None:
    sections = parse_patch(TRICKY)
    assert [(s.old_path, s.new_path, s.status) for s in sections] == [
        ("schema.sql", "schema.sql", "M"),
        ("tests/test_sql.py", "tests/test_sql.py", "M"),
    ]
    assert added_lines(TRICKY) == ["++ new comment", "x = 2"]
    src, tests = split_patch(TRICKY)
    assert src + tests == TRICKY
    assert tests.startswith("diff --git a/tests/test_sql.py") and tests.endswith("of file\n")


MAIL = """\
From 1234 Mon Sep 17 00:00:00 2001
From: A <a@example.com>
Subject: [PATCH] thing

---
 a.py | 2 +-

diff --git a/a.py b/a.py
index 1..2 100644
--- a/a.py
+++ b/a.py
@@ -1 +1 @@
-a
+b
"""
MAIL += "-- \n2.39.5\n\n"  # format-patch signature (the space is part of it)


def test_preamble_and_signature_are_dropped() -> None:
    (fp,) = parse_patch(MAIL)
    assert fp.text.startswith("diff --git a/a.py") and fp.text.endswith("+b\n")
    assert split_patch(MAIL) == (fp.text, "")


PLAIN = """\
--- a/src/m.py\t2024-01-01 00:00:00.000000000 +0000
+++ b/src/m.py\t2024-01-02 00:00:00.000000000 +0000
@@ -1,2 +1,2 @@
 keep
-old
+new
--- /dev/null
+++ tests/test_m.py
@@ -0,0 +1 @@
+def test(): pass
"""


def test_plain_unified_diff() -> None:
    sections = parse_patch(PLAIN)
    assert [(s.old_path, s.new_path, s.status, s.git) for s in sections] == [
        ("src/m.py", "src/m.py", "M", False),
        (None, "tests/test_m.py", "A", False),
    ]
    src, tests = split_patch(PLAIN)
    assert "src/m.py" in src and "test_m" not in src and "test_m" in tests


HEADERS_ONLY = """\
diff --git a/my file.sh b/my file.sh
old mode 100644
new mode 100755
diff --git a/tests/empty b/tests/empty
new file mode 100644
index 0000000..e69de29
diff --git "a/caf\\303\\251 \\"q\\".py" "b/caf\\303\\251 \\"q\\".py"
deleted file mode 100644
index 1111111..0000000
Binary files "a/caf\\303\\251 \\"q\\".py" and /dev/null differ
diff --git a/img.png "b/na\\303\\257ve.png"
similarity index 90%
rename from img.png
rename to "na\\303\\257ve.png"
index 1111111..2222222 100644
GIT binary patch
delta 12
TcmZ?wbhEHbRA6A>U|;|M0rUVD

delta 12
TcmZ?wbhEHbRA6A>U|;|M0rUVD

diff --git a/old.txt b/tests/new.txt
similarity index 100%
copy from old.txt
copy to tests/new.txt
"""


def test_header_only_sections_quoting_binary_and_renames() -> None:
    got = [(s.old_path, s.new_path, s.status, s.binary) for s in parse_patch(HEADERS_ONLY)]
    assert got == [
        ("my file.sh", "my file.sh", "M", False),
        (None, "tests/empty", "A", False),
        ('café "q".py', None, "D", True),
        ("img.png", "naïve.png", "R", True),
        ("old.txt", "tests/new.txt", "C", False),
    ]
    assert files_in_patch(HEADERS_ONLY) == [
        "my file.sh",
        "tests/empty",
        'café "q".py',
        "img.png",
        "naïve.png",
        "old.txt",
        "tests/new.txt",
    ]
    src, tests = split_patch(HEADERS_ONLY)
    assert src + tests != HEADERS_ONLY  # reordered: tests moved out
    assert sorted((src + tests).splitlines()) == sorted(HEADERS_ONLY.splitlines())
    assert [s.path for s in parse_patch(tests)] == ["tests/empty", "tests/new.txt"]
    assert "TcmZ?wbhEHbRA6A>U|;|M0rUVD\n\ndelta 12" in src


def test_special_characters_in_content_do_not_split_lines() -> None:
    patch = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\r\n+b\x0c\u2028c\r\n"
    (fp,) = parse_patch(patch)
    assert fp.text == patch
    assert added_lines(patch) == ["b\x0c\u2028c\r"]


def test_missing_final_newline_and_truncated_hunk() -> None:
    patch = "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n+b"
    (fp,) = parse_patch(patch)
    assert fp.text == patch + "\n"
    assert split_patch("") == ("", "")
    assert split_patch("just some text\n") == ("", "")


def test_custom_predicate() -> None:
    src, tests = split_patch(PLAIN, is_test=lambda p: p.startswith("src/"))
    assert "src/m.py" in tests and "test_m" in src


def test_bytes_round_trip() -> None:
    raw = b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-caf\xe9\n+caf\xc3\xa9\n"
    text = decode_patch(raw)
    assert encode_patch(split_patch(text)[0]) == raw
    assert added_lines(text) == ["café"]


def _git_quote(name: bytes) -> str:
    """C-style quoting as git does with core.quotePath=true."""
    named = {7: "a", 8: "b", 9: "t", 10: "n", 11: "v", 12: "f", 13: "r", 34: '"', 92: "\\"}
    out = []
    for b in name:
        if b in named:
            out.append("\\" + named[b])
        elif b < 0x20 or b >= 0x7F:
            out.append(f"\\{b:03o}")
        else:
            out.append(chr(b))
    return '"' + "".join(out) + '"'


@given(st.binary(min_size=1, max_size=40).filter(lambda b: b"\0" not in b and b"/" not in b))
def test_unquote_inverts_git_quoting(name: bytes) -> None:
    quoted = _git_quote(name)
    got, rest = _unquote(quoted + " tail")
    assert got == name.decode("utf-8", "surrogateescape") and rest == " tail"
    header = f"diff --git {_git_quote(b'a/' + name)} {_git_quote(b'b/' + name)}\n"
    patch = header + "new file mode 100644\nindex 0000000..e69de29\n"
    (fp,) = parse_patch(patch)
    assert fp.new_path == name.decode("utf-8", "surrogateescape")
