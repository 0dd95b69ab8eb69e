"""The harness of the synthesized-task pipelines (``bug_synth``, ``code_instruct``): tasks made by
editing the repository at one revision instead of mined from its history.

Once per run (:class:`SharedBaseline`, shared by every candidate; ``equivalence_tests`` uses it
too, with its own traced run): the snapshot at the revision, its environment recipe and build, a
verifier staged for the whole suite, the suite's stable results (``1 + reruns`` runs) and which
functions the suite calls (one traced run, ``shipped/scripts/trace_calls.py``). Per candidate — one
edit of one file, carried in ``Candidate.extra`` (:class:`SynthEdit`): a function the suite
never calls is dropped at once; otherwise the edit is written into a fresh session of the shared
build and the suite runs through the verifier. The tests that passed before and fail now are the
task's fail-to-pass tests; the others that still pass are its pass-to-pass tests (the whole
suite, or, when the suite is slower than ``suite_budget``, every test file whose imports reach
the edited file). An edit that breaks no test, or more than ``max_break_share`` of them, or
exactly the tests another edit of the same function broke, is dropped. A kept edit becomes a
task: the edited snapshot is the environment, the reverse edit is the gold patch, the test files
are restored by the verifier, and the instruction comes from the evidence (the failing tests and
their messages) — never from the edit. Then the verify gate, as for mined tasks.
"""

from __future__ import annotations

import difflib
import json
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.bootstrap import Recipe, UnsupportedRepo, bootstrap
from repogym.bootstrap.commit import read_commit
from repogym.bootstrap.native.compile import compile_command
from repogym.bootstrap.pin import CONSTRAINTS_NAME, pinned_dockerfile
from repogym.pipelines._harness.emit import (
    EmitInput,
    VerifierInput,
    audit_keys,
    integrity_key,
    stage_verifier,
    update_config,
    write_environment,
    write_file,
    write_task,
)
from repogym.pipelines._harness.frame import RunFailed, TaskHarness
from repogym.pipelines._harness.runtime import PASSED, source_manifest, target_ids
from repogym.pipelines._harness.verifier_runs import build_pinned, probe, verifier_runs
from repogym.pipelines._instructions.evidence import group_tests
from repogym.pipelines._instructions.text import Composed, Evidence
from repogym.pipelines._selection.select import find_test_files, tests_exercising
from repogym.pipelines._synthesis.native import (
    NATIVE_RUNNERS,
    compile_error,
    inline_tests,
    line_coverage,
    under_test,
)
from repogym.pipelines._synthesis.ops import called_keys, trace_script
from repogym.pipelines.base import Candidate, HarnessContext, Outcome
from repogym.sandbox import BuildError, BuiltEnvironment, EnvironmentSpec, SandboxError, Session
from repogym.shipped import infra, tamper
from repogym.shipped.testfiles import is_test_source
from repogym.taskdir import update_task_toml
from repogym.taskdir.instruction_checks import underspecified

WORKDIR = "/workspace"
SURVIVED = "no test fails (the edit survives)"
TRACE_OUT = "/tmp/repogym-calls.json"


