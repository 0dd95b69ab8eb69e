"""``generate(GenerationInput)``: run a pipeline over a repository into a dataset folder.

It drives any registered :class:`~repogym.pipelines.base.Pipeline`: it walks the pipeline's
candidates, evaluates them in parallel in the sandbox, publishes each kept task atomically
under ``<out>/tasks/``, records every outcome for ``--resume``, and writes ``registry.json``,
``manifest.json`` and ``generate-report.json`` at the end. With a Ray executor
(``generate(inp, executor=…)``) the candidates are evaluated on the cluster's workers and this
process still alone writes the dataset (:mod:`._ray.driver`); campaigns over many repositories
are :mod:`.campaign`.

``--repo`` is anything :func:`repogym.sources.resolve.parse_repo_arg` accepts. GitHub and GitLab
repositories are read through their API plus a cached clone (:mod:`repogym.sources.remote`);
a pipeline declares the kinds of source it reads (:attr:`Pipeline.sources`) and ``generate``
refuses other pairings before doing any work.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repogym.atomic import atomic_write, prepare_output_folder
from repogym.errors import RepogymError
from repogym.pipelines._harness.errors import INTERNAL_ERROR, ErrorLog, describe, log_error
from repogym.pipelines._resume_state import GenerateStateError
from repogym.pipelines._resume_state import ResumeOutcomes as _ResumeOutcomes
from repogym.pipelines.base import (
    Candidate,
    GateFactory,
    Harness,
    HarnessContext,
    Outcome,
    Pipeline,
    Progress,
    StopSignal,
    YieldStats,
)
from repogym.pipelines.registry import describe_option_error, get_pipeline, options_model
from repogym.pipelines.report import GenerateReport, LlmUsage, OutcomeRow
from repogym.spec import GenerationInput
from repogym.taskdir import discover, iter_task_dirs
from repogym.taskdir.dataset import write_dataset_index

if TYPE_CHECKING:
    from repogym.executors import Executor
    from repogym.pipelines._instructions.text import InstructionRewriter
    from repogym.sources import Source
    from repogym.sources.resolve import RepoArg

STATE_DIR = ".repogym"
REPORT_FILE = "generate-report.json"


class GenerateError(RepogymError, ValueError):
    """Bad input for generate (unknown pipeline, not a repository, …): exit code 2."""


@dataclass
class GenerateResult:
    stats: YieldStats
    outcomes: list[Outcome]
    out: Path
    report: Path
    """``generate-report.json`` (what :attr:`summary` says, as written)."""
    summary: GenerateReport
    """The run's report: what ``generate --json`` prints."""


def _other_repository(out: Path, repo_id: str) -> str | None:
    """The repository of a task already under ``out/tasks`` that is not ``repo_id`` (a
    resumed run would mix two repositories' tasks in one dataset), or None."""
    from repogym.taskdir import discover

    for task in discover(out / "tasks").tasks if (out / "tasks").is_dir() else []:
        prov = task.provenance
        if prov is not None and prov.repo and prov.repo != repo_id:
            return prov.repo
    return None


def generation_input(**fields: Any) -> GenerationInput:
    """:class:`GenerationInput` from ``fields`` with its pipeline's options checked too;
    :class:`GenerateError` says what is wrong (an unknown option key lists the valid ones)."""
    from pydantic import ValidationError

    try:
        inp = GenerationInput(**fields)
        options_model(inp.pipeline).model_validate(inp.options)
    except ValidationError as exc:
        pipeline = str(fields.get("pipeline"))
        raise GenerateError(f"bad option: {describe_option_error(exc, pipeline)}") from None
    except ValueError as exc:
        raise GenerateError(str(exc)) from None
    return inp


def slug_for(repo_id: str) -> str:
    """``owner/name`` → ``owner__name``; a bare folder name gets the owner ``local``."""
    owner, _, name = repo_id.rpartition("/")
    clean = [
        "".join(c if c.isalnum() or c in "-_." else "-" for c in part)
        for part in (owner.split("/")[-1] or "local", name)
    ]
    return "__".join(clean)


