#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045, UP031, UP032  (runs under the task's Python, 3.6+)
"""pytest plugin: write each test's outcome to a machine-readable report (JSON lines).

Load it with ``-p repogym_pytest_report`` (this file's folder on ``PYTHONPATH``) and give the
report's path in the environment variable ``REPOGYM_REPORT``.  Works with pytest 4.6 to 9.x on
Python 3.6 to 3.13, standard library only.  Without ``REPOGYM_REPORT`` it does nothing.

The variable is removed from ``os.environ`` when this module is imported (``-p`` plugins are
imported before conftest files and entry-point plugins) and the file is opened at once, in
append mode and unbuffered, so every record is a single ``write`` and a crash leaves whatever
was written.  One JSON object per line, UTF-8 (in fact ASCII: ``ensure_ascii``):

* ``{"runner": "pytest", "version": "<pytest version>", "pid": N}`` first;
* ``{"collected": N}`` after collection: the number of test items selected to run (under
  pytest-xdist: the number the first worker collected);
* ``{"id": "<node id>", "status": "PASSED|FAILED|SKIPPED|ERROR"}`` once per test when its last
  report (teardown) is in, with ``"reason"`` for SKIPPED and ``"message"`` for FAILED/ERROR
  when pytest gives one (see below);
* ``{"finished": true, "exitstatus": N}`` last, from ``pytest_sessionfinish``.

Ids and statuses are those ``parsers.py`` reads from ``-rA -v`` output: the node id as pytest
prints it (relative to the invocation directory), the category pytest's own
``pytest_report_teststatus`` gives each setup/call/teardown report merged to the worst (FAILED >
ERROR > PASSED > SKIPPED): setup error -> ERROR, call failure -> FAILED, teardown error after a
pass -> ERROR, xfail and non-strict xpass -> PASSED, strict xpass -> FAILED.  A collector that
fails (a module that does not import) gives its node id (the module path) with ERROR; a module
skipped at collection names no test and gives no record.  A failing subtest (pytest >= 9) marks
its parent test FAILED.  Under pytest-xdist only the controller writes: workers stay silent.

``message`` is the short failure message of the report that gave the test its status: the
first line of pytest's crash message (``longrepr.reprcrash.message``, what ``-rA`` prints
after `` - ``), such as ``TypeError: f() got an unexpected keyword argument 'tz'``; a rewritten
``assert`` gives ``AssertionError: assert 2 == 3`` (the compared values; the ``+ where`` lines
after it quote test source and are dropped).  For a module that fails to collect it is the
exception line of the import traceback (``ModuleNotFoundError: No module named 'x'``).  ANSI
escapes and control characters are removed and it is cut to 300 characters.  Test source code
is never read: a representation that holds no crash message gives no ``message``.

What it does NOT prevent: the code under test runs in the same process, so it can find the open
file (``/proc/self/fd``, the garbage collector, this module's globals), write records of its
own, close the file or monkeypatch this plugin.  The report only makes forgery harder than
printing fake ``PASSED`` lines to stdout, and the ``finished`` record lets the reader tell a
run that ended from one that was killed or called ``os._exit`` before the end (records written
before that are kept).  A forked child never writes (the pid must match).
"""

import re

import pytest
from repogym_report_file import from_environment, short_message  # beside this file

