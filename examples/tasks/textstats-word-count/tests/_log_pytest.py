#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045
"""pytest logs: ``-rA`` short test summaries, ``-v`` lines, xdist workers, collection errors.

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
        PASSED,
        RANK,
        SKIPPED,
        TRUNCATED,
        Out,
        override,
        short_message,
        worst,
    )
else:  # a task's copy: beside parsers.py, which put its folder on sys.path
    from _log_common import (
        ERROR,
        FAILED,
        PASSED,
        RANK,
        SKIPPED,
        TRUNCATED,
        Out,
        override,
        short_message,
        worst,
    )


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
    lines: List[str], out: Out, messages: Dict[str, str]
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
            worst(summary, tid, status)
            if old is not None and RANK[status] > RANK[old]:
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


def _pytest_session(lines: List[str], out: Out, messages: Dict[str, str]) -> Dict[str, str]:
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
                    worst(verbose, collecting, ERROR)
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
                    worst(verbose, tid, _PT_STATUS[m.group(1)])
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
                worst(verbose, tid, _PT_STATUS[m.group(1)])
        elif _PT_NODE_START.match(line):
            pending = _nodeid_prefix(line.rstrip(" "), summary)
    override(verbose, summary)
    return verbose


def parse_pytest(text: str, lines: List[str]) -> Out:
    out = Out()
    starts = [i for i, line in enumerate(lines) if line.startswith("=") and _PT_SESSION.match(line)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    starts.append(len(lines))
    for k in range(len(starts) - 1):
        # Sessions in order: a later pytest run in the same log overrides an earlier one.
        messages = {}  # type: Dict[str, str]
        session = _pytest_session(lines[starts[k] : starts[k + 1]], out, messages)
        override(out.tests, session)
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
