"""``bug_synth``: procedural bugs the repository's own tests catch, with no LLM.

Each function of the revision that the test suite calls gets procedural mutants (comparison and
boolean operators, off-by-one bounds, removed guards and statements, swapped arguments, changed
constants, wrong returns, exception types: :mod:`._synthesis.mutants`). Go, Rust, Java and C/C++
repositories get the operators that carry over (:mod:`._synthesis.braced_mutants`); their suites
are not traced (Go's line coverage stands in), and each mutant must first pass the language's
own compiler (the recipe's compile check: :mod:`._synthesis.native`). A mutant is kept when it
compiles, breaks at least one test, breaks at most ``max_break_share`` of the tests in scope,
and does not break exactly the tests another mutant of the same function broke. The repository
with the mutant is the task's environment; undoing it is the gold patch; the broken tests are
the fail-to-pass tests. The instruction names the failing behaviour (from the tests and their
failures), never the mutation. See :mod:`._synthesis.harness` for the harness.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

from repogym.bootstrap.detect import guess_language
from repogym.bootstrap.native.java import built_folders
from repogym.pipelines._instructions.text import Composed, Evidence, compose_synthesized
from repogym.pipelines._synthesis.braced_mutants import braced_mutants
from repogym.pipelines._synthesis.harness import (
    WORKDIR,
    SynthEdit,
    SynthHarness,
    SynthPipeline,
    round_robin,
    synth_candidate,
    synth_sources,
)
from repogym.pipelines._synthesis.mutants import python_mutants
from repogym.pipelines.base import Candidate, HarnessContext
from repogym.sources import Source
from repogym.spec import BugSynthOptions

EXTENSIONS = {
    "python": (".py",),
    "go": (".go",),
    "rust": (".rs",),
    "java": (".java",),
    "c": (".c", ".h"),
    "cpp": (".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx", ".h", ".c"),
}
"""The files mutated per repository language (the compiled ones through
:mod:`._synthesis.braced_mutants`)."""

BODY = (
    "Some of the project's tests fail at this revision. The behaviour they check is broken in "
    "the code, not in the tests: find the cause in the source and fix it. Keep every other "
    "behaviour as it is."
)


def compose_instruction(cand: Candidate, edit: SynthEdit, evidence: Evidence) -> Composed:
    """The instruction of a kept bug: the failing behaviour (never the mutation)."""
    head = f"Fix {evidence.groups[0].name}" if evidence.groups else "Fix the failing tests"
    return compose_synthesized(head, BODY, evidence, WORKDIR)


class BugSynth(SynthPipeline):
    """Local clones, or GitHub/GitLab repositories through a cached clone (default branch)."""

    name = "bug_synth"
    version = "1"
    options_model = BugSynthOptions

    def candidates(
        self, source: Source, options: BugSynthOptions, slug: str, rev: str
    ) -> Iterator[Candidate | tuple[str, str]]:
        sha = source.resolve(rev)
        extensions, folders = source_scope(source, sha)
        per_function: list[list[Candidate]] = []
        for item in synth_sources(source, sha, options, extensions, folders):
            if len(item) == 3:
                yield f"bug:{item[0]}", item[2]
                continue
            path, text = item[0], item[1]
            assert text is not None
            groups: dict[tuple[str, int], list[Candidate]] = {}
            make = python_mutants if path.endswith(".py") else braced_mutants
            mutants = make(
                text,
                path,
                per_function=options.max_per_function,
                operators=options.operators or None,
            )
            for m in mutants:
                edit = SynthEdit(
                    path=path,
                    function=m.function,
                    line=m.function_line,
                    kind=m.operator,
                    new_text=m.text,
                    description=m.description,
                    edit_line=m.line,
                )
                groups.setdefault((m.function, m.function_line), []).append(
                    synth_candidate(
                        slug=slug,
                        sha=sha,
                        kind="bug_synth",
                        tag="bug",
                        edit=edit,
                        original=text,
                        ident=m.mutation_id,
                    )
                )
            per_function.extend(groups.values())
        yield from round_robin(per_function)

    def harness(self, ctx: HarnessContext) -> SynthHarness:
        return SynthHarness(ctx, compose_instruction, native=True)


def source_scope(source: Source, sha: str) -> tuple[tuple[str, ...], list[str] | None]:
    """``(extensions, folders)`` of the source files ``bug_synth`` mutates at ``sha``: those of
    the repository's language (:func:`repogym.bootstrap.detect.guess_language` on a snapshot),
    Python by default; for Java, the folders of the Maven modules the build compiles
    (:func:`repogym.bootstrap.native.java.built_folders`; None: no restriction)."""
    with tempfile.TemporaryDirectory(prefix="repogym-lang-") as tmp:
        repo = Path(tmp) / "repo"
        source.export_snapshot(sha, repo)
        language, _ = guess_language(repo)
        folders = built_folders(repo) if language == "java" else None
    return EXTENSIONS.get(language or "python", (".py",)), folders


PIPELINE = BugSynth()