def resolve_repo(text: str, pipeline: Pipeline) -> RepoArg:
    """``--repo`` → where the repository lives, refused up front when the pipeline cannot
    read that kind of source (:attr:`Pipeline.sources`)."""
    from repogym.sources.resolve import parse_repo_arg

    try:
        arg = parse_repo_arg(text)
    except ValueError as exc:
        raw = text.strip()
        url = "://" in raw or raw.startswith("gitlab:")
        if not url and (raw.startswith(("/", ".", "~")) or raw.count("/") > 1):
            raise GenerateError(f"{text}: no such local repository") from None
        raise GenerateError(str(exc)) from None
    supported = set(pipeline.sources)
    if arg.kind not in supported:
        why = pipeline.sources_note
        raise GenerateError(
            f"pipeline {pipeline.name} cannot read {arg.kind} repositories (it reads: "
            f"{', '.join(sorted(supported))}){': ' + why if why else ''}"
        )
    return arg


def tasks_held(out_dir: Path) -> int:
    """How many tasks ``out_dir/tasks`` already holds (``generate`` without ``resume`` refuses
    a folder holding any)."""
    tasks = out_dir / "tasks"
    return sum(1 for _ in iter_task_dirs(tasks)) if tasks.is_dir() else 0


def _rewriter(inp: GenerationInput, pipeline: Pipeline) -> InstructionRewriter | None:
    """The LLM instruction rewriter of ``--llm``, checked before any work starts."""
    if not inp.llm:
        if inp.llm_endpoint:
            raise GenerateError("--llm-endpoint needs --llm provider/model")
        return None
    if not pipeline.llm_rewrite:
        raise GenerateError(f"--llm: pipeline {pipeline.name} has no instruction rewrite")
    import importlib.util
    import os

    from repogym.llm import INSTALL_HINT, LLM, LLMError
    from repogym.pipelines._instructions.text import InstructionRewriter

    sdk = "anthropic" if inp.llm.startswith("anthropic/") else "openai"
    if importlib.util.find_spec(sdk) is None:
        raise GenerateError(f"--llm {inp.llm}: the {sdk!r} package is needed: {INSTALL_HINT}")
    try:
        llm = LLM(
            inp.llm,
            endpoint=inp.llm_endpoint,
            api_key=os.environ.get("REPOGYM_LLM_API_KEY", "").strip() or None,
            max_retries=2,
            backoff_s=0.5,
        )
    except (LLMError, ValueError) as exc:
        hint = " (or REPOGYM_LLM_API_KEY)" if "no API key" in str(exc) else ""
        raise GenerateError(f"--llm: {exc}{hint}") from None
    return InstructionRewriter(llm)


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    """``first`` then ``rest``; a source error on the way stops generate with a clear message
    (tasks already published are complete; ``--resume`` continues)."""
    from repogym.sources import SourceError

    if first is None:
        return
    yield first
    try:
        yield from rest
    except SourceError as exc:
        msg = f"{exc} (tasks emitted so far are complete; rerun with --resume)"
        raise GenerateError(msg) from None


def _known_changes(tasks_dir: Path) -> dict[str, str]:
    """change hash → task id of the tasks already in a dataset (see ``_harness.emit.change_hash``):
    the same gold patch and tests are one task, whichever commit or pull request they came
    from."""
    import tomllib

    from repogym.pipelines._harness.emit import change_hash

    out: dict[str, str] = {}
    if not tasks_dir.is_dir():
        return out
    for task_dir in sorted(tasks_dir.iterdir()):
        try:
            data = tomllib.loads((task_dir / "task.toml").read_text())
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        digest = ((data.get("metadata") or {}).get("repogym") or {}).get("change_hash")
        if not digest:
            gold, tests = task_dir / "solution" / "patch.diff", task_dir / "tests" / "test.patch"
            if not (gold.is_file() and tests.is_file()):
                continue
            digest = change_hash(
                gold.read_bytes().decode("utf-8", "surrogateescape"),
                tests.read_bytes().decode("utf-8", "surrogateescape"),
            )
        out.setdefault(digest, task_dir.name)
    return out