@dataclass(frozen=True)
class SynthEdit:
    """One edit of one file: what a synthesized candidate is (``Candidate.extra["edit"]``)."""

    path: str
    function: str
    line: int
    """The function's line as the tracer reports it (``co_firstlineno``)."""
    kind: str
    """The operator (``bug_synth``) or ``stub`` (``code_instruct``)."""
    new_text: str
    description: str
    """For logs and ``solution/edit.json``; never shown to the agent."""
    edit_line: int = 0
    """The first line the edit changes (0: unknown); checked against the suite's line
    coverage where there is one (Go)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "function": self.function,
            "line": self.line,
            "kind": self.kind,
            "description": self.description,
        }


def gold_patch(path: str, edited: str, original: str) -> str:
    """The unified diff that turns the edited file back into the original (``git apply``)."""
    lines = difflib.unified_diff(
        edited.splitlines(keepends=True),
        original.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
        n=3,
    )
    text = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
    return f"diff --git a/{path} b/{path}\n" + text if text else ""


@dataclass
class Baseline:
    """What every candidate of the run shares."""

    snapshot: Path
    recipe: Recipe
    built: BuiltEnvironment
    spec: EnvironmentSpec
    tests: Path
    """The verifier staged for the evaluation runs (the shared build's key, whole suite)."""
    restore: dict[str, bytes]
    test_files: list[str]
    passing: set[str]
    called: set[tuple[str, int]] | None
    """(file, line) of every function the suite called; None when tracing failed (no filter)."""
    constraints: str | None
    suite_seconds: float
    splice: list[str] = field(default_factory=list)
    """Source files whose inline test items the verifier splices back (Rust); their hidden
    copy in ``restore`` is those items."""
    compile: str | None = None
    """The compile check an edit must pass before its tests run (compiled languages)."""
    covered: dict[str, set[int]] | None = None
    """Lines the suite ran, per file (Go's cover profile); None: no line coverage."""
    seen: dict[tuple[str, str, frozenset[str]], str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


ComposeInstruction = Callable[[Candidate, SynthEdit, Evidence], Composed]
"""How a pipeline words the instruction of a kept candidate (``bug_synth``, ``code_instruct``)."""
TraceCalls = Callable[[BuiltEnvironment, EnvironmentSpec, Recipe], set[tuple[str, int]] | None]
"""One traced run of the suite in the shared build: (file, line) of the functions it called,
or None when the traced run failed."""


class SharedBaseline:
    """The revision every candidate of a run edits, computed once on first use and shared by
    them (thread-safe): its snapshot, recipe and build, a verifier staged for the whole suite,
    the suite's stable results and the functions it calls (:class:`Baseline`).

    A failure (no recipe, no passing test, a sandbox error) is kept and raised again for
    every later candidate: they all share the one build."""

    def __init__(
        self, ctx: HarnessContext, trace: TraceCalls | None = None, native: bool = False
    ) -> None:
        self.ctx = ctx
        self.trace = trace
        """The traced run (None: :meth:`trace_calls`; ``equivalence_tests`` records the calls'
        arguments in the same run)."""
        self.native = native
        """Whether compiled-language repositories are taken too (``bug_synth``): Go, Rust,
        Java (Maven) and C/C++ (CTest), whose suites are not traced (Go's line coverage
        stands in) and whose edits must compile first."""
        self.folder = Path(tempfile.mkdtemp(prefix="repogym-synth-"))
        """Scratch space of the run (the shared build context and verifier)."""
        weakref.finalize(self, shutil.rmtree, str(self.folder), True)
        self._lock = threading.Lock()
        self._base: Baseline | RunFailed | None = None

    def get(self, rev: str) -> Baseline:
        """The baseline at ``rev`` (computed by the first caller); RunFailed when it failed."""
        with self._lock:
            if self._base is None:
                try:
                    self._base = self._compute(rev)
                except RunFailed as exc:
                    self._base = exc
                except (BuildError, SandboxError) as exc:
                    # every candidate shares the one build: one failure drops them all, and a
                    # later candidate must not build again over the half-made folder
                    detail = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
                    self._base = RunFailed("sandbox error", detail)
            if isinstance(self._base, RunFailed):
                raise RunFailed(self._base.reason, self._base.detail)
            return self._base

    def _compute(self, rev: str) -> Baseline:
        ctx, opts = self.ctx, self.ctx.options
        context = self.folder / "environment"
        snapshot = context / "repo"
        ctx.source.export_snapshot(rev, snapshot)
        commit = read_commit(ctx.source.path, rev, snapshot)
        try:
            recipe = bootstrap(
                snapshot, repo_id=ctx.repo_label, ref=rev, check=False, commit=commit
            ).recipe
        except UnsupportedRepo as exc:
            raise RunFailed("unsupported repository", str(exc)) from None
        native = self.native and recipe.runner in NATIVE_RUNNERS
        if recipe.runner not in ("pytest", "unittest") and not native:
            wanted = "a Python repository tested with pytest or unittest"
            if self.native:
                wanted += ", or a Go, Rust, Java (Maven) or C/C++ (CTest) one"
            raise RunFailed(
                "unsupported repository",
                f"{ctx.pipeline} needs {wanted} (this one: {recipe.language}, {recipe.runner})",
            )
        key = integrity_key(f"baseline:{ctx.repo_label}@{rev}")
        spec = EnvironmentSpec(
            context_dir=context,
            workdir=recipe.workdir,
            network_mode="no-network",
            memory_mb=4096,
            storage_mb=4096,
        )
        built = build_pinned(ctx.backend, recipe, context, spec, key, self.folder / "build.log")
        constraints_file = context / CONSTRAINTS_NAME
        constraints = constraints_file.read_text() if constraints_file.is_file() else None
        test_files = find_test_files(snapshot, recipe.runner)
        # A crate may keep every test inside its source files.
        splice = inline_tests(snapshot, ctx.source.list_files(rev)) if native else {}
        if not test_files and not splice:
            raise RunFailed("no test files", f"no {recipe.runner} test files found")
        restore = {rel: (snapshot / rel).read_bytes() for rel in test_files}
        restore.update((rel, hidden.encode("utf-8")) for rel, hidden in splice.items())
        tests = self.folder / "tests"
        stage_verifier(
            tests,
            VerifierInput(
                recipe=recipe,
                command=recipe.test_command,
                restore=restore,
                delete=[],
                infra=_infra(snapshot, restore),
                sources=source_manifest(snapshot),
                integrity_key=key,
                reward_mode=opts.reward,
                splice=sorted(splice),
            ),
        )
        with ctx.backend.start(built, spec) as session:
            session.mount(tests, "/tests")
            probe(session, recipe, tests, snapshot)
            runs, seconds = verifier_runs(
                session, recipe, tests, 1 + opts.reruns, "baseline", opts.test_timeout
            )
        stable = _stable([r["tests"] for r in runs])
        passing = {t for t, s in stable.items() if s == PASSED}
        if not passing:
            raise RunFailed("no test passes at the revision")
        update_config(tests, collected=runs[0].get("collected"), audit_allowed=audit_keys(runs))
        trace = self.trace or self.trace_calls
        called = None if native else trace(built, spec, recipe)
        covered = (
            line_coverage(ctx.backend, built, spec, recipe, snapshot, opts.test_timeout)
            if native
            else None
        )
        return Baseline(
            snapshot=snapshot,
            recipe=recipe,
            built=built,
            spec=spec,
            tests=tests,
            restore=restore,
            test_files=test_files,
            passing=passing,
            called=called,
            constraints=constraints,
            suite_seconds=seconds / max(1, len(runs)),
            splice=sorted(splice),
            compile=compile_command(recipe) if native else None,
            covered=covered,
        )

    def trace_calls(
        self, built: BuiltEnvironment, spec: EnvironmentSpec, recipe: Recipe
    ) -> set[tuple[str, int]] | None:
        """The functions one run of the suite calls, or None when the traced run fails."""
        with self.ctx.backend.start(built, spec) as session:
            session.write("/tmp/repogym-trace.py", trace_script())
            data, _ = run_wrapped_suite(
                session,
                recipe,
                "/tmp/repogym-trace.py",
                TRACE_OUT,
                [],
                self.ctx.options.test_timeout,
            )
        return None if data is None else called_keys(data)


def edited_context(
    cand: Candidate, edit: SynthEdit, base: Baseline, work: Path
) -> tuple[Path, str]:
    """``work/environment``: the baseline's snapshot with ``edit`` applied and its
    Dockerfile (pinned when the baseline has constraints); and the task's integrity key."""
    recipe = base.recipe
    context = work / "environment"
    repo = context / "repo"
    shutil.copytree(base.snapshot, repo, symlinks=True)
    (repo / edit.path).write_text(edit.new_text, encoding="utf-8")
    key = integrity_key(cand.task_id)
    if base.constraints is not None:
        write_file(context / CONSTRAINTS_NAME, base.constraints)
        write_environment(context, recipe, key, pinned_dockerfile(recipe.dockerfile))
    else:
        write_environment(context, recipe, key)
    return context, key


class SynthHarness(TaskHarness):
    """Evaluates the candidates of ``bug_synth`` and ``code_instruct`` (one edit each) against
    the shared baseline (thread-safe): the suite with the edit applied; the tests it breaks
    are the task's fail-to-pass tests. ``compose_instruction`` is the pipeline's wording."""

    def __init__(
        self, ctx: HarnessContext, compose_instruction: ComposeInstruction, native: bool = False
    ) -> None:
        super().__init__(ctx)
        self.baseline = SharedBaseline(ctx, native=native)
        self.compose_instruction = compose_instruction

    # ----------------------------------------------------------------------------- evaluate

    def _evaluate(self, cand: Candidate, work: Path, outcome: Outcome) -> None:
        edit: SynthEdit = cand.extra["edit"]
        base = self.baseline.get(cand.head)
        if base.called is not None and (edit.path, edit.line) not in base.called:
            return self._drop(outcome, "function not called by the tests")
        ran = base.covered.get(edit.path, set()) if base.covered is not None else None
        if ran is not None and edit.edit_line and edit.edit_line not in ran:
            return self._drop(outcome, "code not run by the tests")
        recipe, opts = base.recipe, self.options
        if base.suite_seconds > opts.suite_budget > 0 and base.compile is None:
            reach = tests_exercising(base.snapshot, [edit.path], base.test_files)
            selected = sorted(set(reach))
            ids = target_ids(recipe.runner, selected)
            if not ids:
                return self._drop(outcome, "no test file imports the edited file")
            command, scope = recipe.test_command_for(ids), "targeted"
        else:
            selected, command, scope = [], recipe.test_command, "suite"
        eval_tests = work / "eval-tests"
        shutil.copytree(base.tests, eval_tests, symlinks=True)
        update_config(eval_tests, command=command)
        self._progress(cand, "tests_before")
        with self.backend.start(base.built, base.spec) as session:
            session.mount(eval_tests, "/tests")
            session.write(f"{recipe.workdir}/{edit.path}", edit.new_text)
            if base.compile is not None:
                error = compile_error(session, recipe, base.compile, self._edit_timeout(base))
                if error is not None:
                    return self._drop(outcome, "does not compile", error)
            runs, seconds = verifier_runs(
                session, recipe, eval_tests, 1 + opts.reruns, "edited", self._edit_timeout(base)
            )
        outcome.test_seconds += seconds
        stable = _stable([r["tests"] for r in runs])
        in_scope = base.passing if scope == "suite" else _in_files(base.passing, selected)
        broken = sorted(t for t in in_scope if stable.get(t) != PASSED)
        flaky = sorted(_flaky([r["tests"] for r in runs]) & in_scope)
        broken = [t for t in broken if t not in flaky]
        if not broken:
            return self._drop(outcome, SURVIVED)
        if len(broken) > opts.max_break_share * len(in_scope):
            detail = f"{len(broken)} of {len(in_scope)} tests fail"
            return self._drop(outcome, "breaks too much of the suite", detail)
        signature = (edit.path, edit.function, frozenset(broken))
        with base.lock:
            twin = base.seen.get(signature)
            if twin is None:
                base.seen[signature] = cand.task_id
        if twin is not None:
            return self._drop(outcome, "same failures as another edit", twin)
        f2p = broken
        p2p = sorted(t for t in in_scope if t not in set(broken) and t not in set(flaky))
        failures: dict[str, str] = {}
        for result in runs:
            for test_id, message in (result.get("failures") or {}).items():
                failures.setdefault(test_id, message)
        self._emit(
            cand,
            edit,
            base,
            work,
            outcome,
            f2p,
            p2p,
            command,
            scope,
            selected,
            failures,
            audit=audit_keys(runs),
        )

    def _edit_timeout(self, base: Baseline) -> float:
        """An edit often makes a loop endless: its run gets ten times the suite's time (at
        least a minute), not the whole ``test_timeout``."""
        return min(self.options.test_timeout, max(60.0, 10 * base.suite_seconds))

    def _stage(
        self,
        cand: Candidate,
        edit: SynthEdit,
        base: Baseline,
        work: Path,
        command: str,
        audit: list[str] | None,
    ) -> tuple[Path, Path, dict[str, Any]]:
        """The edited repository's build context and its verifier folder (``work/environment``,
        ``work/tests``), and the baseline's verifier config they share."""
        recipe = base.recipe
        context, key = edited_context(cand, edit, base, work)
        repo = context / "repo"
        tests = work / "tests"
        sources = source_manifest(repo)
        stage_verifier(
            tests,
            VerifierInput(
                recipe=recipe,
                command=command,
                restore=base.restore,
                delete=[],
                infra=_infra(repo, base.restore),
                sources=sources,
                integrity_key=key,
                reward_mode=self.options.reward,
                splice=base.splice,
            ),
        )
        shared = json.loads((base.tests / "config.json").read_text())
        allowed = set(shared.get("audit_allowed", [])) | set(audit or [])
        update_config(
            tests,
            command=command,
            audit_allowed=sorted(allowed),
            **{k: shared[k] for k in ("pytest_plugins", "ancestors", "collected") if k in shared},
        )
        baseline = tamper.baseline(str(repo), sorted(sources))
        write_file(tests / "tamper_baseline.json", json.dumps(baseline, sort_keys=True) + "\n")
        return context, tests, shared

    def _emit(
        self,
        cand: Candidate,
        edit: SynthEdit,
        base: Baseline,
        work: Path,
        outcome: Outcome,
        f2p: list[str],
        p2p: list[str],
        command: str,
        scope: str,
        selected: list[str],
        failures: dict[str, str],
        audit: list[str] | None = None,
    ) -> None:
        recipe, opts = base.recipe, self.options
        context, tests, shared = self._stage(cand, edit, base, work, command, audit)

        f2p_files = sorted({f for t in f2p if (f := _file_of(t, base.restore)) is not None})
        text = "\n".join(base.restore[f].decode("utf-8", "replace") for f in f2p_files)
        evidence = Evidence(
            groups=group_tests(f2p, base.snapshot, failures),
            visible=text,
            test_files=f2p_files,
        )
        composed = self.compose_instruction(cand, edit, evidence)
        if opts.solvability != "off":
            reasons = underspecified(composed.text, cand.source_patch, [])
            if reasons:
                return self._drop(outcome, "underspecified", "; ".join(reasons)[:300])
        instruction, rewrite = self._rewrite(
            cand, composed.text, gold_patch=cand.source_patch, workdir=WORKDIR, visible=text
        )
        staging = self._staging(cand)
        write_task(
            staging,
            EmitInput(
                candidate=cand,
                instruction=instruction,
                recipe=recipe,
                context=context,
                tests=tests,
                f2p=f2p,
                p2p=p2p,
                command=command,
                test_files=sorted(base.restore),
                pipeline=self.pipeline,
                pipeline_version=self.pipeline_version,
                repo=self.repo_label,
                options=opts,
                scope=scope,
                selected=selected,
                collected=shared.get("collected"),
                instruction_record=composed.record([]),
                splice=base.splice,
            ),
        )
        # What was edited is part of the answer: it lives beside the gold patch, never in
        # task.toml (which pages show) or the instruction.
        write_file(staging / "solution" / "edit.json", json.dumps(edit.to_json(), indent=1) + "\n")

        def note(config: Any) -> None:
            sub = config.metadata["repo2env"].setdefault(self.pipeline, {})
            sub["edit_kind"] = edit.kind if self.pipeline != "bug_synth" else "procedural"

        update_task_toml(staging, note)
        if self._gate_and_publish(staging, cand, outcome, rewrite):
            outcome.f2p, outcome.p2p = len(f2p), len(p2p)


def run_wrapped_suite(
    session: Session,
    recipe: Recipe,
    script: str,
    out: str,
    options: list[str],
    timeout_s: float,
) -> tuple[dict[str, Any] | None, str]:
    """Run the suite in-process under a wrapping script of ``shipped/scripts`` (``python
    SCRIPT --root WORKDIR --out OUT [OPTIONS] -- -m pytest|unittest …``) and read the JSON report
    it writes: ``(report, "")``, or ``(None, why)`` when it timed out or wrote nothing usable."""
    if recipe.runner == "pytest":
        suite = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]
    else:
        suite = ["-m", "unittest", "discover", "-q"]
    res = session.exec(
        ["python", script, "--root", recipe.workdir, "--out", out, *options, "--", *suite],
        cwd=recipe.workdir,
        timeout_s=timeout_s,
        network=False,
        env=dict(recipe.env),
    )
    try:
        data = json.loads(session.read(out))
    except (OSError, ValueError, RuntimeError):
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, "timed out" if res.timed_out else tail[0][:300]
    if res.timed_out:
        return None, "timed out"
    if not isinstance(data, dict):
        return None, "malformed record"
    return data, ""


def _stable(runs: list[dict[str, str]]) -> dict[str, str]:
    first, *rest = runs
    return {t: s for t, s in first.items() if all(r.get(t) == s for r in rest)}


def _flaky(runs: list[dict[str, str]]) -> set[str]:
    ids = set().union(*runs)
    return {t for t in ids if len({r.get(t) for r in runs}) > 1}


def _in_files(ids: set[str], files: list[str]) -> set[str]:
    """Test ids that belong to ``files`` (pytest ``path::name`` or unittest dotted ids)."""
    dotted = {f[:-3].replace("/", ".") for f in files if f.endswith(".py")}
    out = set()
    for t in ids:
        head = t.split("::", 1)[0]
        if head in files or any(t == d or t.startswith(d + ".") for d in dotted):
            out.add(t)
    return out


def _file_of(test_id: str, files: dict[str, bytes]) -> str | None:
    """The test file a test id belongs to (pytest ``path::name``, unittest ``a.b.Class.test``)."""
    head = test_id.split("::", 1)[0]
    if head in files:
        return head
    for rel in files:
        dotted = rel[:-3].replace("/", ".") if rel.endswith(".py") else rel
        if test_id.startswith(dotted + "."):
            return rel
    return None


def _infra(root: Path, restore: dict[str, bytes]) -> dict[str, str]:
    known = infra.manifest(root, infra.is_infra)
    return {k: v for k, v in known.items() if k not in restore}


# ------------------------------------------------------------------------------ candidates


class SynthPipeline:
    """What the synthesized-task pipelines share besides their harness: every source kind
    (they read one revision of a clone), instructions the ``--llm`` rewrite may reword, and
    de-duplication of identical edits."""

    sources: frozenset[str] = frozenset({"local", "github", "gitlab"})
    sources_note = ""
    llm_rewrite = True
    dedupe_changes = True


def synth_sources(
    source: Any,
    sha: str,
    options: Any,
    extensions: tuple[str, ...] = (".py",),
    folders: list[str] | None = None,
) -> Iterator[tuple[str, str] | tuple[str, None, str]]:
    """``(path, text)`` of every source file at ``sha`` (Python unless ``extensions`` say
    otherwise) a synthesized edit may touch (no tests, no test infrastructure, no build
    output, within ``options.paths``; Java only in the ``src/main/`` of the built modules'
    ``folders`` when given), or ``(path, None, reason)`` for a file that cannot be read as
    text."""
    mains = None if folders is None else tuple(f"{f}/src/main/".lstrip("/") for f in folders)
    count = 0
    native = any(ext != ".py" for ext in extensions)
    for rel in sorted(source.list_files(sha)):
        if not rel.endswith(extensions) or is_test_source(rel) or infra.is_infra(rel):
            continue
        if native and not under_test(rel):
            continue
        if mains is not None and rel.endswith(".java") and not rel.startswith(mains):
            continue
        if options.paths and not any(
            rel == p.strip("/") or rel.startswith(p.strip("/") + "/") for p in options.paths
        ):
            continue
        if options.max_files is not None and count >= options.max_files:
            return
        count += 1
        try:
            yield rel, source.read_file(sha, rel).decode("utf-8")
        except UnicodeDecodeError:
            yield rel, None, "source file not UTF-8"


def round_robin(groups: list[list[Any]]) -> Iterator[Any]:
    """The first item of every group, then the second of every group, …: the first N items
    spread over as many groups (functions, files) as possible."""
    depth = 0
    while True:
        row = [g[depth] for g in groups if depth < len(g)]
        if not row:
            return
        yield from row
        depth += 1


def synth_candidate(
    *, slug: str, sha: str, kind: str, tag: str, edit: SynthEdit, original: str, ident: str
) -> Candidate:
    """A synthesized candidate: base and head are both the revision; the edit is carried in
    ``extra`` and the gold patch undoes it."""
    patch = gold_patch(edit.path, edit.new_text, original)
    return Candidate(
        key=f"{tag}:{ident}",
        task_id=f"{slug}-{tag}-{ident[:8]}",
        kind=kind,
        base=sha,
        head=sha,
        title="",
        body="",
        reference=sha,
        patch=patch,
        source_patch=patch,
        extra={"edit": edit},
    )