PASSED = "PASSED"
FAILED = "FAILED"
SKIPPED = "SKIPPED"
ERROR = "ERROR"
_RANK = {SKIPPED: 0, PASSED: 1, ERROR: 2, FAILED: 3}
# The exception line of a traceback pytest printed: "E   Name: message" (source lines, the
# "File ..." lines of a SyntaxError and message continuations are indented further).
_E_HEADER = re.compile(r"^E   ([A-Za-z_][\w.]*(?::.*)?)$")
# A rendered representation that quotes source (xdist sends representations without a crash
# message as text): doctest lines ("003 >>> f()"), "> " source markers, traceback frames, the
# "file ..., line N" heading of a fixture lookup error.
_QUOTES_SOURCE = re.compile(
    r"^(?:\d{3}(?: |$)|>|\s+File \"|Traceback \(most recent call last\)|file .*, line \d+$)",
    re.M,
)
# pytest's result categories (the first item of pytest_report_teststatus) -> outcome; others
# ("", "rerun", "subtests passed", ...) are not results of their own.
_CATEGORY = {
    "passed": PASSED,
    "failed": FAILED,
    "error": ERROR,
    "skipped": SKIPPED,
    "xfailed": PASSED,
    "xpassed": PASSED,
}


_pending_report = from_environment("repogym_pytest_report")


def _skip_reason(report):
    """The skip reason as pytest's summary shows it ("Skipped: " prefix removed)."""
    longrepr = getattr(report, "longrepr", None)
    if isinstance(longrepr, (tuple, list)) and len(longrepr) == 3:
        reason = str(longrepr[2])
    elif longrepr is None:
        return ""
    else:
        reason = str(longrepr)
    if reason.startswith("Skipped: "):
        reason = reason[len("Skipped: ") :]
    elif reason == "Skipped":
        reason = ""
    return reason


def _message_of_text(text):
    """The exception line of a traceback in text (a collection error's message), else the
    text's first line."""
    lines = text.splitlines()
    found = None
    in_block = False
    for line in lines:
        if line == "E" or line.startswith("E "):
            if not in_block:
                in_block, header = True, None
            if header is None:
                m = _E_HEADER.match(line.rstrip())
                if m:
                    header = found = m.group(1)
        else:
            in_block = False
    if found is not None:
        return short_message(found)
    for line in lines:  # no exception line: a free-form message such as "found no collectors"
        if line.startswith("E "):
            return short_message(line[1:])
    if _QUOTES_SOURCE.search(text):
        return None  # e.g. a doctest failure: its text is the test's source
    return short_message(text)


def failure_message(report):
    """The short failure message of a failed report (None when it has none).

    Only pytest's own summaries of the failure are read (the crash message, a message string,
    a fixture lookup error's text), never a rendered traceback: those quote test source."""
    try:
        longrepr = getattr(report, "longrepr", None)
        if longrepr is None:
            return None
        crash = getattr(longrepr, "reprcrash", None)
        message = getattr(crash, "message", None)
        if isinstance(message, str) and message.strip():
            line = short_message(message)
            if line is not None and (line == "assert" or line.startswith("assert ")):
                line = short_message("AssertionError: " + line)  # pytest's short form
            return line
        if isinstance(longrepr, str):  # collection errors, strict xpass, xdist-serialised
            return _message_of_text(longrepr)
        text = getattr(longrepr, "longrepr", None)  # CollectErrorRepr (pytest >= 7)
        if isinstance(text, str):
            return _message_of_text(text)
        errorstring = getattr(longrepr, "errorstring", None)  # FixtureLookupErrorRepr
        if isinstance(errorstring, str):
            line = short_message(errorstring)
            return None if line is None else short_message("FixtureLookupError: " + line)
    except Exception:
        return None
    return None


def _fallback_category(report):
    """pytest's own categories, for when no plugin answers pytest_report_teststatus."""
    if hasattr(report, "wasxfail"):
        if report.skipped:
            return "xfailed"
        if report.passed:
            return "xpassed"
    if report.when in ("setup", "teardown"):
        if report.failed:
            return "error"
        return "skipped" if report.skipped else ""
    return report.outcome


