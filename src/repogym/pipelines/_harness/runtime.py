"""The runtime harness shared by ``commit_runtime`` and ``pr_runtime``.

For one candidate (repository at ``base``, fix at ``head``): export the base snapshot, derive
the environment recipe, build it in the sandbox (the Dockerfile's last step records what the
verifier trusts), stage the task's verifier folder, then run the tests *through that verifier*
(``tests/test.sh --results``) with the hidden test changes but not the fix ("before") and with
both ("after"), ``1 + reruns`` times each. Which tests run: the whole suite when it finishes in
under ``suite_budget`` seconds, else the changed test files plus every test file whose imports
reach the changed source (:mod:`.._selection.select`). F2P = fails before, passes after;
P2P = passes in both, all of them; tests whose result flips between runs of one state are dropped.

A candidate with at least one F2P test becomes a task, which must then pass the verify gate
(oracle 1, nop 0, oracle reruns agree, and its tests must kill at least ``min_kill_rate`` of
``mutants`` wrong solutions derived from the gold patch) before it is published.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.bootstrap import Recipe, UnsupportedRepo, bootstrap
from repogym.bootstrap.commit import read_commit
from repogym.bootstrap.node.testfiles import computed_f2p
from repogym.pipelines._harness.emit import (
    EmitInput,
    VerifierInput,
    audit_keys,
    integrity_key,
    stage_verifier,
    update_config,
    write_task,
)
from repogym.pipelines._harness.frame import TaskHarness
from repogym.pipelines._harness.verifier_runs import (
    build_pinned,
    probe,
    verifier_result,
    verifier_runs,
)
from repogym.pipelines._instructions.evidence import changed_first, group_tests
from repogym.pipelines._instructions.interface import render_interface, required_interface
from repogym.pipelines._instructions.text import (
    Composed,
    Evidence,
    Rewrite,
    build_instruction,
    compose,
    repair,
)
from repogym.pipelines._mined.inline_tests import EXTRA_KEY as INLINE_KEY
from repogym.pipelines._selection.select import find_test_files, tests_exercising
from repogym.pipelines.base import Candidate, HarnessContext, Outcome
from repogym.sandbox import BuildError, BuiltEnvironment, EnvironmentSpec, Session
from repogym.shipped import infra, rust_tests, tamper
from repogym.shipped.testfiles import JS_TEST_FILE, PY_TEST_FILE
from repogym.sources.patches import parse_patch
from repogym.spec import RuntimeOptions
from repogym.taskdir.instruction_checks import underspecified

PASSED = "PASSED"


def target_ids(runner: str, test_files: list[str]) -> list[str] | None:
    """Ids that make the runner run the given test files; [] = whole suite; None = none runnable."""
    if runner == "pytest":
        ids = [f for f in test_files if PY_TEST_FILE.search(f)]
    elif runner == "unittest":
        ids = [f[:-3].replace("/", ".") for f in test_files if PY_TEST_FILE.search(f)]
    elif runner in ("jest", "vitest"):
        ids = [f for f in test_files if JS_TEST_FILE.search(f)]
    else:  # mocha, node, go, cargo: the whole suite, graded on the ids the log reports
        return []
    return ids or None


@dataclass
class _RepeatedRuns:
    """Per-test results of the runs of one state (before or after)."""

    runs: list[dict[str, str]]

    def stable(self) -> dict[str, str]:
        """Ids with the same result in every run (flaky ones left out)."""
        first, *rest = self.runs
        return {t: s for t, s in first.items() if all(r.get(t) == s for r in rest)}

    def flaky(self) -> set[str]:
        ids = set().union(*self.runs)
        return {t for t in ids if len({r.get(t) for r in self.runs}) > 1}


@dataclass
class _Change:
    """One candidate's change as the runtime evaluation sees it (:meth:`RuntimeHarness._change`)."""

    cand: Candidate
    work: Path
    source: Any
    recipe: Recipe
    test_files: list[str]
    changed_sources: list[str]
    removed_sources: list[str]
    hidden: list[str]
    """Files the verifier restores: the changed tests and infrastructure files."""
    inline: dict[str, str]
    """Source files whose inline test modules the verifier splices in (path → the hidden
    modules, :mod:`.._mined.inline_tests`); they are in ``hidden`` too."""
    delete: list[str]
    ids: list[str]
    """The changed test files' ids for the runner."""
    selected: list[str] = field(default_factory=list)
    """The targeted test files (filled by :meth:`targeted` when the suite is too slow)."""

    @property
    def context(self) -> Path:
        return self.work / "environment"

    @property
    def base(self) -> Path:
        return self.context / "repo"

    def hidden_copy(self, path: str) -> bytes:
        """What the verifier restores ``path`` from: the head's file, or for a file with inline
        tests only its hidden test modules."""
        if path in self.inline:
            return self.inline[path].encode("utf-8")
        return bytes(self.source.read_file(self.cand.head, path))

    def head_snapshot(self) -> Path:
        head = self.work / "head"
        if not head.exists():
            self.source.export_snapshot(self.cand.head, head)
        return head

    def targeted(self) -> str:
        """The changed test files plus every test file whose imports reach the changed
        source (computed only when the whole suite does not fit the budget)."""
        if not self.selected:
            head = self.head_snapshot()
            found = find_test_files(head, self.recipe.runner)
            reach = tests_exercising(head, self.changed_sources, found)
            self.selected.extend(sorted(set(self.test_files) | set(reach)))
        runner = self.recipe.runner
        return self.recipe.test_command_for(target_ids(runner, self.selected) or self.ids or [])


