#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""``ctest`` logs: the console output (``N/M Test #K: name .... Passed``), CTest's JUnit report
printed between ``REPOGYM-CTEST-JUNIT-BEGIN`` / ``-END`` lines, and a failed build.

repogym's CMake recipes run ``ctest --output-on-failure --output-junit FILE`` and then print
FILE between the marker lines (see ``repogym/bootstrap/native/cmake.py``).  The report is the
authority when the log has a complete one: CTest escapes what tests print inside it, so no test
output can forge a ``<testcase>``; the console lines are the fallback.  The report is read with
patterns, not an XML parser (no DTD or entity expansion, no dependency on ``pyexpat``).  When
the build fails the command prints ``REPOGYM-CTEST-BUILD-FAILED`` and ``ctest -N``'s listing:
each listed test is ERROR, with the compiler's first ``error:`` line as its message.

Part of the log parsers (see ``parsers/__init__.py``, shipped into tasks as ``parsers.py``):
standard library only, Python 3.6+ syntax, copied beside it into each generated task's ``tests/``.
"""

import re

# Some typing names appear only in type comments, which ruff does not read (hence F401).
from typing import Dict, List, Optional, Tuple  # noqa: F401

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:  # in the repogym package
    from repogym.shipped.parsers._log_common import (
        ERROR,
        FAILED,
        MAX_MESSAGE,
        PASSED,
        SKIPPED,
        TRUNCATED,
        Out,
        worst,
    )
else:  # a task's copy: beside parsers.py, which put its folder on sys.path
    from _log_common import (
        ERROR,
        FAILED,
        MAX_MESSAGE,
        PASSED,
        SKIPPED,
        TRUNCATED,
        Out,
        worst,
    )

JUNIT_BEGIN = "REPOGYM-CTEST-JUNIT-BEGIN"
JUNIT_END = "REPOGYM-CTEST-JUNIT-END"
BUILD_FAILED = "REPOGYM-CTEST-BUILD-FAILED"
MAX_XML = 64 * 1024 * 1024
"""Largest JUnit report parsed (characters); a bigger one falls back to the console lines."""

_RESULT = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (.+?) \.{3,}(?:\*\*\*|\s+)(.*)$")
_START = re.compile(r"^\s*Start\s+\d+: (.+)$")
_LISTED = re.compile(r"^\s*Test\s+#\d+: (.+)$")
_SUMMARY = re.compile(r"^\d+% tests passed, \d+ tests? failed out of \d+|^No tests were found")
_SECONDS = re.compile(r"\s+\d+(?:\.\d+)? sec\s*$")
_COMPILER_ERROR = re.compile(r"^\S.*?:\d+(?::\d+)?: (?:fatal )?error: \S")
_FAILURE_START = (
    re.compile(r"^(\S.*?):(\d+): Failure$"),  # GoogleTest: the expectation follows
    re.compile(r"^(\S.*?):(\d+): FAILED:$"),  # Catch2: the assertion follows
)
_FAILURE_LINE = (
    re.compile(r"^(\S.*?)\((\d+)\): ERROR: (.+)$"),  # doctest
    re.compile(r"^(\S.*?):(\d+): error: (.+)$"),  # doctest (-s), Unity, many C harnesses
    re.compile(r"^(.*Assertion [`'].*['`] failed\.)$"),  # assert(): see _assertion
    re.compile(r"^((?:ERROR|FAIL|FAILED|FAILURE|Error|Failure):\s+\S.*)$"),  # shell harnesses
)


def status_of(text: str) -> str:
    """A console status (``Passed``, ``Failed``, ``Not Run (Disabled)``, ``Timeout``,
    ``Exception: SegFault``…) as PASSED / FAILED / SKIPPED: what would not fail CTest passes,
    disabled and skipped tests are SKIPPED, a test CTest could not run fails the run."""
    if text.startswith("Passed"):
        return PASSED
    if text.startswith(("Skipped", "Not Run (Disabled)")):
        return SKIPPED
    return FAILED


def failure_message(output: List[str]) -> Optional[str]:
    """The telling line of a failing test's output: a GoogleTest ``file:line: Failure`` or Catch2
    ``file:line: FAILED:`` joined with the lines that follow it, a doctest ``ERROR:`` line, an
    ``Assertion … failed.`` line, or a test script's own ``ERROR: …``/``FAIL: …`` line (a shell
    trace's ``+ echo ERROR: …`` is not one)."""
    for i, line in enumerate(output):
        for pattern in _FAILURE_START:
            m = pattern.match(line.strip())
            if m:
                parts = []  # type: List[str]
                for follow in output[i + 1 : i + 12]:
                    follow = follow.strip()
                    if not follow or follow.startswith("["):
                        break
                    parts.append(follow)
                where = "{}:{}".format(m.group(1).rsplit("/", 1)[-1], m.group(2))
                return (where + ": " + " ".join(parts))[: 2 * MAX_MESSAGE]
        for pattern in _FAILURE_LINE:
            m = pattern.match(line.strip())
            if m:
                if pattern.groups == 3:
                    where = "{}:{}".format(m.group(1).rsplit("/", 1)[-1], m.group(2))
                    return where + ": " + m.group(3)
                return _assertion(m.group(1))
    return None


