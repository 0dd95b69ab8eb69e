"""Setup success as a number: bootstrap and check many repositories, group the failures.

``repogym bootstrap --repos FILE`` (and ``benchmarks/bootstrap.py``) call :func:`run_survey`:
each repository of the list is exported at one commit (``HEAD``, another ref, or the last
commit at least N years before it), bootstrapped and checked (build + collect, as
``repogym bootstrap`` does for one repository), and the outcome reduced to a
:class:`RepoResult` with a **cause**: the failed step plus a normalised reason, so that
failures of different repositories with the same root group together::

    build: pip install failed: No matching distribution
    collect: 0 tests: ModuleNotFoundError
    unsupported repository

Each result is appended to a JSON-lines file as soon as its repository finishes, so a killed
survey loses nothing done and ``resume=True`` carries on where it stopped.

Design notes:

* The commit is exported from git (the sources layer's snapshot, as ``generate`` sees a base
  commit), never the work tree, so a local clone's uncommitted files do not count and the
  recipe cache is shared with ``generate`` (same repository id, same commit). A folder that is
  not a git repository is checked as it is on disk (only with ``HEAD``).
* Remote specs (``owner/name``, URLs, ``gitlab:…``) go through the sources layer's cached bare
  clone (:func:`repogym.sources.remote.open_remote`), which is also where ``--years-back``
  reads the history from.
* Nothing about one repository can stop the survey: an unexpected exception is that
  repository's result (``internal`` step, traceback in the errors log beside the results).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repogym.bootstrap.commit import CommitInfo, read_commit
from repogym.bootstrap.detect import UnsupportedRepo
from repogym.bootstrap.service import BootstrapResult, bootstrap

if TYPE_CHECKING:
    from repogym.sources import LocalGitSource

__all__ = [
    "At",
    "RepoResult",
    "SurveyReport",
    "normalise",
    "pick_commit",
    "read_repo_list",
    "run_survey",
    "survey_repo",
    "totals",
    "years_before",
]

DETAIL_LIMIT = 300
UNSUPPORTED = "unsupported repository"


# ---------------------------------------------------------------------------------- inputs


def read_repo_list(path: Path) -> list[str]:
    """Repository specs of a list file: one per line, blank lines and ``#`` comments skipped
    (a ``#`` after whitespace starts a comment too); duplicates keep their first place."""
    specs: list[str] = []
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if line and line not in specs:
            specs.append(line)
    return specs


@dataclass(frozen=True)
class At:
    """Which commit of each repository: ``ref`` itself, or with ``years_back`` the last
    first-parent commit whose committer date is at least that many years before ``ref``'s."""

    ref: str = "HEAD"
    years_back: float | None = None

    def __post_init__(self) -> None:
        if self.years_back is not None and self.years_back < 0:
            raise ValueError("years back must be >= 0")
        if not self.ref.strip():
            raise ValueError("empty ref")

    @property
    def label(self) -> str:
        """``HEAD``, ``v2.0``, ``HEAD~2y`` (years back): the key of a result in the file."""
        if self.years_back is None:
            return self.ref
        return f"{self.ref}~{self.years_back:g}y"


# ---------------------------------------------------------------------------------- results


@dataclass
class RepoResult:
    """What one repository came to. ``cause`` is the group key of a failure (``""`` when ok)."""

    repo: str
    """The spec as written in the list."""
    at: str = "HEAD"
    repo_id: str | None = None
    ref: str | None = None
    """The commit checked (None for a folder outside git, or when it was never resolved)."""
    commit_date: str | None = None
    """Its committer date (ISO 8601)."""
    ok: bool = False
    failed_step: str = ""
    """``source``, ``detect``, ``build``, ``collect``, ``sandbox`` or ``internal``."""
    reason: str = ""
    """The normalised reason (no names, versions or paths): what groups failures."""
    cause: str = ""
    """``failed_step: reason`` (``unsupported repository`` for ``detect``)."""
    detail: str = ""
    """The raw failed step and reason, one line, for a human."""
    tests_collected: int = 0
    seconds: float = 0.0
    language: str | None = None
    runner: str | None = None
    cached: bool = False
    """The check outcome came from the recipe cache."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RepoResult:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def fail(self, step: str, reason: str, detail: str) -> RepoResult:
        self.ok = False
        self.failed_step, self.reason = step, reason
        self.cause = UNSUPPORTED if step == "detect" else f"{step}: {reason}"
        self.detail = _one_line(detail)
        return self


def _one_line(text: str, limit: int = DETAIL_LIMIT) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# ------------------------------------------------------------------------------ normalising

# reason class → patterns: the first class with a pattern in the failure text names it.
_REASON_PATTERNS: dict[str, list[str]] = {
    "No matching distribution": [
        r"No matching distribution",
        r"Could not find a version that satisfies",
    ],
    "dependency conflict": [
        r"ResolutionImpossible",
        r"conflicting dependencies",
        r"\bERESOLVE\b",
        r"version solving failed",
    ],
    "unsupported interpreter version": [
        r"requires a different Python",
        r"Requires-Python",
        r"python_requires",
        r"Unsupported engine",
        r"\bEBADENGINE\b",
    ],
    "package build failed": [
        r"Failed building wheel",
        r"failed-wheel-build",
        r"subprocess-exited-with-error",
        r"metadata-generation-failed",
        r"did not run successfully",
    ],
    "version from git metadata": [
        r"setuptools.scm",
        r"hatch.vcs",
        r"unable to detect version",
        r"LookupError: .*version",
    ],
    "network unreachable": [
        r"Temporary failure in name resolution",
        r"Network is unreachable",
        r"Could not resolve host",
        r"\bENOTFOUND\b",
        r"\bEAI_AGAIN\b",
        r"getaddrinfo",
        r"Connection refused",
        r"No route to host",
        r"Failed to establish a new connection",
        r"failed to (download|get|load source)",
    ],
    "package not found": [r"\bE404\b", r"404 Not Found", r"is not in this registry"],
    "ModuleNotFoundError": [r"\bModuleNotFoundError\b"],
    "ImportError": [r"\bImportError\b"],
    "SyntaxError": [r"\bSyntaxError\b"],
    "timed out": [r"timed out", r"timeout"],
    "file or command not found": [
        r"command not found",
        r"executable file not found",
        r"No such file or directory",
    ],
    "permission denied": [r"Permission denied", r"\bEACCES\b"],
    "out of memory": [r"out of memory", r"MemoryError", r"\bKilled\b"],
}
_REASONS = [
    (re.compile("|".join(f"(?:{p})" for p in pats), re.I), name)
    for name, pats in _REASON_PATTERNS.items()
]
_EXCEPTION = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b")
_INSTALLERS = [
    (re.compile(r"\b(uv\s+)?pip3?\s+install\b|-m\s+pip\b"), "pip install"),
    (re.compile(r"\bnpm\s+(ci|install|i)\b"), "npm install"),
    (re.compile(r"\byarn\b"), "yarn install"),
    (re.compile(r"\bpnpm\b"), "pnpm install"),
    (re.compile(r"\bcargo\b"), "cargo"),
    (re.compile(r"\bgo\s+(mod|build|get)\b"), "go"),
    (re.compile(r"\bmvn\b"), "mvn"),
    (re.compile(r"\bapt-get\b"), "apt-get"),
    (re.compile(r"\bpoetry\b"), "poetry"),
]


def _reason_class(text: str) -> str:
    """A short name for what went wrong in ``text`` (``""`` when nothing is recognised)."""
    for pattern, name in _REASONS:
        if pattern.search(text):
            return name
    m = _EXCEPTION.search(text)
    return m[1] if m else ""


def _template(text: str, limit: int = 60) -> str:
    """``text`` with names, versions, numbers and paths blanked: a group key of last resort."""
    text = re.sub(r"(['\"`]).*?\1", "…", text)
    text = re.sub(r"\S*/\S*", "…", text)
    text = re.sub(r"\b[0-9a-f]{7,40}\b|\d+(\.\d+)*", "N", text)
    text = " ".join(text.split()).strip(" :;,.")
    return text[:limit].rstrip() or "unknown"


def _command_of(step: str) -> str:
    """``pip install`` for ``build: RUN python -m pip install … (exit 1; …)``, etc."""
    for pattern, name in _INSTALLERS:
        if pattern.search(step):
            return name
    m = re.match(r"build: (?:RUN\s+)?(?:\w+=\S*\s+)*(?:cd \S+ && )?(\S+)", step)
    return Path(m[1]).name if m else "build"


def normalise(failed_step: str, reason: str) -> tuple[str, str]:
    """``(step, normalised reason)`` of a check failure (:class:`~repogym.bootstrap.CheckResult`
    ``failed_step`` and ``reason``). The reason keeps what failed and why, never names."""
    why = _reason_class(reason)
    if failed_step.startswith("build:"):
        if " (exit " in failed_step:
            what = f"{_command_of(failed_step)} failed"
        else:  # not a failing command: FROM, COPY, a timeout…
            what = _template(failed_step.removeprefix("build:"))
        return "build", f"{what}: {why}" if why else what
    if failed_step.startswith("collect:"):
        if "no tests collected" in failed_step:
            what = "0 tests"
        elif "timed out" in failed_step:
            return "collect", "timed out"
        elif "sandbox error" in failed_step:
            return "sandbox", _reason_class(reason) or _template(reason)
        else:
            what = "errors while collecting"
        return "collect", f"{what}: {why}" if why else what
    step = failed_step.partition(":")[0].strip() or "check"
    return step, why or _template(reason or failed_step)


# ---------------------------------------------------------------------------------- commits


def _git(git_dir: str, *args: str) -> str:
    proc = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise LookupError(lines[-1] if lines else f"git {args[0]} failed")
    return proc.stdout.strip()


def years_before(when: datetime, years: float) -> datetime:
    """``when`` minus ``years`` calendar years (29 February → 28th), fractions as days."""
    whole = int(years)
    try:
        back = when.replace(year=when.year - whole)
    except ValueError:
        back = when.replace(year=when.year - whole, day=28)
    return back - timedelta(days=(years - whole) * 365.2425)


def pick_commit(source: LocalGitSource, at: At) -> tuple[str, str]:
    """``(sha, committer date)`` of the commit :class:`At` names in ``source``.

    Raises :class:`LookupError` (one line) when there is none: an unknown ref, or a history
    shorter than ``years_back``.
    """
    from repogym.sources import SourceError

    try:
        head = source.resolve(at.ref)
    except SourceError as exc:
        raise LookupError(str(exc)) from None
    git_dir = source.git_dir
    head_date = _git(git_dir, "show", "-s", "--format=%cI", head)
    if at.years_back is None:
        return head, head_date
    cutoff = years_before(datetime.fromisoformat(head_date), at.years_back)
    stamp = cutoff.strftime("%Y-%m-%d %H:%M:%S %z")
    sha = _git(git_dir, "rev-list", "-1", "--first-parent", f"--before={stamp}", head)
    if not sha:
        raise LookupError(
            f"no commit {at.years_back:g} years before {at.ref} (its date: {head_date[:10]})"
        )
    return sha, _git(git_dir, "show", "-s", "--format=%cI", sha)


# ---------------------------------------------------------------------------------- one repo


def survey_repo(
    spec: str, at: At, *, sandbox: str = "local", refresh: bool = False
) -> tuple[RepoResult, str | None]:
    """Bootstrap and check one repository; never raises for it (Ctrl-C aside).

    Returns the result and, for an unexpected exception, its traceback.
    """
    start = time.monotonic()
    result = RepoResult(repo=spec, at=at.label)
    trace: str | None = None
    try:
        _survey(spec, at, result, sandbox=sandbox, refresh=refresh)
    except Exception as exc:  # a bug met by this repository: it costs this repository only
        lines = str(exc).strip().splitlines()
        head = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
        result.fail("internal", type(exc).__name__, head)
        trace = "".join(traceback.format_exception(exc))
    finally:
        result.seconds = round(time.monotonic() - start, 2)
    return result, trace


def _survey(spec: str, at: At, result: RepoResult, *, sandbox: str, refresh: bool) -> None:
    from repogym.sandbox import SandboxError
    from repogym.sources import LocalGitSource, SourceError
    from repogym.sources.resolve import parse_repo_arg

    try:
        arg = parse_repo_arg(spec)
    except ValueError as exc:
        result.fail("source", "not a repository", str(exc))
        return
    source: LocalGitSource | None = None
    try:
        if arg.kind == "local":
            path = Path(arg.locator)
            try:
                source = LocalGitSource(path)
            except SourceError as exc:
                if "not a git repository" not in str(exc) or not path.is_dir():
                    result.fail("source", _template(str(exc)), str(exc))
                    return
                if at != At():
                    result.fail("source", "not a git repository", f"{exc} (needed for {at.label})")
                    return
                _check(path, result, repo_id=None, ref=None, sandbox=sandbox, refresh=refresh)
                return
            repo_id = source.repo_id()
        else:
            from repogym.sources.remote import open_remote

            try:
                remote = open_remote(arg)
                source = LocalGitSource(remote.clone)
            except SourceError as exc:
                result.fail("source", _source_reason(str(exc)), str(exc))
                return
            repo_id = remote.repo_id
        result.repo_id = repo_id
        try:
            sha, date = pick_commit(source, at)
        except LookupError as exc:
            why = "history too short" if "years before" in str(exc) else _source_reason(str(exc))
            result.fail("source", why, str(exc))
            return
        result.ref, result.commit_date = sha, date
        with tempfile.TemporaryDirectory(prefix="repogym-survey-") as tmp:
            snapshot = Path(tmp) / "repo"
            try:
                source.export_snapshot(sha, snapshot)
            except SourceError as exc:
                result.fail("source", _export_reason(str(exc)), _export_detail(str(exc)))
                return
            commit = read_commit(source.path, sha, snapshot)  # the snapshot has no .git
            _check(
                snapshot,
                result,
                repo_id=repo_id,
                ref=sha,
                sandbox=sandbox,
                refresh=refresh,
                commit=commit,
            )
    except SandboxError as exc:  # the backend cannot run here at all
        result.fail("sandbox", _reason_class(str(exc)) or _template(str(exc)), str(exc))
    finally:
        if source is not None:
            source.close()


def _export_reason(message: str) -> str:
    if "cannot read blob" in message:
        return "file content missing from the git data"
    return _source_reason(message)


def _export_detail(message: str) -> str:
    if "cannot read blob" in message:
        return (
            f"{message}: the clone lacks that file's content (a partial or size-limited clone),"
            " so the commit cannot be exported whole"
        )
    return message


def _source_reason(message: str) -> str:
    low = message.lower()
    for needle, why in [
        ("unknown revision", "unknown ref"),
        ("rate limit", "API rate limit"),
        ("not found", "repository not found"),
        ("private", "repository not accessible"),
        ("empty", "empty repository"),
    ]:
        if needle in low:
            return why
    return _reason_class(message) or _template(message)


def _check(
    folder: Path,
    result: RepoResult,
    *,
    repo_id: str | None,
    ref: str | None,
    sandbox: str,
    refresh: bool,
    commit: CommitInfo | None = None,
) -> None:
    try:
        boot: BootstrapResult = bootstrap(
            folder,
            repo_id=repo_id,
            ref=ref,
            check=True,
            sandbox=sandbox,
            refresh=refresh,
            commit=commit,
        )
    except UnsupportedRepo as exc:
        result.fail("detect", UNSUPPORTED, str(exc))
        return
    result.repo_id = result.repo_id or boot.repo_id
    result.language, result.runner = boot.recipe.language, boot.recipe.runner
    result.cached = boot.cached
    check = boot.check
    if check is None:  # not reachable with check=True; kept honest
        result.fail("check", "not checked", "the recipe was not checked")
        return
    result.tests_collected = check.tests_collected
    if check.ok:
        result.ok = True
        return
    step, reason = normalise(check.failed_step, check.reason)
    result.fail(step, reason, failure_detail(check.failed_step, check.reason))


def failure_detail(failed_step: str, reason: str) -> str:
    """``<step> — <reason>`` in one line: the step (a long ``mvn``/``pip`` command) is cut
    first, so that the reason still fits in :data:`DETAIL_LIMIT`."""
    return _one_line(f"{_one_line(failed_step, 100)} — {reason}")


# ---------------------------------------------------------------------------------- survey


def totals(results: Iterable[RepoResult], *, seconds: float | None = None) -> dict[str, Any]:
    """Success rate and failures grouped by cause and by step (most common first)."""
    items = list(results)
    ok = sum(1 for r in items if r.ok)
    causes = Counter(r.cause for r in items if not r.ok)
    steps = Counter(r.failed_step for r in items if not r.ok)
    order = sorted(causes, key=lambda c: (-causes[c], c))
    return {
        "repos": len(items),
        "ok": ok,
        "failed": len(items) - ok,
        "success_rate": round(ok / len(items), 4) if items else None,
        "tests_collected": sum(r.tests_collected for r in items),
        "repo_seconds": round(sum(r.seconds for r in items), 2),
        **({"seconds": round(seconds, 2)} if seconds is not None else {}),
        "causes": {c: causes[c] for c in order},
        "steps": dict(sorted(steps.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


@dataclass
class SurveyReport:
    """Every repository's result (in list order) and the totals."""

    at: str
    sandbox: str
    results: list[RepoResult]
    seconds: float
    results_file: Path | None = None
    resumed: int = 0
    """Results taken from an earlier run's file (``resume=True``)."""
    errors_log: Path | None = None
    totals: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.totals = totals(self.results, seconds=self.seconds)

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "sandbox": self.sandbox,
            "results_file": str(self.results_file) if self.results_file else None,
            "resumed": self.resumed,
            "errors_log": str(self.errors_log) if self.errors_log else None,
            "totals": self.totals,
            "repos": [r.to_json() for r in self.results],
        }