@dataclass
class Setup:
    """A run ready to evaluate candidates (:func:`prepare`): the input checked, the source
    open, the first candidate read, the output folder and its resume state open."""

    inp: GenerationInput
    pipeline: Pipeline
    options: Any
    arg: RepoArg
    gate: GateFactory
    """Builds the verify gate for a sandbox backend (here, or on each worker)."""
    backend: Any
    """The sandbox backend (None when the candidates are evaluated elsewhere)."""
    source: Source
    remote: Any
    repo_id: str
    slug: str
    items: Iterator[Any]
    state: _ResumeOutcomes
    errors: ErrorLog
    context: _ReportContext
    stats: YieldStats = field(default_factory=YieldStats)
    outcomes: list[Outcome] = field(default_factory=list)
    run: _Run = field(default_factory=lambda: _Run())
    stop: StopSignal = field(default_factory=StopSignal)

    @property
    def source_access(self) -> str:
        return "local" if self.remote is None else str(self.remote.access)

    def write_report(self) -> GenerateReport:
        """``registry.json``, ``manifest.json`` and ``generate-report.json`` of the run so far
        (the report is returned too)."""
        name = f"{self.slug}-{self.inp.pipeline}"
        return _write_report(self.context, self.stats, self.outcomes, self.run, index_name=name)


def prepare(inp: GenerationInput, *, gate: GateFactory, local: bool = True) -> Setup:
    """Check ``inp`` and open the run (see :func:`generate`); :class:`GenerateError` for bad
    input, with nothing written. ``gate`` builds the verify gate for a backend. ``local=False``:
    the candidates are evaluated on other machines, so this one needs no sandbox backend."""
    from repogym.sandbox import SandboxError, get_backend
    from repogym.sources import LocalGitSource, SourceError

    try:
        pipeline = get_pipeline(inp.pipeline)
    except KeyError as exc:
        raise GenerateError(exc.args[0]) from None
    try:
        options = pipeline.options_model.model_validate(inp.options)
    except ValueError as exc:
        raise GenerateError(str(exc)) from None
    if not inp.resume:
        held = tasks_held(inp.out)
        if held:
            raise GenerateError(
                f"--out {inp.out} already holds {held} task(s) of an earlier run; use --resume "
                "to continue it, or another --out"
            )
    arg = resolve_repo(inp.repo, pipeline)
    rewriter = _rewriter(inp, pipeline)
    if getattr(options, "instruction", None) == "llm" and rewriter is None:
        raise GenerateError("--opt instruction=llm needs --llm provider/model")
    backend = None
    if local:
        try:
            backend = get_backend(inp.sandbox)
        except SandboxError as exc:
            raise GenerateError(str(exc)) from None
    remote = None
    source: Source
    try:
        if arg.kind == "local":
            source = LocalGitSource(Path(arg.locator))
        else:
            from repogym.sources.remote import RemoteGitSource, open_remote

            remote = open_remote(arg)
            source = RemoteGitSource(remote)
        source.resolve(inp.rev)
    except SourceError as exc:
        raise GenerateError(str(exc)) from None
    repo_path = Path(arg.locator) if remote is None else remote.clone
    repo_id = source.repo_id()
    slug = slug_for(repo_id)
    # First candidate before anything is written: an API error (rate limit, …) leaves no output.
    items = pipeline.candidates(source, options, slug, inp.rev)
    try:
        first = next(items, None)
    except SourceError as exc:
        raise GenerateError(str(exc)) from None
    out = inp.out
    if inp.resume:
        other = _other_repository(out, repo_id)
        if other is not None:
            raise GenerateError(
                f"--resume: {out} holds tasks of {other}, not {repo_id}; give another --out"
            )
    try:
        state = _ResumeOutcomes(out / STATE_DIR / f"{inp.pipeline}-state.json", inp.resume)
    except GenerateStateError as exc:
        raise GenerateError(str(exc)) from None
    try:
        prepare_output_folder(out)
    except OSError as exc:
        reason = "no space left on the device" if exc.errno == errno.ENOSPC else exc.strerror
        raise GenerateError(f"--out {out}: cannot write there ({reason})") from None
    (out / "tasks").mkdir(parents=True, exist_ok=True)
    for leftover in (out / "tasks").glob(".*.staging"):  # a killed run's task in flight
        shutil.rmtree(leftover, ignore_errors=True)
    errors = ErrorLog(out / STATE_DIR / f"{inp.pipeline}-errors.log")
    return Setup(
        inp=inp,
        pipeline=pipeline,
        options=options,
        arg=arg,
        gate=gate,
        backend=backend,
        source=source,
        remote=remote,
        repo_id=repo_id,
        slug=slug,
        items=_chain(first, items),
        state=state,
        errors=errors,
        context=_ReportContext(inp, options, repo_id, repo_path, remote, rewriter, errors),
    )


