"""Canary candidates for Go (``go test``), Rust (``cargo test``), JUnit (Maven's Surefire) and
GoogleTest (``ctest`` with ``gtest_discover_tests``) test functions.

The same contract as :mod:`.canaries` (a copy of a graded test with one expectation
contradicted, its name left open for the judge): only finding the tests and the expectation
is per language. Both languages are written in their formatter's layout (``gofmt``,
``rustfmt``), which this reads by lines:

* Go: a top-level ``func TestX(t *testing.T) {`` whose body ends at the next line that is
  exactly ``}``; the expectation is the last literal of a comparison line
  (``if got != 3 {``), a ``want``/``expected`` assignment, a testify ``Equal(t, 3, …)``, or a
  row of a table-driven test's cases (``{"1.2", true},`` or a field on its own line; a
  ``true``/``false`` is flipped when the row has no other literal). A changed row that leaves
  its test passing is no canary: the gate's calibration drops it.
* Rust: a ``#[test]`` function (``#[should_panic]`` ones are left alone) whose body ends at the
  next ``}`` at its own indentation; the expectation is the last literal of an
  ``assert_eq!``/``assert!`` line.
* Java: a JUnit 4/5 ``@Test`` method ``void name() {`` ending at the next ``}`` at its own
  indentation (nested classes too); the expectation is the first literal of an
  ``assertEquals(expected, actual)``, else the last of an ``assertThat``/``assertTrue``/
  ``isEqualTo`` line; ids ``pkg.Class#name``.
* C++: a top-level GoogleTest ``TEST(Suite, Name) {`` / ``TEST_F`` ending at the next line that
  is exactly ``}``; the expectation is the last literal of an ``EXPECT_*``/``ASSERT_*`` line.
  The id is ``Suite.Name`` (tests registered per binary with ``add_test`` give none: a canary
  there would be one more failure of the whole binary).

Numbers are changed upwards only (``0`` → ``1``: a ``-1`` would not compile for an unsigned
type); strings as in :mod:`.canaries`. Lines with escapes, raw strings, runes, chars or
comments are left alone. A candidate that does not compile breaks only the calibration run,
which then keeps no canaries (the gate's fallback), never the task.
"""

from __future__ import annotations

import re
from typing import Any

_GO_TEST = re.compile(r"^func (Test[A-Z0-9_]\w*)\(\s*\w+\s+\*testing\.T\s*\)\s*\{\s*$")
_GO_EXPECT = re.compile(
    r"(?:!=|==)\s*\S+\s*(?:\|\||&&|\{)|\b(?:want|expected|exp)\w*\s*:?=|\bEqual(?:Values)?\(\s*t\s*,"
    # a row (or a row's field) of a table-driven test's cases: `{"1.2", true},`, `"1.2",`
    r'|^\s*(?:\{.*\}|"[^"]*"|\d+(?:\.\d+)?|true|false)\s*,\s*$'
)
_RUST_ATTR = re.compile(r"^(\s*)#\[test\]\s*$")
_RUST_FN = re.compile(
    r"^(\s*)(?:pub\s+)?(?:async\s+)?fn\s+([a-z_]\w*)\s*\(\s*\)\s*(?:->[^{]*)?\{\s*$"
)
_RUST_EXPECT = re.compile(r"\bassert(?:_eq)?!\(")
_JUNIT_ATTR = re.compile(r"^(\s*)@(?:org\.junit\.(?:jupiter\.api\.)?)?Test\s*$")
_JAVA_METHOD = re.compile(
    r"^(\s*)(?:public\s+|protected\s+)?void\s+(\w+)\s*\(\s*\)\s*(?:throws\s+[\w., ]+)?\{\s*$"
)
_JUNIT_EXPECT = re.compile(
    r"\bassert(?:Equals|That|True|False|Same|ArrayEquals)\s*\(|\.isEqualTo\("
)
_GTEST = re.compile(r"^TEST(?:_F)?\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{\s*$")
_GTEST_EXPECT = re.compile(r"\b(?:EXPECT|ASSERT)_[A-Z_]+\(")
_BOOLEAN = re.compile(r"(?<![\w.])(?:true|false)(?![\w.])")
_LITERAL = re.compile(r'"[^"\\]*"|(?<![\w.])\d+(?:\.\d+)?(?![\w.])')


def _expected_literal(line: str) -> tuple[int, int, str] | None:
    """``(start, end, replacement)`` of the line's expected value: the first plain literal
    of a JUnit ``assertEquals(expected, actual)``, else the line's last plain literal."""
    if any(mark in line for mark in ("\\", "`", "'", "//", "/*", 'r"', "r#")):
        return None
    found = list(_LITERAL.finditer(line))
    junit = line.find("assertEquals(")
    if junit >= 0:
        found = [m for m in found if m.start() > junit][:1]
    if not found:
        flag = list(_BOOLEAN.finditer(line)) if junit < 0 else []
        if not flag:
            return None
        m = flag[-1]
        return m.start(), m.end(), "false" if m.group(0) == "true" else "true"
    m = found[-1]
    text = m.group(0)
    if text.startswith('"'):
        inner = text[1:-1]
        new = f'"{inner}{inner[-1]}"' if inner else '"0"'
    elif "." in text:
        new = repr(float(text) + 1.0)
    else:
        new = str(int(text) + 1)
    return m.start(), m.end(), new


Block = tuple[int, int, str, int, int]
"""``(first line, line after the last, test name, line of the name, its column)``."""


