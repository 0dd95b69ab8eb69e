"""Campaigns: ``repogym generate --repos FILE --out DIR`` — one dataset per repository.

FILE lists one repository a line (a local path, ``owner/name``, ``gitlab:group/name``, a URL),
optionally followed by ``pipeline=NAME`` and ``key=value`` pipeline options (over the command's
``--pipeline`` and ``--opt``); ``#`` starts a comment, blank lines are skipped. Every line is
checked before any work (:func:`read_campaign`): a bad one is a :class:`CampaignError` naming
its line.

Each repository gets the dataset a single ``generate`` writes, under ``DIR/<slug>/`` (its
``owner__name``; ``owner__name-<pipeline>`` when the file lists it under several pipelines).
``DIR/campaign-report.json`` says per repository: status, candidates, kept, drop reasons,
seconds and error; it is rewritten as each repository finishes. ``--resume`` skips the
repositories already ``complete`` and continues the others with generate's own ``--resume``.

With the local executor the repositories run one after another (each with ``--jobs``). With Ray
the candidates of all repositories go into one executor stream, interleaved round-robin
(:func:`._ray.driver.run_drivers`), so a big repository does not hold up the rest.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from repogym.atomic import atomic_write
from repogym.pipelines.base import GateFactory
from repogym.pipelines.generation import (
    GenerateError,
    prepare,
    resolve_repo,
    run_here,
    slug_for,
    tasks_held,
)
from repogym.pipelines.registry import get_pipeline
from repogym.spec import GenerationInput, describe_error

REPORT = "campaign-report.json"
FINISHED = "complete"
_COMMENT = re.compile(r"(^|\s)#.*$")


class CampaignError(GenerateError):
    """A bad repository list or output folder: one line, exit 2, nothing run."""


@dataclass(frozen=True)
class CampaignInput:
    """What ``generate --repos`` was given (per-repository settings come from the list)."""

    repos_file: Path
    out: Path
    pipeline: str = "commit_runtime"
    options: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None
    jobs: int = 1
    resume: bool = False
    sandbox: str = "local"
    rev: str = "HEAD"
    llm: str | None = None
    llm_endpoint: str | None = None


@dataclass(frozen=True)
class Entry:
    """One repository of the list, checked."""

    line: int
    repo: str
    pipeline: str
    options: dict[str, Any]
    kind: str
    """``local``, ``github`` or ``gitlab``."""
    repo_id: str
    folder: str
    """Its dataset's folder under the campaign's ``--out``."""

    def generation(self, inp: CampaignInput, *, resume: bool) -> GenerationInput:
        return GenerationInput(
            repo=self.repo,
            pipeline=self.pipeline,
            out=inp.out / self.folder,
            limit=inp.limit,
            jobs=inp.jobs,
            resume=resume,
            sandbox=inp.sandbox,
            rev=inp.rev,
            options=self.options,
            llm=inp.llm,
            llm_endpoint=inp.llm_endpoint,
        )


@dataclass
class RepoReport:
    """What one repository of the campaign came to."""

    line: int
    repo: str
    repo_id: str
    pipeline: str
    out: str
    status: str = "pending"
    """``pending``, ``complete``, ``stopped`` (a source error on the way), ``failed`` (it could
    not start), ``interrupted`` or ``error`` (an unexpected exception)."""
    candidates: int = 0
    kept: int = 0
    tasks: int = 0
    """Tasks its dataset holds (earlier runs included)."""
    dropped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class CampaignReport:
    inp: CampaignInput
    executor: str
    repos: list[RepoReport]
    status: str = "running"
    seconds: float = 0.0

    @property
    def kept(self) -> int:
        return sum(r.kept for r in self.repos)

    @property
    def tasks(self) -> int:
        return sum(r.tasks for r in self.repos)

    def to_json(self) -> dict[str, Any]:
        count: dict[str, int] = {}
        for r in self.repos:
            count[r.status] = count.get(r.status, 0) + 1
        return {
            "repos_file": str(self.inp.repos_file),
            "out": str(self.inp.out),
            "executor": self.executor,
            "status": self.status,
            "seconds": round(self.seconds, 2),
            "totals": {
                "repositories": len(self.repos),
                **count,
                "candidates": sum(r.candidates for r in self.repos),
                "kept": self.kept,
                "tasks": self.tasks,
            },
            "repositories": [r.to_json() for r in self.repos],
        }

    def write(self) -> Path:
        path = self.inp.out / REPORT
        self.inp.out.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(self.to_json(), indent=2) + "\n")
        return path


# ------------------------------------------------------------------------------ the list


def read_campaign(inp: CampaignInput) -> list[Entry]:
    """The checked entries of ``inp.repos_file``; :class:`CampaignError` for the first bad
    line (or an output folder holding an earlier campaign without ``resume``)."""
    try:
        text = inp.repos_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CampaignError(f"{inp.repos_file}: {why}") from None
    entries: list[Entry] = []
    seen: dict[tuple[str, str], int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw).strip()
        if not line:
            continue
        try:
            entry = _entry(inp, number, line)
        except (GenerateError, ValueError) as exc:
            raise CampaignError(f"{inp.repos_file}:{number}: {exc}") from None
        twin = seen.get((entry.repo_id, entry.pipeline))
        if twin is not None:
            raise CampaignError(
                f"{inp.repos_file}:{number}: {entry.repo_id} with pipeline {entry.pipeline} "
                f"is already on line {twin}"
            )
        seen[(entry.repo_id, entry.pipeline)] = number
        entries.append(entry)
    if not entries:
        raise CampaignError(f"{inp.repos_file}: no repositories listed")
    entries = _folders(entries)
    if not inp.resume:
        if (inp.out / REPORT).is_file():
            raise CampaignError(
                f"--out {inp.out} holds an earlier campaign; use --resume to continue it, or "
                "another --out"
            )
        for e in entries:
            held = tasks_held(inp.out / e.folder)
            if held:
                raise CampaignError(
                    f"--out {inp.out / e.folder} already holds {held} task(s) (line {e.line}); "
                    "use --resume or another --out"
                )
    return entries


def _entry(inp: CampaignInput, number: int, line: str) -> Entry:
    from repogym.sources import LocalGitSource, SourceError

    words = shlex.split(line)
    repo, pairs = words[0], words[1:]
    pipeline_name = inp.pipeline
    options = dict(inp.options)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value after the repository, got {pair!r}")
        if key.strip() == "pipeline":
            pipeline_name = value.strip()
        else:
            options[key.strip()] = value
    try:
        pipeline = get_pipeline(pipeline_name)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    try:
        pipeline.options_model.model_validate(options)
    except ValidationError as exc:
        raise ValueError(f"bad option: {describe_error(exc)}") from None
    arg = resolve_repo(repo, pipeline)
    if arg.kind == "local":
        try:
            with LocalGitSource(Path(arg.locator)) as source:
                repo_id = source.repo_id()
        except SourceError as exc:
            raise ValueError(str(exc)) from None
    else:
        repo_id = arg.locator
    return Entry(number, repo, pipeline.name, options, arg.kind, repo_id, slug_for(repo_id))


def _folders(entries: list[Entry]) -> list[Entry]:
    """A repository listed under several pipelines gets ``<slug>-<pipeline>`` folders."""
    from dataclasses import replace

    count: dict[str, int] = {}
    for e in entries:
        count[e.folder] = count.get(e.folder, 0) + 1
    return [
        e if count[e.folder] == 1 else replace(e, folder=f"{e.folder}-{e.pipeline}")
        for e in entries
    ]


# ------------------------------------------------------------------------------ the run


def run_campaign(
    inp: CampaignInput,
    entries: list[Entry],
    *,
    gate: GateFactory,
    executor: Any = None,
    on_repo: Callable[[RepoReport], None] | None = None,
) -> CampaignReport:
    """Generate every listed repository's dataset (see the module docstring). A repository
    that fails costs itself only; Ctrl-C writes the report (the interrupted repository
    ``interrupted``) and is raised again. :class:`CampaignError` (nothing run): ``--llm`` with
    an executor other than the local one. ``gate`` builds the verify gate for a sandbox
    backend (see :func:`~repogym.pipelines.generation.generate`)."""
    name = "local" if executor is None else executor.name
    if name != "local" and inp.llm:
        raise CampaignError(
            f"--llm is not available with --executor {name} yet; run the campaign locally"
        )
    report = CampaignReport(inp, name, [_fresh(inp, e) for e in entries])
    earlier = _earlier(inp) if inp.resume else {}
    todo: list[tuple[Entry, RepoReport]] = []
    for entry, row in zip(entries, report.repos, strict=True):
        old = earlier.get(entry.folder)
        if old is not None and old.get("status") == FINISHED:
            row.__dict__.update({k: v for k, v in old.items() if k in row.__dict__})
            row.line, row.repo = entry.line, entry.repo
            continue
        todo.append((entry, row))
    started = time.monotonic()
    report.write()
    try:
        if name == "local":
            for entry, row in todo:
                _run_one(inp, entry, row, gate)
                report.write()
                if on_repo:
                    on_repo(row)
        else:
            _run_interleaved(inp, todo, executor, report, on_repo, gate)
    except KeyboardInterrupt:
        report.status = "interrupted"
        raise
    finally:
        report.seconds = time.monotonic() - started
        if report.status == "running":
            report.status = "complete"
        report.write()
    return report


def _fresh(inp: CampaignInput, e: Entry) -> RepoReport:
    return RepoReport(e.line, e.repo, e.repo_id, e.pipeline, str(inp.out / e.folder))


def _earlier(inp: CampaignInput) -> dict[str, dict[str, Any]]:
    """The rows of an earlier campaign's report, by dataset folder name."""
    try:
        data = json.loads((inp.out / REPORT).read_text())
    except (OSError, ValueError):
        return {}
    rows = data.get("repositories") if isinstance(data, dict) else None
    return {Path(r["out"]).name: r for r in rows or [] if isinstance(r, dict) and "out" in r}


