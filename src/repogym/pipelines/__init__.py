"""Pipelines: mine a repository into Harbor task folders.

``generate(GenerationInput)`` drives any pipeline: it walks the pipeline's candidates, evaluates
them in parallel in the sandbox, publishes each kept task atomically under ``<out>/tasks/``,
records every outcome for ``--resume``, and writes ``registry.json``, ``manifest.json`` and
``generate-report.json`` at the end.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.harbor import atomic_write, discover
from repogym.harbor.dataset import write_dataset_index
from repogym.pipelines.base import Candidate, Outcome, YieldStats
from repogym.spec import GenerationInput

PIPELINES = {
    "commit_runtime": "repogym.pipelines.commit_runtime",
    "pr_runtime": "repogym.pipelines.pr_runtime",
    "pr_diff": "repogym.pipelines.pr_diff",
}
STATE_DIR = ".repogym"


class GenerateError(ValueError):
    """Bad input for generate (unknown pipeline, not a repository, …): exit code 2."""


@dataclass
class GenerateResult:
    stats: YieldStats
    outcomes: list[Outcome]
    out: Path
    report: Path


class _State:
    """Outcome of every candidate examined, for ``--resume`` (written after each one)."""

    def __init__(self, path: Path, resume: bool) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.done: dict[str, dict[str, Any]] = {}
        if resume and path.is_file():
            self.done = json.loads(path.read_text())

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self.lock:
            self.done[key] = value
            atomic_write(self.path, json.dumps(self.done, indent=1, sort_keys=True))


def slug_for(repo_id: str) -> str:
    """``owner/name`` → ``owner__name``; a bare folder name gets the owner ``local``."""
    owner, _, name = repo_id.rpartition("/")
    clean = [
        "".join(c if c.isalnum() or c in "-_." else "-" for c in part)
        for part in (owner.split("/")[-1] or "local", name)
    ]
    return "__".join(clean)


def generate(
    inp: GenerationInput,
    *,
    on_outcome: Callable[[Outcome, YieldStats], None] | None = None,
    on_drop: Callable[[str, str, YieldStats], None] | None = None,
) -> GenerateResult:
    from repogym.pipelines._runtime import RuntimeHarness
    from repogym.sandbox import SandboxError, get_backend
    from repogym.sources import LocalGitSource, SourceError

    try:
        options = inp.pipeline_options()
    except ValueError as exc:
        raise GenerateError(str(exc)) from None
    module = importlib.import_module(PIPELINES[inp.pipeline])
    repo_path = Path(inp.repo).expanduser()
    if not repo_path.exists():
        raise GenerateError(
            f"{inp.repo}: no such local repository ({inp.pipeline} reads local git clones)"
        )
    try:
        source = LocalGitSource(repo_path)
        source.resolve(inp.rev)
    except SourceError as exc:
        raise GenerateError(str(exc)) from None
    try:
        backend = get_backend(inp.sandbox)
    except SandboxError as exc:
        raise GenerateError(str(exc)) from None
    repo_id = source.repo_id()
    out = inp.out
    (out / "tasks").mkdir(parents=True, exist_ok=True)
    state = _State(out / STATE_DIR / f"{inp.pipeline}-state.json", inp.resume)
    # A pipeline with its own task content provides make_harness(); others use the runtime one.
    make_harness = getattr(module, "make_harness", RuntimeHarness)
    harness = make_harness(
        source,
        backend,
        options,  # type: ignore[arg-type]
        pipeline=module.NAME,
        pipeline_version=module.VERSION,
        repo_label=repo_id,
        out_dir=out,
    )
    stats = YieldStats()
    outcomes: list[Outcome] = []
    max_candidates = getattr(options, "max_candidates", None)

    def dropped(key: str, reason: str) -> None:
        stats.drop(reason)
        state.put(key, {"status": "dropped", "reason": reason})
        if on_drop:
            on_drop(key, reason, stats)

    def finished(fut: Future[Outcome]) -> None:
        outcome = fut.result()
        outcomes.append(outcome)
        stats.record(outcome)
        with stats.lock:
            stats.running -= 1
        cand = outcome.candidate
        state.put(
            cand.key,
            {"status": "kept", "task_id": cand.task_id}
            if outcome.kept
            else {"status": "dropped", "reason": outcome.reason, "detail": outcome.detail},
        )
        if on_outcome:
            on_outcome(outcome, stats)

    slug = slug_for(repo_id)
    pending: set[Future[Outcome]] = set()
    with ThreadPoolExecutor(max_workers=inp.jobs) as pool:
        for item in module.candidates(source, options, slug, inp.rev):
            if max_candidates is not None and stats.seen >= max_candidates:
                break
            if inp.limit is not None and stats.kept >= inp.limit:
                break
            if isinstance(item, tuple):
                key, reason = item
                if key not in state.done:
                    dropped(key, reason)
                continue
            cand: Candidate = item
            if (out / "tasks" / cand.task_id).exists():
                stats.drop("already emitted")
                continue
            if cand.key in state.done:
                continue  # --resume: examined by an earlier run
            # Keep at most `jobs` evaluations in flight, and never more than the limit needs.
            while pending and (
                len(pending) >= inp.jobs
                or (inp.limit is not None and stats.kept + len(pending) >= inp.limit)
            ):
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    finished(fut)
            if inp.limit is not None and stats.kept >= inp.limit:
                break
            with stats.lock:
                stats.seen += 1
                stats.running += 1
            pending.add(pool.submit(harness.evaluate, cand))
        for fut in pending:  # the pool waits for each in turn
            finished(fut)
    found = discover(out / "tasks")
    write_dataset_index(out, found.tasks, name=f"{slug}-{inp.pipeline}")
    report = out / "generate-report.json"
    payload = {
        "repo": str(repo_path),
        "repo_id": repo_id,
        "pipeline": inp.pipeline,
        "options": options.model_dump(),
        "yield": stats.to_json(),
        "overhead_ratio": round(stats.elapsed / stats.test_seconds, 3)
        if stats.test_seconds
        else None,
        "outcomes": [
            {
                "key": o.candidate.key,
                "task_id": o.candidate.task_id,
                "kept": o.kept,
                "reason": o.reason,
                "detail": o.detail,
                "seconds": round(o.seconds, 2),
                "test_seconds": round(o.test_seconds, 2),
                "f2p": o.f2p,
                "p2p": o.p2p,
            }
            for o in outcomes
        ],
    }
    atomic_write(report, json.dumps(payload, indent=2) + "\n")
    return GenerateResult(stats, outcomes, out, report)
