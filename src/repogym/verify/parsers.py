#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""Parse test-runner logs into ``{test id: PASSED | FAILED | SKIPPED | ERROR}``.

This file is self-contained (standard library only, Python 3.6+ syntax, no repogym imports):
pipelines copy it into each generated task's ``tests/`` folder, where it runs under whatever
Python the repository uses.  ``python parsers.py [--runner R] LOGFILE`` (``-`` for stdin) prints
the result as JSON.

Runners: pytest, unittest, jest, vitest, mocha, node, go, cargo, nextest -- auto-detected when not
given, but pipelines that know the runner should pass it.  ANSI codes, CRLF, test output mixed
into result lines and truncated logs are tolerated; a log without its end-of-run summary gets the
``TRUNCATED`` warning; a JavaScript log that ends early (jest's ``process.exit called with``, a
mocha or ``node --test`` run without its summary) also gets a ``CUT_SHORT`` warning saying why,
and is parsed up to the cut.

Test ids (stable, and in the form the runner uses to select tests):

* pytest -- the node id as printed: ``tests/test_x.py::TestC::test_b[a b-1]``.  A module that
  fails to collect is reported as its path (``tests/test_y.py``) with ERROR.  ``-rA`` summaries
  name every outcome except skips (``SKIPPED [1] file:line`` has no id), ``-v`` lines name skips
  too: run with ``-rA -v`` for complete results.
* unittest -- ``package.module.Class.test_name``.  A failing ``setUpClass``/``setUpModule`` gives
  the class/module id ERROR; a module that fails to import gives the module name ERROR; failing
  subtests mark their parent test.
* jest, vitest -- ``<file> > <describe> > ... > <test>``, the file as the runner prints it
  (relative to the project root).  JSON reports carry absolute paths: they are made relative when
  the same log shows the root (vitest banner) or the relative file names (jest ``PASS``/``FAIL``
  lines), else kept as given.  A file that fails to load is ``<file>`` with ERROR.  vitest 4's
  default reporter omits describe titles, so only what it names fully is reported (with a
  warning); use ``--reporter=verbose`` or ``--reporter=json``.
* mocha -- the spec reporter prints no file names: ``<describe> > ... > <test>``.  The JSON report
  has the file but does not separate nested describe titles, so its ids are
  ``<file> > <describe titles joined by spaces, as mocha's fullTitle> > <test>``.  A failing
  ``before all``/``after all`` hook marks its suite ERROR, an ``each`` hook the named test.
* node (``node --test``) -- ``<file> > <suite> > ... > <test>`` from the lines of repogym's
  reporter (``node:test {"s": ..., "id": [...]}``, see ``repogym/bootstrap/node_runner.py``), the
  file relative to the working directory; a file that fails to load is ``<file>`` with ERROR (its
  message: the first ``Error:`` line it wrote to stderr), a suite whose hook fails is the suite's
  id with ERROR, cancelled tests are FAILED, todo tests SKIPPED.  Node's own TAP and spec
  reporters name no file for passing tests, so their ids are ``<suite> > ... > <test>`` (Node 18's
  TAP wraps each file in a subtest named by its path, which then comes first).
* go -- ``TestX/sub_case`` as ``go test`` names it.  When the same name occurs in more than one
  package of the log it is qualified as ``<import path>::TestX/sub_case``.  A package that fails to
  build (or fails with no test reported) is ``<import path>`` with ERROR.
* cargo -- the libtest name ``module::test`` (doctests ``src/lib.rs - item (line 3)``).  When the
  same name is reported by more than one test binary it is qualified as
  ``<binary>:<source>::<name>`` (e.g. ``demo:src/lib.rs::tests::it_works``; doctests use
  ``<crate>:doctests``; old cargo without a source path uses ``<binary>``).
* nextest -- ``<binary-id> <test name>`` exactly as nextest prints it (``demo::api tests::get``).

Outcomes follow the runner's own exit-code semantics: an id is PASSED when the runner would not fail
the run because of it.  So pytest XFAIL and non-strict XPASS are PASSED (strict XPASS is printed as
FAILED), unittest ``expected failure`` is PASSED and ``unexpected success`` FAILED, todo tests are
SKIPPED, nextest SIGSEGV/TIMEOUT/ABORT/exec-fail are FAILED and FLAKY is PASSED, and a go test that
started but never reported in a package that failed (panic, timeout) is FAILED.

Several results for one id within a single run (pytest call failure plus teardown error, unittest
subtests) merge to the worst: FAILED > ERROR > PASSED > SKIPPED.  Across reruns (a second pytest
session or unittest run, go ``-count``, retries, a repeated log) the last result wins.  For pytest
the short test summary (``-rA``) wins over ``-v`` lines for the same id.

Failure messages (``ParseResult.failures``: id -> one line, only for ids that end FAILED or
ERROR) are read where the log states them plainly: pytest ``-rA`` summary lines (``FAILED
id - TypeError: ...``; a rewritten ``assert`` becomes ``AssertionError: assert ...``) and the
exception line of an ``ERROR collecting`` section; jest/vitest JSON ``failureMessages`` (first
line; a file that fails to load: its error's first line); mocha JSON ``err.stack`` (first line);
go ``file_test.go:12: ...`` lines that a failing test logged (the first one) or a ``panic:``
line right after its ``--- FAIL``, and a build failure's first compiler error.  Messages have no
ANSI codes or control characters, at most ``MAX_MESSAGE`` characters each, at most
``MAX_FAILURES`` of them.  Other runners and formats give none.
"""

import json
import re
import sys

# Callable and Set appear only in type comments, which ruff does not read (hence F401).
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple, Union  # noqa: F401

__all__ = [
    "ERROR",
    "FAILED",
    "MAX_FAILURES",
    "MAX_MESSAGE",
    "PASSED",
    "RUNNERS",
    "SKIPPED",
    "TRUNCATED",
    "CUT_SHORT",
    "ParseResult",
    "clean_text",
    "detect_runner",
    "parse_log",
]

PASSED = "PASSED"
FAILED = "FAILED"
SKIPPED = "SKIPPED"
ERROR = "ERROR"

RUNNERS = ("pytest", "unittest", "jest", "vitest", "mocha", "node", "go", "cargo", "nextest")

_RANK = {SKIPPED: 0, PASSED: 1, ERROR: 2, FAILED: 3}
MAX_MESSAGE = 300
"""Longest failure message kept (characters)."""
MAX_FAILURES = 2000
"""Most failure messages kept per log."""


class ParseResult:
    """Outcome of parsing one log: runner, ``tests`` (id -> status), status and warnings.

    ``status`` is ``ok`` (at least one test), ``empty`` (runner recognised, no tests) or
    ``unparsed`` (no parser understood the log).  ``failures`` maps FAILED/ERROR ids to the
    short failure message the log gives for them (only where one was found).
    """

    def __init__(
        self,
        runner: Optional[str] = None,
        tests: Optional[Dict[str, str]] = None,
        status: str = "unparsed",
        warnings: Optional[List[str]] = None,
        failures: Optional[Dict[str, str]] = None,
    ) -> None:
        self.runner = runner
        self.tests = tests if tests is not None else {}
        self.status = status
        self.warnings = warnings if warnings is not None else []
        self.failures = failures if failures is not None else {}

    def to_dict(self) -> dict:
        """Plain-data form (what the CLI prints)."""
        return {
            "runner": self.runner,
            "status": self.status,
            "tests": dict(self.tests),
            "warnings": list(self.warnings),
            "failures": dict(self.failures),
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParseResult) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return (
            f"ParseResult(runner={self.runner!r}, status={self.status!r}, "
            f"tests={len(self.tests)} ids, warnings={self.warnings!r})"
        )


class _Out:
    """What one parser found."""

    def __init__(self) -> None:
        self.tests = {}  # type: Dict[str, str]
        self.recognised = False
        self.warnings = []  # type: List[str]
        self.failures = {}  # type: Dict[str, str]  # id -> failure message

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)


def _worst(tests: Dict[str, str], tid: str, status: str) -> None:
    old = tests.get(tid)
    if old is None or _RANK[status] > _RANK[old]:
        tests[tid] = status


def _override(into: Dict[str, str], new: Dict[str, str]) -> None:
    for tid, status in new.items():
        into[tid] = status


TRUNCATED = "log looks truncated: no end-of-run summary after the last results"
CUT_SHORT = "log cut short"
"""Prefix of the warning that says why a JavaScript runner's log ends early (results up to the
cut are kept): ``log cut short: process.exit called with "1" (jest stops the whole run)``."""

# --------------------------------------------------------------------------------------------
# Cleaning

_SGR = re.compile(r"\x1b\[[0-9;]*m")
_MOVE = r"\[[0-9;]*[ABEFGHf]|\[2K|\[[23]J"  # cursor movements and line/screen erases
_ESCAPES = re.compile(
    r"\x1b(?!" + _MOVE + r")(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])?"
)
_MOVES = r"(?:\x1b(?:" + _MOVE + r"))+"
_MOVE_AT_EDGE = re.compile(r"(^|\n)" + _MOVES + r"|" + _MOVES + r"(?=\n|$)")
_MOVE_INSIDE = re.compile(_MOVES)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_text(text: str) -> str:
    """Strip ANSI colour/cursor codes and control characters; normalise line endings.

    A cursor movement inside a line (back to column 1, erase line, up a line, ...) means the
    text after it was drawn over a fresh line, so it becomes a line break; at either end of a
    line it is dropped.  Lone carriage returns (progress bars) also become line breaks.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if "\x1b" in text:
        text = _SGR.sub("", text)  # colours: by far the most common, so strip them cheaply first
    if "\x1b" in text:
        text = _ESCAPES.sub("", text)
        if "\x1b" in text:
            text = _MOVE_AT_EDGE.sub(r"\1", text)
            text = _MOVE_INSIDE.sub("\n", text)
    if "\r" in text:
        text = text.replace("\r", "\n")
    return _CONTROL.sub("", text)