class _ResultsFile:
    """JSON lines, one per finished repository, flushed and synced as each one finishes."""

    def __init__(self, path: Path | None, *, resume: bool) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.errors = path.with_name(path.name + ".errors.log") if path else None
        self.earlier: list[dict[str, Any]] = []
        if path is None:
            return
        if resume and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    self.earlier.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut by a kill: that repository runs again
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("", encoding="utf-8")
            if self.errors is not None and self.errors.exists():
                self.errors.unlink()

    def done(self, at: str) -> dict[str, RepoResult]:
        """spec → result of the earlier run (same ``at``)."""
        return {d["repo"]: RepoResult.from_json(d) for d in self.earlier if d.get("at") == at}

    def append(self, result: RepoResult, trace: str | None) -> None:
        if self.path is None:
            return
        import os

        with self.lock:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(result.to_json(), sort_keys=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            if trace and self.errors is not None:
                with self.errors.open("a", encoding="utf-8") as fh:
                    fh.write(f"=== {result.repo} @ {result.at}\n{trace}\n")


def run_survey(
    specs: list[str],
    at: At,
    *,
    jobs: int = 1,
    sandbox: str = "local",
    refresh: bool = False,
    results_file: Path | None = None,
    resume: bool = False,
    on_result: Callable[[RepoResult, int, int], None] | None = None,
) -> SurveyReport:
    """Bootstrap and check every repository of ``specs``, ``jobs`` at a time.

    Each result is appended to ``results_file`` (JSON lines) when its repository finishes;
    with ``resume`` the repositories already there (same ``at``) are not run again.
    ``on_result(result, finished, total)`` is called in the calling thread. Ctrl-C stops at
    once (repositories in flight still write their line when they finish).
    """
    start = time.monotonic()
    store = _ResultsFile(results_file, resume=resume)
    earlier = store.done(at.label)
    by_spec: dict[str, RepoResult] = {s: earlier[s] for s in specs if s in earlier}
    todo = [s for s in specs if s not in by_spec]
    total, finished = len(specs), len(by_spec)

    def one(spec: str) -> RepoResult:
        result, trace = survey_repo(spec, at, sandbox=sandbox, refresh=refresh)
        store.append(result, trace)  # in the worker: written even if the caller is gone
        return result

    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    clean = False
    try:
        pending: set[Future[RepoResult]] = set()
        queue = iter(todo)
        while True:
            while len(pending) < max(1, jobs):
                spec = next(queue, None)
                if spec is None:
                    break
                pending.add(pool.submit(one, spec))
            if not pending:
                break
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                result = fut.result()
                by_spec[result.repo] = result
                finished += 1
                if on_result is not None:
                    on_result(result, finished, total)
        clean = True
    finally:
        pool.shutdown(wait=clean, cancel_futures=True)
    errors = store.errors if store.errors is not None and store.errors.exists() else None
    return SurveyReport(
        at=at.label,
        sandbox=sandbox,
        results=[by_spec[s] for s in specs],
        seconds=time.monotonic() - start,
        results_file=results_file,
        resumed=len(earlier.keys() & set(specs)),
        errors_log=errors,
    )
