"""Check a recipe for real: build it in a sandbox and see its collect command find tests."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import snapshot_repo
from repogym.bootstrap.model import COLLECT_MARK, Recipe, collect_summary

COLLECT_TIMEOUT_S = 600.0
LOG_TAIL_LINES = 40
LOG_TAIL_CHARS = 8000
LINE_CHARS = 300
_ERROR_LINE = re.compile(
    r"(^ERROR\b|^E\s|Error:|error:|error\[|No matching distribution|Could not find|"
    r"ModuleNotFoundError|ImportError|SyntaxError|npm ERR!|npm error|FAILED|cannot find)",
    re.I,
)


@dataclass
class CheckResult:
    """Whether a recipe builds and its collect command lists tests."""

    ok: bool
    failed_step: str = ""
    """Which step failed, e.g. ``build: Dockerfile line 5: RUN … (exit 1)`` or ``collect: …``."""
    reason: str = ""
    """One line a user can act on."""
    tests_collected: int = 0
    sample_ids: list[str] = field(default_factory=list)
    log_tail: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    sandbox: str = "local"
    base_mapping: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckResult:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def write_build_context(repo_dir: Path, recipe: Recipe, dest: Path) -> Path:
    """Write ``dest/Dockerfile`` and ``dest/repo/`` (the snapshot): a task's ``environment/``."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "Dockerfile").write_text(recipe.dockerfile, encoding="utf-8")
    snapshot_repo(Path(repo_dir), dest / "repo")
    return dest


def _tail(text: str, lines: int = LOG_TAIL_LINES, chars: int = LOG_TAIL_CHARS) -> str:
    """The last ``lines`` lines, each cut to 1,000 characters, at most ``chars`` in all."""
    kept = [
        ln if len(ln) <= 1000 else ln[:1000] + " …"
        for ln in text.rstrip().splitlines()[-lines:]
        if not ln.startswith(COLLECT_MARK)
    ]
    out = "\n".join(kept)
    return out if len(out) <= chars else "…" + out[-chars:]


_EXCEPTION_LINE = re.compile(r"^(E\s+)?([\w.]*(Error|Exception|Warning)|error\[E\d+\]): ")
_COLLECT_ERROR = re.compile(r"_ ERROR collecting (\S+) _")
# A test id or a collected item (pytest ``-v`` / tree output): names, never reasons.
_TEST_ID = re.compile(r"^(\S+::\S+( PASSED| FAILED| SKIPPED| ERROR)?|<\w+ [^>]*>)$")


_JSON_LINE = re.compile(r"^\s*(\{\"|\[\{)")
"""A line holding a JSON document (a runner's report): never a reason by itself."""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_JEST_HEADING = re.compile(r"^\s*● (.+?):?\s*$")
_REPORT_START = re.compile(r'\{\s*"num')
_NODE_TEST_LINE = re.compile(r"^node:test (\{.*\})$")


