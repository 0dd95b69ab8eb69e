"""The frame every pipeline's harness shares: one temporary folder per candidate, errors
turned into drop reasons, the optional LLM rewrite of the instruction, and the verify gate that
stands between a staged task and the dataset.

A harness subclasses :class:`TaskHarness` and implements :meth:`TaskHarness._evaluate`: stage
the task under :meth:`TaskHarness._staging` and hand it to :meth:`TaskHarness._gate_and_publish`.
What a pipeline adds to every staged task's ``task.toml`` (``cve_patches``: the advisory) is a
function given as ``annotate``, not a subclass.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repogym.atomic import staging_dir
from repogym.pipelines._harness.errors import INTERNAL_ERROR, describe, log_error
from repogym.pipelines._instructions.text import Rewrite
from repogym.pipelines.base import Candidate, HarnessContext, Outcome, Progress
from repogym.sandbox import BuildError, SandboxError
from repogym.taskdir import TaskConfig, publish_task_dir, update_task_toml

WEAK_TESTS = "tests too weak (mutants survive)"
GAMEABLE = "gameable (a generic wrong solution earns the full reward)"
INTERRUPTED_DROP = "interrupted"


class RunFailed(Exception):
    """A verifier run at generation gave nothing usable: (drop reason, detail)."""

    def __init__(self, reason: str, detail: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, detail


class TaskHarness:
    """Evaluates candidates of one repository into verified tasks (thread-safe; one per job)."""

    def __init__(
        self, ctx: HarnessContext, *, annotate: Callable[[Path, Candidate], None] | None = None
    ) -> None:
        self.ctx = ctx
        self.annotate = annotate
        """Called with each staged task folder and its candidate before provenance is stamped
        and the gate runs (e.g. to merge a pipeline's own facts into ``task.toml``)."""
        self.source = ctx.source
        self.backend = ctx.backend
        self.options: Any = ctx.options
        self.pipeline = ctx.pipeline
        self.pipeline_version = ctx.pipeline_version
        self.repo_label = ctx.repo_label
        self.out_dir = ctx.out_dir
        self.source_access = ctx.source_access
        self.rewriter = ctx.rewriter
        self.error_log = ctx.error_log
        self.on_progress = ctx.on_progress
        self.gate = ctx.gate
        self.stop = ctx.stop
        self.rewrites: dict[str, dict[str, Any]] = {}
        """task id → what the rewrite came to (for the report)."""

    def evaluate(self, cand: Candidate) -> Outcome:
        """Evaluate one candidate; never raises for it: an unexpected exception becomes the
        drop reason ``internal error`` (traceback in :attr:`error_log`), and neither its
        temporary folder nor its staging folder survives."""
        start = time.monotonic()
        work = staging_dir(tempfile.gettempdir(), "candidate", cand.task_id)
        outcome = Outcome(cand, kept=False)
        try:
            self._progress(cand, "started")
            self._evaluate(cand, work, outcome)
        except RunFailed as exc:
            outcome.reason, outcome.detail = exc.reason, exc.detail
        except (BuildError, SandboxError) as exc:
            outcome.reason, outcome.detail = "sandbox error", str(exc).splitlines()[0][:300]
        except Exception as exc:  # a bug met by this candidate: it costs the candidate only
            outcome.kept, outcome.reason, outcome.detail = False, INTERNAL_ERROR, describe(exc)
            log_error(self.error_log, f"candidate {cand.key} ({cand.task_id})", exc)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(self.out_dir / "tasks" / f".{cand.task_id}.staging", ignore_errors=True)
            outcome.seconds = time.monotonic() - start
        with contextlib.suppress(Exception):  # the outcome is what counts now
            self._progress(cand, "finished")
        return outcome

    def _progress(self, cand: Candidate, step: str) -> None:
        """Tell :attr:`HarnessContext.on_progress` that ``step`` (a key of
        :data:`~repogym.pipelines.base.PROGRESS_STEPS`) of ``cand`` starts."""
        if self.on_progress is not None:
            self.on_progress(Progress(cand.task_id, step))

    def _drop(self, outcome: Outcome, reason: str, detail: str | None = None) -> None:
        outcome.reason, outcome.detail = reason, detail

    def _evaluate(self, cand: Candidate, work: Path, outcome: Outcome) -> None:
        """Stage one candidate's task in ``work`` and publish it (or set the drop reason)."""
        raise NotImplementedError

    def _staging(self, cand: Candidate) -> Path:
        """``<out>/tasks/.<id>.staging``, emptied: where the candidate's task is written before
        the gate (:meth:`evaluate` removes it whatever happens)."""
        staging = self.out_dir / "tasks" / f".{cand.task_id}.staging"
        shutil.rmtree(staging, ignore_errors=True)
        return staging

    def _rewrite(
        self,
        cand: Candidate,
        instruction: str,
        *,
        gold_patch: str,
        workdir: str,
        finish: Callable[[str], str] = lambda text: text,
        required: list[str] | None = None,
        visible: str = "",
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
            required=required,
            visible=visible,
        )
        self.rewrites[cand.task_id] = rewrite.to_json()
        if rewrite.instruction is None:
            return instruction, rewrite
        return finish(rewrite.instruction), rewrite

    def _gate_and_publish(
        self, staging: Path, cand: Candidate, outcome: Outcome, rewrite: Rewrite | None
    ) -> bool:
        """Stamp provenance (after :attr:`annotate`), run the verify gate on the staged task as
        the pipeline's options ask for it and publish it atomically under
        ``<out>/tasks/<id>`` when verified; the staging folder never survives."""
        try:
            if self.annotate is not None:
                self.annotate(staging, cand)
            stamp_provenance(staging, source_access=self.source_access, rewrite=rewrite)
            self._progress(cand, "verify")
            result = self.gate(
                staging,
                reruns=self.options.verify_reruns,
                mutants=getattr(self.options, "mutants", 0),
                adversarial=getattr(self.options, "adversarial", False),
            )
            outcome.test_seconds += result.seconds
            if result.winners:
                self._drop(outcome, GAMEABLE, "; ".join(result.winners)[:300])
                return False
            if not result.verified:
                detail = "; ".join(result.reasons)[:300]
                self._drop(outcome, f"verify: {result.status}", detail)
                return False
            floor = getattr(self.options, "min_kill_rate", 0.0)
            if result.kill_rate is not None and result.kill_rate < floor:
                detail = f"kill rate {result.kill_rate:.2f} < {floor:g}: " + "; ".join(
                    result.survivors
                )
                self._drop(outcome, WEAK_TESTS, detail[:300])
                return False
            with self.stop.unless_stopped() as go:
                if not go:  # interrupted: the run's index is written without this task
                    self._drop(outcome, INTERRUPTED_DROP, "the run was interrupted")
                    return False
                publish_task_dir(staging, self.out_dir / "tasks" / cand.task_id)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        outcome.kept = True
        outcome.task_dir = self.out_dir / "tasks" / cand.task_id
        return True


def stamp_provenance(task_dir: Path, *, source_access: str, rewrite: Rewrite | None) -> None:
    """Record where the source came from and what the LLM rewrite did in ``task.toml``
    (``source_access``, ``synthesis_llm``, ``[metadata.repogym].instruction_rewrite``), then
    refresh the content hash."""
    if source_access == "local" and rewrite is None:
        return

    def change(config: TaskConfig) -> None:
        prov = config.metadata.setdefault("repo2env", {})
        prov["source_access"] = source_access
        if rewrite is not None:
            prov["synthesis_llm"] = rewrite.llm if rewrite.status == "accepted" else "none"
            config.metadata.setdefault("repogym", {})["instruction_rewrite"] = rewrite.to_json()

    update_task_toml(task_dir, change)