_GLIBC_ASSERT = re.compile(r"^(?:\S+: )?(\S+?):(\d+): (.*Assertion .*)$")


def _assertion(text):  # type: (str) -> str
    """glibc's ``prog: /path/file.c:12: func: Assertion `x' failed.`` as ``file.c:12: func:
    Assertion `x' failed.``, without the progress marks a harness printed on the same line
    before it (minunit's dots)."""
    text = re.sub(r"^[^\w/]+", "", text)
    m = _GLIBC_ASSERT.match(text)
    if m:
        return "{}:{}: {}".format(m.group(1).rsplit("/", 1)[-1], m.group(2), m.group(3))
    return text


# The console lines


def _console(lines: List[str], out: Out) -> Tuple[Dict[str, str], Dict[str, str]]:
    """``({id: status}, {id: message})`` from CTest's console lines."""
    tests = {}  # type: Dict[str, str]
    messages = {}  # type: Dict[str, str]
    started = {}  # type: Dict[str, bool]
    current = None  # type: Optional[str]  # a failed test whose output follows
    status_text = ""
    output = []  # type: List[str]
    summary = False

    def flush() -> None:
        if current is not None:
            message = failure_message(output)
            if not message and status_text and not status_text.startswith("Failed"):
                message = status_text
            if not message and status_text.startswith("Failed") and status_text != "Failed":
                message = status_text  # e.g. "Failed  Required regular expression not found"
            if message and current not in messages:
                messages[current] = message

    for line in lines:
        m = _RESULT.match(line)
        if m:
            flush()
            name, status_text = m.group(1).strip(), _SECONDS.sub("", m.group(2)).strip()
            out.recognised = True
            worst(tests, name, status_of(status_text))
            started.pop(name, None)
            current = name if tests[name] == FAILED else None
            output = []
            continue
        m = _START.match(line)
        if m:
            flush()
            current = None
            started[m.group(1).strip()] = True
            continue
        if _SUMMARY.match(line):
            flush()
            current = None
            summary = True
            out.recognised = True
            continue
        if current is not None and len(output) < 400:
            output.append(line)
    flush()
    if tests and not summary:
        out.warn(TRUNCATED)
        for name in started:  # running when the log ends: it hung or the run was killed
            worst(tests, name, FAILED)
    return tests, messages


# The JUnit report


def _junit_block(lines: List[str]) -> Optional[str]:
    """The report between the last ``BEGIN`` line followed by ``<?xml`` (a test's output
    cannot print one inside the real report: CTest escapes ``<``) and the last ``END`` line."""
    begin = None
    for i in range(len(lines) - 1):
        if lines[i].strip() == JUNIT_BEGIN and lines[i + 1].lstrip().startswith("<?xml"):
            begin = i
    if begin is None:
        return None
    end = None
    for i in range(len(lines) - 1, begin, -1):
        if lines[i].strip() == JUNIT_END:
            end = i
            break
    if end is None:
        return None
    return "\n".join(lines[begin + 1 : end])


