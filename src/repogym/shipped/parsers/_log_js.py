#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""What the JavaScript runners' parsers share: JSON reports (jest, vitest, mocha), test
titles and file names, and the early exits of a run (process.exit, a crash, a kill).

Part of the log parsers (see ``parsers/__init__.py``, shipped into tasks as ``parsers.py``):
standard library only, Python 3.6+ syntax, copied beside it into each generated task's ``tests/``.
"""

import json
import re

# Some typing names appear only in type comments, which ruff does not read (hence F401).
from typing import Iterable, List, Optional, Tuple  # noqa: F401

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:  # in the repogym package
    from repogym.shipped.parsers._log_common import (
        CUT_SHORT,
        ERROR,
        FAILED,
        MAX_MESSAGE,
        PASSED,
        SKIPPED,
        Out,
        clean_text,
        short_message,
    )
else:  # a task's copy: beside parsers.py, which put its folder on sys.path
    from _log_common import (
        CUT_SHORT,
        ERROR,
        FAILED,
        MAX_MESSAGE,
        PASSED,
        SKIPPED,
        Out,
        clean_text,
        short_message,
    )


_JSON_START = re.compile(r'\{\s*"(?:num(?:Failed|Passed|Total)TestSuites|stats)"\s*:')


def json_reports(text: str, out: Out) -> List[dict]:
    """Decode the jest/vitest/mocha JSON reports embedded anywhere in ``text``."""
    reports = []  # type: List[dict]
    if '"testResults"' not in text and '"stats"' not in text:
        return reports
    decoder = json.JSONDecoder()
    pos = 0
    attempts = 0
    while attempts < 50:
        m = _JSON_START.search(text, pos)
        if not m:
            break
        attempts += 1
        try:
            obj, end = decoder.raw_decode(text, m.start())
        except (ValueError, RecursionError):
            out.warn("a JSON test report in the log is truncated or malformed")
            pos = m.end()
            continue
        if isinstance(obj, dict) and (
            isinstance(obj.get("testResults"), list)
            or (isinstance(obj.get("stats"), dict) and isinstance(obj.get("tests"), list))
        ):
            reports.append(obj)
        pos = end
    return reports


def _relativise(path: str, root: Optional[str], known: Iterable[str]) -> str:
    p = path.replace("\\", "/")
    if root:
        r = root.replace("\\", "/").rstrip("/") + "/"
        if p.startswith(r):
            return p[len(r) :]
    best = None
    for k in known:
        kk = k.replace("\\", "/")
        if (p == kk or p.endswith("/" + kk)) and (best is None or len(k) > len(best)):
            best = k
    return best if best is not None else path


_JEST_JSON_STATUS = {
    "passed": PASSED,
    "failed": FAILED,
    "pending": SKIPPED,
    "skipped": SKIPPED,
    "todo": SKIPPED,
    "disabled": SKIPPED,
    "focused": PASSED,
}


def _first_message(texts: object, skip: str = "") -> Optional[str]:
    """The first line of the first string in ``texts`` (a string or a list) that has one,
    skipping lines that contain ``skip``."""
    for text in texts if isinstance(texts, list) else [texts]:
        if not isinstance(text, str):
            continue
        for line in clean_text(text[: 64 * MAX_MESSAGE]).split("\n"):
            if skip and skip in line:
                continue
            message = short_message(line)
            if message:
                return message
    return None


def jest_json(report: dict, out: Out, root: Optional[str], known: Iterable[str]) -> None:
    for suite in report.get("testResults") or []:
        if not isinstance(suite, dict):
            continue
        name = suite.get("name") or suite.get("testFilePath") or ""
        fname = _relativise(str(name), root, known) if name else ""
        assertions = suite.get("assertionResults") or suite.get("testResults") or []
        for a in assertions:
            if not isinstance(a, dict):
                continue
            status = _JEST_JSON_STATUS.get(str(a.get("status")))
            if status is None:
                continue
            parts = [fname] if fname else []
            parts.extend(str(t) for t in (a.get("ancestorTitles") or []))
            parts.append(str(a.get("title", "")))
            tid = " > ".join(parts)
            out.tests[tid] = status
            out.failures.pop(tid, None)
            if status == FAILED:
                message = _first_message(a.get("failureMessages"))
                if message:
                    out.failures[tid] = message
        failed = suite.get("status") == "failed" or bool(suite.get("testExecError"))
        if fname and failed and not assertions:
            out.tests[fname] = ERROR
            error = suite.get("testExecError")
            message = _first_message(
                [error.get("message") if isinstance(error, dict) else None, suite.get("message")],
                "Test suite failed to run",
            )
            if message:
                out.failures[fname] = message


MOCHA_HOOK = re.compile(r'^"(before|after) (all|each)" hook')
_MOCHA_HOOK_FOR = re.compile(r'for "(.*)"')


def mocha_hook_id(parts: List[str], title: str) -> str:
    m = MOCHA_HOOK.match(title)
    if m and m.group(2) == "each":
        f = _MOCHA_HOOK_FOR.search(title)
        if f:
            return " > ".join(parts + [f.group(1)])
    return " > ".join(parts) if parts else title


def _mocha_error(t: dict) -> Optional[str]:
    err = t.get("err")
    if not isinstance(err, dict):
        return None
    return _first_message([err.get("stack"), err.get("message")])


def mocha_json(report: dict, out: Out) -> None:
    def key(t: dict) -> Tuple[str, str]:
        return (str(t.get("file") or ""), str(t.get("fullTitle") or ""))

    def parts_of(t: dict) -> Tuple[List[str], str]:
        title = str(t.get("title") or "")
        full = str(t.get("fullTitle") or title)
        prefix = full[: -len(title)].strip() if title and full.endswith(title) else ""
        parts = [str(t["file"])] if t.get("file") else []
        if prefix:
            parts.append(prefix)
        return parts, title

    lists = {}
    for name in ("failures", "pending", "passes"):
        items = report.get(name)
        lists[name] = (
            {key(t) for t in items if isinstance(t, dict)} if isinstance(items, list) else set()
        )
    for t in report.get("tests") or []:
        if not isinstance(t, dict):
            continue
        k = key(t)
        parts, title = parts_of(t)
        if k in lists["failures"] or (isinstance(t.get("err"), dict) and t["err"]):
            status = FAILED
        elif k in lists["pending"] or (k not in lists["passes"] and "duration" not in t):
            status = SKIPPED
        else:
            status = PASSED
        tid = " > ".join(parts + [title])
        out.tests[tid] = status
        out.failures.pop(tid, None)
        message = _mocha_error(t) if status == FAILED else None
        if message:
            out.failures[tid] = message
    for t in report.get("failures") or []:
        if isinstance(t, dict) and MOCHA_HOOK.match(str(t.get("title") or "")):
            parts, title = parts_of(t)
            tid = mocha_hook_id(parts, title)
            out.tests[tid] = ERROR
            message = _mocha_error(t)
            if message:
                out.failures[tid] = message


JS_EXTS = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte")
_DURATION = re.compile(r"\d+(?:\.\d+)?\s*m?s$")


def strip_duration(title: str) -> str:
    """Drop a trailing ``(12 ms)`` / ``(1.2 s)`` / ``12ms`` duration."""
    if title.endswith("s)"):
        i = title.rfind(" (")
        if i >= 0 and _DURATION.match(title, i + 2, len(title) - 1):
            return title[:i]
    elif title.endswith("s"):
        i = title.rfind(" ")
        if i >= 0 and _DURATION.match(title, i + 1):
            return title[:i].rstrip()
    return title


def looks_like_file(s: str) -> bool:
    return s.endswith(JS_EXTS) or ("/" in s and " " not in s)


# Early exits of JavaScript runners (process.exit, a crash, a kill)


_JEST_EXIT = re.compile(r'process\.exit called with "([^"\n]*)"')
_VITEST_EXIT = re.compile(r'process\.exit unexpectedly called with "([^"\n]*)"')


def cut_short(out: Out, text: str, runner: str, ended: bool) -> None:
    """Say why a JavaScript run ended early (``ended``: the runner's summary was seen)."""
    if runner == "jest":
        m = _JEST_EXIT.search(text) if "process.exit" in text else None
        if m:
            out.recognised = True
            out.warn(
                f'{CUT_SHORT}: process.exit called with "{m.group(1)}" (jest stops the whole'
                " run; results up to the cut are kept, the rest did not run)"
            )
            return
    if runner == "vitest" and "process.exit" in text:
        m = _VITEST_EXIT.search(text)
        if m:
            out.warn(f'a test called process.exit("{m.group(1)}"): vitest reports it as a failure')
    if not ended and out.tests:
        out.warn(
            f"{CUT_SHORT}: no {runner} summary after the last result (the process exited early:"
            " process.exit, a crash or a kill); results up to the cut are kept"
        )
