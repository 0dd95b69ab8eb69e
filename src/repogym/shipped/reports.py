#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045, UP031, UP032
"""Read the test report written by repogym's pytest plugin or unittest wrapper.

This file is self-contained (standard library only, Python 3.6+ syntax, no repogym imports), like
``parsers.py``: pipelines may copy it next to the verifier.  ``python reports.py REPORT`` prints
the result as JSON.

The writers are ``shipped/scripts/repogym_pytest_report.py`` (``pytest -p
repogym_pytest_report``) and ``shipped/scripts/repogym_unittest.py`` (in place of ``python
-m unittest``); both take the report's path from ``REPOGYM_REPORT``, remove it from the
environment and append one JSON object a line:

* ``{"runner": "pytest" | "unittest", "version": "...", "pid": N}`` first;
* ``{"collected": N}`` after collection;
* ``{"id": "<test id>", "status": "PASSED|FAILED|SKIPPED|ERROR", "reason": "...", "message":
  "..."}`` once per test (``reason`` only for SKIPPED, ``message`` only for FAILED/ERROR: the
  short failure message, e.g. ``TypeError: f() got an unexpected keyword argument 'tz'``), with
  the ids and outcome semantics of ``parsers.py``;
* ``{"finished": true, "exitstatus": N}`` last.

``read_report(path)`` returns ``{"tests": {id: status}, "skips": {id: reason}, "failures": {id:
message}, "collected": int | None, "finished": bool, "exitstatus": int | None, "runner":
"pytest" | "unittest" | None, "problems": [str, ...]}``.  Several records for one id merge to
the worst (FAILED > ERROR > PASSED > SKIPPED), as ``parsers.py`` merges results within one run,
so an appended PASSED cannot hide a failure.  ``skips`` has every id whose status is SKIPPED.
``failures`` has the ids whose merged status is FAILED or ERROR and whose record of that status
came with a message (the first such record's); each message is one line without ANSI escapes
or control characters, at most ``MAX_MESSAGE`` (300) characters, and at most
``MAX_FAILURES`` (2000) ids are kept, in report order.  A missing file gives
``finished`` False and the problem ``no report``.  Malformed lines, a last line without its
newline (a write cut short), unknown records, a second header and anything after the
``finished`` record are ignored, each noted in ``problems``.  ``finished`` False means the run
did not reach its end (killed, crashed, ``os._exit``): what was recorded before is returned.

The report is written from inside the process that runs the code under test, which can reach
the open file: it makes forging results harder than printing fake lines to stdout, it does not
make it impossible.  Treat ``problems`` as a reason for suspicion.
"""

import json
import re
import sys
from typing import Any, Dict, List, Optional

__all__ = [
    "Channel",
    "ERROR",
    "FAILED",
    "MAX_FAILURES",
    "MAX_MESSAGE",
    "PASSED",
    "SKIPPED",
    "STATUSES",
    "judge",
    "parse_report",
    "read_report",
]

PASSED = "PASSED"
FAILED = "FAILED"
SKIPPED = "SKIPPED"
ERROR = "ERROR"
STATUSES = (PASSED, FAILED, SKIPPED, ERROR)
RUNNERS = ("pytest", "unittest")

_RANK = {SKIPPED: 0, PASSED: 1, ERROR: 2, FAILED: 3}
MAX_MESSAGE = 300
"""Longest failure message kept (characters)."""
MAX_FAILURES = 2000
"""Most failure messages kept."""
# ANSI escapes (CSI, OSC, two-character) and control characters (C0 but tab, DEL, C1).
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])?")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def short_message(text: Any) -> Optional[str]:
    """The first non-blank line of ``text`` without escapes or control characters, cut to
    MAX_MESSAGE characters (None when nothing is left or ``text`` is not a string)."""
    if not isinstance(text, str):
        return None
    for line in _ESCAPE.sub("", text[: 64 * MAX_MESSAGE]).splitlines():
        line = _CONTROL.sub("", line.replace("\t", " ")).strip()
        if line:
            if len(line) > MAX_MESSAGE:
                line = line[: MAX_MESSAGE - 3] + "..."
            return line
    return None