def _top_level(lines: list[str], header: re.Pattern[str], group: int) -> list[Block]:
    """Blocks opened by a ``header`` line at column 0 and closed by the next line that is
    exactly ``}`` (gofmt's and clang-format's layout of top-level functions); the name is
    the header's ``group``."""
    out = []
    for i, line in enumerate(lines):
        m = header.match(line)
        if not m:
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j] == "}"), None)
        if end is not None:
            out.append((i, end + 1, m[group], i, m.start(group)))
    return out


def go_blocks(lines: list[str]) -> list[Block]:
    """Every top-level Go test function."""
    return _top_level(lines, _GO_TEST, 1)


def _attributed(
    lines: list[str], attr: re.Pattern[str], head: re.Pattern[str], prefix: str, veto: str
) -> list[Block]:
    """Functions marked by an ``attr`` line, with more lines starting with ``prefix`` (other
    attributes or annotations) before the ``head`` line at the same indentation, ending at
    the next ``}`` at that indentation; one of those lines holding ``veto`` skips it."""
    out = []
    for i, line in enumerate(lines):
        a = attr.match(line)
        if not a:
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip().startswith(prefix) and veto not in lines[j]:
            j += 1
        m = head.match(lines[j]) if j < len(lines) else None
        if not m or m[1] != a[1]:
            continue
        close = m[1] + "}"
        end = next((k for k in range(j + 1, len(lines)) if lines[k] == close), None)
        if end is not None:
            out.append((i, end + 1, m[2], j, m.start(2)))
    return out


def rust_blocks(lines: list[str]) -> list[Block]:
    """Every ``#[test]`` function, from its attribute line (``#[should_panic]`` ones are left
    alone: a contradicted expectation in them may still panic)."""
    return _attributed(lines, _RUST_ATTR, _RUST_FN, "#[", "should_panic")


def gtest_blocks(lines: list[str]) -> list[Block]:
    """Every top-level GoogleTest ``TEST``/``TEST_F`` (the name is the test's, after the suite;
    parameterised ``TEST_P`` tests are left alone: their ids carry instantiation names)."""
    return _top_level(lines, _GTEST, 2)


def junit_blocks(lines: list[str]) -> list[Block]:
    """Every JUnit ``@Test void name() {`` method (from its annotation; other annotations
    between them are kept, parameterised tests have another annotation and are left alone)."""
    return _attributed(lines, _JUNIT_ATTR, _JAVA_METHOD, "@", "\0")


_BLOCKS = {"go": go_blocks, "cargo": rust_blocks, "ctest": gtest_blocks, "maven": junit_blocks}
_EXPECT = {"go": _GO_EXPECT, "cargo": _RUST_EXPECT, "ctest": _GTEST_EXPECT, "maven": _JUNIT_EXPECT}


def _owners(name: str, ids: list[tuple[str, str]], runner: str) -> list[tuple[str, str]]:
    if runner == "maven":  # Surefire: pkg.Class#name
        return [(t, o) for t, o in ids if t.endswith("#" + name)]
    if runner == "ctest":  # gtest_discover_tests names tests Suite.Name
        return [(t, o) for t, o in ids if t.rsplit(".", 1)[-1] == name and "/" not in t]
    if runner == "go":
        return [(t, o) for t, o in ids if t.rsplit("::", 1)[-1].split("/", 1)[0] == name]
    return [(t, o) for t, o in ids if t == name or t.endswith("::" + name)]


def blocks(text: str, runner: str) -> list[Block]:
    """The file's test functions (see :data:`Block`)."""
    return _BLOCKS[runner](text.split("\n"))


def owners(name: str, ids: list[str], runner: str) -> list[str]:
    """The graded ids a test function called ``name`` gives (its subtests too)."""
    return [t for t, _o in _owners(name, [(t, "") for t in ids], runner)]


def test_names(text: str, runner: str) -> list[str]:
    """The names of the file's test functions (the vocabulary of a canary's name)."""
    return [b[2] for b in _BLOCKS[runner](text.split("\n"))]


def candidates(
    rel: str, text: str, ids: list[tuple[str, str]], runner: str
) -> list[dict[str, Any]]:
    """Candidate fields but the names (see :class:`.canaries.Candidate`) for the graded
    tests of one file; ``ids``: (id, origin) of the graded tests."""
    if "\r" in text:
        return []
    lines = text.split("\n")
    blocks = _BLOCKS[runner](lines)
    expect = _EXPECT[runner]
    out: list[dict[str, Any]] = []
    for start, end, name, name_line, name_col in blocks:
        owners = _owners(name, ids, runner)
        if not owners:
            continue
        test_id, origin = min(owners, key=lambda to: to[1] != "f2p")
        for k in range(start, end):
            if not expect.search(lines[k]):
                continue
            change = _expected_literal(lines[k])
            if change is None:
                continue
            a, b, new = change
            body = lines[start:end]
            body[k - start] = lines[k][:a] + new + lines[k][b:]
            first = body[name_line - start]
            body[name_line - start] = first[:name_col] + "\x00" + first[name_col + len(name) :]
            out.append(
                {
                    "file": rel,
                    "source": test_id,
                    "title": name,
                    "before": start,
                    "after": end,
                    "code": "\n".join(body) + "\n",
                    "change": f"{lines[k][a:b]} -> {new}",
                    "origin": origin,
                }
            )
    return out
