#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045, UP031, UP032  (runs under the task's Python, 3.6+)
"""``python -m unittest`` that also writes each test's outcome to a report (JSON lines).

``python repogym_unittest.py [ARGS]`` takes the arguments of ``python -m unittest`` (test names,
``discover -s S -t T -p P``, ``-v``, ``-f``, ``-k`` ...) and runs ``unittest.__main__`` as
``python -m unittest`` does: same ``sys.path[0]`` (the current directory), same ``__main__``
module, same output on stdout and stderr and the same exit code (only the traceback of an
exception that escapes unittest, such as ``discover -s`` of a missing folder, shows this
script's frames).  Standard library only, Python 3.6 to 3.13.  The report's path comes from
the environment variable ``REPOGYM_REPORT``; without it nothing else happens.

The variable is removed from ``os.environ`` first thing and the file is opened at once, in
append mode and unbuffered, so every record is a single ``write`` and a crash leaves whatever
was written.  One JSON object per line, UTF-8 (in fact ASCII: ``ensure_ascii``):

* ``{"runner": "unittest", "version": "<Python version>", "pid": N}`` first;
* ``{"collected": N}`` before the run: ``suite.countTestCases()``;
* ``{"id": "<test id>", "status": "PASSED|FAILED|SKIPPED|ERROR"}`` once per test when it stops
  (at once for class and module fixtures), with ``"reason"`` for SKIPPED and ``"message"`` for
  FAILED/ERROR when the outcome came with an exception (see below);
* ``{"finished": true, "exitstatus": N}`` last, when unittest exits (also on a usage error).

Ids and statuses are those ``parsers.py`` reads from ``-v`` output: ``pkg.module.Class.test``;
a failing ``setUpClass``/``tearDownClass`` gives the class id, ``setUpModule`` the module id,
a module that fails to import its name, all with ERROR; failing subtests mark their parent
test (FAILED, or ERROR for an exception); expected failure -> PASSED, unexpected success ->
FAILED; several results for one test merge to the worst (FAILED > ERROR > PASSED > SKIPPED).
Only the top-level run records: suites that the tests run themselves do not.

``message`` is the short failure message of the result that gave the test its status: the
exception's type (module-qualified unless built in, as tracebacks print it) and the first line
of ``str(exc)``, e.g. ``AssertionError: 'a' != 'b'`` or ``KeyError: 'x'``; for a module that
fails to import, the exception line of the import traceback unittest wraps
(``ModuleNotFoundError: No module named 'x'``).  ANSI escapes and control characters are
removed and it is cut to 300 characters.  Tracebacks (which quote test source) are not kept.

What it does NOT prevent: the code under test runs in the same process, so it can find the open
file (``/proc/self/fd``, the garbage collector, this module), write records of its own, close
the file or monkeypatch unittest.  The report only makes forgery harder than printing fake
``ok`` lines, and the ``finished`` record lets the reader tell a run that ended from one that
was killed or called ``os._exit`` before the end (records written before that are kept).  A
forked child never writes (the pid must match).
"""

import os
import platform  # noqa: E402
import re  # noqa: E402
import runpy  # noqa: E402
import sys  # noqa: E402
import unittest  # noqa: E402
import unittest.case  # noqa: E402
import unittest.main  # noqa: E402

from repogym_report_file import from_environment, short_message  # noqa: E402  (beside it)

_PENDING = from_environment("repogym_unittest")

PASSED = "PASSED"
FAILED = "FAILED"
SKIPPED = "SKIPPED"
ERROR = "ERROR"
_RANK = {SKIPPED: 0, PASSED: 1, ERROR: 2, FAILED: 3}
# str(test) as unittest prints it: "test_x (pkg.mod.Class)" (3.11+: "(pkg.mod.Class.test_x)")
_DESCRIPTION = re.compile(r"^([^\s()]+) \(([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\)$")
_FIXTURES = ("setUpClass", "tearDownClass", "setUpModule", "tearDownModule")
_FAILED_IMPORT = ("unittest.loader._FailedTest", "unittest.loader.ModuleImportFailure")
_TRACEBACK = "Traceback (most recent call last):"


_report = None  # the ReportFile of this run, set by main()


def test_id(test):
    """The id ``parsers.py`` gives the line unittest prints for ``test``."""
    try:
        text = str(test)
    except Exception:
        text = ""
    m = _DESCRIPTION.match(text)
    if m:
        name, cls = m.group(1), m.group(2)
        if cls.startswith(_FAILED_IMPORT):
            return name
        if name in _FIXTURES or cls.endswith("." + name):
            return cls
        return cls + "." + name
    try:
        return str(test.id())
    except Exception:
        return text or repr(test)


def _type_name(etype):
    name = getattr(etype, "__qualname__", None) or getattr(etype, "__name__", None)
    if not isinstance(name, str):
        return "Exception"
    module = getattr(etype, "__module__", None)
    if isinstance(module, str) and module not in ("builtins", "__main__"):
        name = module + "." + name
    return name


