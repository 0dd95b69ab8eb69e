#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""``node --test`` logs: repogym's reporter lines, Node's TAP and spec reporters.

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
        worst,
    )
    from repogym.shipped.parsers._log_js import cut_short, looks_like_file
else:  # a task's copy: beside parsers.py, which put its folder on sys.path
    from _log_common import ERROR, FAILED, PASSED, SKIPPED, TRUNCATED, Out, worst
    from _log_js import cut_short, looks_like_file


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


def _node_reporter(lines: List[str], out: Out) -> bool:
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
        worst(out.tests, tid, status)
        message = rec.get("m")
        if status == ERROR and len(ident) == 1 and message in (None, "", "test failed"):
            if errors is None:
                errors = _node_file_errors(lines)
            message = errors.get(tid, message)
        if status in (FAILED, ERROR) and isinstance(message, str) and message:
            out.failures[tid] = message
    if seen and not ended:
        out.warn(TRUNCATED)
        cut_short(out, "", "node", False)
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


def _node_tap(lines: List[str], out: Out) -> None:
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
        if not parts and status == PASSED and name.startswith("/") and looks_like_file(name):
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
        if status == FAILED and not parts and looks_like_file(name) and kind == "testCodeFailure":
            status = ERROR  # a file that failed to load
        worst(out.tests, tid, status)
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
        cut_short(out, "", "node", False)


def _node_spec(lines: List[str], out: Out) -> None:
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
                worst(out.tests, tid, ERROR)  # its hook failed
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
        worst(out.tests, tid, status)
    if out.tests and not ended:
        out.warn(TRUNCATED)
        cut_short(out, "", "node", False)


def name_is_file(name: str) -> bool:
    return name.startswith("/") and looks_like_file(name)


def parse_node(text: str, lines: List[str]) -> Out:
    out = Out()
    if "node:test {" in text and _node_reporter(lines, out):
        return out
    if "# Subtest:" in text or re.search(r"^TAP version \d+", text, re.M):
        _node_tap(lines, out)
        if out.tests:
            return out
    spec = Out()
    _node_spec(lines, spec)
    return spec if spec.tests else out