def _short(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def _summary_reason(summary: dict[str, Any] | None) -> str:
    """``error collecting <file>: <exception line>`` from a collect summary's errors."""
    errors = [e for e in (summary or {}).get("errors") or [] if isinstance(e, dict)]
    if not errors:
        return ""
    first = errors[0]
    where = str(first.get("nodeid") or "") or "the session"
    message = str(first.get("message") or "").strip()
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return _short(f"error collecting {where}{more}" + (f": {message}" if message else ""))


_MAVEN_GOAL = re.compile(
    r"^\[ERROR\] Failed to execute goal(?: (\S+)[^:]*?)? on project ([^\s:]+): (.*)$"
)
_MAVEN_MISSING = ("No versions available", "Could not find artifact", "The following artifacts")
_MAVEN_SOURCE_ERROR = re.compile(r"^\[ERROR\] /\S+?/(?:workspace/)?(\S+):(\[\d+,\d+\]) (.*)$")


_MAVEN_BOILERPLATE = ("See ", "->", "To see the full", "Re-run Maven", "For more information")
_SUREFIRE_TOTALS = re.compile(
    r"^\[(?:ERROR|WARNING)\] (Tests run: \d+, Failures: \d+, Errors: \d+)"
)
_SUREFIRE_FIRST = re.compile(r"^\[ERROR\]\s{2,}(\S.*)$")


def _surefire_summary(lines: list[str]) -> str:
    """``tests failed: Tests run: N, Failures: F, Errors: E (first failing test: why)`` from
    Surefire's summary above a failed ``test`` goal (``""``: none)."""
    totals = next((m[1] for ln in reversed(lines) if (m := _SUREFIRE_TOTALS.match(ln))), "")
    if not totals:
        return ""
    first = next((m[1] for ln in lines if (m := _SUREFIRE_FIRST.match(ln))), "")
    return f"tests failed: {totals}" + (f" ({' '.join(first.split())})" if first else "")


def _maven_reason(text: str) -> str:
    """Maven's first failed goal: ``<goal> failed on project <p>: <why>``, a compilation failure
    told by its first compiler error (and the detail line under it)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _MAVEN_GOAL.match(line)
        if not m:
            continue
        goal = m[1].split(":")[-1] if m[1] else ""  # none: resolving the project's dependencies
        why = re.sub(r"\s*-> \[Help \d+\]$", "", m[3]).strip()
        if why.startswith(("Could not collect dependencies", "Could not resolve dependencies")):
            below = (ln.removeprefix("[ERROR]").strip() for ln in lines[i + 1 : i + 5])
            why = next((b for b in below if b.startswith(_MAVEN_MISSING)), why)
        if not why:  # the message is on the lines below (Surefire's fork errors)
            below = (ln.removeprefix("[ERROR]").strip() for ln in lines[i + 1 : i + 20])
            why = next((b for b in below if b and not b.startswith(_MAVEN_BOILERPLATE)), "")
        if goal == "test" and not why:  # tests failed: Surefire's summary and its first one
            why = _surefire_summary(lines[:i])
        for j, after in enumerate(lines[i + 1 : i + 40], start=i + 1):
            e = _MAVEN_SOURCE_ERROR.match(after)
            if e:
                following = lines[j + 1] if j + 1 < len(lines) else ""
                detail = " ".join(following.removeprefix("[ERROR]").split())
                if detail.startswith("->") or _MAVEN_SOURCE_ERROR.match(following):
                    detail = ""
                why = f"{e[1]}:{e[2]} {e[3]}" + (f" ({detail})" if detail else "")
                break
        return _short(f"mvn {goal + ' ' if goal else ''}failed on project {m[2]}: {why}")
    for line in lines:  # a POM Maven could not read (no goal ran)
        if line.startswith("[FATAL] "):
            return _short("mvn: " + line.removeprefix("[FATAL] ").strip())
    for line in lines:  # the goal's line was cut off (a long list of compiler errors)
        e = _MAVEN_SOURCE_ERROR.match(line)
        if e:
            return _short(f"mvn: compilation failed: {e[1]}:{e[2]} {e[3]}")
    return ""


_CMAKE_ERROR = re.compile(r"^CMake Error(?: at (\S+?:\d+) \((\w+)\))?:\s*(.*)$")


def _cmake_reason(text: str) -> str:
    """CMake's first ``CMake Error at <file>:<line> (<command>):`` with the message under it
    (its indented lines, joined)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _CMAKE_ERROR.match(line.strip())
        if not m:
            continue
        words = [m[3]] if m[3] else []
        for following in lines[i + 1 : i + 12]:
            if following.strip() and not following.startswith(" "):
                break
            words += following.split()
        where = f" at {m[1]} ({m[2]})" if m[1] else ""
        return _short(f"CMake Error{where}: {' '.join(words)}")
    return ""


def _reason_from(text: str, fallback: str) -> str:
    """The most telling line of a failure's output (one line, at most 300 characters).

    Preference: the collect summary's first error, a pytest collection error with its
    exception, the last exception line (``ModuleNotFoundError: …``), the last error-looking
    line (pip ``ERROR:``, ``npm ERR!``…). Test ids and collected items are never the reason.
    """
    from_summary = (
        _summary_reason(collect_summary(text)) or _maven_reason(text) or _cmake_reason(text)
    )
    if from_summary:
        return from_summary
    lines = [
        ln.strip()
        for ln in text.splitlines()
        if ln.strip()
        and not ln.startswith(COLLECT_MARK)
        and not _TEST_ID.match(ln.strip())
        and not _JSON_LINE.match(ln)
    ]
    for i, line in enumerate(lines):
        m = _COLLECT_ERROR.search(line)
        if m:
            exc = next((ln for ln in lines[i + 1 :] if ln.startswith("E ")), "")
            detail = f": {exc[1:].strip()}" if exc else ""
            return _short(f"error collecting {m[1]}{detail}")
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line):
            return _short(line.removeprefix("E").strip())
    for line in reversed(lines):
        if _ERROR_LINE.search(line) and not line.startswith("---"):
            return _short(line)
    return (_short(lines[-1]) if lines else "") or fallback


