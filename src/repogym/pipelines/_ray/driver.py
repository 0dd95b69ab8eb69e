"""The driver's side of ``generate --executor ray`` (and of campaigns on Ray).

Data flow: the driver walks each repository's candidates here (cheap: git history), turns every
candidate that needs a sandbox into a :class:`~repogym.executors.Work` unit
calling :func:`.worker.evaluate_remote` with the run's :class:`.worker.RemoteRun` (a local
repository's history shipped once as a git bundle through ``executor.put``), and records each
:class:`~repogym.executors.Done` as it comes back: a kept task's archive is
unpacked into ``<out>/tasks/.<id>.staging`` and renamed into place (the same atomic publish as a
local run), the outcome goes into the resume state, the yield counts and, at the end, the
reports. Workers never write the dataset.

:class:`RepoDriver` does this for one repository; :func:`run_drivers` feeds the units of several
(a campaign) round-robin into one executor stream, so a big repository does not hold up the
rest. At most ``parallel`` units are in flight, and never more than a repository's ``--limit``
still needs (as with the local executor). A unit whose worker was lost past Ray's retries, or
whose evaluation raised, is recorded as ``internal error`` with the reason: ``--resume``
evaluates it again.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from repogym.executors import Done, Executor, Work
from repogym.pipelines._harness.errors import DETAIL_LIMIT, INTERNAL_ERROR, describe
from repogym.pipelines._ray.worker import (
    KILL_HOOK,
    RemoteResult,
    RemoteRun,
    Shipped,
    evaluate_remote,
)
from repogym.pipelines.base import Candidate, GateFactory, Outcome, YieldStats
from repogym.pipelines.generation import (
    REPORT_FILE,
    GenerateError,
    GenerateResult,
    Setup,
    _known_changes,
    prepare,
)
from repogym.pipelines.report import GenerateReport
from repogym.spec import GenerationInput
from repogym.taskdir import publish_task_dir

FORWARDED_ENV = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "REPOGYM_GITHUB_API",
    "REPOGYM_GITLAB_URL",
    KILL_HOOK,
)
"""Variables of the driver's environment the workers get (through the executor's ``env``)."""


def worker_env(*, github: bool = False) -> dict[str, str]:
    """The environment the workers need: tokens and host settings set here (with ``github``,
    the GitHub CLI's token when no variable holds one)."""
    env = {k: os.environ[k] for k in FORWARDED_ENV if os.environ.get(k, "").strip()}
    if github and not ({"GITHUB_TOKEN", "GH_TOKEN"} & set(env)):
        from repogym.auth import github_token_source

        token, _where = github_token_source()
        if token:
            env["GITHUB_TOKEN"] = token
    return env


def worker_env_for(repos: list[str]) -> dict[str, str]:
    """:func:`worker_env` for these ``--repo`` values (the GitHub CLI's token is asked for
    only when one is a GitHub repository)."""
    from repogym.sources.resolve import parse_repo_arg

    kinds = set()
    for text in repos:
        try:
            kinds.add(parse_repo_arg(text).kind)
        except ValueError:
            continue
    return worker_env(github="github" in kinds)


def generate_remote(
    inp: GenerationInput,
    executor: Executor,
    *,
    gate: GateFactory,
    on_outcome: Callable[[Outcome, YieldStats], None] | None = None,
    on_drop: Callable[[str, str, YieldStats], None] | None = None,
) -> GenerateResult:
    """:func:`~repogym.pipelines.generation.generate` with the candidates evaluated by
    ``executor`` (same checks, outputs and exceptions)."""
    refuse_llm(inp)
    setup = prepare(inp, gate=gate, local=False)
    try:
        driver = RepoDriver(setup, executor, on_outcome=on_outcome, on_drop=on_drop)
    except BaseException as exc:  # the repository could not be shipped
        setup.run.ended_by(exc, setup.errors)
        setup.write_report()
        raise
    ended: BaseException | None = None
    try:
        run_drivers([driver], executor, parallel=capacity(executor, inp.jobs))
    except BaseException as exc:
        ended = exc
        raise
    finally:
        report = driver.end(ended)
    if driver.failure is not None:
        raise driver.failure
    return GenerateResult(setup.stats, setup.outcomes, inp.out, inp.out / REPORT_FILE, report)


def refuse_llm(inp: GenerationInput) -> None:
    if inp.llm:
        raise GenerateError(
            "--llm is not available with --executor ray yet (the rewrite's usage is counted "
            "on one machine); run it with the local executor"
        )


def capacity(executor: Executor, jobs: int) -> int:
    """Units in flight at once: the cluster's CPUs (at least ``jobs``)."""
    ray = getattr(executor, "ray", None)
    cpus = 0
    if ray is not None:
        try:
            cpus = int(ray.cluster_resources().get("CPU", 0))
        except Exception:  # noqa: BLE001 - the cluster is asked again by the tasks themselves
            cpus = 0
    return max(jobs, cpus, 1)


def run_drivers(
    drivers: list[RepoDriver],
    executor: Executor,
    *,
    parallel: int,
    on_done: Callable[[RepoDriver], None] | None = None,
) -> None:
    """Evaluate the candidates of every driver with ``executor``, their units interleaved
    round-robin in one stream (at most ``parallel`` in flight); ``on_done`` is told each
    driver as soon as it has finished. Returns when every driver has finished."""
    owner: dict[str, RepoDriver] = {}
    told: set[int] = set()

    def settle() -> None:
        for driver in drivers:
            if on_done is not None and driver.done and id(driver) not in told:
                told.add(id(driver))
                on_done(driver)

    def stream(active: list[RepoDriver]) -> Iterator[Work]:
        while True:
            gave = False
            for driver in active:
                unit = driver.next_unit()
                if unit is not None:
                    gave = True
                    owner[unit.key] = driver
                    yield unit
            settle()
            if not gave:  # each waits for what it has in flight (a limit), or is done
                return

    while active := [d for d in drivers if not d.done]:
        for done in executor.map(stream(active), parallel=parallel):
            owner.pop(done.key).finished(done)
            settle()
    settle()


def remote_run(setup: Setup, executor: Executor) -> RemoteRun:
    """The description of ``setup``'s run that workers rebuild its harness from; a local
    repository's history goes into the executor's object store once, as a git bundle."""
    arg, bundle = setup.arg, None
    if arg.kind == "local":
        data = git_bundle(setup.context.repo_path)
        bundle = Shipped(hashlib.sha256(data).hexdigest(), executor.put(data))
    identity = [
        bundle.digest if bundle else f"{arg.kind}:{arg.base_url}:{arg.locator}",
        setup.pipeline.name,
        setup.pipeline.version,
        setup.options.model_dump_json(),
        setup.inp.sandbox,
        setup.repo_id,
        setup.source_access,
    ]
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:20]
    return RemoteRun(
        key=key,
        pipeline=setup.pipeline,
        options=setup.options,
        gate=setup.gate,
        rev=setup.inp.rev,
        sandbox=setup.inp.sandbox,
        repo_label=setup.repo_id,
        source_access=setup.source_access,
        kind=arg.kind,
        locator=arg.locator if arg.kind != "local" else "",
        base_url=arg.base_url,
        bundle=bundle,
    )


