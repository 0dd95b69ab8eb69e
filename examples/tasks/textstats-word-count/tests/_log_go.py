#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""``go test`` logs: text (``-v`` or not) and ``-json`` events, build failures.

Part of the log parsers (see ``parsers/__init__.py``, shipped into tasks as ``parsers.py``):
standard library only, Python 3.6+ syntax, copied beside it into each generated task's ``tests/``.
"""

import json
import re

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
        indent_of,
        qualified_ids,
        short_message,
    )
else:  # a task's copy: beside parsers.py, which put its folder on sys.path
    from _log_common import (
        ERROR,
        FAILED,
        PASSED,
        SKIPPED,
        TRUNCATED,
        Out,
        indent_of,
        qualified_ids,
        short_message,
    )


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
    """What :func:`parse_go` gathers over the lines of a ``go test`` log (text or ``-json``)."""

    def __init__(self) -> None:
        self.out = Out()
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
                self.failed_at = (name, indent_of(line)) if m.group(1) == "FAIL" else None
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

    def result(self) -> Out:
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
        ids = qualified_ids(entries, "::")
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


def parse_go(text: str, lines: List[str]) -> Out:
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