def generate(
    inp: GenerationInput,
    *,
    gate: GateFactory,
    on_outcome: Callable[[Outcome, YieldStats], None] | None = None,
    on_drop: Callable[[str, str, YieldStats], None] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    executor: Executor | None = None,
) -> GenerateResult:
    """Run ``inp.pipeline`` over ``inp.repo`` into ``inp.out`` (see the module docstring);
    :class:`GenerateError` for bad input (``inp.out`` holding tasks without ``inp.resume``
    included) or a source that fails on the way.

    ``on_outcome`` is told each candidate's outcome, ``on_drop`` each cheap drop (both from
    this thread); ``on_progress`` each step of each evaluation (:class:`Progress`: build,
    tests before and after the fix, verify …), from the worker threads.

    ``gate`` builds the verify gate every staged task passes, for a sandbox backend (the
    caller wires it: :class:`repogym.run.gate.TaskGate`, as :func:`repogym.workflows.generate`
    does).

    ``executor``: None or a local one evaluates ``inp.jobs`` candidates at once in threads
    here; another (Ray) evaluates them on its workers (:mod:`._ray.driver`; no ``on_progress``).
    """
    if executor is not None and executor.name != "local":
        from repogym.pipelines._ray.driver import generate_remote

        return generate_remote(inp, executor, gate=gate, on_outcome=on_outcome, on_drop=on_drop)
    return run_here(
        prepare(inp, gate=gate), on_outcome=on_outcome, on_drop=on_drop, on_progress=on_progress
    )


