"""``code_instruct``: implement a function whose body was removed, graded by the repository's
own tests, with no LLM.

Each function of the revision that the test suite calls, has a docstring (``require_docstring``)
and at least ``min_statements`` statements gets its body replaced by its docstring and
``raise NotImplementedError`` (signature, decorators and type hints kept: :mod:`._synthesis.ops`).
The tests that then fail are the fail-to-pass tests; the instruction names the function and its
file, quotes its docstring and describes the behaviour the failing tests check. The removed
body is the gold patch (it lives only in ``solution/``). See :mod:`._synthesis.harness` for the
harness.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from repogym.pipelines._instructions.text import Composed, Evidence, compose_synthesized
from repogym.pipelines._synthesis.harness import (
    WORKDIR,
    SynthEdit,
    SynthHarness,
    SynthPipeline,
    round_robin,
    synth_candidate,
    synth_sources,
)
from repogym.pipelines._synthesis.ops import FunctionInfo, python_functions, stub_function
from repogym.pipelines.base import Candidate, HarnessContext
from repogym.sources import Source
from repogym.spec import CodeInstructOptions


def compose_instruction(cand: Candidate, edit: SynthEdit, evidence: Evidence) -> Composed:
    """The instruction of a kept stub: the function, its file and docstring, and the behaviour
    the failing tests check."""
    doc = str(cand.extra.get("docstring") or "").strip()
    body = [
        f"The body of `{edit.function}` in `{edit.path}` is missing: it raises "
        "`NotImplementedError`. Implement it so that it does what its signature and "
        "docstring describe, and so that the rest of the project works with it again. Keep "
        "its signature as it is.",
    ]
    if doc:
        quoted = "\n".join(f"> {line}".rstrip() for line in doc.splitlines())
        body += ["", "Its docstring:", "", quoted]
    head = f"Implement `{edit.function}`"
    return compose_synthesized(head, "\n".join(body), evidence, WORKDIR)


class CodeInstruct(SynthPipeline):
    """Local clones, or GitHub/GitLab repositories through a cached clone (default branch)."""

    name = "code_instruct"
    version = "1"
    options_model = CodeInstructOptions

    def candidates(
        self, source: Source, options: CodeInstructOptions, slug: str, rev: str
    ) -> Iterator[Candidate | tuple[str, str]]:
        sha = source.resolve(rev)
        per_file: list[list[Candidate]] = []
        for item in synth_sources(source, sha, options):
            if len(item) == 3:
                yield f"impl:{item[0]}", item[2]
                continue
            path, text = item[0], item[1]
            assert text is not None
            found: list[Candidate] = []
            for fn in python_functions(text, path):
                key = f"impl:{path}:{fn.qualname}"
                why = _not_a_candidate(fn)
                if why:
                    yield key, why
                    continue
                if options.require_docstring and not fn.docstring:
                    yield key, "no docstring"
                    continue
                if fn.statements < options.min_statements:
                    yield key, "function too small"
                    continue
                new_text = stub_function(text, path, fn.qualname, fn.line)
                if new_text is None:
                    yield key, "cannot be stubbed"
                    continue
                ident = hashlib.sha256(f"{path}\0{fn.qualname}\0{text}".encode()).hexdigest()
                edit = SynthEdit(
                    path=path,
                    function=fn.qualname,
                    line=fn.line,
                    kind="stub",
                    new_text=new_text,
                    description=f"body of {fn.qualname} removed",
                )
                cand = synth_candidate(
                    slug=slug,
                    sha=sha,
                    kind="code_instruct",
                    tag="impl",
                    edit=edit,
                    original=text,
                    ident=ident,
                )
                cand.extra["docstring"] = fn.docstring or ""
                found.append(cand)
            per_file.append(found)
        yield from round_robin(per_file)

    def harness(self, ctx: HarnessContext) -> SynthHarness:
        return SynthHarness(ctx, compose_instruction)


def _not_a_candidate(fn: FunctionInfo) -> str | None:
    if fn.trivial:
        return "function body already trivial"
    if fn.is_property or fn.is_abstract or fn.is_overload:
        return "property, abstract or overload"
    return None


PIPELINE = CodeInstruct()