_CASE = re.compile(r"<testcase\b([^>]*?)(?:/>|>(.*?)</testcase>)", re.S)
_ATTR = re.compile(r'([\w:.-]+)="([^"<]*)"')
_CHILD = re.compile(r"<(failure|skipped)\b([^>]*?)/?>")
_SYSTEM_OUT = re.compile(r"<system-out>(.*?)</system-out>", re.S)
_ENTITY = re.compile(r"&(lt|gt|amp|quot|apos|#\d{1,7}|#x[0-9a-fA-F]{1,6});")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def _unescape(text: str) -> str:
    """XML's five named entities and character references (nothing else exists here)."""

    def one(m):  # type: ignore[no-untyped-def]
        ref = m.group(1)
        if ref in _NAMED:
            return _NAMED[ref]
        code = int(ref[2:], 16) if ref.startswith("#x") else int(ref[1:])
        return chr(code) if 0 < code < 0x110000 else ""

    return _ENTITY.sub(one, text)


def _attributes(text: str) -> Dict[str, str]:
    # XML normalises white space in attribute values to spaces.
    return {k: _unescape(re.sub(r"[\t\n\r]", " ", v)) for k, v in _ATTR.findall(text)}


def _junit(xml_text: str, out: Out) -> Optional[Tuple[Dict[str, str], Dict[str, str]]]:
    """``({id: status}, {id: message})`` from CTest's JUnit report; None when unusable.

    CTest writes a flat report (``<testsuite>`` of ``<testcase>`` elements, text escaped), so it
    is read with patterns rather than an XML library: no DTD, entity or parser in play."""
    if len(xml_text) > MAX_XML:
        out.warn("ctest: the JUnit report is too large; read the console lines instead")
        return None
    body = xml_text.strip()
    if "<!DOCTYPE" in body or "<!ENTITY" in body:
        out.warn("ctest: the JUnit report declares a DTD or entities; ignored")
        return None
    if not (body.startswith("<?xml") and "<testsuite" in body and body.endswith("</testsuite>")):
        out.warn("ctest: the JUnit report is malformed; read the console lines instead")
        return None
    tests = {}  # type: Dict[str, str]
    messages = {}  # type: Dict[str, str]
    for case in _CASE.finditer(body):
        attrs = _attributes(case.group(1))
        name = attrs.get("name")
        if not name:
            continue
        inner = case.group(2) or ""
        children = {}  # type: Dict[str, Dict[str, str]]
        for child in _CHILD.finditer(_SYSTEM_OUT.sub("", inner)):
            children.setdefault(child.group(1), _attributes(child.group(2)))
        status = attrs.get("status", "")
        if status == "run":
            result = PASSED
        elif status == "disabled":
            result = SKIPPED
        elif status == "notrun":
            why = children.get("skipped", {}).get("message", "")
            result = SKIPPED if why.startswith("SKIP_") else FAILED  # else: could not start
        else:
            result = FAILED if status == "fail" or "failure" in children else PASSED
        worst(tests, name, result)
        if result == FAILED and name not in messages:
            output = _SYSTEM_OUT.search(inner)
            message = failure_message(_unescape(output.group(1)).split("\n") if output else [])
            for kind in ("failure", "skipped"):
                if not message:
                    message = children.get(kind, {}).get("message", "").strip() or None
            if message:
                messages[name] = message
    return tests, messages


# Build failures


def _build_failure(lines: List[str], at: int, out: Out) -> None:
    message = None
    for line in lines[:at]:
        if _COMPILER_ERROR.match(line) or line.startswith(("CMake Error", "ninja: error")):
            message = line.strip()
            break
    out.warn("ctest: the build failed; the tests did not run")
    for line in lines[at + 1 :]:
        m = _LISTED.match(line)
        if m:
            name = m.group(1).strip()
            if name.endswith(" (Disabled)"):
                worst(out.tests, name[: -len(" (Disabled)")], SKIPPED)
                continue
            worst(out.tests, name, ERROR)
            if message:
                out.failures.setdefault(name, message)


def parse_ctest(text: str, lines: List[str]) -> Out:
    out = Out()
    for i, line in enumerate(lines):
        if line.strip() == BUILD_FAILED:
            out.recognised = True
            _build_failure(lines, i, out)
            return out
    console, console_messages = _console(lines, out)
    block = _junit_block(lines)
    report = _junit(block, out) if block is not None else None
    if report is not None:
        out.recognised = True
        out.warnings = [w for w in out.warnings if w != TRUNCATED]
        tests, messages = report
        for name, message in console_messages.items():
            messages.setdefault(name, message)  # the console names timeouts and crashes
    else:
        tests, messages = console, console_messages
    out.tests = tests
    for name, message in messages.items():
        if tests.get(name) in (FAILED, ERROR):
            out.failures[name] = message
    return out
