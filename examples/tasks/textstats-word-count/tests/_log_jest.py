#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""jest logs: the default reporter's text (``PASS``/``FAIL`` files, ``--verbose`` marks) or its
JSON report.

Part of the log parsers (see ``parsers/__init__.py``, shipped into tasks as ``parsers.py``):
standard library only, Python 3.6+ syntax, copied beside it into each generated task's ``tests/``.
"""

import re

# Some typing names appear only in type comments, which ruff does not read (hence F401).
from typing import List, Optional, Set, Tuple  # noqa: F401

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:  # in the repogym package
    from repogym.shipped.parsers._log_common import ERROR, FAILED, PASSED, SKIPPED, TRUNCATED, Out
    from repogym.shipped.parsers._log_js import (
        JS_EXTS,
        cut_short,
        jest_json,
        json_reports,
        strip_duration,
    )
else:  # a task's copy: beside parsers.py, which put its folder on sys.path
    from _log_common import ERROR, FAILED, PASSED, SKIPPED, TRUNCATED, Out
    from _log_js import JS_EXTS, cut_short, jest_json, json_reports, strip_duration


_JEST_HEADER = re.compile(r"^\s?(PASS|FAIL)\s+(\S.*?)(?:\s+\(\d+(?:\.\d+)?\s*m?s\))?\s*$")
_JEST_DETAIL = re.compile(r"^  ● (.+)$")
_JEST_TOTALS = re.compile(r"^Tests:\s+.*\d+ total")
_JEST_MARK = {
    "✓": PASSED,
    "✔": PASSED,
    "√": PASSED,
    "✕": FAILED,
    "✖": FAILED,
    "×": FAILED,
    "○": SKIPPED,
    "✎": SKIPPED,
}


def _jest_text(lines: List[str], out: Out) -> List[str]:
    files = []  # type: List[str]
    fname = None  # type: Optional[str]
    in_tree = False
    stack = []  # type: List[Tuple[int, str]]
    prefix = ""
    in_block = set()  # type: Set[str]  # ids the current file's tree reported
    saw_header = saw_totals = False
    for line in lines:
        stripped = line.lstrip()
        if not stripped:
            in_tree = False
            continue
        ind = len(line) - len(stripped)
        first = stripped[0]
        if ind <= 1 and (first == "P" or first == "F"):
            m = _JEST_HEADER.match(line)
            if m and (" " not in m.group(2) or m.group(2).endswith(JS_EXTS)):
                fname = m.group(2)
                files.append(fname)
                out.recognised = saw_header = True
                in_tree, stack, prefix = True, [], fname
                in_block = set()
                continue
        elif first == "●":
            in_tree = False
            m = _JEST_DETAIL.match(line)
            if m and fname is not None:
                title = m.group(1).strip()
                if title == "Test suite failed to run":
                    out.tests[fname] = ERROR
                elif title != "Console" and not title.startswith("process.exit called with"):
                    # The tree (verbose) is authoritative: a detail block can be an error from
                    # an attempt that a retry then passed.
                    tid = " > ".join([fname] + title.split(" › "))
                    if tid not in in_block:
                        out.tests[tid] = FAILED
            continue
        elif first == "T" and line.startswith("Tests:") and _JEST_TOTALS.match(line):
            out.recognised = saw_totals = True
            continue
        if not in_tree or fname is None:
            continue
        if stack and stack[-1][0] >= ind:
            while stack and stack[-1][0] >= ind:
                stack.pop()
            prefix = " > ".join([fname] + [n for _, n in stack])
        mark = _JEST_MARK.get(first)
        if mark is not None and stripped[1:2] == " ":
            title = stripped[2:].rstrip()
            if title.endswith("s)"):
                title = strip_duration(title)
            if first == "○" and title.startswith("skipped "):
                title = title[8:]
            elif first == "✎" and title.startswith("todo "):
                title = title[5:]
            tid = prefix + " > " + title
            out.tests[tid] = mark
            in_block.add(tid)
        else:
            stack.append((ind, stripped.rstrip()))
            prefix = " > ".join([fname] + [n for _, n in stack])
    if saw_header and not saw_totals:
        out.warn(TRUNCATED)
    return files


def parse_jest(text: str, lines: List[str]) -> Out:
    out = Out()
    files = _jest_text(lines, out)
    reports = [r for r in json_reports(text, out) if "testResults" in r]
    if reports:
        json_out = Out()
        for r in reports:
            jest_json(r, json_out, None, files)
        if json_out.tests:
            out.tests = json_out.tests
            out.failures = json_out.failures
            out.recognised = True
            out.warnings = [w for w in out.warnings if w != TRUNCATED]
    ended = bool(reports) or TRUNCATED not in out.warnings
    cut_short(out, text, "jest", ended)
    return out