def short_message(text: object) -> Optional[str]:
    """The first non-blank line of ``text`` without ANSI codes or control characters, cut to
    MAX_MESSAGE characters; None when nothing is left (or ``text`` is not a string)."""
    if not isinstance(text, str):
        return None
    for line in clean_text(text[: 64 * MAX_MESSAGE]).split("\n"):
        line = line.replace("\t", " ").strip()
        if line:
            if len(line) > MAX_MESSAGE:
                line = line[: MAX_MESSAGE - 3] + "..."
            return line
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


# --------------------------------------------------------------------------------------------
# pytest

_PT_STATUS = {
    "PASSED": PASSED,
    "FAILED": FAILED,
    "SKIPPED": SKIPPED,
    "ERROR": ERROR,
    "XFAIL": PASSED,
    "XPASS": PASSED,
    "FAIL": FAILED,  # pytest < 3.x short summaries
}
_PT_SESSION = re.compile(r"^=+ test session starts =+$")
_PT_SUMMARY = re.compile(r"^=+ short test summary info =+$")
_PT_FINAL = re.compile(
    r"^=*\s*(?:no tests ran|\d+ \w+)[^=]* in \d+(?:\.\d+)? ?s(?:econds)?(?: \([^)]*\))?\s*=*$"
)
_PT_V_TAIL = re.compile(
    r"(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS|RERUN)(?: \(.*\))?\s*(?:\[\s*\d+%\])?\s*$"
)
_PT_XDIST = re.compile(
    r"^\[gw\d+\](?: \[\s*\d+%\])? (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS|RERUN) (.+)$"
)
_PT_NODE_START = re.compile(r"[^\s:\[][^:]*?\.\w+::\S")
_PT_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|FAIL|ERROR|XFAIL|XPASS|SKIPPED) (.+)$")
_PT_REPORTS = re.compile(
    r"^=+ (?:FAILURES|ERRORS|PASSES|XFAILURES|XPASSES|warnings summary|slowest \d* ?durations)"
    r" =+$"
)
_PT_COLLECT_ERR = re.compile(r"^_+ ERROR collecting (.+?) _+$")
_PT_COLLECTED = re.compile(
    r"^(?:collecting \.\.\. )?collected \d+ items?|^\d+ workers? \[\d+ items?\]"
)
# The exception line of a traceback pytest printed: "E   Name: message" (source lines, the
# "File ..." lines of a SyntaxError and message continuations are indented further).
_PT_E_HEADER = re.compile(r"^E   ([A-Za-z_][\w.]*(?::.*)?)$")
# A summary message that quotes source: a doctest's numbered lines, a "> " source marker.
_PT_QUOTED_SOURCE = re.compile(r"^(?:\d{3}(?: |$)|>)")


def _pt_message(text: str) -> Optional[str]:
    """A pytest crash message as the plugin reports it: ``assert ...`` (pytest drops the
    ``AssertionError: `` of a rewritten assert) gets its exception name back.  A summary that
    quotes source (a doctest's numbered lines, under xdist) gives none."""
    line = short_message(text)
    if line is not None and _PT_QUOTED_SOURCE.match(line):
        return None
    if line is not None and (line == "assert" or line.startswith("assert ")):
        line = short_message("AssertionError: " + line)
    return line


def _nodeid_prefix(s: str, known: Optional[Dict[str, str]] = None) -> str:
    """Return the pytest node id at the start of ``s`` (which may continue with more text)."""
    if known:
        if s in known:
            return s
        pos = s.find(" ")
        while pos >= 0:
            if s[:pos] in known:
                return s[:pos]
            pos = s.find(" ", pos + 1)
    i = s.find("::")
    if i < 0:
        j = s.find(" - ")
        return (s if j < 0 else s[:j]).strip()
    sp = s.find(" ", i)
    if sp < 0:
        return s.strip()
    br = s.find("[", i)
    if br < 0 or sp < br:
        return s[:sp]
    # A parametrised id whose brackets contain spaces: end at a "]" followed by a space (or the
    # end) where the brackets balance; failing that, at the last such "]".
    last = -1
    pos = s.find("]", br)
    while pos >= 0:
        if pos + 1 == len(s) or s[pos + 1] == " ":
            part = s[br : pos + 1]
            if part.count("[") == part.count("]"):
                return s[: pos + 1]
            last = pos
        pos = s.find("]", pos + 1)
    if last >= 0:
        return s[: last + 1]
    return s.rstrip()


