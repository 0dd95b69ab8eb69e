#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""``cargo nextest`` logs.

Part of the log parsers (see ``parsers/__init__.py``, shipped into tasks as ``parsers.py``):
standard library only, Python 3.6+ syntax, copied beside it into each generated task's ``tests/``.
"""

import re

# Some typing names appear only in type comments, which ruff does not read (hence F401).
from typing import List, Optional  # noqa: F401

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:  # in the repogym package
    from repogym.shipped.parsers._log_common import FAILED, PASSED, SKIPPED, TRUNCATED, Out
else:  # a task's copy: beside parsers.py, which put its folder on sys.path
    from _log_common import FAILED, PASSED, SKIPPED, TRUNCATED, Out


_NX_LINE = re.compile(
    r"^\s*(?P<st>(?:TRY \d+ )?[A-Z][A-Z+\-]*(?: \+ [A-Z]+)?(?: \d+/\d+)?)"
    r" \[\s*(?P<gt>>)?\s*[\d.]*s?\s*\]\s+(?:\([^)]*\)\s+)?(?:\[[\d/]+\]\s+)?(?P<bin>\S+)\s+"
    r"(?P<test>\S.*?)\s*$"
)
_NX_TRY = re.compile(r"^TRY \d+ ")
_NX_PASS = {"PASS", "LEAK", "TIMEOUT-PASS", "SLOW", "SLOW + LEAK", "SLOW+TMPASS", "TMPASS"}
_NX_FAIL = {
    "FAIL",
    "FAIL + LEAK",
    "FL+LK",
    "XFAIL",
    "LEAK-FAIL",
    "LKFAIL",
    "TIMEOUT",
    "TMT",
    "ABORT",
}
_NX_STARTING = re.compile(r"^\s*Starting \d+ tests? across \d+ binar")
_NX_SUMMARY = re.compile(r"^\s*Summary \[\s*[\d.]+s\]")


def _nextest_status(word: str) -> Optional[str]:
    word = _NX_TRY.sub("", word)
    if word.startswith("FLAKY") or word in _NX_PASS:
        return PASSED
    if word == "SKIP":
        return SKIPPED
    if word in _NX_FAIL or (word.startswith("SIG") and word.isalnum()):
        return FAILED
    return None


def parse_nextest(text: str, lines: List[str]) -> Out:
    out = Out()
    started = summary = False
    for line in lines:
        if "] " not in line:
            if "Starting" in line and _NX_STARTING.match(line):
                out.recognised = started = True
            continue
        m = _NX_LINE.match(line)
        if m:
            status = None if m.group("gt") else _nextest_status(m.group("st"))
            if status is not None:
                out.recognised = True
                out.tests[m.group("bin") + " " + m.group("test")] = status
            continue
        if "Summary" in line and _NX_SUMMARY.match(line):
            out.recognised = summary = True
        elif "Starting" in line and _NX_STARTING.match(line):
            out.recognised = started = True
    if (started or out.tests) and not summary:
        out.warn(TRUNCATED)
    return out
