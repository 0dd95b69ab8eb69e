#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045, UP031, UP032  (runs under the task's Python, 3.6+)
"""The report file repogym's pytest plugin and unittest stand-in write (standard library only).

One JSON object a line, each line a single unbuffered write, so a crash leaves whatever was
written; only the process that opened the file writes (a forked child stays silent). The format
and its reader are described in ``repogym/shipped/reports.py``.
"""

import contextlib
import json
import os
import re
import sys

MAX_MESSAGE = 300
"""Characters of a failure message kept in a record."""
# ANSI escapes (CSI, OSC, two-character) and control characters (C0 but tab, DEL, C1).
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])?")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def short_message(text):
    """The first non-blank line of ``text`` without escapes or control characters, cut to
    MAX_MESSAGE characters (None when nothing is left)."""
    if not isinstance(text, str):
        return None
    for line in _ESCAPE.sub("", text[: 64 * MAX_MESSAGE]).splitlines():
        line = _CONTROL.sub("", line.replace("\t", " ")).strip()
        if line:
            if len(line) > MAX_MESSAGE:
                line = line[: MAX_MESSAGE - 3] + "..."
            return line
    return None


CHANNEL_ENV = "REPOGYM_CHANNEL_FD"
"""The judge's channel: the number of an inherited descriptor (a pipe the judge reads)."""
PATH_ENV = "REPOGYM_REPORT"
"""A report file's path (older verifiers, and runs without a judge)."""


def from_environment(who):
    """The report this process writes: the judge's channel when there is one (the variable
    is removed from the environment), else the file ``REPOGYM_REPORT`` names, else None."""
    fd = os.environ.pop(CHANNEL_ENV, None)
    path = os.environ.pop(PATH_ENV, None)
    if fd and fd.isdigit():
        return ReportFile(None, who, fd=int(fd))
    return ReportFile(path, who) if path else None


class ReportFile:
    """An append-only report file, or the judge's channel (``fd``); ``who`` names the writer
    in error messages."""

    def __init__(self, path, who, fd=None):
        self.pid = os.getpid()
        self.who = who
        self.fh = None
        try:
            if fd is not None:
                # "wb", not "ab": a pipe cannot seek (Python 3.6 refuses "ab" on one), and
                # opening a descriptor truncates nothing.
                self.fh = open(fd, "wb", 0, closefd=False)  # noqa: SIM115  (the channel)
            else:
                self.fh = open(path, "ab", 0)  # noqa: SIM115  (open for the whole run)
        except (OSError, ValueError) as exc:
            sys.stderr.write("%s: cannot open the report: %s\n" % (who, exc))

    def write(self, record):
        if self.fh is None or os.getpid() != self.pid:
            return
        data = memoryview((json.dumps(record, ensure_ascii=True) + "\n").encode("ascii"))
        try:
            while len(data):
                written = self.fh.write(data)
                if not written:
                    raise OSError("short write")
                data = data[written:]
        except (OSError, ValueError) as exc:
            # Stop writing: the missing "finished" record tells the reader the report is short.
            sys.stderr.write("%s: cannot write the report: %s\n" % (self.who, exc))
            self.close()

    def close(self):
        fh, self.fh = self.fh, None
        if fh is not None and os.getpid() == self.pid:
            with contextlib.suppress(OSError, ValueError):
                fh.close()
