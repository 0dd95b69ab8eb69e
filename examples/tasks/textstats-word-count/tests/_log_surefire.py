#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""Maven logs: Surefire's XML reports printed after ``mvn test`` between marker lines, and the
modules Maven failed to build.

repogym's Maven test command prints every ``target/surefire-reports/TEST-*.xml`` after the run:
``REPOGYM-SUREFIRE-REPORT <path>``, the XML, ``REPOGYM-SUREFIRE-END``.  Ids are
``<classname>#<name>`` from each ``<testcase>`` (``demo.CalcTest#adds``, JUnit 5 parameterised
``demo.CalcTest#identity(int)[1]``, nested ``demo.CalcTest$Inner#zero``); a class-level result
with no method name is ``<classname>``.  A module whose build fails (compilation, unresolvable
dependencies, a crashed test JVM) is its artifactId with ERROR, its message the compiler's first
error line or Maven's own.  Reports with a DOCTYPE (entity declarations) are never parsed;
reports that are not well-formed are read tag by tag.

Part of the log parsers (see ``parsers/__init__.py``, shipped into tasks as ``parsers.py``):
standard library only, Python 3.6+ syntax, copied beside it into each generated task's ``tests/``.
"""

import re
import xml.etree.ElementTree as ET

# Some typing names appear only in type comments, which ruff does not read (hence F401).
from typing import Dict, List, Optional, Tuple  # noqa: F401

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

REPORT_MARK = "REPOGYM-SUREFIRE-REPORT"
REPORT_END = "REPOGYM-SUREFIRE-END"
MAX_REPORT = 50 * 1024 * 1024
"""Longest report block parsed as XML (characters); longer ones are read tag by tag."""

_SESSION = re.compile(r"^\[INFO\] Scanning for projects\.\.\.\s*$")
_MODULE = re.compile(r"^\[INFO\] -+< ([^\s:<>]+):([^\s:<>]+) >-+\s*$")
_COMPILE_ERROR = re.compile(r"^\[ERROR\] (\S+\.(?:java|kt|groovy|scala)):(\[\d+(?:,\d+)?\]) (.+)$")
_SYMBOL = re.compile(r"^(?:\[ERROR\])?\s+symbol:\s+(.+)$")
_GOAL_FAILED = re.compile(
    r"^\[ERROR\] Failed to execute goal (\S+)(?: \([^)]*\))? on project ([^\s:]+): (.*)$"
)
_TEST_FAILURES = re.compile(r"^There (?:are|were) test failures|^There was a timeout")
_WORKDIR_PREFIX = re.compile(r"^/workspace/")

# Attribute values never hold a raw "<": a scan stops at the next tag, so reading stays linear.
_TAG = re.compile(r"<(/?)([A-Za-z][\w.-]*)((?:[^<>\"']|\"[^\"<]*\"|'[^'<]*')*?)(/?)>")
_ATTR = re.compile(r"([\w:.-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
_ENTITY = re.compile(r"&(#x[0-9a-fA-F]+|#\d+|\w+);")


def _unescape(text: str) -> str:
    def sub(m):  # type: (re.Match[str]) -> str
        name = m.group(1)
        try:
            if name.startswith("#x"):
                return chr(int(name[2:], 16))
            if name.startswith("#"):
                return chr(int(name[1:]))
        except (ValueError, OverflowError):
            return m.group(0)
        return _ENTITIES.get(name, m.group(0))

    return _ENTITY.sub(sub, text)


def _first_line(text: Optional[str]) -> str:
    for line in (text or "").split("\n"):
        if line.strip():
            return line.strip()
    return ""


def _message(tag: str, message: Optional[str], kind: Optional[str]) -> str:
    """A failure's message; an error's (an unexpected exception) names its type too."""
    text = _first_line(message)
    if tag == "error" and kind:
        return f"{kind}: {text}" if text else kind
    return text or (kind or "")


def _case_id(classname: str, name: str, suite: str) -> str:
    cls = classname or suite
    if not name or name == cls:
        return cls
    return cls + "#" + name if cls else name


_OUTCOMES = {"failure": FAILED, "error": ERROR, "skipped": SKIPPED}


def _from_tree(root: ET.Element, found: List[Tuple[str, str, str]]) -> None:
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    for suite in suites:
        suite_name = suite.get("name") or ""
        for case in suite.iter("testcase"):
            status, message = PASSED, ""
            for child in case:
                outcome = _OUTCOMES.get(child.tag)
                if outcome is not None and status == PASSED:
                    status = outcome
                    message = _message(child.tag, child.get("message"), child.get("type"))
                    message = message or _first_line(child.text)
            tid = _case_id(case.get("classname") or "", case.get("name") or "", suite_name)
            if tid:
                found.append((tid, status, message))


def _drop_sections(xml: str, opener: str, closer: str) -> str:
    """``xml`` without its ``opener … closer`` sections; one left open (a cut report) runs to
    the end."""
    parts = []  # type: List[str]
    pos = 0
    while True:
        start = xml.find(opener, pos)
        if start < 0:
            parts.append(xml[pos:])
            return "".join(parts)
        parts.append(xml[pos:start])
        end = xml.find(closer, start + len(opener))
        if end < 0:
            return "".join(parts)
        pos = end + len(closer)


def _leniently(xml: str, found: List[Tuple[str, str, str]]) -> None:
    """Read ``<testcase>`` tags and the outcome tags inside them without an XML parser."""
    xml = _drop_sections(_drop_sections(xml, "<![CDATA[", "]]>"), "<!--", "-->")
    suite_name, case = "", None  # type: str, Optional[List[str]]
    for m in _TAG.finditer(xml):
        closing, tag, attrs, empty = m.group(1), m.group(2), m.group(3), m.group(4)
        values = {}  # type: Dict[str, str]
        if not closing:
            values = {
                a.group(1): _unescape(a.group(2) or a.group(3) or "") for a in _ATTR.finditer(attrs)
            }
        if tag == "testsuite" and not closing:
            suite_name = values.get("name", "")
        elif tag == "testcase":
            if case is not None and (closing or case[1] != PASSED):
                found.append((case[0], case[1], case[2]))
            case = None
            if not closing:
                tid = _case_id(values.get("classname", ""), values.get("name", ""), suite_name)
                case = [tid, PASSED, ""]
                if empty:
                    found.append((case[0], case[1], case[2]))
                    case = None
        elif tag in _OUTCOMES and not closing and case is not None and case[1] == PASSED:
            case[1] = _OUTCOMES[tag]
            case[2] = _message(tag, values.get("message"), values.get("type"))
    # A <testcase> still open at the end (a cut report) has no known outcome: not reported.


def _parse_report(block: List[str], out: Out) -> List[Tuple[str, str, str]]:
    xml = "\n".join(block)
    start = xml.find("<")
    xml = xml[start:] if start >= 0 else ""
    found = []  # type: List[Tuple[str, str, str]]
    if not xml.strip():
        return found
    if "<!DOCTYPE" in xml or "<!ENTITY" in xml:
        out.warn("surefire: a report with a DOCTYPE was not read")
        return found
    if len(xml) <= MAX_REPORT:
        try:
            _from_tree(ET.fromstring(xml.encode("utf-8")), found)
            return found
        except (ET.ParseError, ValueError, RecursionError):
            del found[:]
    out.warn("surefire: a report is not well-formed XML; read tag by tag")
    _leniently(xml, found)
    return found


class _Maven:
    """Module context and build failures from Maven's console output."""

    def __init__(self) -> None:
        self.module = ""
        self.first_error = {}  # type: Dict[str, str]
        self.failed = {}  # type: Dict[str, str]
        self.symbol_for = None  # type: Optional[str]

    def line(self, line: str) -> bool:
        """Read one console line; whether it was Maven's."""
        if self.symbol_for is not None:
            m = _SYMBOL.match(line)
            if m:  # javac's "cannot find symbol" names the symbol on the next line
                self.first_error[self.symbol_for] += f" ({m.group(1).strip()})"
            self.symbol_for = None
            if m:
                return True
        if not line.startswith("[") or len(line) < 8:
            return False
        m = _MODULE.match(line)
        if m:
            self.module = m.group(2)
            return True
        m = _COMPILE_ERROR.match(line)
        if m:
            where = _WORKDIR_PREFIX.sub("", m.group(1))
            message = f"{where}:{m.group(2)} {m.group(3).strip()}"
            if self.module not in self.first_error:
                self.first_error[self.module] = message
                self.symbol_for = self.module
            return True
        m = _GOAL_FAILED.match(line)
        if m:
            goal, module, reason = m.group(1), m.group(2), m.group(3).strip()
            if ("surefire" in goal or "failsafe" in goal) and _TEST_FAILURES.match(reason):
                return True
            reason = re.sub(r"\s*-> \[Help \d+\]$", "", reason)
            message = self.first_error.get(module) or f"{goal.split(':')[-1]}: {reason}"
            self.failed.setdefault(module, message)
            return True
        return line.startswith(("[INFO]", "[ERROR]", "[WARNING]"))


