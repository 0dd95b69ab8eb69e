"""The cheap checks that turn a change (a commit, a merged pull request) into a runtime
candidate before any sandbox work: tests and source both changed, not too large."""

from __future__ import annotations

from repogym.pipelines._harness.emit import code_lines
from repogym.pipelines._mined.inline_tests import (
    EXTRA_KEY,
    InlineTests,
    inline_test_changes,
    split_inline,
)
from repogym.pipelines.base import Candidate
from repogym.shipped.testfiles import is_test_path
from repogym.sources import Source
from repogym.sources.patches import FilePatch, parse_patch, split_patch
from repogym.spec import RuntimeOptions
from repogym.verify.file_kinds import is_release_notes


def split_sized(
    patch: str,
    files: list[FilePatch],
    options: RuntimeOptions,
    inline: dict[str, InlineTests] | None = None,
) -> tuple[tuple[str, str] | None, str | None]:
    """``((source_patch, test_patch), None)`` when the change's code part is a gold patch of an
    acceptable kind and size, else ``(None, drop reason)``. Release notes and changelogs ride
    along with the gold patch but are not the change. ``inline``: source files whose inline
    test modules changed (:mod:`.inline_tests`): their tests go to the test part."""
    inline = inline or {}
    code = [
        f
        for f in files
        if not is_test_path(f.path)
        and not is_release_notes(f.path)
        and (f.path not in inline or inline[f.path].code_changed)
    ]
    if not code:
        return None, "tests and release notes only"
    if all(f.binary for f in code):
        return None, "binary-only source change"
    if len(code) > options.max_source_files:
        return None, "too many source files"
    source_patch, test_patch = split_patch(patch)
    if inline:
        source_patch, test_patch = split_inline(source_patch, test_patch, inline)
    if len(code_lines(source_patch)) > options.max_patch_lines:
        return None, "gold patch too large"
    return (source_patch, test_patch), None


def candidate_from_change(
    source: Source,
    *,
    key: str,
    task_id: str,
    kind: str,
    base: str,
    head: str,
    title: str,
    body: str,
    reference: str,
    number: int | None,
    options: RuntimeOptions,
    created_at: str = "",
) -> tuple[Candidate | None, str | None]:
    """Cheap checks before any sandbox work: (candidate, None) or (None, drop reason)."""
    patch = source.diff(base, head)
    files = parse_patch(patch)
    if not files:
        return None, "empty change"
    inline = inline_test_changes(source, base, head, files)
    tests = [f for f in files if is_test_path(f.path)]
    sources = [
        f
        for f in files
        if not is_test_path(f.path) and (f.path not in inline or inline[f.path].code_changed)
    ]
    if not tests and not inline:
        return None, "no test change"
    if not sources:
        return None, "tests only"
    if not inline and not any(f.status != "D" for f in tests):
        return None, "no added or changed test"
    split, why = split_sized(patch, files, options, inline)
    if split is None:
        return None, why
    source_patch, test_patch = split
    return (
        Candidate(
            key=key,
            task_id=task_id,
            kind=kind,
            base=base,
            head=head,
            title=title,
            body=body,
            reference=reference,
            patch=patch,
            source_patch=source_patch,
            test_patch=test_patch,
            number=number,
            created_at=created_at,
            extra={EXTRA_KEY: {p: t.hidden for p, t in inline.items()}} if inline else {},
        ),
        None,
    )