def _run_one(inp: CampaignInput, entry: Entry, row: RepoReport, gate: GateFactory) -> None:
    """One repository with the local executor (generate's own code path)."""
    from repogym.pipelines._harness.errors import describe

    started = time.monotonic()
    setup = None
    try:
        setup = prepare(entry.generation(inp, resume=inp.resume), gate=gate)
        run_here(setup)
    except GenerateError as exc:
        row.error = str(exc)
        if setup is None:
            row.status = "failed"
    except KeyboardInterrupt:
        row.error = "KeyboardInterrupt"
        raise
    except Exception as exc:  # noqa: BLE001 - one repository's bug costs that repository
        row.error = describe(exc)
        if setup is None:
            row.status = "error"
    finally:
        if setup is not None:
            _note(row, setup)
        row.seconds = round(time.monotonic() - started, 2)


def _note(row: RepoReport, setup: Any) -> None:
    """Copy a finished (or interrupted) run's numbers into its row."""
    stats = setup.stats.to_json()
    row.status = setup.run.status
    row.candidates, row.kept, row.dropped = stats["candidates"], stats["kept"], stats["dropped"]
    row.tasks = tasks_held(setup.inp.out)


def _run_interleaved(
    inp: CampaignInput,
    todo: list[tuple[Entry, RepoReport]],
    executor: Any,
    report: CampaignReport,
    on_repo: Callable[[RepoReport], None] | None,
    gate: GateFactory,
) -> None:
    """Every repository's candidates in one executor stream (Ray)."""
    from repogym.pipelines._ray.driver import RepoDriver, capacity, run_drivers

    drivers: list[RepoDriver] = []
    rows: dict[int, RepoReport] = {}
    started = time.monotonic()
    for entry, row in todo:
        gen = entry.generation(inp, resume=inp.resume)
        try:
            setup = prepare(gen, gate=gate, local=False)
            driver = RepoDriver(setup, executor, tag=f"{len(drivers)}:")
        except GenerateError as exc:
            row.status, row.error = "failed", str(exc)
            continue
        rows[id(driver)] = row
        drivers.append(driver)
    report.write()

    def ended(driver: RepoDriver, exc: BaseException | None = None) -> None:
        row = rows.pop(id(driver))
        driver.end(exc)
        _note(row, driver.s)
        failure = exc or driver.failure
        if failure is not None:
            from repogym.pipelines._harness.errors import describe

            row.error = (
                "KeyboardInterrupt"
                if isinstance(failure, KeyboardInterrupt)
                else (str(failure) if isinstance(failure, GenerateError) else describe(failure))
            )
        row.seconds = round(time.monotonic() - started, 2)
        report.write()
        if on_repo and exc is None:
            on_repo(row)

    try:
        run_drivers(drivers, executor, parallel=capacity(executor, inp.jobs), on_done=ended)
    except BaseException as exc:
        for driver in drivers:
            if id(driver) in rows:
                ended(driver, exc)
        raise
