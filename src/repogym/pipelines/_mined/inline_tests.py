"""Unit tests that live inside source files (Rust's ``#[cfg(test)] mod tests { … }``), split out
of a change like test files: the gold patch keeps only the code, the new test items are hidden
and put back by the verifier into whatever file the agent leaves (``config.json`` ``splice``,
:func:`repogym.shipped.rust_tests.splice`)."""

from __future__ import annotations

from dataclasses import dataclass

from repogym.shipped import rust_tests
from repogym.shipped.testfiles import is_test_path
from repogym.sources import Source
from repogym.sources.patches import FilePatch, file_diff, parse_patch

EXTRA_KEY = "inline_tests"
"""Where a candidate keeps its inline tests (``Candidate.extra``): ``{path: hidden test items}``."""


@dataclass(frozen=True)
class InlineTests:
    """One source file whose change touches its inline test items."""

    path: str
    base: str | None
    """The file at the base (None: the change adds it)."""
    gold: str
    """What the gold patch makes of it: the head's code with the base's test items."""
    hidden: str
    """The head's test items (what the verifier splices in)."""

    @property
    def code_changed(self) -> bool:
        return self.gold != (self.base or "")


def _text(source: Source, ref: str, path: str) -> str | None:
    try:
        return source.read_file(ref, path).decode("utf-8")
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return None


def inline_test_changes(
    source: Source, base: str, head: str, files: list[FilePatch]
) -> dict[str, InlineTests]:
    """The changed Rust source files (added or modified, not test files) whose top-level test
    items (``#[cfg(test)] mod tests``, ``#[test]`` functions) change; a file the scanner cannot
    read stays plain source."""
    out: dict[str, InlineTests] = {}
    for fp in files:
        if fp.binary or fp.status not in ("A", "M") or not fp.path.endswith(".rs"):
            continue
        if is_test_path(fp.path):
            continue
        new = _text(source, head, fp.path)
        old = None if fp.status == "A" else _text(source, base, fp.path)
        if new is None or (old is None and fp.status != "A"):
            continue
        try:
            parts = rust_tests.split(old, new)
        except rust_tests.RustSyntaxError:
            continue
        if parts is not None:
            out[fp.path] = InlineTests(fp.path, old, parts[0], parts[1])
    return out


def split_inline(
    source_patch: str, test_patch: str, inline: dict[str, InlineTests]
) -> tuple[str, str]:
    """The source and test patches with each inline-test file's section replaced: the source
    part changes the file into its gold text (no section when only its tests changed), the test
    part puts the head's test items into the base file (what the verifier's splice does
    before the fix). Both still apply to the base on their own."""
    source: list[str] = []
    for fp in parse_patch(source_patch):
        if fp.path not in inline:
            source.append(fp.text)
            continue
        item = inline[fp.path]
        if item.code_changed:
            source.append(file_diff(fp.path, item.base, item.gold))
    tests = [test_patch] if test_patch else []
    for path, item in sorted(inline.items()):
        before = rust_tests.splice(item.base or "", item.hidden)
        tests.append(file_diff(path, item.base, before))
    return "".join(source), "".join(tests)
