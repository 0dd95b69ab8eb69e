"""The worker's side of ``generate --executor ray``: evaluate one candidate on a Ray worker.

:func:`evaluate_remote` is the work function. It receives the run's description
(:class:`RemoteRun`: repository, pipeline, options, revision, sandbox — never a token: a GitHub
or GitLab token reaches the worker through the executor's ``env``) and one candidate. Once per
worker process and run it rebuilds the pipeline's harness (cached in :data:`_HARNESSES`) over its
own copy of the repository:

* a local repository: the driver shipped its history once as a ``git bundle`` (bytes in Ray's
  object store, :class:`Shipped`); the worker clones it into its cache under the bundle's
  digest (``$REPOGYM_CACHE/ray-repos/<digest>``), atomically, shared by the processes of that
  machine;
* a GitHub or GitLab repository: the worker opens its own cached clone, fetching a pull
  request's commits when they are missing.

The harness evaluates into a worker-local output folder. A kept task comes back as data (a tar
archive, :class:`RemoteResult`) and is deleted here: the driver alone publishes task folders
and writes the resume state and the reports (:mod:`.driver`).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.pipelines._harness.errors import ErrorLog
from repogym.pipelines.base import (
    Candidate,
    GateFactory,
    Harness,
    HarnessContext,
    Outcome,
    Pipeline,
)

KILL_HOOK = "REPOGYM_TEST_KILL_WORKER_ONCE"
"""Test-only: a marker file path; the first evaluation that finds it missing creates it and
kills its worker process (a lost worker, as when a node goes away)."""
CACHED_RUNS = 4
"""Harnesses kept per worker process (a campaign's repositories take turns)."""


@dataclass(frozen=True)
class Shipped:
    """A repository's history as a git bundle: ``data`` is the bytes, or a Ray object
    reference to them (read only by a worker whose cache lacks ``digest``)."""

    digest: str
    data: Any
    """The bytes, or the handle :meth:`Executor.put` gave for them."""


@dataclass(frozen=True)
class RemoteRun:
    """What a worker needs to rebuild a run's harness; no secrets."""

    key: str
    """Identity of the run (its worker-side harness is cached under it)."""
    pipeline: Pipeline
    options: Any
    """The pipeline's validated options model (not re-validated on the worker)."""
    rev: str
    sandbox: str
    repo_label: str
    source_access: str
    kind: str
    """``local``, ``github`` or ``gitlab``."""
    gate: GateFactory
    """Builds the verify gate for the worker's backend (a class, pickled by reference)."""
    locator: str = ""
    """``owner/name`` of a remote repository."""
    base_url: str | None = None
    bundle: Shipped | None = None
    """A local repository's history."""


@dataclass
class RemoteResult:
    """What one evaluation sends back to the driver."""

    outcome: Outcome
    """``task_dir`` is None: the task, when kept, is :attr:`archive`."""
    archive: bytes | None = None
    """The kept task's folder as a gzip'd tar archive."""
    digest: str | None = None
    """The content hash of that folder on the worker (checked again where it is unpacked)."""
    errors: str = ""
    """Tracebacks the harness logged for this candidate (the error log's text)."""
    rewrite: dict[str, Any] | None = None


@dataclass
class _Cached:
    harness: Harness
    source: Any
    out: Path
    errors: ErrorLog


_HARNESSES: OrderedDict[str, _Cached] = OrderedDict()
_lock = threading.Lock()


def evaluate_remote(run: RemoteRun, cand: Candidate) -> RemoteResult:
    """Evaluate ``cand`` with the harness of ``run`` on this worker (the work function of
    ``generate --executor ray``)."""
    _kill_hook()
    cached = _harness_for(run)
    if run.kind != "local" and cand.number is not None:
        cached.source.remote.ensure_commits(cached.source, cand.number, [cand.base, cand.head])
    task_dir = cached.out / "tasks" / cand.task_id
    archive, digest = None, None
    try:
        outcome = cached.harness.evaluate(cand)
        if outcome.kept and task_dir.is_dir():
            from repogym.executors.shipping import pack_folder
            from repogym.taskdir import content_hash

            archive, digest = pack_folder(task_dir), content_hash(task_dir)
    finally:
        shutil.rmtree(task_dir, ignore_errors=True)
        shutil.rmtree(task_dir.with_name(f".{cand.task_id}.staging"), ignore_errors=True)
    outcome.task_dir = None
    rewrite = cached.harness.rewrites.pop(cand.task_id, None)
    return RemoteResult(outcome, archive, digest, _drain(cached.errors), rewrite)


def _kill_hook() -> None:
    marker = os.environ.get(KILL_HOOK)
    if not marker:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return
    os.close(fd)
    os._exit(1)


def _drain(errors: ErrorLog) -> str:
    """The error log's text so far (then emptied): one evaluation runs at a time per process."""
    try:
        text = errors.path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    errors.path.unlink(missing_ok=True)
    return text


def _harness_for(run: RemoteRun) -> _Cached:
    with _lock:
        cached = _HARNESSES.get(run.key)
        if cached is not None:
            _HARNESSES.move_to_end(run.key)
            return cached
        cached = _build(run)
        _HARNESSES[run.key] = cached
        while len(_HARNESSES) > CACHED_RUNS:
            _key, old = _HARNESSES.popitem(last=False)
            old.source.close()
            shutil.rmtree(old.out, ignore_errors=True)
        return cached


def _build(run: RemoteRun) -> _Cached:
    """The run's harness over this worker's copy of the repository."""
    from repogym.sandbox import get_backend

    source = _open_source(run)
    out = Path(tempfile.mkdtemp(prefix="repogym-ray-out-"))
    atexit.register(shutil.rmtree, out, True)
    (out / "tasks").mkdir()
    errors = ErrorLog(out / "errors.log")
    backend = get_backend(run.sandbox)
    harness = run.pipeline.harness(
        HarnessContext(
            source=source,
            backend=backend,
            options=run.options,
            pipeline=run.pipeline.name,
            pipeline_version=run.pipeline.version,
            repo_label=run.repo_label,
            out_dir=out,
            gate=run.gate(backend),
            source_access=run.source_access,
            error_log=errors,
        )
    )
    return _Cached(harness, source, out, errors)


def _open_source(run: RemoteRun) -> Any:
    from repogym.sources import LocalGitSource

    if run.kind == "local":
        assert run.bundle is not None
        return LocalGitSource(_unbundled(run.bundle))
    from repogym.sources.remote import RemoteGitSource, open_remote
    from repogym.sources.resolve import RepoArg

    arg = RepoArg(run.kind, run.locator, run.base_url)  # type: ignore[arg-type]
    return RemoteGitSource(open_remote(arg))


def repos_cache() -> Path:
    """Where workers keep the repositories shipped to them: ``$REPOGYM_CACHE/ray-repos``."""
    from repogym.bootstrap import cache_root

    return cache_root() / "ray-repos"


def _unbundled(bundle: Shipped) -> Path:
    """The bare clone of ``bundle`` in this machine's cache (made once, atomically)."""
    final = repos_cache() / f"{bundle.digest}.git"
    if (final / "HEAD").is_file():
        return final
    from repogym.executors import fetch

    data = bytes(fetch(bundle.data))
    if hashlib.sha256(data).hexdigest() != bundle.digest:
        raise ValueError("the shipped repository does not match its digest")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{bundle.digest[:12]}.", dir=final.parent))
    try:
        (tmp / "repo.bundle").write_bytes(data)
        env = {**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
        proc = subprocess.run(
            [
                "git",
                "clone",
                "--quiet",
                "--mirror",
                str(tmp / "repo.bundle"),
                str(tmp / "repo.git"),
            ],
            capture_output=True,
            env=env,
            check=False,
        )
        if proc.returncode != 0:
            why = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            raise RuntimeError(f"cannot unpack the shipped repository: {why[0]}")
        try:
            os.rename(tmp / "repo.git", final)
        except OSError:
            if not (final / "HEAD").is_file():  # another process won the race: use its copy
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