def _empty() -> Dict[str, Any]:
    return {
        "tests": {},
        "skips": {},
        "failures": {},
        "collected": None,
        "finished": False,
        "exitstatus": None,
        "runner": None,
        "problems": [],
    }


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Reader:
    def __init__(self) -> None:
        self.result = _empty()
        self.problems = self.result["problems"]  # type: List[str]
        self.reasons = {}  # type: Dict[str, str]
        self.messages = {}  # type: Dict[str, str]
        self.header_seen = False
        self.records = 0

    def problem(self, lineno: int, message: str) -> None:
        self.problems.append("line %d: %s" % (lineno, message))

    def record(self, lineno: int, rec: Dict[str, Any]) -> None:
        result = self.result
        if "runner" in rec:
            if self.header_seen:
                self.problem(lineno, "a second header record, ignored")
                return
            self.header_seen = True
            if rec["runner"] in RUNNERS:
                result["runner"] = rec["runner"]
            else:
                self.problem(lineno, "unknown runner %r" % (rec["runner"],))
        elif "id" in rec:
            tid, status = rec.get("id"), rec.get("status")
            if not isinstance(tid, str) or status not in _RANK:
                self.problem(lineno, "malformed test record, ignored")
                return
            old = result["tests"].get(tid)
            if old is None or _RANK[status] > _RANK[old]:
                result["tests"][tid] = status
                self.messages.pop(tid, None)  # the message goes with the worst record
            if status in (FAILED, ERROR) and rec.get("message") is not None:
                message = short_message(rec["message"])
                if message is None:
                    self.problem(lineno, "malformed failure message, ignored")
                elif result["tests"][tid] == status and tid not in self.messages:
                    self.messages[tid] = message
            reason = rec.get("reason")
            if status == SKIPPED and isinstance(reason, str) and tid not in self.reasons:
                self.reasons[tid] = reason
        elif "collected" in rec:
            count = rec["collected"]
            if count is not None and not (_is_int(count) and count >= 0):
                self.problem(lineno, "malformed collected record, ignored")
            elif result["collected"] is not None:
                self.problem(lineno, "a second collected record, ignored")
            else:
                result["collected"] = count
        elif "finished" in rec:
            if rec["finished"] is not True:
                self.problem(lineno, "malformed finished record, ignored")
                return
            result["finished"] = True
            status = rec.get("exitstatus")
            if _is_int(status):
                result["exitstatus"] = status
            elif status is not None:
                self.problem(lineno, "malformed exit status %r" % (status,))
        else:
            self.problem(lineno, "unknown record, ignored")

    def feed(self, data: bytes) -> Dict[str, Any]:
        lines = data.split(b"\n")
        tail = lines.pop()  # what follows the last newline: b"" unless a write was cut short
        ignored = 0
        for lineno, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            if self.result["finished"]:
                ignored += 1
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                self.problem(lineno, "not a JSON record, ignored")
                continue
            if not isinstance(rec, dict):
                self.problem(lineno, "not a JSON object, ignored")
                continue
            self.records += 1
            self.record(lineno, rec)
        if tail.strip():
            if self.result["finished"]:
                ignored += 1
            else:
                self.problem(len(lines) + 1, "partial last line (no newline), ignored")
        if ignored:
            self.problems.append("%d line(s) after the finished record ignored" % ignored)
        if self.records and not self.header_seen:
            self.problems.append("no header record")
        if not self.records and not self.problems:
            self.problems.append("empty report")
        tests = self.result["tests"]
        self.result["skips"] = {
            tid: self.reasons.get(tid, "") for tid, status in tests.items() if status == SKIPPED
        }
        failures = self.result["failures"]
        for tid, status in tests.items():
            if len(failures) >= MAX_FAILURES:
                break
            message = self.messages.get(tid)
            if message and status in (FAILED, ERROR):
                failures[tid] = message
        return self.result