def _wrapped_exception(text):
    """The exception line of the last traceback in ``text`` (what the loader's import
    failures carry), or None."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.rstrip() == _TRACEBACK]
    if not starts:
        return None
    for line in lines[starts[-1] + 1 :]:
        if line.strip() and not line[:1].isspace():
            return line  # frames and source lines are indented; the exception line is not
    return None


def failure_message(test, err):
    """The short failure message of ``err`` (an exc_info tuple), or None."""
    try:
        etype, value = err[0], err[1]
        if etype is None:
            return None
        try:
            text = str(value)
        except Exception:
            text = "<unprintable %s object>" % _type_name(etype)
        if type(test).__name__ in ("_FailedTest", "ModuleImportFailure"):
            wrapped = _wrapped_exception(text)
            if wrapped is not None:
                return short_message(wrapped)
        first = short_message(text)
        name = _type_name(etype)
        return short_message(name + ": " + first if first else name)
    except Exception:
        return None


class _Result(unittest.TextTestResult):
    """TextTestResult that also records each test's worst outcome."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._running = {}  # id -> number of started, not yet stopped, tests with that id
        self._pending = {}  # id -> worst status so far
        self._reasons = {}  # id -> skip reason
        self._messages = {}  # id -> failure message of the result that set its status

    def _note(self, test, status, reason=None, err=None):
        tid = test_id(test)
        old = self._pending.get(tid)
        if old is None or _RANK[status] > _RANK[old]:
            self._pending[tid] = status
            self._messages.pop(tid, None)  # the message goes with the worst result
        if err is not None and self._pending[tid] == status and tid not in self._messages:
            message = failure_message(test, err)
            if message:
                self._messages[tid] = message
        if reason is not None and tid not in self._reasons:
            self._reasons[tid] = reason
        if tid not in self._running:
            self._flush(tid)  # class/module fixtures: no startTest/stopTest around them

    def _flush(self, tid):
        status = self._pending.pop(tid, None)
        reason = self._reasons.pop(tid, "")
        message = self._messages.pop(tid, None)
        if status is None or _report is None:
            return
        record = {"id": tid, "status": status}
        if status == SKIPPED:
            record["reason"] = reason
        elif status in (FAILED, ERROR) and message:
            record["message"] = message
        _report.write(record)

    def flush_all(self):
        for tid in list(self._pending):
            self._flush(tid)

    def startTest(self, test):
        tid = test_id(test)
        self._running[tid] = self._running.get(tid, 0) + 1
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        tid = test_id(test)
        count = self._running.pop(tid, 1) - 1
        if count > 0:
            self._running[tid] = count
        self._flush(tid)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._note(test, PASSED)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._note(test, FAILED, err=err)

    def addError(self, test, err):
        super().addError(test, err)
        self._note(test, ERROR, err=err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        if not isinstance(test, unittest.case._SubTest):  # a skipped subtest: the parent decides
            self._note(test, SKIPPED, str(reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._note(test, PASSED)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._note(test, FAILED)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failure = err[0] is not None and issubclass(err[0], test.failureException)
            self._note(test, FAILED if failure else ERROR, err=err)


class _Runner(unittest.TextTestRunner):
    """TextTestRunner of the top-level run: writes ``collected`` and uses ``_Result``."""

    resultclass = _Result

    def run(self, test):
        if _report is not None:
            ids = list(_ids_of(test))
            _report.write({"collected": len(ids), "ids": ids})
        result = super().run(test)
        if isinstance(result, _Result):
            result.flush_all()
        return result


def _ids_of(suite):
    """The ids of every test of ``suite``, in the order the run will take them."""
    try:
        members = iter(suite)
    except TypeError:
        yield test_id(suite)
        return
    for member in members:
        if isinstance(member, unittest.TestSuite):
            yield from _ids_of(member)
        else:
            yield test_id(member)


def _exit_code(code):
    """The process exit status ``sys.exit(code)`` gives."""
    if code is None:
        return 0
    if isinstance(code, int):  # bool too: sys.exit(not ok)
        return int(code)
    return 1  # a message: printed to stderr, status 1


def main():
    global _PENDING, _report
    _report, _PENDING = _PENDING, None
    if _report is not None:
        _report.write(
            {"runner": "unittest", "version": platform.python_version(), "pid": _report.pid}
        )
    # What "python -m" puts first on sys.path: the current directory ("" before 3.7), not the
    # folder of this script; nothing with -P / PYTHONSAFEPATH (3.11+).
    if not getattr(sys.flags, "safe_path", False) and sys.path:
        sys.path[0] = os.getcwd() if sys.version_info >= (3, 7) else ""
    # unittest/__main__.py calls unittest.main.main(module=None): give that one call our runner
    # and put the original back at once, so that runs started by the tests are not recorded.
    program_module = sys.modules["unittest.main"]
    original = program_module.main

    def program(*args, **kwargs):
        program_module.main = original
        if kwargs.get("testRunner") is None:
            kwargs["testRunner"] = _Runner
        return original(*args, **kwargs)

    program_module.main = program
    try:
        runpy.run_module("unittest", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if _report is not None:
            _report.write({"finished": True, "exitstatus": _exit_code(exc.code)})
            _report.close()
        raise
    finally:
        program_module.main = original
    # unittest always exits; should it ever return, the run still ended normally.
    if _report is not None:
        _report.write({"finished": True, "exitstatus": 0})
        _report.close()


if __name__ == "__main__":
    main()
