"""The runtime harness shared by ``commit_runtime`` and ``pr_runtime``.

For one candidate (repository at ``base``, fix at ``head``): export the base snapshot, derive
the environment recipe, build it in the sandbox, then run the targeted tests with the hidden test
changes applied but not the fix ("before") and with both ("after"), ``1 + reruns`` times each.
F2P = fails before, passes after; P2P = passes in both; tests whose result flips between runs of
one state are dropped. A candidate with at least one F2P test becomes a task, which must then
pass the verify gate (oracle 1, nop 0, oracle reruns agree) before it is published.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import tomli_w

from repogym.bootstrap import Recipe, UnsupportedRepo, bootstrap
from repogym.harbor import load_task, publish_task_dir, set_content_hash
from repogym.pipelines._emit import EmitInput, write_task
from repogym.pipelines._instruction import InstructionRewriter, Rewrite, build_instruction
from repogym.pipelines.base import Candidate, Outcome
from repogym.run.agents import NopAgent, OracleAgent
from repogym.run.gate import VERIFIED, Verdict, judge, record
from repogym.run.trial import TrialRunner
from repogym.sandbox import BuildError, EnvironmentSpec, Sandbox, SandboxError, Session
from repogym.sources import LocalGitSource
from repogym.sources._patches import is_test_path, parse_patch
from repogym.spec import RuntimeOptions
from repogym.verify.parsers import parse_log

PASSED = "PASSED"
_PY_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")
_JS_TEST_FILE = re.compile(r"\.(test|spec)\.[cm]?[jt]sx?$|(^|/)__tests__/")


def target_ids(runner: str, test_files: list[str]) -> list[str] | None:
    """Ids that make the runner run the given test files; [] = whole suite; None = none runnable."""
    if runner == "pytest":
        ids = [f for f in test_files if _PY_TEST_FILE.search(f)]
    elif runner == "unittest":
        ids = [f[:-3].replace("/", ".") for f in test_files if _PY_TEST_FILE.search(f)]
    elif runner in ("jest", "vitest"):
        ids = [f for f in test_files if _JS_TEST_FILE.search(f)]
    else:  # mocha, node, go, cargo: the whole suite, graded on the ids the log reports
        return []
    return ids or None


@dataclass
class _State:
    """Per-test results of the runs of one state (before or after)."""

    runs: list[dict[str, str]]

    def stable(self) -> dict[str, str]:
        """Ids with the same result in every run (flaky ones left out)."""
        first, *rest = self.runs
        return {t: s for t, s in first.items() if all(r.get(t) == s for r in rest)}

    def flaky(self) -> set[str]:
        ids = set().union(*self.runs)
        return {t for t in ids if len({r.get(t) for r in self.runs}) > 1}


class RuntimeHarness:
    """Turns candidates of one repository into verified tasks (thread-safe; one per job)."""

    def __init__(
        self,
        source: LocalGitSource,
        backend: Sandbox,
        options: RuntimeOptions,
        *,
        pipeline: str,
        pipeline_version: str,
        repo_label: str,
        out_dir: Path,
    ) -> None:
        self.source = source
        self.backend = backend
        self.options = options
        self.pipeline = pipeline
        self.pipeline_version = pipeline_version
        self.repo_label = repo_label
        self.out_dir = out_dir
        self.runner = TrialRunner(backend)
        self.source_access = "local"
        """Provenance ``source_access``: ``local``, ``public`` or ``private``."""
        self.rewriter: InstructionRewriter | None = None
        """Optional LLM rewrite of instructions (``generate --llm``)."""
        self.rewrites: dict[str, dict[str, Any]] = {}
        """task id → what the rewrite came to (for the report)."""

    # -------------------------------------------------------------------------------- evaluate

    def evaluate(self, cand: Candidate) -> Outcome:
        start = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix=f"repogym-{cand.task_id}-"))
        outcome = Outcome(cand, kept=False)
        try:
            self._evaluate(cand, work, outcome)
        except (BuildError, SandboxError) as exc:
            outcome.reason, outcome.detail = "sandbox error", str(exc).splitlines()[0][:300]
        finally:
            shutil.rmtree(work, ignore_errors=True)
            outcome.seconds = time.monotonic() - start
        return outcome

    def _drop(self, outcome: Outcome, reason: str, detail: str | None = None) -> None:
        outcome.reason, outcome.detail = reason, detail

    def _evaluate(self, cand: Candidate, work: Path, outcome: Outcome) -> None:
        opts = self.options
        instruction, why = build_instruction(
            cand.title,
            cand.body,
            workdir="/workspace",
            gold_patch=cand.source_patch,
            min_words=opts.min_instruction_words,
        )
        if instruction is None:
            return self._drop(outcome, why or "no instruction")
        context = work / "environment"
        context.mkdir()
        self.source.export_snapshot(cand.base, context / "repo")
        try:
            recipe = bootstrap(
                context / "repo", repo_id=self.repo_label, ref=cand.base, check=False
            ).recipe
        except UnsupportedRepo as exc:
            return self._drop(outcome, "unsupported repository", str(exc))
        (context / "Dockerfile").write_text(recipe.dockerfile)

        test_changes = parse_patch(cand.test_patch)
        test_files = [p.path for p in test_changes if p.status != "D"]
        deleted_tests = [p.path for p in test_changes if p.status == "D"]
        ids = target_ids(recipe.runner, test_files)
        if ids is None:
            return self._drop(outcome, "no runnable test file changed")
        command = recipe.test_command_for(ids)
        spec = EnvironmentSpec(
            context_dir=context,
            workdir=recipe.workdir,
            network_mode="no-network",
            memory_mb=4096,
            storage_mb=4096,
        )
        try:
            built = self.backend.build(spec, log=work / "build.log")
        except BuildError as exc:
            return self._drop(outcome, "environment build failed", str(exc).splitlines()[0][:300])

        source_changes = parse_patch(cand.source_patch)
        with self.backend.start(built, spec) as session:
            self._apply(session, recipe, cand.head, test_files, deleted_tests)
            before, t1 = self._runs(session, recipe, command)
            self._apply(
                session,
                recipe,
                cand.head,
                [p.path for p in source_changes if p.status != "D"],
                [p.path for p in source_changes if p.status == "D"],
            )
            after, t2 = self._runs(session, recipe, command)
        outcome.test_seconds += t1 + t2
        if before is None:
            return self._drop(outcome, "test log not understood (before the fix)")
        if after is None:
            return self._drop(outcome, "test log not understood (after the fix)")
        flaky = before.flaky() | after.flaky()
        b, a = before.stable(), after.stable()
        f2p = sorted(
            t for t, s in a.items() if s == PASSED and b.get(t) != PASSED and t not in flaky
        )
        p2p = sorted(
            t for t, s in a.items() if s == PASSED and b.get(t) == PASSED and t not in flaky
        )
        p2p = p2p[: opts.max_p2p]
        if not any(s == PASSED for s in a.values()):
            return self._drop(outcome, "no test passes after the fix")
        if not f2p:
            reason = "only flaky fail-to-pass tests" if flaky else "no fail-to-pass test"
            return self._drop(outcome, reason)

        instruction, rewrite = self._rewrite(
            cand, instruction, gold_patch=cand.source_patch, workdir="/workspace"
        )

        staging = self.out_dir / "tasks" / f".{cand.task_id}.staging"
        shutil.rmtree(staging, ignore_errors=True)
        write_task(
            staging,
            EmitInput(
                candidate=cand,
                instruction=instruction,
                recipe=recipe,
                context=context,
                f2p=f2p,
                p2p=p2p,
                command=command,
                test_files={p: self.source.read_file(cand.head, p) for p in test_files},
                deleted_tests=deleted_tests,
                pipeline=self.pipeline,
                pipeline_version=self.pipeline_version,
                repo=self.repo_label,
                options=opts,
                flaky=sorted(flaky),
            ),
        )
        if self._gate_and_publish(staging, cand, outcome, rewrite):
            outcome.f2p, outcome.p2p = len(f2p), len(p2p)

    # -------------------------------------------------------------------------------- helpers

    def _rewrite(
        self,
        cand: Candidate,
        instruction: str,
        *,
        gold_patch: str,
        workdir: str,
        finish: Callable[[str], str] = lambda text: text,
    ) -> tuple[str, Rewrite | None]:
        """``generate --llm``: the rewritten instruction (``finish`` adds a pipeline's footer)
        when the rewrite is accepted, else ``instruction``; the outcome is kept for the report."""
        if self.rewriter is None:
            return instruction, None
        rewrite = self.rewriter.rewrite(
            instruction,
            gold_patch=gold_patch,
            workdir=workdir,
            min_words=self.options.min_instruction_words,
        )
        self.rewrites[cand.task_id] = rewrite.to_json()
        if rewrite.instruction is None:
            return instruction, rewrite
        return finish(rewrite.instruction), rewrite

    def _gate_and_publish(
        self, staging: Path, cand: Candidate, outcome: Outcome, rewrite: Rewrite | None
    ) -> bool:
        """Stamp provenance, run the verify gate on the staged task and publish it atomically
        under ``<out>/tasks/<id>`` when verified; the staging folder never survives."""
        try:
            stamp_provenance(staging, source_access=self.source_access, rewrite=rewrite)
            verdict, seconds = self._verify(staging)
            outcome.test_seconds += seconds
            if verdict.status != VERIFIED:
                detail = "; ".join(verdict.reasons)[:300]
                self._drop(outcome, f"verify: {verdict.status}", detail)
                return False
            publish_task_dir(staging, self.out_dir / "tasks" / cand.task_id)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        outcome.kept = True
        outcome.task_dir = self.out_dir / "tasks" / cand.task_id
        return True

    def _apply(
        self, session: Session, recipe: Recipe, ref: str, files: list[str], deleted: list[str]
    ) -> None:
        """Write the post-images of ``files`` at ``ref`` into the sandbox; remove ``deleted``."""
        for path in files:
            session.write(f"{recipe.workdir}/{path}", self.source.read_file(ref, path))
        for path in deleted:
            session.remove(f"{recipe.workdir}/{path}")

    def _runs(self, session: Session, recipe: Recipe, command: str) -> tuple[_State | None, float]:
        runs: list[dict[str, str]] = []
        spent = 0.0
        for _ in range(1 + self.options.reruns):
            res = session.exec(
                command, timeout_s=self.options.test_timeout, cwd=recipe.workdir, network=False
            )
            spent += res.duration_s
            parsed = parse_log(res.stdout + "\n" + res.stderr, recipe.runner)
            if parsed.status == "unparsed":
                return None, spent
            runs.append(dict(parsed.tests))
        return _State(runs), spent

    def _verify(self, task_dir: Path) -> tuple[Verdict, float]:
        task = load_task(task_dir)
        oracle = [
            self.runner.run(task, OracleAgent()) for _ in range(1 + self.options.verify_reruns)
        ]
        nop = self.runner.run(task, NopAgent())
        spent = sum(_test_seconds(o.result) for o in [*oracle, nop])
        verdict = judge(task.id, oracle, nop)
        if verdict.status == VERIFIED:
            record(task, verdict, self.backend.name, self.options.verify_reruns)
        return verdict, spent


def stamp_provenance(task_dir: Path, *, source_access: str, rewrite: Rewrite | None) -> None:
    """Record where the source came from and what the LLM rewrite did in ``task.toml``
    (``source_access``, ``synthesis_llm``, ``[metadata.repogym].instruction_rewrite``), then
    refresh the content hash."""
    if source_access == "local" and rewrite is None:
        return
    path = task_dir / "task.toml"
    data = tomllib.loads(path.read_text())
    meta = data.setdefault("metadata", {})
    prov = meta.setdefault("repo2env", {})
    prov["source_access"] = source_access
    if rewrite is not None:
        prov["synthesis_llm"] = rewrite.llm if rewrite.status == "accepted" else "none"
        meta.setdefault("repogym", {})["instruction_rewrite"] = rewrite.to_json()
    path.write_text(tomli_w.dumps(data))
    set_content_hash(task_dir)


def _test_seconds(result: dict[str, Any]) -> float:
    """Seconds a trial spent running code in the task (agent and verifier phases)."""
    total = 0.0
    for phase in ("agent_execution", "verifier"):
        t = result.get(phase) or {}
        if t.get("started_at") and t.get("finished_at"):
            total += (
                datetime.fromisoformat(t["finished_at"]) - datetime.fromisoformat(t["started_at"])
            ).total_seconds()
    return total


def candidate_from_change(
    source: LocalGitSource,
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
) -> tuple[Candidate | None, str | None]:
    """Cheap checks before any sandbox work: (candidate, None) or (None, drop reason)."""
    from repogym.sources._patches import split_patch

    patch = source.diff(base, head)
    files = parse_patch(patch)
    if not files:
        return None, "empty change"
    tests = [f for f in files if is_test_path(f.path)]
    sources = [f for f in files if not is_test_path(f.path)]
    if not tests:
        return None, "no test change"
    if not sources:
        return None, "tests only"
    if not any(f.status != "D" for f in tests):
        return None, "no added or changed test"
    if all(f.binary for f in sources):
        return None, "binary-only source change"
    if len(sources) > options.max_source_files:
        return None, "too many source files"
    source_patch, test_patch = split_patch(patch)
    size = sum(
        1 for ln in source_patch.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")
    )
    if size > options.max_patch_lines:
        return None, "gold patch too large"
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
        ),
        None,
    )