@dataclass
class _Runs:
    """The reference runs of a candidate (:meth:`RuntimeHarness._fix_runs`)."""

    scope: str
    """``suite`` or ``targeted``."""
    command: str
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    seconds: float


def classify(
    recipe: Recipe,
    before_results: list[dict[str, Any]],
    after_results: list[dict[str, Any]],
    restore: dict[str, bytes],
) -> tuple[list[str], list[str], set[str], bool]:
    """(F2P, P2P, flaky would-be F2P ids, whether any test passes after the fix) from the
    reference runs: only ids with the same result in every run count. A flaky id is reported
    only when it could have been fail-to-pass (it passed in a run after the fix and did not in
    a run before): a flaky test elsewhere in the suite is no reason to drop the change."""
    before_state = _RepeatedRuns([r["tests"] for r in before_results])
    after_state = _RepeatedRuns([r["tests"] for r in after_results])
    flaky = before_state.flaky() | after_state.flaky()
    b, a = before_state.stable(), after_state.stable()
    f2p = sorted(t for t, s in a.items() if s == PASSED and b.get(t) != PASSED and t not in flaky)
    if recipe.language == "node":
        # A title that embeds computed output (a generated regex, say) is a new name for
        # an old test: it pays only for byte-identical output, so it is not fail-to-pass.
        computed = computed_f2p(f2p, [r["tests"] for r in before_results], restore)
        f2p = [t for t in f2p if t not in computed]
        flaky |= set(computed)
    p2p = sorted(t for t, s in a.items() if s == PASSED and b.get(t) == PASSED and t not in flaky)
    would_be = {
        t
        for t in flaky
        if any(r.get(t) == PASSED for r in after_state.runs)
        and any(r.get(t) != PASSED for r in before_state.runs)
    }
    return f2p, p2p, would_be, any(s == PASSED for s in a.values())


_DOCTEST_ID = re.compile(r"^(?P<file>[^\s]+\.rs) - .*\(line \d+\)")


def line_bound(ids: list[str], changed: list[str]) -> list[str]:
    """Cargo doctest ids that name a line of a file the change edits (``src/lib.rs - parse
    (line 80)``): the line moves with any fix of another length, so such an id is a new name
    for an old test, not something an agent's fix can be graded on."""

    def edited(file: str) -> bool:  # a workspace member's doctests name crate-relative paths
        return any(path == file or path.endswith("/" + file) for path in changed)

    return [t for t in ids if (m := _DOCTEST_ID.match(t)) is not None and edited(m["file"])]


def record_runs(tests: Path, runs: _Runs) -> None:
    """Record what the reference runs saw in the staged verifier's config: the command they
    ran, the tamper signatures the fix itself shows, the collected count, and what the judge's
    audit may see."""
    first = runs.after[0]
    update_config(
        tests,
        command=runs.command,
        tamper_waived=sorted({s for r in runs.after for s in r.get("tamper_sigs", [])}),
        collected=first.get("collected"),
        # What the reference runs (before and after the fix) did that the judge's audit
        # reports: allowed; anything else a run does is a tamper.
        audit_allowed=audit_keys(runs.before + runs.after),
    )