class _Recorder:
    """Hooks of the process that owns the report (registered by ``pytest_configure``)."""

    def __init__(self, config, report):
        self.config = config
        self.report = report
        self.pending = {}  # node id -> worst status so far
        self.reasons = {}  # node id -> skip reason
        self.messages = {}  # node id -> failure message of the report that set its status
        self.collected = False

    def nodeid(self, report):
        """The node id as pytest prints it: relative to the invocation directory."""
        nodeid = report.nodeid
        candidates = [nodeid]
        structured = getattr(report, "id", None)  # pytest >= 9.2: a NodeId object
        if structured is not None and hasattr(structured, "path"):
            candidates.insert(0, structured)
        for candidate in candidates:
            try:
                return str(self.config.cwd_relative_nodeid(candidate))
            except Exception:
                continue
        return nodeid

    def category(self, report):
        try:
            res = self.config.hook.pytest_report_teststatus(report=report, config=self.config)
        except Exception:
            res = None
        if res:
            return res[0]
        return _fallback_category(report)

    def flush(self, tid):
        status = self.pending.pop(tid, None)
        reason = self.reasons.pop(tid, "")
        message = self.messages.pop(tid, None)
        if status is None:
            return
        record = {"id": tid, "status": status}
        if status == SKIPPED:
            record["reason"] = reason
        elif status in (FAILED, ERROR) and message:
            record["message"] = message
        self.report.write(record)

    def relative(self, nodeid):
        try:
            return str(self.config.cwd_relative_nodeid(nodeid))
        except Exception:
            return nodeid

    def pytest_collection_finish(self, session):
        if not self.collected:
            self.collected = True
            ids = [self.relative(item.nodeid) for item in session.items]
            self.report.write({"collected": len(ids), "ids": ids})

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        # The xdist controller collects nothing itself: its workers tell it what they found.
        if not self.collected:
            self.collected = True
            ids = [self.relative(i) for i in ids]
            self.report.write({"collected": len(ids), "ids": ids})

    def pytest_collectreport(self, report):
        if report.failed:
            record = {"id": self.nodeid(report), "status": ERROR}
            message = failure_message(report)
            if message:
                record["message"] = message
            self.report.write(record)

    def pytest_runtest_logreport(self, report):
        tid = self.nodeid(report)
        status = _CATEGORY.get(self.category(report))
        if status is not None:
            old = self.pending.get(tid)
            if old is None or _RANK[status] > _RANK[old]:
                self.pending[tid] = status
                self.messages.pop(tid, None)  # the message goes with the worst report
            if (
                status in (FAILED, ERROR)
                and self.pending[tid] == status
                and tid not in self.messages
            ):
                message = failure_message(report)
                if message:
                    self.messages[tid] = message
            if status == SKIPPED and tid not in self.reasons:
                self.reasons[tid] = _skip_reason(report)
        # Teardown is the last report of a test; any other phase (xdist's "???" for a test whose
        # worker crashed) gets no teardown after it.
        if report.when not in ("setup", "call"):
            self.flush(tid)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        for tid in list(self.pending):
            self.flush(tid)
        status = getattr(session, "exitstatus", exitstatus)
        try:
            status = int(status)
        except (TypeError, ValueError):
            status = None
        self.report.write({"finished": True, "exitstatus": status})

    def pytest_unconfigure(self, config):
        self.report.close()


def pytest_configure(config):
    global _pending_report
    report, _pending_report = _pending_report, None
    if report is None:
        return
    if hasattr(config, "workerinput") or hasattr(config, "slaveinput"):  # slaveinput: xdist < 2
        report.close()  # an xdist worker: the controller writes the report
        return
    version = getattr(pytest, "__version__", None)
    manager = config.pluginmanager
    header = {"runner": "pytest", "version": version, "pid": report.pid}
    # Outcomes come in collection order, one per test, unless a plugin runs tests in several
    # processes or runs a failed test again.
    workers = getattr(config.option, "numprocesses", None)
    header["parallel"] = bool(manager.hasplugin("xdist") and workers)
    header["reruns"] = bool(manager.hasplugin("rerunfailures"))
    report.write(header)
    config.pluginmanager.register(_Recorder(config, report), "repogym_pytest_report_recorder")