def _pytest_summary(
    lines: List[str], out: _Out, messages: Dict[str, str]
) -> Tuple[Dict[str, str], Optional[int]]:
    """The results of a session's last "short test summary info" section (worst-of), and the
    index of its header line (None: no summary); the failure messages found go to
    ``messages``."""
    summary = {}  # type: Dict[str, str]
    start = None
    for idx, line in enumerate(lines):
        if line.startswith("=") and _PT_SUMMARY.match(line):
            start = idx
    if start is not None:
        out.recognised = True
        for line in lines[start + 1 :]:
            if line.startswith("="):
                break
            m = _PT_SUMMARY_LINE.match(line)
            if not m:
                continue
            word, rest = m.group(1), m.group(2)
            if word == "SKIPPED" and rest.startswith("["):
                continue  # "SKIPPED [1] file:line: reason" names no test
            rest = rest.strip()
            tid, status = _nodeid_prefix(rest), _PT_STATUS[word]
            old = summary.get(tid)
            _worst(summary, tid, status)
            if old is not None and _RANK[status] > _RANK[old]:
                messages.pop(tid, None)  # the message goes with the worst line
            tail = rest[len(tid) :] if rest.startswith(tid) else ""
            # (An import error's summary, cut to the terminal's width, says less than the
            # exception line of its "ERROR collecting" section.)
            if (
                status in (FAILED, ERROR)
                and summary[tid] == status
                and tid not in messages
                and tail.startswith(" - ")
                and not tail.startswith(" - ImportError while ")
            ):
                message = _pt_message(tail[3:])
                if message:
                    messages[tid] = message
    return summary, start


def _pytest_session(lines: List[str], out: _Out, messages: Dict[str, str]) -> Dict[str, str]:
    """Results of one pytest session (worst-of within the session, summary over -v lines);
    the failure messages found go to ``messages``."""
    summary, start = _pytest_summary(lines, out, messages)
    verbose = {}  # type: Dict[str, str]
    pending = None  # type: Optional[str]
    run_over = False
    stated = set(messages)  # messages of summary lines: they win over tracebacks
    collecting = None  # type: Optional[str]  # the module of an "ERROR collecting" section
    header = None  # type: Optional[str]  # its exception line in the current "E" block
    in_block = False
    end = start if start is not None else len(lines)
    for line in lines[:end]:
        if not line:
            continue
        c = line[0]
        if c == "=" or c == "_":
            pending = None
            collecting = None
            if c == "_":
                m = _PT_COLLECT_ERR.match(line)
                if m:
                    collecting = m.group(1).strip()
                    _worst(verbose, collecting, ERROR)
            elif _PT_SESSION.match(line):
                out.recognised = True
            elif _PT_REPORTS.match(line):
                run_over = True  # captured output below may quote other pytest runs
            continue
        if collecting is not None:
            # The exception line of the last traceback in the section (of a chain: the last).
            if c == "E" and (line == "E" or line.startswith("E ")):
                if not in_block:
                    in_block, header = True, None
                m = _PT_E_HEADER.match(line.rstrip()) if header is None else None
                if m:
                    header = m.group(1)
                    if collecting not in stated:
                        message = short_message(header)
                        if message:
                            messages[collecting] = message
            else:
                in_block = False
        if run_over:
            continue
        if c == "[" and line.startswith("[gw"):
            m = _PT_XDIST.match(line)
            if m:
                out.recognised = True
                if m.group(1) != "RERUN":
                    tid = _nodeid_prefix(m.group(2).strip(), summary)
                    _worst(verbose, tid, _PT_STATUS[m.group(1)])
            continue
        if c == "c" and _PT_COLLECTED.match(line):
            out.recognised = True
            continue
        m = _PT_V_TAIL.search(line) if len(line) < 20000 else None
        if m:
            prefix = line[: m.start()]
            if _PT_NODE_START.match(prefix):
                tid = _nodeid_prefix(
                    prefix.rstrip(" ") if prefix.endswith(" ") else prefix, summary
                )
            elif pending is not None:
                tid = pending
            else:
                continue
            pending = None
            out.recognised = True
            if m.group(1) != "RERUN":
                _worst(verbose, tid, _PT_STATUS[m.group(1)])
        elif _PT_NODE_START.match(line):
            pending = _nodeid_prefix(line.rstrip(" "), summary)
    _override(verbose, summary)
    return verbose