class Channel:
    """The judge's reading of the records a test process streams to it (see ``judge``)."""

    def __init__(
        self, ordered: bool = True, reruns: bool = False, proof: Optional[str] = None
    ) -> None:
        self.ordered = ordered
        self.reruns = reruns
        # The secret only the boot received (through a descriptor it read and closed before
        # any other code ran): an end record without it was not written by the boot.
        self.proof = proof
        self.reader = _Reader()
        self.tamper = []  # type: List[str]
        self.audit = []  # type: List[Dict[str, Any]]
        self.ids = None  # type: Optional[List[str]]
        self.position = {}  # type: Dict[str, int]
        self.next = 0
        self.seen = set()  # type: Any
        self.state = "start"  # start -> header -> collected -> finished -> ended
        self.lines = 0

    def broken(self, why: str) -> None:
        if len(self.tamper) < 20 and why not in self.tamper:
            self.tamper.append(why)

    def line(self, raw: bytes) -> None:
        self.lines += 1
        if not raw.strip():
            return
        if self.state == "ended":
            self.broken("a record after the end of the run")
            return
        try:
            rec = json.loads(raw.decode("ascii"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            self.broken("a malformed record")
            return
        if not isinstance(rec, dict):
            self.broken("a malformed record")
            return
        if "audit" in rec:
            if len(self.audit) < 200:
                self.audit.append(rec)
            return
        if "end" in rec:
            if self.proof is not None and rec.get("proof") != self.proof:
                self.broken("an end of the run the boot did not write")
            elif self.state != "finished":
                self.broken("the run ended before the runner finished")
            self.state = "ended"
            return
        if "runner" in rec:
            if self.state != "start":
                self.broken("a second runner header")
                return
            self.state = "header"
            self.reader.record(self.lines, rec)
            return
        if self.state == "start":
            self.broken("a record before the runner's header")
            return
        if "collected" in rec:
            if self.state != "header":
                self.broken("a second collection, or one after the tests")
                return
            ids = rec.get("ids")
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                self.broken("a collection without the ids of its tests")
                return
            self.ids = ids
            self.position = dict((tid, i) for i, tid in enumerate(ids))
            self.state = "collected"
            self.reader.record(self.lines, rec)
            return
        if "finished" in rec:
            if self.state not in ("collected", "header"):
                self.broken("a second end of the runner")
                return
            self.state = "finished"
            self.reader.record(self.lines, rec)
            return
        if "id" in rec:
            self.outcome(rec)
            return
        self.broken("an unknown record")

    def outcome(self, rec: Dict[str, Any]) -> None:
        tid = rec.get("id")
        if self.state == "header":
            # Only a collector that failed (a module that does not import) has an outcome
            # before the collection ends.
            if rec.get("status") != ERROR:
                self.broken("a test outcome before the collection ended")
                return
        elif self.state != "collected":
            self.broken("a test outcome after the runner finished")
            return
        else:
            where = self.position.get(tid) if isinstance(tid, str) else None
            if where is None and self.parent_error(rec):
                self.seen.add(tid)
                self.reader.record(self.lines, rec)
                return
            if where is None:
                self.broken("an outcome for a test that was never collected")
                return
            if tid in self.seen and not self.reruns:
                self.broken("two outcomes for one test")
                return
            if self.ordered and where < self.next and tid not in self.seen:
                self.broken("outcomes out of the collection's order")
            self.next = max(self.next, where + 1)
        self.seen.add(tid)
        self.reader.record(self.lines, rec)

    def parent_error(self, rec: Dict[str, Any]) -> bool:
        """An ERROR of something that holds collected tests (a unittest class or module
        whose fixture failed): it is no test of its own."""
        tid = rec.get("id")
        if rec.get("status") != ERROR or not isinstance(tid, str) or not tid:
            return False
        return any(i.startswith(tid + ".") or i.startswith(tid + "::") for i in self.ids or [])

    def result(self, killed: bool = False, exit_code: Optional[int] = None) -> Dict[str, Any]:
        """What the run established; ``killed``: the judge stopped it (a timeout) or it died
        of a signal. A run that exited on its own without its end record is a tamper."""
        out = self.reader.feed(b"")
        out["problems"] = [p for p in out["problems"] if p != "empty report"]
        if self.state != "ended":
            if killed:
                out["problems"].append("the test process did not finish (killed)")
            elif self.state == "start":
                out["problems"].append("no report")
            else:
                self.broken("the test process exited without ending its run (exit %s)" % exit_code)
        out["finished"] = self.state in ("finished", "ended") and out["finished"]
        out["tamper"] = list(self.tamper)
        out["audit"] = list(self.audit)
        out["ended"] = self.state == "ended"
        out["collected_ids"] = self.ids
        return out


def judge(data: bytes, **kwargs: Any) -> Dict[str, Any]:
    """The strict reading of a whole channel (``Channel``): the runner's header first, a
    failed collector's outcome before the collection, one collection with its ids, one
    outcome per collected id in collection order (``ordered``; ``reruns`` allows several),
    the runner's end, audit records anywhere, and the boot's ``end`` last. Anything else is
    a reason in ``tamper``."""
    chan = Channel(ordered=kwargs.pop("ordered", True), reruns=kwargs.pop("reruns", False))
    for raw in data.split(b"\n"):
        chan.line(raw)
    return chan.result(**kwargs)


def parse_report(data: bytes) -> Dict[str, Any]:
    """Read a report's bytes (see ``read_report``)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return _Reader().feed(data)


def read_report(path: Any) -> Dict[str, Any]:
    """Read the report at ``path``; a missing file gives the problem ``no report``."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        result = _empty()
        result["problems"].append("no report")
        return result
    except OSError as exc:
        result = _empty()
        result["problems"].append("cannot read the report: %s" % (exc,))
        return result
    return parse_report(data)


def main(argv: Optional[List[str]] = None) -> int:
    """CLI: ``reports.py REPORT`` prints what ``read_report`` returns as JSON."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        sys.stderr.write("usage: reports.py REPORT\n")
        return 2
    payload = json.dumps(read_report(args[0]), indent=2, ensure_ascii=False) + "\n"
    stream = getattr(sys.stdout, "buffer", None)
    if stream is not None:
        stream.write(payload.encode("utf-8"))
        stream.flush()
    else:
        sys.stdout.write(payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