class RuntimeHarness(TaskHarness):
    """Turns candidates of one repository into verified runtime tasks (thread-safe; one per
    job): the runtime evaluation inside :class:`TaskHarness`'s frame and gate."""

    # -------------------------------------------------------------------------------- evaluate

    def _evaluate(self, cand: Candidate, work: Path, outcome: Outcome) -> None:
        """The steps of one runtime task, in order; each drop ends it with its reason."""
        # 1. the change: base snapshot, recipe, the test and source files it touches
        change = self._change(cand, work, outcome)
        if change is None:
            return
        recipe, key = change.recipe, integrity_key(cand.task_id)
        spec = EnvironmentSpec(
            context_dir=change.context,
            workdir=recipe.workdir,
            network_mode="no-network",
            memory_mb=4096,
            storage_mb=4096,
        )
        # 2. the environment, dependencies pinned
        self._progress(cand, "build_started")
        try:
            built = build_pinned(
                self.backend, recipe, change.context, spec, key, work / "build.log"
            )
        except BuildError as exc:
            return self._drop(outcome, "environment build failed", str(exc).splitlines()[0][:300])
        self._progress(cand, "build_finished")
        # 3. the task's verifier, staged: the reference runs go through it
        tests = work / "tests"
        restore = {p: change.hidden_copy(p) for p in change.hidden}
        known = infra.manifest(change.base, infra.is_infra)
        stage_verifier(
            tests,
            VerifierInput(
                recipe=recipe,
                command=recipe.test_command,
                restore=restore,
                splice=sorted(change.inline),
                delete=change.delete,
                infra={
                    k: v for k, v in known.items() if k not in restore and k not in change.delete
                },
                sources=source_manifest(change.base),
                integrity_key=key,
                reward_mode=self.options.reward,
            ),
        )
        # 4. the tests after and before the fix; 5. F2P and P2P from them
        runs = self._fix_runs(change, built, spec, tests)
        outcome.test_seconds += runs.seconds
        f2p, p2p, flaky, passing = classify(recipe, runs.before, runs.after, restore)
        if recipe.runner == "cargo":
            moved = set(line_bound(f2p + p2p, change.changed_sources + sorted(change.inline)))
            flaky |= moved & set(f2p)
            f2p, p2p = [t for t in f2p if t not in moved], [t for t in p2p if t not in moved]
        if not passing:
            return self._drop(outcome, "no test passes after the fix")
        if not f2p:
            reason = "only flaky fail-to-pass tests" if flaky else "no fail-to-pass test"
            return self._drop(outcome, reason)
        record_runs(tests, runs)
        # 6. the instruction (what must hold, through the solvability gate; --llm rewrite)
        said = self._instruction(change, f2p, restore, runs.before, outcome)
        if said is None:
            return
        instruction, rewrite, record = said
        # 7. the task folder, staged; 8. the verify gate, then publish
        staging = self._staging(cand)
        facts = self._emit_input(change, tests, runs, instruction, record, (f2p, p2p, flaky))
        write_task(staging, facts)
        if self._gate_and_publish(staging, cand, outcome, rewrite):
            outcome.f2p, outcome.p2p = len(f2p), len(p2p)

    def _change(self, cand: Candidate, work: Path, outcome: Outcome) -> _Change | None:
        """The candidate's change read from the source: the base snapshot and its recipe, the
        test and source files it touches. None (and the drop reason set) when it cannot make a
        runtime task."""
        opts = self.options
        instruction, why = build_instruction(
            cand.title,
            cand.body,
            workdir="/workspace",
            gold_patch=cand.source_patch,
            min_words=opts.min_instruction_words,
        )
        if instruction is None:
            self._drop(outcome, why or "no instruction")
            return None
        context = work / "environment"
        context.mkdir()
        base = context / "repo"
        self.source.export_snapshot(cand.base, base)
        # The snapshot has no .git: the commit's date (dependencies resolve as of it), release
        # tag (versions from git tags) and submodules come from the repository itself.
        commit = read_commit(self.source.path, cand.base, base)
        try:
            recipe = bootstrap(
                base, repo_id=self.repo_label, ref=cand.base, check=False, commit=commit
            ).recipe
        except UnsupportedRepo as exc:
            self._drop(outcome, "unsupported repository", str(exc))
            return None

        test_changes = parse_patch(cand.test_patch)
        source_changes = parse_patch(cand.source_patch)
        test_files = [p.path for p in test_changes if p.status != "D"]
        inline: dict[str, str] = dict(cand.extra.get(INLINE_KEY) or {})
        if opts.instruction == "tdd":
            # A test-driven task: the new and changed tests are in the workspace (the hidden
            # copy still restores over them before grading).
            for rel in test_files:
                target = base / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                if rel in inline:
                    old = target.read_text("utf-8") if target.is_file() else ""
                    target.write_text(rust_tests.splice(old, inline[rel]), "utf-8")
                else:
                    target.write_bytes(self.source.read_file(cand.head, rel))
        ids = target_ids(recipe.runner, test_files)
        if ids is None:
            self._drop(outcome, "no runnable test file changed")
            return None
        infra_changes = [p for p in source_changes if infra.is_infra(p.path)]
        delete = [p.path for p in test_changes if p.status == "D"]
        delete += [p.path for p in infra_changes if p.status == "D"]
        return _Change(
            cand=cand,
            work=work,
            source=self.source,
            recipe=recipe,
            test_files=test_files,
            changed_sources=[p.path for p in source_changes if p.status != "D"],
            removed_sources=[p.path for p in source_changes if p.status == "D"],
            hidden=test_files + [p.path for p in infra_changes if p.status != "D"],
            inline=inline,
            delete=delete,
            ids=ids,
        )

    def _fix_runs(
        self, change: _Change, built: BuiltEnvironment, spec: EnvironmentSpec, tests: Path
    ) -> _Runs:
        """The tests with the fix (whole suite or targeted, see :meth:`_after_runs`), then
        without it, each in its own sandbox of the built environment."""
        cand, recipe = change.cand, change.recipe
        with self.backend.start(built, spec) as before:
            before.mount(tests, "/tests")
            probe(before, recipe, tests, change.base)
            with self.backend.start(built, spec) as after:
                after.mount(tests, "/tests")
                self._apply(
                    after, recipe, cand.head, change.changed_sources, change.removed_sources
                )
                self._progress(cand, "tests_after")
                scope, after_results, t2 = self._after_runs(
                    after, recipe, tests, change.targeted if change.ids else None
                )
            command = recipe.test_command if scope == "suite" else change.targeted()
            self._progress(cand, "tests_before")
            before_results, t1 = verifier_runs(
                before,
                recipe,
                tests,
                1 + self.options.reruns,
                "before the fix",
                self.options.test_timeout,
            )
        return _Runs(scope, command, before_results, after_results, t1 + t2)

    def _instruction(
        self,
        change: _Change,
        f2p: list[str],
        restore: dict[str, bytes],
        before: list[dict[str, Any]],
        outcome: Outcome,
    ) -> tuple[str, Rewrite | None, dict[str, Any]] | None:
        """The instruction from the evidence (the F2P tests, their failures before the fix,
        the names they need), the LLM rewrite's outcome and the instruction record; None (the
        drop reason set) when it stays underspecified."""
        cand = change.cand
        evidence = self._evidence(
            change.base,
            change.head_snapshot(),
            change.test_files,
            changed_first(f2p, cand.test_patch),
            restore,
            before,
        )
        composed, why = self._instruct(cand, evidence)
        if composed is None:
            self._drop(outcome, "underspecified", why)
            return None
        instruction, rewrite = self._rewrite(
            cand,
            composed.text,
            gold_patch=cand.source_patch,
            workdir="/workspace",
            required=evidence.required,
            visible=evidence.visible,
        )
        record = composed.record(evidence.required)
        if rewrite is not None and rewrite.instruction is not None:
            record["mode"] = "llm"
        return instruction, rewrite, record

    def _emit_input(
        self,
        change: _Change,
        tests: Path,
        runs: _Runs,
        instruction: str,
        record: dict[str, Any],
        graded: tuple[list[str], list[str], set[str]],
    ) -> EmitInput:
        """What :func:`~.emit.write_task` writes the runtime task from (``graded``: F2P, P2P
        and flaky ids)."""
        f2p, p2p, flaky = graded
        first = runs.after[0]
        skipped = [t for t, s in first["tests"].items() if s == "SKIPPED"]
        reasons: dict[str, int] = {}
        for t in skipped:
            why = (first.get("skips") or {}).get(t) or "(no reason)"
            reasons[why] = reasons.get(why, 0) + 1
        return EmitInput(
            candidate=change.cand,
            instruction=instruction,
            recipe=change.recipe,
            context=change.context,
            tests=tests,
            f2p=f2p,
            p2p=p2p,
            command=runs.command,
            test_files=change.test_files,
            pipeline=self.pipeline,
            pipeline_version=self.pipeline_version,
            repo=self.repo_label,
            options=self.options,
            flaky=sorted(flaky),
            scope=runs.scope,
            selected=change.selected,
            skipped=len(skipped),
            skip_reasons=dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:10]),
            collected=first.get("collected"),
            instruction_record=record,
            splice=sorted(change.inline),
        )

    # -------------------------------------------------------------------------------- helpers

    @staticmethod
    def _evidence(
        base: Path,
        head: Path,
        test_files: list[str],
        f2p: list[str],
        restore: dict[str, bytes],
        before_results: list[dict[str, Any]],
    ) -> Evidence:
        """What the task proves: the F2P tests with their failures before the fix, and the
        names they need that the base does not have."""
        failures: dict[str, str] = {}
        for result in before_results:
            for test_id, message in (result.get("failures") or {}).items():
                failures.setdefault(test_id, message)
        items = required_interface(base, head, test_files, f2p, restore)
        interface = render_interface(items)
        tests_text = "\n".join(data.decode("utf-8", "replace") for data in restore.values())
        return Evidence(
            groups=group_tests(f2p, head, failures),
            interface=interface,
            required=list(dict.fromkeys(item.name for item in items)),
            visible=tests_text + "\n" + interface,
            test_files=sorted(test_files),
        )

    def _instruct(self, cand: Candidate, evidence: Evidence) -> tuple[Composed | None, str]:
        """The instruction in the chosen mode, through the solvability gate: (composed, "")
        or (None, why the task is underspecified)."""
        opts = self.options
        mode = "evidence" if opts.instruction == "llm" else opts.instruction
        composed = compose(
            cand.title,
            cand.body,
            workdir="/workspace",
            gold_patch=cand.source_patch,
            evidence=evidence,
            mode=mode,
        )
        if opts.solvability == "off":
            return composed, ""
        reasons = underspecified(composed.text, cand.source_patch, evidence.required)
        if reasons and opts.solvability == "repair":
            composed = repair(composed, evidence, "/workspace")
            reasons = underspecified(composed.text, cand.source_patch, evidence.required)
        if reasons:
            return None, "the instruction " + "; ".join(reasons)
        return composed, ""

    def _apply(
        self, session: Session, recipe: Recipe, ref: str, files: list[str], deleted: list[str]
    ) -> None:
        """Write the post-images of ``files`` at ``ref`` into the sandbox; remove ``deleted``."""
        for path in files:
            session.write(f"{recipe.workdir}/{path}", self.source.read_file(ref, path))
        for path in deleted:
            session.remove(f"{recipe.workdir}/{path}")

    def _after_runs(
        self,
        session: Session,
        recipe: Recipe,
        tests: Path,
        targeted: Callable[[], str] | None,
    ) -> tuple[str, list[dict[str, Any]], float]:
        """Runs with the fix: the whole suite when it finishes within ``suite_budget`` (or the
        runner cannot select files: ``targeted`` is None), else the command ``targeted()``
        gives. Returns (scope, results, seconds)."""
        total, timeout = 1 + self.options.reruns, self.options.test_timeout
        if targeted is None:
            runs, spent = verifier_runs(session, recipe, tests, total, "after the fix", timeout)
            return "suite", runs, spent
        spent = 0.0
        budget = self.options.suite_budget
        if budget > 0:
            update_config(tests, command=recipe.test_command)
            first = verifier_result(session, recipe, tests, budget)
            if first is not None and first["parse_status"] == "ok" and first.get("finished"):
                runs, more = verifier_runs(
                    session, recipe, tests, total - 1, "after the fix", timeout
                )
                return "suite", [first, *runs], first["seconds"] + more
            spent = budget if first is None else first["seconds"]
        update_config(tests, command=targeted())
        runs, more = verifier_runs(session, recipe, tests, total, "after the fix", timeout)
        return "targeted", runs, spent + more


def scanned_source(rel: str) -> bool:
    """Files whose base digest the verifier keeps: source it scans, compiled modules it checks."""
    if infra.is_infra(rel):
        return False
    return tamper.language_of(rel) is not None or rel.endswith(infra.COMPILED_EXT)


def source_manifest(root: Path) -> dict[str, str]:
    """The base digests the verifier keeps (``sources.json``): source files and compiled
    modules by name, and any other file that holds native code by its content (a loader can
    run it whatever its name)."""

    def keep(rel: str) -> bool:
        if scanned_source(rel):
            return True
        return not infra.is_infra(rel) and infra.is_native(str(root / rel))

    return infra.manifest(root, keep)


class RuntimePipeline:
    """What the runtime pipelines share: their options, sources and harness. A subclass names
    itself and walks its candidates (see ``commit_runtime``)."""

    name: str
    version: str
    options_model: type[RuntimeOptions] = RuntimeOptions
    sources: frozenset[str] = frozenset({"local", "github", "gitlab"})
    sources_note = ""
    llm_rewrite = True
    dedupe_changes = True

    def harness(self, ctx: HarnessContext) -> RuntimeHarness:
        return RuntimeHarness(ctx)