def parse_surefire(text: str, lines: List[str]) -> Out:
    out = Out()
    final = {}  # type: Dict[str, str]
    session = {}  # type: Dict[str, str]
    maven = _Maven()
    block = None  # type: Optional[List[str]]
    complete = opened = False
    running = False  # an mvn run started and has not printed its BUILD line yet

    def close_session() -> None:
        for module, message in maven.failed.items():
            worst(session, module, ERROR)
            out.failures.setdefault(module, message)
        override(final, session)
        session.clear()
        maven.failed.clear()
        maven.first_error.clear()

    def take(report: List[str]) -> None:
        for tid, status, message in _parse_report(report, out):
            worst(session, tid, status)
            if message and status in (FAILED, ERROR):
                out.failures.setdefault(tid, message)

    for line in lines:
        if block is not None:
            # The end marker counts after the report's </testsuite>, or in a block that never
            # opened one (an empty report file); inside a report it is the tests' own text.
            if line == REPORT_END and (complete or not opened):
                take(block)
                block = None
                continue
            if line.startswith(REPORT_MARK + " ") and (complete or not opened):
                take(block)
                block = []
                complete = opened = False
                continue
            block.append(line)
            if line.rstrip().endswith("</testsuite>"):
                complete = True
            elif not opened and "<testsuite" in line:
                opened = True
            continue
        if line.startswith(REPORT_MARK + " "):
            out.recognised = True
            block, complete, opened = [], False, False
            continue
        if _SESSION.match(line):
            out.recognised = running = True
            if session or maven.failed:
                close_session()
            continue
        if maven.line(line):
            if line.startswith("[INFO] BUILD "):
                out.recognised, running = True, False
            elif "T E S T S" in line:
                out.recognised = True
    if block is not None or running:
        out.warn(TRUNCATED)
    if block is not None:
        take(block)
    close_session()
    out.tests = final
    return out
