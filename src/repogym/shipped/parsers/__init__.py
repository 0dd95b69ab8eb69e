#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""Parse test-runner logs into ``{test id: PASSED | FAILED | SKIPPED | ERROR}``.

This package is standard library only (Python 3.6+ syntax): pipelines copy it into each
generated task's ``tests/`` folder, this file as ``parsers.py`` and its ``_log_*.py`` modules
beside it (one per log format; ``_log_common.py`` the shared ground, ``_log_js.py`` what the
JavaScript runners share), where it runs under whatever Python the repository uses.  ``python
parsers.py [--runner R] LOGFILE`` (``-`` for stdin) prints the result as JSON.

Runners: pytest, unittest, jest, vitest, mocha, node, go, cargo, nextest, ctest, maven --
auto-detected when not given, but pipelines that know the runner should pass it. ANSI codes,
CRLF, test output mixed into result lines and truncated logs are tolerated; a log without its
end-of-run summary gets the ``TRUNCATED`` warning; a JavaScript log that ends early (jest's
``process.exit called with``, a mocha or ``node --test`` run without its summary) also gets a
``CUT_SHORT`` warning saying why, and is parsed up to the cut.

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
  reporter (``node:test {"s": ..., "id": [...]}``, see ``repogym/bootstrap/node/runner.py``), the
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
* ctest -- the CTest test name (``gtest_discover_tests``: ``Suite.Test``, parameterised
  ``Inst/Suite.Test/<value>``), from CTest's JUnit report printed between
  ``REPOGYM-CTEST-JUNIT-BEGIN``/``-END`` lines when the log has one, else from the console lines.
  Disabled and skipped tests (``SKIP_RETURN_CODE``, GoogleTest's ``GTEST_SKIP``) are SKIPPED;
  timeouts, crashes and tests CTest could not start (``Not Run``) are FAILED; after
  ``REPOGYM-CTEST-BUILD-FAILED`` every test ``ctest -N`` lists is ERROR.
* maven -- ``<fully.qualified.Class>#<method>`` from Surefire's XML reports, which repogym's Maven
  test command prints after the run between ``REPOGYM-SUREFIRE-REPORT <path>`` and
  ``REPOGYM-SUREFIRE-END`` lines (JUnit 5 parameterised ``Calc#identity(int)[1]``, nested
  ``Outer$Inner#m``; a class-level result without a method: ``<Class>``).  A module Maven fails to
  build is its artifactId with ERROR.  Surefire ``<error>`` is ERROR, ``<failure>`` FAILED; a
  test that passed on a rerun (``flakyFailure``) is PASSED.

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
Surefire's ``message`` attribute (first line) and a failed Maven module's first compiler error;
go ``file_test.go:12: ...`` lines that a failing test logged (the first one) or a ``panic:``
line right after its ``--- FAIL``, and a build failure's first compiler error; ctest: a
GoogleTest ``file:line: Failure`` or Catch2 ``FAILED:`` with the lines after it, a doctest
``ERROR:`` or ``Assertion ... failed.`` line, else CTest's status (``Timeout``, ``Exception:
SegFault``), and a failed build's first compiler error.  Messages have no
ANSI codes or control characters, at most ``MAX_MESSAGE`` characters each, at most
``MAX_FAILURES`` of them.  Other runners and formats give none.
"""

import json
import os
import re
import sys

# Some typing names appear only in type comments, which ruff does not read (hence F401).
from typing import Callable, Dict, List, Optional, Tuple, Union  # noqa: F401

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:  # repogym.shipped.parsers
    from repogym.shipped.parsers._log_cargo import parse_cargo
    from repogym.shipped.parsers._log_common import (
        CUT_SHORT,
        ERROR,
        FAILED,
        MAX_FAILURES,
        MAX_MESSAGE,
        PASSED,
        RUNNERS,
        SKIPPED,
        TRUNCATED,
        Out,
        ParseResult,
        clean_text,
        short_message,
    )
    from repogym.shipped.parsers._log_ctest import parse_ctest
    from repogym.shipped.parsers._log_go import parse_go
    from repogym.shipped.parsers._log_jest import parse_jest
    from repogym.shipped.parsers._log_mocha import parse_mocha
    from repogym.shipped.parsers._log_nextest import parse_nextest
    from repogym.shipped.parsers._log_node import parse_node
    from repogym.shipped.parsers._log_pytest import parse_pytest
    from repogym.shipped.parsers._log_surefire import parse_surefire
    from repogym.shipped.parsers._log_unittest import parse_unittest
    from repogym.shipped.parsers._log_vitest import parse_vitest
else:  # a task's copy (imported as ``parsers`` or run as a script, -I too): the rest beside it
    _HERE = os.path.dirname(os.path.abspath(__file__))
    if sys.path[:1] != [_HERE]:
        sys.path.insert(0, _HERE)
    from _log_cargo import parse_cargo
    from _log_common import (
        CUT_SHORT,
        ERROR,
        FAILED,
        MAX_FAILURES,
        MAX_MESSAGE,
        PASSED,
        RUNNERS,
        SKIPPED,
        TRUNCATED,
        Out,  # noqa: F401 - in type comments
        ParseResult,
        clean_text,
        short_message,
    )
    from _log_ctest import parse_ctest
    from _log_go import parse_go
    from _log_jest import parse_jest
    from _log_mocha import parse_mocha
    from _log_nextest import parse_nextest
    from _log_node import parse_node
    from _log_pytest import parse_pytest
    from _log_surefire import parse_surefire
    from _log_unittest import parse_unittest
    from _log_vitest import parse_vitest

PARSER_PARTS = (
    "common",
    "pytest",
    "unittest",
    "js",
    "jest",
    "vitest",
    "mocha",
    "node",
    "go",
    "cargo",
    "nextest",
    "ctest",
    "surefire",
)
"""The package's modules (``_log_<part>.py``), shipped into tasks beside ``parsers.py``."""

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


# Detection and entry points

_PARSERS = {
    "pytest": parse_pytest,
    "unittest": parse_unittest,
    "jest": parse_jest,
    "vitest": parse_vitest,
    "mocha": parse_mocha,
    "node": parse_node,
    "go": parse_go,
    "cargo": parse_cargo,
    "nextest": parse_nextest,
    "ctest": parse_ctest,
    "maven": parse_surefire,
}  # type: Dict[str, Callable[[str, List[str]], Out]]

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
    ("ctest", "REPOGYM-CTEST-", re.compile(r"^REPOGYM-CTEST-(?:JUNIT-BEGIN|BUILD-FAILED)$", _M), 9),
    ("ctest", " Test ", re.compile(r"^\s*\d+/\d+ Test\s+#\d+: \S.* \.{3,}", _M), 5),
    ("ctest", "tests passed", re.compile(r"^\d+% tests passed, \d+ tests? failed out of", _M), 4),
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

_SIGNATURES += [
    ("maven", "REPOGYM-SUREFIRE-REPORT", re.compile(r"^REPOGYM-SUREFIRE-REPORT \S", _M), 8),
    ("maven", "T E S T S", re.compile(r"^\[INFO\]  T E S T S$", _M), 4),
    ("maven", "[INFO] BUILD", re.compile(r"^\[INFO\] BUILD (?:SUCCESS|FAILURE)$", _M), 3),
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
    chosen = None  # type: Optional[Tuple[str, Out]]
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