def _parse_pytest(text: str, lines: List[str]) -> _Out:
    out = _Out()
    starts = [i for i, line in enumerate(lines) if line.startswith("=") and _PT_SESSION.match(line)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    starts.append(len(lines))
    for k in range(len(starts) - 1):
        # Sessions in order: a later pytest run in the same log overrides an earlier one.
        messages = {}  # type: Dict[str, str]
        session = _pytest_session(lines[starts[k] : starts[k + 1]], out, messages)
        _override(out.tests, session)
        for tid in session:
            out.failures.pop(tid, None)
            if tid in messages:
                out.failures[tid] = messages[tid]
    # Completion: the last session (or -q run) must end with its "N passed in Xs" line.
    last = lines[starts[-2] :]
    has_final = any(line and _PT_FINAL.match(line) for line in last)
    if has_final:
        out.recognised = True
    elif out.recognised:
        out.warn(TRUNCATED)
    return out


# --------------------------------------------------------------------------------------------
# unittest

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
        self.out = _Out()
        self.run = {}  # type: Dict[str, str]
        self.pending = None  # type: Optional[str]
        self.candidate = None  # type: Optional[str]
        self.awaiting_description = False
        self.open_run = False

    def commit(self) -> None:
        """Give the test waiting for its status the last status-like text seen since."""
        if self.pending is not None and self.candidate is not None:
            _worst(self.run, self.pending, self.candidate)
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
                _worst(self.run, tid, status)
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
                _worst(self.run, _ut_id(m.group("name"), m.group("cls")), sub)
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
                _worst(self.run, _ut_id(m.group("name"), m.group("cls")), status)
                return
        if c == "R" and _UT_RAN.match(line):
            self.commit()
            self.out.recognised = True
            self.open_run = False
            _override(self.out.tests, self.run)
            self.run = {}
            return
        if self.pending is not None:
            guess = _ut_status(line, exact=False)
            if guess is not None:
                self.candidate = guess


def _parse_unittest(text: str, lines: List[str]) -> _Out:
    p = _Unittest()
    for line in lines:
        p.line(line)
    if lines and _UT_PARTIAL.match(lines[-1]):
        p.commit()  # the log was cut while the next test's name was being printed
    _override(p.out.tests, p.run)
    if p.open_run:
        p.out.warn(TRUNCATED)
    return p.out


# --------------------------------------------------------------------------------------------
# JSON reports (jest, vitest, mocha)

_JSON_START = re.compile(r'\{\s*"(?:num(?:Failed|Passed|Total)TestSuites|stats)"\s*:')


def _json_reports(text: str, out: _Out) -> List[dict]:
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


def _jest_json(report: dict, out: _Out, root: Optional[str], known: Iterable[str]) -> None:
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


_MOCHA_HOOK = re.compile(r'^"(before|after) (all|each)" hook')
_MOCHA_HOOK_FOR = re.compile(r'for "(.*)"')


def _mocha_hook_id(parts: List[str], title: str) -> str:
    m = _MOCHA_HOOK.match(title)
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


def _mocha_json(report: dict, out: _Out) -> None:
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
        if isinstance(t, dict) and _MOCHA_HOOK.match(str(t.get("title") or "")):
            parts, title = parts_of(t)
            tid = _mocha_hook_id(parts, title)
            out.tests[tid] = ERROR
            message = _mocha_error(t)
            if message:
                out.failures[tid] = message


# --------------------------------------------------------------------------------------------
# jest (text)

_JS_EXTS = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte")
_JEST_HEADER = re.compile(r"^\s?(PASS|FAIL)\s+(\S.*?)(?:\s+\(\d+(?:\.\d+)?\s*m?s\))?\s*$")
_JEST_DETAIL = re.compile(r"^  ● (.+)$")
_DURATION = re.compile(r"\d+(?:\.\d+)?\s*m?s$")
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


def _strip_duration(title: str) -> str:
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


def _jest_text(lines: List[str], out: _Out) -> List[str]:
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
            if m and (" " not in m.group(2) or m.group(2).endswith(_JS_EXTS)):
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
                title = _strip_duration(title)
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


def _parse_jest(text: str, lines: List[str]) -> _Out:
    out = _Out()
    files = _jest_text(lines, out)
    reports = [r for r in _json_reports(text, out) if "testResults" in r]
    if reports:
        json_out = _Out()
        for r in reports:
            _jest_json(r, json_out, None, files)
        if json_out.tests:
            out.tests = json_out.tests
            out.failures = json_out.failures
            out.recognised = True
            out.warnings = [w for w in out.warnings if w != TRUNCATED]
    ended = bool(reports) or TRUNCATED not in out.warnings
    _cut_short(out, text, "jest", ended)
    return out


# --------------------------------------------------------------------------------------------
# vitest (text)

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


def _looks_like_file(s: str) -> bool:
    return s.endswith(_JS_EXTS) or ("/" in s and " " not in s)


def _vitest_text(lines: List[str], out: _Out) -> Tuple[Optional[str], List[str]]:
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
                _worst(out.tests, body, status)
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
        if counted and ind <= 1 and _looks_like_file(counted.group("name")):
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
        body = _strip_duration(body)
        status = _VT_MARK[mark]
        cut = body.find(" > ")
        head = body[:cut]
        if cut > 0 and (head == fname or _looks_like_file(head) or head.startswith("|")):
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


def _parse_vitest(text: str, lines: List[str]) -> _Out:
    out = _Out()
    root, files = _vitest_text(lines, out)
    reports = [r for r in _json_reports(text, out) if "testResults" in r]
    if reports:
        json_out = _Out()
        for r in reports:
            _jest_json(r, json_out, root, files)
        if json_out.tests:
            out.tests = json_out.tests
            out.failures = json_out.failures
            out.recognised = True
            out.warnings = [w for w in out.warnings if w != TRUNCATED and "vitest result" not in w]
    _cut_short(out, text, "vitest", bool(reports) or TRUNCATED not in out.warnings)
    return out


# --------------------------------------------------------------------------------------------
# mocha (spec reporter)

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


def _parse_mocha(text: str, lines: List[str]) -> _Out:
    out = _Out()
    reports = [r for r in _json_reports(text, out) if "stats" in r]
    if reports:
        for r in reports:
            _mocha_json(r, out)
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
            ind = _indent(line)
            if ind < 2 or not line.strip():
                continue
            # A suite title is only accepted when something deeper follows it.
            nxt = None
            for j in range(i + 1, min(len(region), i + 200)):
                mk_next = markers[j]
                if mk_next is not None:
                    nxt = mk_next[0]
                    break
                if _indent(region[j]) >= 2 and region[j].strip():
                    nxt = _indent(region[j])
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
            title = _strip_duration(title)
        saw_tests = True
        if status == FAILED and _MOCHA_HOOK.match(title):
            out.tests[_mocha_hook_id([n for _, n in stack], title)] = ERROR
        else:
            out.tests[prefix + " > " + title if prefix else title] = status
    if saw_tests:
        out.recognised = True
        if end is None:
            out.warn(TRUNCATED)
            _cut_short(out, text, "mocha", False)
    return out


# --------------------------------------------------------------------------------------------
# Early exits of JavaScript runners (process.exit, a crash, a kill)

_JEST_EXIT = re.compile(r'process\.exit called with "([^"\n]*)"')
_VITEST_EXIT = re.compile(r'process\.exit unexpectedly called with "([^"\n]*)"')


def _cut_short(out: _Out, text: str, runner: str, ended: bool) -> None:
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


# --------------------------------------------------------------------------------------------
# node --test (repogym's reporter lines, TAP, spec)

_NODE_LINE = re.compile(r"^node:test (\{.*\})\s*$")
_NODE_STATUS = {
    "pass": PASSED,
    "fail": FAILED,
    "cancelled": FAILED,
    "skip": SKIPPED,
    "todo": SKIPPED,
    "error": ERROR,
}
_NODE_STDERR = re.compile(r"^# stderr (\S+): (.*)$")
_NODE_ERROR_LINE = re.compile(r"^\s*(?:[A-Z]\w*(?:Error|Exception)|Error)(?: \[\w+\])?: \S")
_TAP_SUBTEST = re.compile(r"^(\s*)# Subtest: (.*)$")
_TAP_RESULT = re.compile(r"^(\s*)(not ok|ok) \d+(?: - (.*?))?(?: # (SKIP|TODO)\b.*)?$")
_TAP_SUMMARY = re.compile(r"^# (?:tests|pass) \d+\s*$")
_SPEC_MARK = {"✔": PASSED, "✖": FAILED, "﹣": SKIPPED}
_SPEC_LINE = re.compile(r"^(\s*)([✔✖﹣▶]) (.+?)\s*$")
_SPEC_TAIL = re.compile(r"\s*\(\d+(?:\.\d+)?m?s\)(?:\s*# (SKIP|TODO)\b.*)?$|\s*# (SKIP|TODO)\b.*$")
_SPEC_SUMMARY = re.compile(r"^ℹ tests \d+\s*$")


def _node_file_errors(lines: List[str]) -> Dict[str, str]:
    """For each file, the first error line it wrote to stderr (``# stderr file: Error: …``)."""
    found = {}  # type: Dict[str, str]
    for line in lines:
        if line.startswith("# stderr "):
            m = _NODE_STDERR.match(line)
            if m and m.group(1) not in found and _NODE_ERROR_LINE.match(m.group(2)):
                found[m.group(1)] = m.group(2).strip()
    return found


def _node_reporter(lines: List[str], out: _Out) -> bool:
    """Lines of repogym's reporter; True when any was found."""
    seen = ended = False
    errors = None  # type: Optional[Dict[str, str]]
    for line in lines:
        if not line.startswith("node:test {"):
            continue
        m = _NODE_LINE.match(line)
        if not m:
            continue
        try:
            rec = json.loads(m.group(1))
        except ValueError:
            out.warn("a node:test result line is malformed")
            continue
        if not isinstance(rec, dict):
            continue
        seen = out.recognised = True
        kind = rec.get("s")
        if kind == "end":
            ended = True
            continue
        ident = rec.get("id")
        if not isinstance(ident, list) or not ident:
            continue
        tid = " > ".join(str(p) for p in ident)
        if kind == "empty":
            out.warn(f"{tid} reported no test: it has none, or it exited early (process.exit)")
            continue
        status = _NODE_STATUS.get(str(kind))
        if status is None:
            continue
        _worst(out.tests, tid, status)
        message = rec.get("m")
        if status == ERROR and len(ident) == 1 and message in (None, "", "test failed"):
            if errors is None:
                errors = _node_file_errors(lines)
            message = errors.get(tid, message)
        if status in (FAILED, ERROR) and isinstance(message, str) and message:
            out.failures[tid] = message
    if seen and not ended:
        out.warn(TRUNCATED)
        _cut_short(out, "", "node", False)
    return seen


def _tap_error(block: List[str]) -> Optional[str]:
    """The first line of the ``error:`` field of a TAP YAML block."""
    for i, line in enumerate(block):
        s = line.strip()
        if s.startswith("error:"):
            value = s[6:].strip()
            if value in ("|-", "|", ">-", ">"):
                for nxt in block[i + 1 :]:
                    if nxt.strip():
                        return nxt.strip()
                return None
            return value.strip("'\"") or None
    return None


def _node_tap(lines: List[str], out: _Out) -> None:
    """Node's TAP (``--test-reporter=tap``, and the default before Node 20): nested
    ``# Subtest:`` blocks closed by their ``ok``/``not ok`` line; ids ``suite > name`` (Node 18
    wraps each file's tests in a subtest named by the file: ``file > …``)."""
    stack = []  # type: List[Tuple[int, str]]  # open subtests (indent, name)
    pending = None  # type: Optional[Tuple[List[str], str, str, List[str]]]
    ended = False
    last_indent = -1  # of the previous result line

    def settle() -> None:
        if pending is None:
            return
        parts, name, status, block = pending
        yaml = "\n".join(block)
        tid = " > ".join(parts + [name])
        if not parts and status == PASSED and name.startswith("/") and _looks_like_file(name):
            if not had_children:
                out.warn(f"{name} reported no test: it has none, or it exited early")
            return
        failure = re.search(r"failureType: '(\w+)'", yaml)
        kind = failure.group(1) if failure else ""
        if "type: 'suite'" in yaml:
            if status == FAILED and kind not in ("subtestsFailed", ""):
                out.tests[tid] = ERROR  # a hook of the suite failed
                message = _tap_error(block)
                if message:
                    out.failures[tid] = message
            return
        if status == FAILED and not parts and _looks_like_file(name) and kind == "testCodeFailure":
            status = ERROR  # a file that failed to load
        _worst(out.tests, tid, status)
        message = _tap_error(block) if status in (FAILED, ERROR) else None
        if message:
            out.failures[tid] = message

    had_children = False
    for line in lines:
        result = _TAP_RESULT.match(line) if "ok" in line else None
        subtest = _TAP_SUBTEST.match(line) if "# Subtest:" in line else None
        if pending is not None and not result and not subtest and line.startswith(" "):
            pending[3].append(line)  # the result's YAML block
            continue
        settle()
        pending = None
        if subtest:
            ind = len(subtest.group(1))
            while stack and stack[-1][0] >= ind:
                stack.pop()
            stack.append((ind, subtest.group(2).replace("\\#", "#").replace("\\\\", "\\")))
            out.recognised = True
        elif result:
            ind = len(result.group(1))
            had_children = last_indent > ind
            last_indent = ind
            while stack and stack[-1][0] > ind:
                stack.pop()
            if stack and stack[-1][0] == ind:
                stack.pop()  # the subtest this line closes
            name = (result.group(3) or "").replace("\\#", "#").replace("\\\\", "\\")
            status = PASSED if result.group(2) == "ok" else FAILED
            if result.group(4):
                status = SKIPPED
            pending = ([n for _i, n in stack], name, status, [])
            out.recognised = True
        elif line.startswith("# ") and _TAP_SUMMARY.match(line):
            ended = True
    settle()
    if out.tests and not ended:
        out.warn(TRUNCATED)
        _cut_short(out, "", "node", False)


def _node_spec(lines: List[str], out: _Out) -> None:
    """Node's spec reporter: ``▶ suite`` opens a group, ``✔``/``✖``/``﹣`` lines are results
    (ids ``suite > name``: spec output names no files); a group's own line after its children
    is not a result unless it failed with no failing child (a hook: ERROR); the ``failing
    tests:`` recap is skipped."""
    stack = []  # type: List[list]  # [indent, name, a child failed]
    ended = False
    for line in lines:
        if "failing tests:" in line and line.lstrip().startswith("✖ failing tests:"):
            break
        if line.startswith("ℹ") and _SPEC_SUMMARY.match(line):
            ended = out.recognised = True
            continue
        m = _SPEC_LINE.match(line)
        if not m:
            continue
        ind, mark, body = len(m.group(1)), m.group(2), m.group(3)
        tail = _SPEC_TAIL.search(body)
        flag = (tail.group(1) or tail.group(2)) if tail else None
        title = body[: tail.start()] if tail else body
        if mark == "▶":
            while stack and stack[-1][0] >= ind:
                stack.pop()
            stack.append([ind, title, False])
            continue
        closing = stack[-1] if stack and stack[-1][:2] == [ind, title] else None
        while stack and stack[-1][0] >= ind:
            stack.pop()
        status = SKIPPED if flag else _SPEC_MARK[mark]
        tid = " > ".join([g[1] for g in stack] + [title])
        out.recognised = True
        if closing is not None:
            if status == FAILED and not closing[2]:
                _worst(out.tests, tid, ERROR)  # its hook failed
            if status == FAILED and stack:
                stack[-1][2] = True
            continue
        if status == FAILED:
            for group in stack:
                group[2] = True
            if not stack and name_is_file(title):
                status = ERROR  # a file that failed to load
        elif status == PASSED and not stack and name_is_file(title):
            out.warn(f"{title} reported no test: it has none, or it exited early")
            continue
        _worst(out.tests, tid, status)
    if out.tests and not ended:
        out.warn(TRUNCATED)
        _cut_short(out, "", "node", False)


def name_is_file(name: str) -> bool:
    return name.startswith("/") and _looks_like_file(name)


def _parse_node(text: str, lines: List[str]) -> _Out:
    out = _Out()
    if "node:test {" in text and _node_reporter(lines, out):
        return out
    if "# Subtest:" in text or re.search(r"^TAP version \d+", text, re.M):
        _node_tap(lines, out)
        if out.tests:
            return out
    spec = _Out()
    _node_spec(lines, spec)
    return spec if spec.tests else out


# --------------------------------------------------------------------------------------------
# go test

_GO_RESULT = re.compile(r"--- (PASS|FAIL|SKIP): (\S+) \((?:\d+(?:\.\d+)?s|unknown)\)")
_GO_RUN = re.compile(r"^=== RUN\s+(\S+)")
_GO_PKG = re.compile(
    r"^(?:(ok)\s+(\S+)\s+(?:\d+(?:\.\d+)?s|\(cached\))"
    r"|(FAIL)\s+(\S+)\s+(?:\d+(?:\.\d+)?s|(\[(?:build|setup) failed\]))"
    r"|(\?)\s+(\S+)\s+\[no test files\])"
)
_GO_STATUS = {"PASS": PASSED, "FAIL": FAILED, "SKIP": SKIPPED}
_GO_ACTION = {"pass": PASSED, "fail": FAILED, "skip": SKIPPED}
_GO_CURRENT = re.compile(r"^=== (?:RUN|CONT|NAME)\s+(\S+)")
# What a test logged (t.Error, t.Fatal, t.Log): "    file_test.go:12: message".
_GO_MESSAGE = re.compile(r"^(\s+)(\S+\.go:\d+: \S.*)$")
_GO_BUILD_HEADER = re.compile(r"^# (\S+)")


def _qualified_ids(entries: List[Tuple[Optional[str], str, str]], sep: str) -> List[str]:
    """The id of each (qualifier, name, status) entry: names that collide are qualified."""
    first = {}  # type: Dict[str, str]
    shared = set()
    for q, name, _ in entries:
        if q is not None and first.setdefault(name, q) != q:
            shared.add(name)
    return [q + sep + name if q is not None and name in shared else name for q, name, _ in entries]


def _qualify(entries: List[Tuple[Optional[str], str, str]], sep: str) -> Dict[str, str]:
    """Turn (qualifier, name, status) entries into ids, qualifying names that collide."""
    tests = {}  # type: Dict[str, str]
    for i, tid in enumerate(_qualified_ids(entries, sep)):
        tests[tid] = entries[i][2]
    return tests


class _GoBlock:
    def __init__(self) -> None:
        self.results = {}  # type: Dict[str, str]
        self.running = {}  # type: Dict[str, bool]
        self.fallback = {}  # type: Dict[str, str]
        self.messages = {}  # type: Dict[str, str]  # test -> first line it logged

    def note(self, name: str, text: str) -> None:
        if name not in self.messages:
            message = short_message(text)
            if message:
                self.messages[name] = message


class _GoLog:
    """What :func:`_parse_go` gathers over the lines of a ``go test`` log (text or ``-json``)."""

    def __init__(self) -> None:
        self.out = _Out()
        self.entries = []  # type: List[Tuple[Optional[str], str, str]]
        self.entry_messages = []  # type: List[Optional[str]]  # aligned with entries
        self.errors = {}  # type: Dict[str, str]
        self.build_messages = {}  # type: Dict[str, str]  # package -> first compiler error
        self.block = _GoBlock()  # text output of the package being printed
        self.packages = {}  # type: Dict[str, _GoBlock]  # -json events, by package
        self.lone_fail = False
        self.current = None  # type: Optional[str]  # the test whose output is being printed (-v)
        self.failed_at = None  # type: Optional[Tuple[str, int]]  # last "--- FAIL": (test, indent)
        self.building = None  # type: Optional[str]  # the package of a "# pkg" build output block

    def finish(self, b: _GoBlock, pkg: Optional[str], failed: Optional[bool]) -> None:
        for name in b.running:
            if name not in b.results:
                if name in b.fallback:
                    b.results[name] = b.fallback[name]
                elif failed is not None:
                    b.results[name] = FAILED if failed else PASSED
        if failed and not b.results and pkg is not None:
            self.errors[pkg] = ERROR
        for name, status in b.results.items():
            self.entries.append((pkg, name, status))
            self.entry_messages.append(b.messages.get(name))

    def event(self, line: str) -> None:
        """One line of ``go test -json``."""
        out = self.out
        try:
            ev = json.loads(line)
        except ValueError:
            out.warn("a go test -json line is truncated or malformed")
            return
        if not isinstance(ev, dict):
            return
        out.recognised = True
        action = ev.get("Action")
        if action == "build-fail" and isinstance(ev.get("ImportPath"), str):
            self.errors[ev["ImportPath"].split(" ", 1)[0]] = ERROR
            return
        if action == "build-output" and isinstance(ev.get("ImportPath"), str):
            output = ev.get("Output")
            target = ev["ImportPath"].split(" ", 1)[0]
            message = short_message(output)
            if (
                message
                and isinstance(output, str)
                and not output.startswith("#")
                and target not in self.build_messages
            ):
                self.build_messages[target] = message
            return
        pkg = ev.get("Package")
        if not isinstance(pkg, str) or not isinstance(action, str):
            return
        b = self.packages.setdefault(pkg, _GoBlock())
        test = ev.get("Test")
        if action == "output":
            output = ev.get("Output")
            if isinstance(output, str) and "--- " in output:
                for hit in _GO_RESULT.finditer(output):
                    b.fallback[hit.group(2)] = _GO_STATUS[hit.group(1)]
            if (
                isinstance(test, str)
                and isinstance(output, str)
                and (_GO_MESSAGE.match(output.rstrip("\n")) or output.startswith("panic: "))
            ):
                b.note(test, output)
            return
        if isinstance(test, str):
            if action == "run":
                b.running[test] = True
                b.messages.pop(test, None)  # a rerun (-count) starts afresh
            elif action in _GO_ACTION:
                b.results[test] = _GO_ACTION[action]
                b.running.setdefault(test, True)
        elif action in _GO_ACTION:
            if ev.get("FailedBuild"):
                self.errors[pkg] = ERROR
            self.finish(b, pkg, action == "fail")
            del self.packages[pkg]

    def text(self, line: str, c: str) -> None:
        """One line of ``go test``'s text output (``c``: its first character)."""
        out, block = self.out, self.block
        if self.building is not None:
            message = short_message(line)
            if message and c != "#" and not line.startswith("FAIL"):
                self.build_messages.setdefault(self.building, message)
            self.building = None
        if c == "#":
            m = _GO_BUILD_HEADER.match(line)
            self.building = m.group(1) if m else None
            return
        if "--- " in line:
            m = _GO_RESULT.search(line)
            if m:
                out.recognised = True
                name = m.group(2)
                block.results[name] = _GO_STATUS[m.group(1)]
                block.running.setdefault(name, True)
                self.failed_at = (name, _indent(line)) if m.group(1) == "FAIL" else None
                return
        if c == "=":
            self.failed_at = None
            m = _GO_RUN.match(line)
            if m:
                out.recognised = True
                block.running[m.group(1)] = True
                block.messages.pop(m.group(1), None)  # a rerun (-count) starts afresh
            m = _GO_CURRENT.match(line)
            self.current = m.group(1) if m else None
            return
        failed_at = self.failed_at
        if c == " ":
            # A test's log line: below its "--- FAIL" (without -v), or while it runs (-v).
            m = _GO_MESSAGE.match(line)
            if m:
                if failed_at is not None:
                    if len(m.group(1)) > failed_at[1]:
                        block.note(failed_at[0], m.group(2))
                elif self.current is not None:
                    block.note(self.current, m.group(2))
                return
        if c == "p" and failed_at is not None and line.startswith("panic: "):
            block.note(failed_at[0], line)
        self.failed_at = None
        if c in "oF?":
            if line == "FAIL":
                self.lone_fail = True
                return
            m = _GO_PKG.match(line)
            if m:
                out.recognised = True
                if m.group(1):
                    self.finish(block, m.group(2), False)
                elif m.group(3):
                    if m.group(5):
                        self.errors[m.group(4)] = ERROR
                    self.finish(block, m.group(4), True)
                else:
                    self.finish(block, m.group(7), None)
                self.block, self.lone_fail, self.current = _GoBlock(), False, None

    def result(self) -> _Out:
        """The results, once every line has been read."""
        out, block, lone_fail = self.out, self.block, self.lone_fail
        if block.results or block.running:
            self.finish(block, None, True if lone_fail else None)
            if not lone_fail:
                out.warn(TRUNCATED)
        for pkg, b in self.packages.items():
            self.finish(b, pkg, None)
            out.warn(TRUNCATED)
        entries = self.entries
        ids = _qualified_ids(entries, "::")
        out.tests = {}
        for i, tid in enumerate(ids):
            out.tests[tid] = entries[i][2]
            out.failures.pop(tid, None)
            message = self.entry_messages[i]
            if message:
                out.failures[tid] = message
        for pkg in self.errors:
            out.tests[pkg] = ERROR
            out.failures.pop(pkg, None)
            if self.build_messages.get(pkg):
                out.failures[pkg] = self.build_messages[pkg]
        return out


def _parse_go(text: str, lines: List[str]) -> _Out:
    log = _GoLog()
    for line in lines:
        if not line:
            continue
        c = line[0]
        if c == "{" and '"Action"' in line:
            log.event(line)
        else:
            log.text(line, c)
    return log.result()


# --------------------------------------------------------------------------------------------
# cargo test (libtest)

_CARGO_RUNNING = re.compile(
    r"^\s*Running (?:(?:unittests|tests|benches|examples) )?(?:(?P<src>[^(\s][^(]*?) )?"
    r"\((?P<bin>[^)]+)\)\s*$"
)
_CARGO_RUNNING_OLD = re.compile(r"^\s*Running (?P<bin>\S+)\s*$")
_CARGO_DOC = re.compile(r"^\s*Doc-tests (\S+)\s*$")
_CARGO_TEST = re.compile(r"^test (?P<name>.+?) \.\.\.(?: (?P<rest>.*))?$")
_CARGO_RESULT = re.compile(r"^test result: (?:ok|FAILED)\.")
_CARGO_COUNT = re.compile(r"^running (\d+) tests?$")
_CARGO_HASH = re.compile(r"-[0-9a-f]{16}$")
_CARGO_IGNORED = re.compile(r"ignored(?:, .*)?$")


def _cargo_binary(path: str) -> str:
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    if name.endswith(".exe"):
        name = name[:-4]
    return _CARGO_HASH.sub("", name)


def _cargo_status(s: str, exact: bool) -> Optional[str]:
    if exact:
        if s == "ok" or s.startswith("bench:"):
            return PASSED
        if s == "FAILED":
            return FAILED
        if s == "ignored" or s.startswith("ignored, "):
            return SKIPPED
        return None
    if s.endswith("ok"):
        return PASSED
    if s.endswith("FAILED"):
        return FAILED
    if "ignored" in s and _CARGO_IGNORED.search(s):
        return SKIPPED
    return None


def _parse_cargo(text: str, lines: List[str]) -> _Out:
    out = _Out()
    entries = []  # type: List[Tuple[Optional[str], str, str]]
    qual = None  # type: Optional[str]
    pending = None  # type: Optional[str]
    candidate = None  # type: Optional[str]
    block_open = False

    def commit(crashed: bool = False) -> None:
        if pending is not None:
            if candidate is not None:
                entries.append((qual, pending, candidate))
            elif crashed:
                entries.append((qual, pending, FAILED))

    for line in lines:
        if not line:
            continue
        c = line[0]
        if c == "t":
            m = _CARGO_TEST.match(line)
            if m:
                commit()
                pending = candidate = None
                out.recognised = True
                name = m.group("name")
                if name.endswith(" - should panic"):
                    name = name[: -len(" - should panic")]
                rest = m.group("rest") or ""
                status = _cargo_status(rest, exact=True)
                if status is not None:
                    entries.append((qual, name, status))
                else:
                    pending, candidate = name, _cargo_status(rest, exact=False)
                continue
            if _CARGO_RESULT.match(line):
                commit()
                pending = candidate = None
                block_open = False
                out.recognised = True
                continue
        if c == "r":
            m = _CARGO_COUNT.match(line)
            if m:
                commit(crashed=True)
                pending = candidate = None
                out.recognised = True
                block_open = m.group(1) != "0"
                continue
        if c == " " or c == "e" or c == "f":
            stripped = line.strip()
            if stripped.startswith("Running "):
                m = _CARGO_RUNNING.match(line)
                m_old = None if m else _CARGO_RUNNING_OLD.match(line)
                if m or m_old:
                    commit(crashed=True)
                    pending = candidate = None
                    if m:
                        binary, src = _cargo_binary(m.group("bin")), m.group("src")
                        qual = binary + ":" + src if src else binary
                    elif m_old:
                        qual = _cargo_binary(m_old.group("bin"))
                    continue
            elif stripped.startswith("Doc-tests "):
                m = _CARGO_DOC.match(line)
                if m:
                    commit(crashed=True)
                    pending = candidate = None
                    qual = m.group(1) + ":doctests"
                    continue
            elif stripped == "failures:":
                commit()
                pending = candidate = None
                continue
            elif stripped.startswith("error: test failed") or "didn't exit successfully" in line:
                commit(crashed=True)
                pending = candidate = None
                block_open = False
                continue
            elif stripped.startswith("error") and "could not compile" in stripped:
                out.recognised = True
                out.warn("cargo: compilation failed")
                continue
        if pending is not None:
            status = _cargo_status(line, exact=False)
            if status is not None:
                candidate = status
    if block_open:
        out.warn(TRUNCATED)
    out.tests = _qualify(entries, "::")
    return out


# --------------------------------------------------------------------------------------------
# cargo nextest

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


def _parse_nextest(text: str, lines: List[str]) -> _Out:
    out = _Out()
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


# --------------------------------------------------------------------------------------------
# Detection and entry points

_PARSERS = {
    "pytest": _parse_pytest,
    "unittest": _parse_unittest,
    "jest": _parse_jest,
    "vitest": _parse_vitest,
    "mocha": _parse_mocha,
    "node": _parse_node,
    "go": _parse_go,
    "cargo": _parse_cargo,
    "nextest": _parse_nextest,
}  # type: Dict[str, Callable[[str, List[str]], _Out]]

_M = re.MULTILINE
# (runner, literal that must occur, pattern, weight)
_SIGNATURES = [
    ("pytest", "test session starts", re.compile(r"^=+ test session starts =+$", _M), 5),
    ("pytest", "short test summary info", re.compile(r"^=+ short test summary info =+$", _M), 5),
    (
        "pytest",
        "::",
        re.compile(r"^[^\s:][^:\n]*\.py::\S.* (?:PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b", _M),
        3,
    ),
    ("pytest", "[gw", re.compile(r"^\[gw\d+\] (?:\[\s*\d+%\] )?(?:PASSED|FAILED) ", _M), 4),
    ("pytest", "::", re.compile(r"^(?:PASSED|FAILED|ERROR) [^\s:][^:\n]*\.py::", _M), 3),
    (
        "pytest",
        " in ",
        re.compile(
            r"^=+ .*\b(?:passed|failed|errors?|no tests ran)\b.* in \d+(?:\.\d+)?s.*=+$", _M
        ),
        3,
    ),
    ("unittest", "Ran ", re.compile(r"^Ran \d+ tests? in \d+(?:\.\d+)?s\s*$", _M), 5),
    (
        "unittest",
        " ... ",
        re.compile(
            r"^[A-Za-z_]\w* \([A-Za-z_][\w.]*\) \.\.\. "
            r"(?:ok|FAIL|ERROR|skipped|expected failure|unexpected success)$",
            _M,
        ),
        3,
    ),
    ("unittest", ": ", re.compile(r"^(?:FAIL|ERROR): [A-Za-z_]\w* \([A-Za-z_][\w.]*\)$", _M), 2),
    ("jest", "Test Suites:", re.compile(r"^Test Suites: .*\d+ total", _M), 5),
    ("jest", "Tests:", re.compile(r"^Tests:\s+.*\d+ total", _M), 3),
    ("jest", "PASS", re.compile(r"^\s?PASS\s+\S+\.[cm]?[jt]sx?(?: \([\d.]+ ?m?s\))?$", _M), 2),
    ("jest", "FAIL", re.compile(r"^\s?FAIL\s+\S+\.[cm]?[jt]sx?(?: \([\d.]+ ?m?s\))?$", _M), 2),
    ("jest", " ms)", re.compile(r"^\s+[✓✕] \S.* \(\d+ ms\)$", _M), 2),
    ("jest", '"numRuntimeErrorTestSuites"', re.compile(r'"numRuntimeErrorTestSuites"\s*:'), 6),
    ("vitest", '"numTotalTestSuites"', re.compile(r'"numTotalTestSuites"\s*:'), 3),
    ("vitest", "RUN", re.compile(r"^\s*(?:RUN|DEV)\s+v\d+\.\d+\S*\s", _M), 4),
    ("vitest", "Test Files", re.compile(r"^\s*Test Files\s+\d+ (?:passed|failed)", _M), 5),
    ("vitest", "⎯", re.compile(r"⎯+\s*Failed (?:Tests|Suites) \d+\s*⎯"), 4),
    ("vitest", " > ", re.compile(r"^\s*[✓✔×↓] \S+\.(?:test|spec)\.[cm]?[jt]sx? > ", _M), 3),
    ("mocha", "passing", re.compile(r"^\s+\d+ passing \(\d+(?:\.\d+)?\s*m?s\)\s*$", _M), 5),
    ("mocha", "failing", re.compile(r"^\s+\d+ failing\s*$", _M), 2),
    ("mocha", "✔", re.compile(r"^\s{2,}✔ \S", _M), 2),
    ("mocha", '"stats"', re.compile(r'"stats"\s*:\s*\{\s*"suites"'), 5),
    ("node", "node:test {", re.compile(r'^node:test \{"s":"', _M), 8),
    ("node", "# Subtest:", re.compile(r"^\s*# Subtest: \S", _M), 3),
    ("node", "# cancelled", re.compile(r"^# cancelled \d+\s*$", _M), 3),
    ("node", "ℹ tests", re.compile(r"^ℹ tests \d+\s*$", _M), 5),
    ("node", "ms)", re.compile(r"^\s*[✔✖] \S.* \(\d+\.\d+ms\)$", _M), 2),
    ("jest", "process.exit called", re.compile(r'^\s*●\s+process\.exit called with "', _M), 4),
    ("go", "=== RUN", re.compile(r"^=== RUN\s+\S", _M), 4),
    (
        "go",
        "--- ",
        re.compile(r"^\s*--- (?:PASS|FAIL|SKIP): \S+ \((?:\d+(?:\.\d+)?s|unknown)\)", _M),
        4,
    ),
    ("go", "ok", re.compile(r"^ok\s+\S+\s+(?:\d+(?:\.\d+)?s|\(cached\))", _M), 3),
    (
        "go",
        "FAIL",
        re.compile(r"^FAIL\s+\S+\s+(?:\d+(?:\.\d+)?s|\[(?:build|setup) failed\])", _M),
        3,
    ),
    ("go", "[no test files]", re.compile(r"^\?\s+\S+\s+\[no test files\]", _M), 2),
    ("go", '"Action"', re.compile(r'^\{"Time":"[^"]*","Action":"\w+"', _M), 5),
    ("go", '"Action"', re.compile(r'^\{"Action":"[\w-]+".*"(?:Package|ImportPath)"', _M), 4),
    ("cargo", "running ", re.compile(r"^running \d+ tests?$", _M), 3),
    ("cargo", "test result:", re.compile(r"^test result: (?:ok|FAILED)\. \d+ passed", _M), 5),
    ("cargo", "test ", re.compile(r"^test \S.* \.\.\. (?:ok|FAILED|ignored)", _M), 3),
    ("cargo", "could not compile", re.compile(r"^error(?:\[E\d+\])?: could not compile", _M), 2),
    ("cargo", "Doc-tests", re.compile(r"^\s+Doc-tests \S+$", _M), 2),
    ("nextest", "Starting", re.compile(r"^\s*Starting \d+ tests? across \d+ binar", _M), 5),
    ("nextest", "Summary", re.compile(r"^\s*Summary \[\s*[\d.]+s\] \d+", _M), 4),
    (
        "nextest",
        "] ",
        re.compile(
            r"^\s*(?:TRY \d+ )?(?:PASS|FAIL|SKIP|SIG[A-Z]+|TIMEOUT|FLAKY \d+/\d+)"
            r" \[\s*[\d.]*s?\s*\] \S",
            _M,
        ),
        3,
    ),
]

_SAMPLE = 256 * 1024


def _scores(text: str) -> Dict[str, int]:
    scores = {}  # type: Dict[str, int]
    for runner, literal, pattern, weight in _SIGNATURES:
        if literal in text and pattern.search(text):
            scores[runner] = scores.get(runner, 0) + weight
    return scores


def _ranked(text: str) -> List[str]:
    scores = {}  # type: Dict[str, int]
    if len(text) > 2 * _SAMPLE:
        # Runners print their banners first and their summaries last: look there first, so
        # that detection stays fast on huge logs.
        head, tail = text[:_SAMPLE], text[-_SAMPLE:]
        scores = _scores(head[: head.rfind("\n") + 1] + tail[tail.find("\n") + 1 :])
    if not scores:
        scores = _scores(text)
    order = {r: i for i, r in enumerate(RUNNERS)}
    return sorted(scores, key=lambda r: (-scores[r], order[r]))


def detect_runner(text: str) -> Optional[str]:
    """Best guess of the runner that wrote ``text``, or None."""
    ranked = _ranked(clean_text(text))
    return ranked[0] if ranked else None


def parse_log(text: Union[str, bytes], runner: Optional[str] = None) -> ParseResult:
    """Parse a test log (bytes are decoded as UTF-8); ``runner`` is one of RUNNERS, or None to
    detect it."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if runner is not None and runner not in _PARSERS:
        raise ValueError(
            "unknown runner {!r}; expected one of {}".format(runner, ", ".join(RUNNERS))
        )
    cleaned = clean_text(text)
    candidates = [runner] if runner is not None else _ranked(cleaned)[:3]
    if not candidates:
        return ParseResult(None, {}, "unparsed", [])
    lines = cleaned.split("\n")
    chosen = None  # type: Optional[Tuple[str, _Out]]
    crashes = []  # type: List[str]
    for name in candidates:
        try:
            out = _PARSERS[name](cleaned, lines)
        except Exception as exc:  # a parser bug must not break grading
            crashes.append(f"internal error in the {name} parser: {exc!r}")
            continue
        if out.tests:
            chosen = (name, out)
            break
        if chosen is None and out.recognised:
            chosen = (name, out)
    if chosen is None:
        return ParseResult(runner, {}, "unparsed", crashes)
    name, out = chosen
    status = "ok" if out.tests else "empty"
    failures = {}  # type: Dict[str, str]
    for tid, text in out.failures.items():
        if len(failures) >= MAX_FAILURES:
            break
        message = short_message(text)
        if message and out.tests.get(tid) in (FAILED, ERROR):
            failures[tid] = message
    return ParseResult(name, out.tests, status, out.warnings + crashes, failures)


def main(argv: Optional[List[str]] = None) -> int:
    """CLI: ``parsers.py [--runner R] LOGFILE`` (``-`` reads stdin); prints the result as JSON."""
    import argparse

    ap = argparse.ArgumentParser(description="Parse a test log into test ids and outcomes.")
    ap.add_argument("--runner", choices=RUNNERS, default=None)
    ap.add_argument("logfile")
    args = ap.parse_args(argv)
    if args.logfile == "-":
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
    else:
        try:
            with open(args.logfile, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            sys.stderr.write(f"parsers.py: cannot read {args.logfile}: {exc}\n")
            return 2
    result = parse_log(data, args.runner)
    payload = json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n"
    stream = getattr(sys.stdout, "buffer", None)
    if stream is not None:
        stream.write(payload.encode("utf-8"))
        stream.flush()
    else:
        sys.stdout.write(payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
