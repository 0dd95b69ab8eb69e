#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""vitest logs: the default and verbose reporters' text, or its JSON report.

Part of the log parsers (see ``parsers/__init__.py``, shipped into tasks as ``parsers.py``):
standard library only, Python 3.6+ syntax, copied beside it into each generated task's ``tests/``.
"""

import re

# Some typing names appear only in type comments, which ruff does not read (hence F401).
from typing import List, Optional, Tuple  # noqa: F401

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:  # in the repogym package
    from repogym.shipped.parsers._log_common import (
        ERROR,
        FAILED,
        PASSED,
        SKIPPED,
        TRUNCATED,
        Out,
        worst,
    )
    from repogym.shipped.parsers._log_js import (
        cut_short,
        jest_json,
        json_reports,
        looks_like_file,
        strip_duration,
    )
else:  # a task's copy: beside parsers.py, which put its folder on sys.path
    from _log_common import ERROR, FAILED, PASSED, SKIPPED, TRUNCATED, Out, worst
    from _log_js import cut_short, jest_json, json_reports, looks_like_file, strip_duration


_VT_BANNER = re.compile(r"^\s*(?:RUN|DEV|WATCH)\s+v\d+\S*\s+(\S.*?)\s*$")
_VT_MARK = {
    "✓": PASSED,
    "✔": PASSED,
    "√": PASSED,
    "×": FAILED,
    "✗": FAILED,
    "✕": FAILED,
    "❯": FAILED,
    "↓": SKIPPED,
    "□": SKIPPED,
}
_VT_LINE = re.compile(r"^(\s*)([✓✔√×✗✕❯↓□])\s+(\S.*)$")
_VT_INLINE = re.compile(r"\s([✓✔√×✗✕↓□])\s+(\S.*? > .+)$")
_VT_COUNT = re.compile(
    r"^(?P<name>\S.*?)\s+\((?P<n>\d+)(?: tests?)?(?: \|[^)]*)?\)(?:\s+[\d.]+\s*m?s)?$"
)
_VT_SUFFIX = re.compile(r"\s+\[(?:skipped|todo|retry[^\]]*)\]$")
_VT_FAIL = re.compile(r"^\s*FAIL\s+(\S.*?)\s*$")
_VT_FAIL_SUFFIX = re.compile(r"\s+\[ .* \]$")
_VT_SECTION = re.compile(r"⎯+\s*Failed (Tests|Suites) \d+\s*⎯+")
_VT_TOTALS = re.compile(r"^\s*Test Files\s+\d+")


def _vitest_text(lines: List[str], out: Out) -> Tuple[Optional[str], List[str]]:
    root = None  # type: Optional[str]
    files = []  # type: List[str]
    fname = None  # type: Optional[str]
    stack = []  # type: List[Tuple[int, str]]
    section = None  # type: Optional[str]
    dropped = 0
    saw_any = saw_totals = False
    for line in lines:
        if not line.strip():
            continue
        if "⎯" in line:
            m = _VT_SECTION.search(line)
            section = m.group(1) if m else section
            continue
        if "Test Files" in line and _VT_TOTALS.match(line):
            out.recognised = saw_totals = True
            section = None
            continue
        if section is not None:
            m = _VT_FAIL.match(line) if "FAIL" in line else None
            if m:
                body = _VT_FAIL_SUFFIX.sub("", m.group(1))
                status = FAILED if section == "Tests" else ERROR
                worst(out.tests, body, status)
                out.recognised = saw_any = True
            continue
        if root is None and ("RUN" in line or "DEV" in line or "WATCH" in line):
            m = _VT_BANNER.match(line)
            if m:
                root = m.group(1)
                out.recognised = saw_any = True
                continue
        m = _VT_LINE.match(line)
        if m is None:
            m2 = _VT_INLINE.search(line)
            if m2 is None:
                continue
            ind, mark, body = 1, m2.group(1), m2.group(2)
        else:
            ind, mark, body = len(m.group(1)), m.group(2), m.group(3)
        body = body.rstrip()
        if body.endswith("]"):
            body = _VT_SUFFIX.sub("", body)
        counted = _VT_COUNT.match(body) if "(" in body else None
        if counted and ind <= 1 and looks_like_file(counted.group("name")):
            fname = counted.group("name")
            files.append(fname)
            stack = []
            out.recognised = saw_any = True
            continue
        while stack and stack[-1][0] >= ind:
            stack.pop()
        if counted:
            stack.append((ind, counted.group("name")))
            continue
        body = strip_duration(body)
        status = _VT_MARK[mark]
        cut = body.find(" > ")
        head = body[:cut]
        if cut > 0 and (head == fname or looks_like_file(head) or head.startswith("|")):
            tid = body
        elif fname is not None and ind - 3 == 2 * len(stack):
            tid = " > ".join([fname] + [n for _, n in stack] + [body])
        else:
            dropped += 1
            continue
        out.recognised = saw_any = True
        out.tests[tid] = status
    if dropped:
        out.warn(
            f"{dropped} vitest result(s) without suite names were skipped; use --reporter=verbose "
            "or --reporter=json"
        )
    if saw_any and not saw_totals:
        out.warn(TRUNCATED)
    return root, files


def parse_vitest(text: str, lines: List[str]) -> Out:
    out = Out()
    root, files = _vitest_text(lines, out)
    reports = [r for r in json_reports(text, out) if "testResults" in r]
    if reports:
        json_out = Out()
        for r in reports:
            jest_json(r, json_out, root, files)
        if json_out.tests:
            out.tests = json_out.tests
            out.failures = json_out.failures
            out.recognised = True
            out.warnings = [w for w in out.warnings if w != TRUNCATED and "vitest result" not in w]
    cut_short(out, text, "vitest", bool(reports) or TRUNCATED not in out.warnings)
    return out
