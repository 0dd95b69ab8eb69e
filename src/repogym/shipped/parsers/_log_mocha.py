#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""mocha logs: the spec reporter, or the JSON report.

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
        indent_of,
    )
    from repogym.shipped.parsers._log_js import (
        MOCHA_HOOK,
        cut_short,
        json_reports,
        mocha_hook_id,
        mocha_json,
        strip_duration,
    )
else:  # a task's copy: beside parsers.py, which put its folder on sys.path
    from _log_common import ERROR, FAILED, PASSED, SKIPPED, TRUNCATED, Out, indent_of
    from _log_js import (
        MOCHA_HOOK,
        cut_short,
        json_reports,
        mocha_hook_id,
        mocha_json,
        strip_duration,
    )


_MOCHA_PASSING = re.compile(r"^\s+\d+ passing \(\d+(?:\.\d+)?\s*m?s\)\s*$")
_MOCHA_FAILED = re.compile(r"\d+\) (.*)$")
_MOCHA_INLINE = re.compile(r"(\s+)([✓✔√]) (.+)$")


def _mocha_marker(line: str) -> Optional[Tuple[int, str, str]]:
    """(indent, status, title) of a spec-reporter test line, else None."""
    s = line.lstrip(" ")
    ind = len(line) - len(s)
    if ind >= 2 and len(s) > 2:
        first = s[0]
        if s[1] == " ":
            if first in "✓✔√":
                return ind, PASSED, s[2:]
            if first == "-":
                return ind, SKIPPED, s[2:]
        elif first.isdigit():
            m = _MOCHA_FAILED.match(s)
            if m:
                return ind, FAILED, m.group(1)
    if "✔" in line or "✓" in line or "√" in line:
        # Output printed without a newline, then the test line.
        m = _MOCHA_INLINE.search(line)
        if m and m.start() > 0:
            return len(m.group(1)), PASSED, m.group(3)
    return None


def parse_mocha(text: str, lines: List[str]) -> Out:
    out = Out()
    reports = [r for r in json_reports(text, out) if "stats" in r]
    if reports:
        for r in reports:
            mocha_json(r, out)
        out.recognised = True
        return out
    end = None
    for i, line in enumerate(lines):
        if "passing" in line and _MOCHA_PASSING.match(line):
            end = i
            out.recognised = True
            break
    region = lines if end is None else lines[:end]
    markers = [_mocha_marker(line) if line else None for line in region]
    stack = []  # type: List[Tuple[int, str]]
    prefix = ""
    saw_tests = False
    for i, mk in enumerate(markers):
        if mk is None:
            line = region[i]
            ind = indent_of(line)
            if ind < 2 or not line.strip():
                continue
            # A suite title is only accepted when something deeper follows it.
            nxt = None
            for j in range(i + 1, min(len(region), i + 200)):
                mk_next = markers[j]
                if mk_next is not None:
                    nxt = mk_next[0]
                    break
                if indent_of(region[j]) >= 2 and region[j].strip():
                    nxt = indent_of(region[j])
                    break
            if nxt is None or nxt <= ind:
                continue
            while stack and stack[-1][0] >= ind:
                stack.pop()
            stack.append((ind, line.strip()))
            prefix = " > ".join(n for _, n in stack)
            continue
        ind, status, title = mk
        if stack and stack[-1][0] >= ind:
            while stack and stack[-1][0] >= ind:
                stack.pop()
            prefix = " > ".join(n for _, n in stack)
        title = title.rstrip()
        if title.endswith("s)"):
            title = strip_duration(title)
        saw_tests = True
        if status == FAILED and MOCHA_HOOK.match(title):
            out.tests[mocha_hook_id([n for _, n in stack], title)] = ERROR
        else:
            out.tests[prefix + " > " + title if prefix else title] = status
    if saw_tests:
        out.recognised = True
        if end is None:
            out.warn(TRUNCATED)
            cut_short(out, text, "mocha", False)
    return out