def git_bundle(repo: Path) -> bytes:
    """Every ref of the repository (branches, tags, HEAD) and its history, as a git bundle."""
    env = {**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
    proc = subprocess.run(
        ["git", "-C", str(repo), "bundle", "create", "--quiet", "-", "--all"],
        capture_output=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        why = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["failed"]
        raise GenerateError(f"cannot ship the repository to the workers: git bundle: {why[0]}")
    return proc.stdout


class RepoDriver:
    """One repository's run whose candidates an executor evaluates: it hands out units
    (:meth:`next_unit`), records each finished one (:meth:`finished`) and writes the reports
    (:meth:`end`). Same filters, resume state and reports as the local run."""

    def __init__(
        self,
        setup: Setup,
        executor: Executor,
        *,
        tag: str = "",
        on_outcome: Callable[[Outcome, YieldStats], None] | None = None,
        on_drop: Callable[[str, str, YieldStats], None] | None = None,
    ) -> None:
        self.s = setup
        self.tag = tag
        """Prefix of this driver's unit keys (unique among the drivers of one stream)."""
        self.on_outcome, self.on_drop = on_outcome, on_drop
        self.run = remote_run(setup, executor)
        self.in_flight: dict[str, Candidate] = {}
        self.changes = _known_changes(setup.inp.out / "tasks")
        self.exhausted = False
        self.failure: Exception | None = None
        """What stopped the walk of the candidates (a source error: GenerateError)."""

    @property
    def done(self) -> bool:
        return self.exhausted and not self.in_flight

    def next_unit(self) -> Work | None:
        """The next candidate to evaluate, or None: none left (:attr:`exhausted`), or none
        until those in flight finish (the limit may be reached by them)."""
        if self.exhausted:
            return None
        inp, stats, state = self.s.inp, self.s.stats, self.s.state
        limit, out = inp.limit, inp.out
        max_candidates = getattr(self.s.options, "max_candidates", None)
        while True:
            if (max_candidates is not None and stats.seen >= max_candidates) or (
                limit is not None and stats.kept >= limit
            ):
                self.exhausted = True
                return None
            if limit is not None and stats.kept + len(self.in_flight) >= limit:
                return None
            try:
                item = next(self.s.items)
            except StopIteration:
                self.exhausted = True
                return None
            except Exception as exc:  # a source error (or a bug) ends this repository's walk
                self.failure, self.exhausted = exc, True
                return None
            if isinstance(item, tuple):
                key, reason = item
                if key not in state.done:
                    self._dropped(key, reason)
                continue
            cand: Candidate = item
            if (out / "tasks" / cand.task_id).exists():
                stats.drop("already emitted")
                continue
            if state.done.get(cand.key, {}).get("status") not in (None, "error"):
                continue  # --resume: examined by an earlier run
            digest = self._change(cand)
            if digest is not None and digest in self.changes:
                self._dropped(cand.key, "duplicate change")
                continue
            if digest is not None:
                self.changes[digest] = cand.task_id
            with stats.lock:
                stats.seen += 1
                stats.running += 1
            key = f"{self.tag}{cand.key}"
            self.in_flight[key] = cand
            return Work(key, evaluate_remote, (self.run, cand))

    def _change(self, cand: Candidate) -> str | None:
        from repogym.pipelines._harness.emit import change_hash

        if not (self.s.pipeline.dedupe_changes and cand.patch):
            return None
        return change_hash(cand.source_patch, cand.test_patch)

    def _dropped(self, key: str, reason: str) -> None:
        self.s.stats.drop(reason)
        self.s.state.put(key, {"status": "dropped", "reason": reason})
        if self.on_drop:
            self.on_drop(key, reason, self.s.stats)

    def finished(self, done: Done) -> None:
        """Record one evaluation: publish its task when kept, note its outcome."""
        cand = self.in_flight.pop(done.key)
        s = self.s
        if done.ok and isinstance(done.value, RemoteResult):
            result: RemoteResult = done.value
            outcome = result.outcome
            s.errors.extend(result.errors)
            if result.rewrite is not None:
                s.context.rewrites[cand.task_id] = result.rewrite
            if outcome.kept:
                try:
                    outcome.task_dir = publish_archive(result, s.inp.out, cand.task_id)
                except Exception as exc:  # noqa: BLE001 - costs this candidate only
                    self._log(cand, f"{describe(exc)}\n")
                    outcome = Outcome(cand, kept=False, reason=INTERNAL_ERROR, detail=describe(exc))
        else:
            why = done.error or f"unexpected result {type(done.value).__name__}"
            self._log(cand, done.detail or why + "\n")
            outcome = Outcome(cand, kept=False, reason=INTERNAL_ERROR, detail=_bounded(why))
        s.outcomes.append(outcome)
        s.stats.record(outcome)
        with s.stats.lock:
            s.stats.running -= 1
        if outcome.kept:
            entry: dict[str, Any] = {"status": "kept", "task_id": cand.task_id}
        else:
            # An internal error is retried by --resume: the crash may be fixed by then.
            status = "error" if outcome.reason == INTERNAL_ERROR else "dropped"
            entry = {"status": status, "reason": outcome.reason, "detail": outcome.detail}
        s.state.put(cand.key, entry)
        if self.on_outcome:
            self.on_outcome(outcome, s.stats)

    def _log(self, cand: Candidate, text: str) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        self.s.errors.extend(f"=== {stamp} candidate {cand.key} ({cand.task_id})\n{text}\n")

    def end(self, exc: BaseException | None = None) -> GenerateReport:
        """Note how the run ended (``exc``: what interrupted it) and write its reports."""
        run = self.s.run
        ended = exc if exc is not None else self.failure
        if ended is not None:
            run.ended_by(ended, self.s.errors)
        if exc is not None and self.in_flight:
            run.in_flight = [c.key for c in self.in_flight.values()]
        return self.s.write_report()


def _bounded(text: str) -> str:
    first = (text.strip().splitlines() or [""])[0]
    return first if len(first) <= DETAIL_LIMIT else first[: DETAIL_LIMIT - 1] + "…"


def publish_archive(result: RemoteResult, out: Path, task_id: str) -> Path:
    """Unpack a worker's task archive into ``<out>/tasks/.<id>.staging``, check it is the task
    the worker hashed, and rename it into ``<out>/tasks/<id>`` (atomic, as a local run)."""
    from repogym.taskdir import content_hash

    if not result.archive:
        raise ValueError("the worker kept the task but sent no archive")
    tasks = out / "tasks"
    staging = tasks / f".{task_id}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(result.archive), mode="r:*") as tar:
            tar.extractall(staging, filter="tar")  # the task's own links are kept as they are
        staging.chmod(0o755)
        if content_hash(staging) != result.digest:
            raise ValueError("the task's files changed on the way from the worker")
        publish_task_dir(staging, tasks / task_id)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tasks / task_id
