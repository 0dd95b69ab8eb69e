"""Pipelines: mine a repository into Harbor task folders.

``generate(GenerationInput)`` drives any pipeline: it walks the pipeline's candidates, evaluates
them in parallel in the sandbox, publishes each kept task atomically under ``<out>/tasks/``,
records every outcome for ``--resume``, and writes ``registry.json``, ``manifest.json`` and
``generate-report.json`` at the end.

``--repo`` is anything :func:`repogym.sources.resolve.parse_repo_arg` accepts. GitHub and GitLab
repositories are read through their API plus a cached clone (:mod:`repogym.sources.remote`);
a pipeline declares the kinds of source it reads in its module's ``SOURCES`` (default
``{"local"}``) and ``generate`` refuses other pairings before doing any work.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repogym.harbor import atomic_write, discover
from repogym.harbor.dataset import write_dataset_index
from repogym.pipelines.base import Candidate, Outcome, YieldStats
from repogym.spec import GenerationInput

if TYPE_CHECKING:
    from repogym.pipelines._instruction import InstructionRewriter
    from repogym.sources.resolve import RepoArg

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


def resolve_repo(text: str, module: Any) -> RepoArg:
    """``--repo`` → where the repository lives, refused up front when the pipeline cannot
    read that kind of source (its module's ``SOURCES``; ``{"local"}`` when undeclared)."""
    from repogym.sources.resolve import parse_repo_arg

    try:
        arg = parse_repo_arg(text)
    except ValueError as exc:
        raw = text.strip()
        url = "://" in raw or raw.startswith("gitlab:")
        if not url and (raw.startswith(("/", ".", "~")) or raw.count("/") > 1):
            raise GenerateError(f"{text}: no such local repository") from None
        raise GenerateError(str(exc)) from None
    supported = set(getattr(module, "SOURCES", {"local"}))
    if arg.kind not in supported:
        why = getattr(module, "SOURCES_NOTE", "")
        raise GenerateError(
            f"pipeline {module.NAME} cannot read {arg.kind} repositories (it reads: "
            f"{', '.join(sorted(supported))}){': ' + why if why else ''}"
        )
    return arg


def _rewriter(inp: GenerationInput, module: Any) -> InstructionRewriter | None:
    """The LLM instruction rewriter of ``--llm``, checked before any work starts."""
    if not inp.llm:
        if inp.llm_endpoint:
            raise GenerateError("--llm-endpoint needs --llm provider/model")
        return None
    if not getattr(module, "LLM_REWRITE", False):
        raise GenerateError(f"--llm: pipeline {module.NAME} has no instruction rewrite")
    import importlib.util
    import os

    from repogym.llm import INSTALL_HINT, LLM, LLMError
    from repogym.pipelines._instruction import InstructionRewriter

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
    """change hash → task id of the tasks already in a dataset (see ``_emit.change_hash``):
    the same gold patch and tests are one task, whichever commit or pull request they came
    from."""
    import tomllib

    from repogym.pipelines._emit import change_hash

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


def generate(
    inp: GenerationInput,
    *,
    on_outcome: Callable[[Outcome, YieldStats], None] | None = None,
    on_drop: Callable[[str, str, YieldStats], None] | None = None,
) -> GenerateResult:
    from repogym.pipelines._emit import change_hash
    from repogym.pipelines._runtime import RuntimeHarness
    from repogym.sandbox import SandboxError, get_backend
    from repogym.sources import LocalGitSource, SourceError
    from repogym.sources.local import redact_url

    try:
        options = inp.pipeline_options()
    except ValueError as exc:
        raise GenerateError(str(exc)) from None
    module = importlib.import_module(PIPELINES[inp.pipeline])
    arg = resolve_repo(inp.repo, module)
    rewriter = _rewriter(inp, module)
    if getattr(options, "instruction", None) == "llm" and rewriter is None:
        raise GenerateError("--opt instruction=llm needs --llm provider/model")
    try:
        backend = get_backend(inp.sandbox)
    except SandboxError as exc:
        raise GenerateError(str(exc)) from None
    remote = None
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
    # First candidate before anything is written: an API error (rate limit, …) leaves no output.
    items = module.candidates(source, options, slug_for(repo_id), inp.rev)
    try:
        first = next(items, None)
    except SourceError as exc:
        raise GenerateError(str(exc)) from None
    out = inp.out
    (out / "tasks").mkdir(parents=True, exist_ok=True)
    state = _State(out / STATE_DIR / f"{inp.pipeline}-state.json", inp.resume)
    # A pipeline with its own task content provides make_harness(); others use the runtime one.
    make_harness = getattr(module, "make_harness", RuntimeHarness)
    runtime = make_harness is RuntimeHarness
    """Runtime tasks of one change are one task, whichever pipeline mined it."""
    harness = make_harness(
        source,
        backend,
        options,  # type: ignore[arg-type]
        pipeline=module.NAME,
        pipeline_version=module.VERSION,
        repo_label=repo_id,
        out_dir=out,
    )
    harness.source_access = "local" if remote is None else remote.access
    harness.rewriter = rewriter
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
    changes = _known_changes(out / "tasks")
    pending: set[Future[Outcome]] = set()
    stopped: GenerateError | None = None
    with ThreadPoolExecutor(max_workers=inp.jobs) as pool:
        try:
            for item in _chain(first, items):
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
                digest = (
                    change_hash(cand.source_patch, cand.test_patch)
                    if runtime and cand.patch
                    else None
                )
                if digest is not None and digest in changes:
                    dropped(cand.key, "duplicate change")
                    continue
                if digest is not None:
                    changes[digest] = cand.task_id
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
        except GenerateError as exc:
            stopped = exc  # candidates in flight still finish and are recorded
        for fut in pending:  # the pool waits for each in turn
            finished(fut)
    if stopped is not None:
        raise stopped
    found = discover(out / "tasks")
    write_dataset_index(out, found.tasks, name=f"{slug}-{inp.pipeline}")
    report = out / "generate-report.json"
    rewrites = getattr(harness, "rewrites", {})
    payload = {
        "repo": redact_url(inp.repo) if remote is not None else str(repo_path),
        "repo_id": repo_id,
        "source": remote.describe() if remote is not None else {"kind": "local"},
        "source_access": harness.source_access,
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
                **(
                    {"instruction_rewrite": rewrites[o.candidate.task_id]}
                    if o.candidate.task_id in rewrites
                    else {}
                ),
            }
            for o in outcomes
        ],
    }
    if rewriter is not None:
        payload["llm"] = rewriter.summary()
    atomic_write(report, json.dumps(payload, indent=2) + "\n")
    return GenerateResult(stats, outcomes, out, report)
