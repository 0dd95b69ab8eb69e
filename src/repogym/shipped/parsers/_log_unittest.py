#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""unittest logs (``-v``): test lines, subtests, class and module fixtures, import errors.

Part of the log parsers (see ``parsers/__init__.py``, shipped into tasks as ``parsers.py``):
standard library only, Python 3.6+ syntax, copied beside it into each generated task's ``tests/``.
"""

import re

# Some typing names appear only in type comments, which ruff does not read (hence F401).
from typing import Dict, List, Optional  # noqa: F401

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:  # in the repogym package
    from repogym.shipped.parsers._log_common import (
        ERROR,
        FAILED,
        PASSED,
        SKIPPED,
        TRUNCATED,
        Out,
        override,
        worst,
    )
else:  # a task's copy: beside parsers.py, which put its folder on sys.path
    from _log_common import ERROR, FAILED, PASSED, SKIPPED, TRUNCATED, Out, override, worst


_UT_NAME = r"(?P<name>[^\s()]+)"
_UT_CLS = r"\((?P<cls>[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)\)"
_UT_TEST = re.compile(r"^" + _UT_NAME + " " + _UT_CLS + r"(?P<rest>(?: \.\.\.(?: .*)?)?)$")
_UT_SUB = re.compile(r"^\s+" + _UT_NAME + " " + _UT_CLS + r" .*\.\.\. (?P<st>FAIL|ERROR)$")
_UT_HEADER = re.compile(
    r"^(?P<kind>FAIL|ERROR|UNEXPECTED SUCCESS): " + _UT_NAME + " " + _UT_CLS + r"(?: .*)?$"
)
_UT_RAN = re.compile(r"^Ran (\d+) tests? in \d+(?:\.\d+)?s\s*$")
_UT_SKIP_TAIL = re.compile(r"skipped (?:'.*'|\".*\")$")
_UT_PARTIAL = re.compile(r"[A-Za-z_]\w* \([A-Za-z_]")
_UT_FIXTURES = ("setUpClass", "tearDownClass", "setUpModule", "tearDownModule")


def _ut_id(name: str, cls: str) -> str:
    if cls.startswith("unittest.loader._FailedTest") or cls.startswith(
        "unittest.loader.ModuleImportFailure"
    ):
        return name
    if name in _UT_FIXTURES:
        return cls
    if cls.endswith("." + name):
        return cls
    return cls + "." + name


def _ut_status(s: str, exact: bool) -> Optional[str]:
    """Status at the end of ``s`` (or ``s`` exactly when ``exact``)."""
    if exact:
        if s == "ok":
            return PASSED
        if s == "FAIL" or s == "unexpected success":
            return FAILED
        if s == "ERROR":
            return ERROR
        if s == "expected failure":
            return PASSED
        if s.startswith("skipped") and (s == "skipped" or _UT_SKIP_TAIL.match(s)):
            return SKIPPED
        return None
    if s.endswith("ok"):
        return PASSED
    if s.endswith("FAIL") or s.endswith("unexpected success"):
        return FAILED
    if s.endswith("ERROR"):
        return ERROR
    if s.endswith("expected failure"):
        return PASSED
    if "skipped" in s and _UT_SKIP_TAIL.search(s):
        return SKIPPED
    return None


class _Unittest:
    """State machine over ``python -m unittest -v`` output."""

    def __init__(self) -> None:
        self.out = Out()
        self.run = {}  # type: Dict[str, str]
        self.pending = None  # type: Optional[str]
        self.candidate = None  # type: Optional[str]
        self.awaiting_description = False
        self.open_run = False

    def commit(self) -> None:
        """Give the test waiting for its status the last status-like text seen since."""
        if self.pending is not None and self.candidate is not None:
            worst(self.run, self.pending, self.candidate)
        self.pending = self.candidate = None

    def test_line(self, m: "Optional[re.Match[str]]") -> None:
        while m:
            self.commit()
            self.out.recognised = self.open_run = True
            tid = _ut_id(m.group("name"), m.group("cls"))
            rest = m.group("rest")
            if not rest:
                self.pending = tid
                self.awaiting_description = True
                return
            tail = rest[5:]
            status = _ut_status(tail, exact=True)
            if status is not None:
                worst(self.run, tid, status)
                return
            # Python < 3.11 prints no status for a test whose subtests failed, so the next
            # test can start on the same line.
            m = _UT_TEST.match(tail)
            if not m:
                self.pending, self.candidate = tid, _ut_status(tail, exact=False)

    def line(self, line: str) -> None:
        if self.awaiting_description:
            self.awaiting_description = False
            self.candidate = _ut_status(line, exact=False) if " ... " in line else None
            return
        if not line:
            return
        c = line[0]
        if c not in " =-":
            m = _UT_TEST.match(line)
            if m:
                self.test_line(m)
                return
        elif c == " ":
            m = _UT_SUB.match(line)
            if m:
                self.out.recognised = self.open_run = True
                sub = FAILED if m.group("st") == "FAIL" else ERROR
                worst(self.run, _ut_id(m.group("name"), m.group("cls")), sub)
                return
        elif line.startswith("======") or line.startswith("------"):
            self.commit()
            return
        if c in "FEU":
            m = _UT_HEADER.match(line)
            if m:
                self.commit()
                self.out.recognised = self.open_run = True
                status = ERROR if m.group("kind") == "ERROR" else FAILED
                worst(self.run, _ut_id(m.group("name"), m.group("cls")), status)
                return
        if c == "R" and _UT_RAN.match(line):
            self.commit()
            self.out.recognised = True
            self.open_run = False
            override(self.out.tests, self.run)
            self.run = {}
            return
        if self.pending is not None:
            guess = _ut_status(line, exact=False)
            if guess is not None:
                self.candidate = guess


def parse_unittest(text: str, lines: List[str]) -> Out:
    p = _Unittest()
    for line in lines:
        p.line(line)
    if lines and _UT_PARTIAL.match(lines[-1]):
        p.commit()  # the log was cut while the next test's name was being printed
    override(p.out.tests, p.run)
    if p.open_run:
        p.out.warn(TRUNCATED)
    return p.out