def run_here(
    s: Setup,
    *,
    on_outcome: Callable[[Outcome, YieldStats], None] | None = None,
    on_drop: Callable[[str, str, YieldStats], None] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> GenerateResult:
    """Evaluate the candidates of a prepared run in threads of this process (``jobs`` at once);
    the reports are written however it ends."""
    inp = s.inp
    try:
        harness = s.pipeline.harness(
            HarnessContext(
                source=s.source,
                backend=s.backend,
                options=s.options,
                pipeline=s.pipeline.name,
                pipeline_version=s.pipeline.version,
                repo_label=s.repo_id,
                out_dir=inp.out,
                gate=s.gate(s.backend),
                source_access=s.source_access,
                rewriter=s.context.rewriter,
                error_log=s.errors,
                on_progress=on_progress,
                stop=s.stop,
            )
        )
        s.context.harness = harness
        _run_candidates(
            inp,
            s.options,
            harness=harness,
            items=s.items,
            dedupe=s.pipeline.dedupe_changes,
            state=s.state,
            stats=s.stats,
            outcomes=s.outcomes,
            run=s.run,
            errors=s.errors,
            on_outcome=on_outcome,
            on_drop=on_drop,
            stop=s.stop,
        )
    except BaseException as exc:
        s.run.ended_by(exc, s.errors)
        raise
    finally:
        report = s.write_report()
    return GenerateResult(s.stats, s.outcomes, inp.out, inp.out / REPORT_FILE, report)


@dataclass
class _Run:
    """How the run ended, for the report."""

    status: str = "complete"
    """``complete``, ``stopped`` (a source error: ``--resume`` continues), ``interrupted``
    (Ctrl-C) or ``error`` (an unexpected exception outside any one candidate)."""
    error: BaseException | None = None
    in_flight: list[str] | None = None
    """Keys of candidates still being evaluated when the run ended abnormally."""

    def ended_by(self, exc: BaseException, errors: ErrorLog) -> None:
        """Record that ``exc`` ended the run (a source error, Ctrl-C, anything else)."""
        self.error = exc
        if isinstance(exc, GenerateError):
            self.status = "stopped"
        elif isinstance(exc, KeyboardInterrupt):
            self.status = "interrupted"
        else:
            self.status = "error"
            log_error(errors, "generate", exc)


@dataclass
class _ReportContext:
    """What the report says about the run besides the outcomes."""

    inp: GenerationInput
    options: Any
    repo_id: str
    repo_path: Path
    remote: Any
    rewriter: InstructionRewriter | None
    errors: ErrorLog
    harness: Harness | None = None
    rewrites: dict[str, dict[str, Any]] = field(default_factory=dict)
    """task id → the LLM rewrite of its instruction, when no harness of this process has it."""


def _crashed(cand: Candidate, exc: BaseException, out: Path, errors: ErrorLog) -> Outcome:
    """The outcome of a candidate whose evaluation raised out of the harness itself."""
    log_error(errors, f"candidate {cand.key} ({cand.task_id})", exc)
    shutil.rmtree(out / "tasks" / f".{cand.task_id}.staging", ignore_errors=True)
    return Outcome(cand, kept=False, reason=INTERNAL_ERROR, detail=describe(exc))


def _screen(
    item: Any,
    out: Path,
    state: _ResumeOutcomes,
    stats: YieldStats,
    changes: dict[str, str],
    dedupe: bool,
    dropped: Callable[[str, str], None],
) -> Candidate | None:
    """The candidate ``item`` is when it is to be evaluated; None when it is skipped: a cheap
    drop (``(key, reason)``), a task already emitted, a candidate an earlier run examined
    (``--resume``) or a change already seen (``changes``: digest → task id, updated)."""
    from repogym.pipelines._harness.emit import change_hash

    if isinstance(item, tuple):
        key, reason = item
        if key not in state.done:
            dropped(key, reason)
        return None
    cand: Candidate = item
    if (out / "tasks" / cand.task_id).exists():
        stats.drop("already emitted")
        return None
    if state.done.get(cand.key, {}).get("status") not in (None, "error"):
        return None  # --resume: examined by an earlier run
    digest = change_hash(cand.source_patch, cand.test_patch) if dedupe and cand.patch else None
    if digest is not None and digest in changes:
        dropped(cand.key, "duplicate change")
        return None
    if digest is not None:
        changes[digest] = cand.task_id
    return cand


def _state_entry(cand: Candidate, outcome: Outcome) -> dict[str, Any]:
    """What the resume state keeps of an outcome."""
    if outcome.kept:
        return {"status": "kept", "task_id": cand.task_id}
    # An internal error is retried by --resume: the crash may be fixed by then.
    status = "error" if outcome.reason == INTERNAL_ERROR else "dropped"
    return {"status": status, "reason": outcome.reason, "detail": outcome.detail}


def _run_candidates(
    inp: GenerationInput,
    options: Any,
    *,
    harness: Harness,
    items: Iterator[Any],
    dedupe: bool,
    state: _ResumeOutcomes,
    stats: YieldStats,
    outcomes: list[Outcome],
    run: _Run,
    errors: ErrorLog,
    on_outcome: Callable[[Outcome, YieldStats], None] | None,
    on_drop: Callable[[str, str, YieldStats], None] | None,
    stop: StopSignal | None = None,
) -> None:
    """Walk the candidates, evaluate them ``inp.jobs`` at a time and record every outcome.

    A candidate whose evaluation raises is dropped as ``internal error``; the run goes on. A
    source error (:class:`GenerateError`) stops the walk after the candidates in flight
    finish. Any other exception (Ctrl-C included) leaves at once: candidates not started are
    cancelled, those in flight are listed in ``run.in_flight``.
    """
    out = inp.out
    max_candidates = getattr(options, "max_candidates", None)
    futures: dict[Future[Outcome], Candidate] = {}
    """Submitted evaluations whose outcome is not recorded yet."""

    def dropped(key: str, reason: str) -> None:
        stats.drop(reason)
        state.put(key, {"status": "dropped", "reason": reason})
        if on_drop:
            on_drop(key, reason, stats)

    def finished(fut: Future[Outcome], *, notify: bool = True) -> None:
        cand = futures.pop(fut)
        try:
            outcome = fut.result()
        except Exception as exc:  # a harness without the runtime one's safety net
            outcome = _crashed(cand, exc, out, errors)
        outcomes.append(outcome)
        stats.record(outcome)
        with stats.lock:
            stats.running -= 1
        state.put(cand.key, _state_entry(cand, outcome))
        if on_outcome and notify:
            on_outcome(outcome, stats)

    changes = _known_changes(out / "tasks")
    pending: set[Future[Outcome]] = set()
    stopped: GenerateError | None = None
    pool = ThreadPoolExecutor(max_workers=inp.jobs)
    clean = False
    try:
        try:
            for item in items:
                if max_candidates is not None and stats.seen >= max_candidates:
                    break
                if inp.limit is not None and stats.kept >= inp.limit:
                    break
                cand = _screen(item, out, state, stats, changes, dedupe, dropped)
                if cand is None:
                    continue
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
                fut = pool.submit(harness.evaluate, cand)
                futures[fut] = cand
                pending.add(fut)
        except GenerateError as exc:
            stopped = exc  # candidates in flight still finish and are recorded
        for fut in list(futures):  # in submission order; each waits for its outcome
            finished(fut)
        clean = True
    finally:
        if not clean and stop is not None:
            stop.stop()  # no task in flight publishes after this: the index is written next
        pool.shutdown(wait=clean, cancel_futures=True)
        if not clean:
            settled = [f for f in futures if f.done() and not f.cancelled()]
            _end_in_flight([f for f in futures if not f.done()])
            # Record what had finished (quietly: the run is ending), list the rest.
            for fut in settled:
                try:
                    finished(fut, notify=False)
                except Exception:  # the report must still be written
                    futures.pop(fut, None)
            run.in_flight = [c.key for f, c in futures.items() if not f.cancelled()]
    if stopped is not None:
        raise stopped


def _end_in_flight(running: list[Future[Outcome]], wait_s: float = 60.0) -> None:
    """An interrupted run does not wait for its candidates' commands: their sandboxes are
    closed, so each evaluation in flight ends within seconds (its outcome is not recorded:
    ``--resume`` evaluates it again), and sandboxes may start again afterwards."""
    if not running:
        return
    from repogym.sandbox import interrupt_sandboxes, resume_sandboxes

    interrupt_sandboxes()
    try:
        wait(running, timeout=wait_s)
    finally:
        resume_sandboxes()


def _write_report(
    ctx: _ReportContext, stats: YieldStats, outcomes: list[Outcome], run: _Run, *, index_name: str
) -> GenerateReport:
    """Write ``registry.json``, ``manifest.json`` and ``generate-report.json`` for the tasks
    published so far (also after an error or Ctrl-C: never raises on that path); returns the
    report written."""
    from repogym._secrets import redact_url

    inp, out, remote = ctx.inp, ctx.inp.out, ctx.remote
    try:
        found = discover(out / "tasks")
        write_dataset_index(out, found.tasks, name=index_name)
    except Exception as exc:
        if run.error is None:
            raise
        log_error(ctx.errors, "dataset index", exc)
    rewrites = ctx.harness.rewrites if ctx.harness is not None else ctx.rewrites
    error = None
    if run.error is not None:
        error = (
            "KeyboardInterrupt" if isinstance(run.error, KeyboardInterrupt) else describe(run.error)
        )
    report = GenerateReport(
        repo=redact_url(inp.repo) if remote is not None else str(ctx.repo_path),
        repo_id=ctx.repo_id,
        source=remote.describe() if remote is not None else {"kind": "local"},
        source_access="local" if remote is None else remote.access,
        pipeline=inp.pipeline,
        options=ctx.options.model_dump(),
        status=run.status,
        yield_counts=stats.to_json(),
        overhead_ratio=GenerateReport.overhead(stats),
        outcomes=[OutcomeRow.of(o, rewrites.get(o.candidate.task_id)) for o in outcomes],
        error=error,
        in_flight=run.in_flight or None,
        errors_log=str(ctx.errors.path) if ctx.errors.count else None,
        llm=LlmUsage.from_json(ctx.rewriter.summary()) if ctx.rewriter is not None else None,
    )
    atomic_write(out / REPORT_FILE, report.to_text())
    return report