def _build_failure(message: str, log_text: str) -> tuple[str, str, str]:
    """``(failed_step, reason, tail)`` from a BuildError message and the build log."""
    head, _, output = message.partition("\n--- output (tail) ---\n")
    head = head.strip()
    m = re.match(r"^(?P<where>.*?): RUN failed with exit code (?P<code>\S+) \((?P<ins>.*)\)$", head)
    if m:
        step = f"build: {_short(m['ins'])} (exit {m['code']}; {m['where']})"
    else:
        step = f"build: {_short(head.splitlines()[0]) if head else 'failed'}"
    if not output:  # not a failing command: the message itself is the reason
        reason = _short(head.splitlines()[0]) if head else "build failed"
        return step, reason, _tail(log_text or head)
    return step, _reason_from(output, head), _tail(output)


def check_recipe(
    repo_dir: Path,
    recipe: Recipe,
    sandbox: str = "local",
    *,
    collect_timeout_s: float = COLLECT_TIMEOUT_S,
    build_timeout_s: float = 1800.0,
    keep_dir: Path | None = None,
) -> CheckResult:
    """Build ``recipe`` over a snapshot of ``repo_dir`` and run its collect command.

    The build context is a temporary ``Dockerfile`` + ``repo/`` folder (or ``keep_dir``, left in
    place for inspection). Never raises for a failing repository: the result says what failed.
    Raises :class:`~repogym.sandbox.SandboxError` when the backend cannot run here at all.
    """
    from repogym.sandbox import EnvironmentSpec, SandboxError, get_backend

    timings: dict[str, float] = {}
    t0 = time.monotonic()
    result = CheckResult(ok=False, sandbox=sandbox, timings=timings)
    tmp = Path(tempfile.mkdtemp(prefix="repogym-bootstrap-"))
    context = keep_dir if keep_dir is not None else tmp / "environment"
    try:
        write_build_context(repo_dir, recipe, context)
        timings["snapshot_s"] = round(time.monotonic() - t0, 3)
        backend = get_backend(sandbox)  # SandboxError: unusable here, not the recipe's fault
        spec = EnvironmentSpec(
            context_dir=context,
            workdir=recipe.workdir,
            network_mode="no-network",
            build_timeout_sec=build_timeout_s,
        )
        log_path = tmp / "build.log"
        t1 = time.monotonic()
        try:
            built = backend.build(spec, log=log_path)
        except SandboxError as exc:
            timings["build_s"] = round(time.monotonic() - t1, 3)
            log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
            result.failed_step, result.reason, result.log_tail = _build_failure(str(exc), log_text)
            return result
        timings["build_s"] = round(time.monotonic() - t1, 3)
        result.base_mapping = dict(built.base_mapping)
        t2 = time.monotonic()
        try:
            with backend.start(built, spec) as session:
                res = session.exec(
                    recipe.collect_command,
                    timeout_s=collect_timeout_s,
                    cwd=recipe.workdir,
                    network=False,
                )
        except SandboxError as exc:
            result.failed_step = "collect: sandbox error"
            result.reason = _short(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
            return result
        timings["collect_s"] = round(time.monotonic() - t2, 3)
        output = res.stdout + ("\n" + res.stderr if res.stderr else "")
        result.log_tail = _tail(output)
        count = recipe.count_collected(res.stdout)
        result.tests_collected = count
        result.sample_ids = _sample_ids(recipe, res.stdout)
        if res.timed_out:
            result.failed_step = f"collect: timed out after {collect_timeout_s:.0f}s"
            result.reason = "the collect command did not finish"
        elif count == 0:
            result.failed_step = "collect: no tests collected"
            result.reason = _collect_reason(
                recipe, res.stdout, output, f"exit {res.exit_code}, no test ids in the output"
            )
        elif res.exit_code != 0:
            result.failed_step = f"collect: exit {res.exit_code} ({count} tests collected)"
            result.reason = _collect_reason(
                recipe, res.stdout, output, "the collect command reported errors"
            )
        else:
            result.ok = True
        return result
    finally:
        timings["total_s"] = round(time.monotonic() - t0, 3)
        shutil.rmtree(tmp, ignore_errors=True)


def _collect_reason(recipe: Recipe, stdout: str, output: str, fallback: str) -> str:
    """Why a collect command failed: for jest/vitest the first failing file of the JSON report
    (``error collecting <file>: <first line of its error>``), then jest's ``● Heading`` block,
    then :func:`_reason_from`."""
    if recipe.runner in ("jest", "vitest"):
        reason = _js_report_reason(stdout, recipe.workdir)
        if reason:
            return reason
    if recipe.runner == "jest":
        reason = _jest_block_reason(output)
        if reason:
            return reason
    return _reason_from(output, fallback)


def _js_report(stdout: str) -> dict[str, Any] | None:
    """The jest/vitest JSON report in ``stdout`` (None: none)."""
    m = _REPORT_START.search(stdout)  # vitest < 1 pretty-prints it
    if m is None:
        return None
    try:
        report, _ = json.JSONDecoder().raw_decode(stdout[m.start() :])
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


def _first_message_line(message: str) -> str:
    """The first line of a suite's error that is not a ``● Heading`` (jest)."""
    lines = [ln for ln in (_ANSI.sub("", x).strip() for x in message.splitlines()) if ln]
    body = [ln for ln in lines if not ln.startswith("●")]
    return (body or [ln.lstrip("● ") for ln in lines] or [""])[0]


def _js_report_reason(stdout: str, workdir: str) -> str:
    """``error collecting <file> (+N more): <first error line>`` from a JSON report."""
    report = _js_report(stdout)
    failed = [
        suite
        for suite in (report or {}).get("testResults") or []
        if isinstance(suite, dict) and suite.get("status") == "failed"
    ]
    if not failed:
        return ""
    first = failed[0]
    name = str(first.get("name", "")).removeprefix(workdir.rstrip("/") + "/")
    message = _first_message_line(str(first.get("message") or ""))
    more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
    return _short(f"error collecting {name}{more}" + (f": {message}" if message else ""))


def _jest_block_reason(output: str) -> str:
    """``Heading: first line`` of jest's first ``● Heading`` block (CLI and config errors)."""
    lines = [_ANSI.sub("", ln) for ln in output.splitlines()]
    for i, line in enumerate(lines):
        m = _JEST_HEADING.match(line)
        if not m:
            continue
        detail = next((ln.strip() for ln in lines[i + 1 : i + 6] if ln.strip()), "")
        return _short(f"{m[1]}: {detail}" if detail else m[1])
    return ""


def _sample_ids(recipe: Recipe, stdout: str, limit: int = 10) -> list[str]:
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    marked = [ln.removeprefix(f"{COLLECT_MARK}-ID ") for ln in lines]
    marked = [m for m, ln in zip(marked, lines, strict=True) if m != ln]
    if marked:
        return marked[:limit]
    if recipe.runner == "pytest":
        ids = [ln for ln in lines if "::" in ln and not ln.startswith("ERROR")]
    elif recipe.runner == "unittest":
        ids = [ln for ln in lines if re.fullmatch(r"[\w.]+\.\w+", ln)]
    elif recipe.runner == "cargo":
        ids = [ln.removesuffix(": test") for ln in lines if ln.endswith(": test")]
    elif recipe.runner == "go":
        ids = [ln for ln in lines if re.fullmatch(r"(Test|Example|Fuzz)\w*", ln)]
    elif recipe.runner in ("jest", "vitest"):
        ids = _js_report_ids(stdout, recipe.workdir)
    elif recipe.runner == "node":
        ids = _node_test_ids(lines)
    elif recipe.runner == "ctest":  # ctest -N: "Test  #3: Suite.Name"
        ids = [m[1] for m in (re.match(r"^Test\s+#\d+: (.+)$", ln) for ln in lines) if m]
    else:
        ids = [ln.lstrip("✔✓ ").strip() for ln in lines if ln.startswith(("✔", "✓"))]
    return ids[:limit]


def _node_test_ids(lines: list[str]) -> list[str]:
    """``file > suite > test`` ids from the result lines of repogym's ``node --test`` reporter."""
    ids = []
    for line in lines:
        m = _NODE_TEST_LINE.match(line)
        if not m:
            continue
        try:
            event = json.loads(m[1])
        except ValueError:
            continue
        parts = event.get("id") if isinstance(event, dict) else None
        if isinstance(parts, list) and event.get("s") in ("pass", "fail", "skip", "todo"):
            ids.append(" > ".join(str(p) for p in parts))
    return ids


def _js_report_ids(stdout: str, workdir: str) -> list[str]:
    """``file > describe > test`` ids from a jest/vitest JSON report, as the parsers name them."""
    report = _js_report(stdout)
    if report is None:
        return []
    ids = []
    for suite in report.get("testResults") or []:
        name = str(suite.get("name", "")).removeprefix(workdir.rstrip("/") + "/")
        for test in suite.get("assertionResults") or []:
            parts = [p for p in test.get("ancestorTitles") or [] if p] + [test.get("title", "")]
            ids.append(" > ".join([name, *parts]))
    return ids
