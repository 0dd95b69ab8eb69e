#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP031, UP032, UP035, UP045  (runs under the task's Python, maybe 3.6)
"""Record which functions of a repository a Python command calls (standard library, 3.6+).

``python trace_calls.py --root ROOT --out OUT.json -- ARGS...`` runs ``python ARGS...`` in this
process (``-m module ...``, ``-c code ...`` or ``script.py ...``; no other interpreter options)
with the same ``sys.argv``, ``sys.path[0]``, output and exit status, and writes::

    {"called": [[relpath, firstlineno, name], ...]}

one entry per function (or method) of a ``.py`` file under ROOT that ran at least once:
``relpath`` is ``/``-separated and relative to ROOT, ``firstlineno`` is ``co_firstlineno``
(the first decorator's line for a decorated function, else the ``def`` line) and ``name`` is
``co_name``. Lambdas, comprehensions, module and class bodies are left out, and so are test
files and dependencies: a path with a folder named ``test``, ``tests``, ``testing``, ... (the
Python part of repogym's test-infrastructure rule), a file named ``test_*.py``, ``*_test.py``,
``tests.py`` or ``conftest.py``, and virtualenvs, ``site-packages`` and VCS folders.

The file is written (atomically) when the command ends, also when it fails or calls
``sys.exit``; a process killed or ending with ``os._exit`` writes nothing, and subprocesses
(``pytest -n``, ``multiprocessing``) are not traced.

How (``--mode``, default ``auto``: the fastest this Python has): on Python 3.12+
``sys.monitoring`` (``PY_START`` events, disabled for each function once seen: about one
callback per function, no measurable overhead); before that the C profiler behind ``cProfile``
(``_lsprof``, Python functions only) installed with ``sys.setprofile`` and, through
``threading.setprofile``, in every thread started later (test suites run about 2x slower);
``--mode profile`` is a plain Python ``sys.setprofile`` function recording ``call`` events
(about 4x slower). Paths are resolved at the end. Before 3.12 a test that installs a profiler
of its own (``cProfile``) stops the recording in its thread from then on.
"""

import json
import os
import re
import runpy
import sys
import threading

CO_OPTIMIZED = 0x1  # functions (also lambdas and comprehensions), not module or class bodies
TEST_DIRS = frozenset(
    ("test", "tests", "__tests__", "spec", "testing", "testdata", "__snapshots__", "__mocks__")
)
TEST_FILE_RE = re.compile(r"^(?:test_.+\.py|.+_test\.py|conftest\.py|tests\.py)$")
SKIP_DIRS = frozenset(
    (
        "node_modules",
        "__pycache__",
        "venv",
        "site-packages",
        "dist-packages",
        "__pypackages__",
    )
)
MODES = ("auto", "monitoring", "lsprof", "profile")  # fastest first
MONITORING_TOOLS = (4, 3)  # ids left free by the debugger, coverage, profiler and optimizer


class Recorder:
    """The code objects that started running while it was on.

    ``mode``, fastest first: ``monitoring`` (3.12+), ``lsprof`` (the C profiler behind
    ``cProfile``, Python functions only, one per thread), ``profile`` (a Python
    ``sys.setprofile`` function); the one asked for or the next this Python has (``auto``:
    the fastest)."""

    def __init__(self, mode="auto"):
        self.mode = mode
        self.codes = set()
        self.tool = None
        self.profilers = []

    def start(self):
        monitoring = getattr(sys, "monitoring", None)
        wanted = MODES[MODES.index(self.mode) :]  # that mode or a slower one
        if "monitoring" in wanted and monitoring is not None and self._start_monitoring(monitoring):
            return
        if "lsprof" in wanted and monitoring is None:  # 3.12+ lsprof is one tool per process
            try:
                import _lsprof
            except ImportError:
                _lsprof = None
            if _lsprof is not None:
                self._start_lsprof(_lsprof)
                return
        self._start_profile()

    def _start_monitoring(self, monitoring):
        add = self.codes.add
        for tool in MONITORING_TOOLS:
            if monitoring.get_tool(tool) is None:

                def on_start(code, offset, disable=monitoring.DISABLE):
                    add(code)
                    return disable

                monitoring.use_tool_id(tool, "repogym-trace")
                monitoring.register_callback(tool, monitoring.events.PY_START, on_start)
                monitoring.set_events(tool, monitoring.events.PY_START)
                self.tool = tool
                self.mode = "monitoring"
                return True
        return False

    def _start_lsprof(self, lsprof):
        profilers = self.profilers

        def new_profiler():
            profiler = lsprof.Profiler(subcalls=False, builtins=False)
            profilers.append(profiler)
            profiler.enable()

        def thread_started(frame, event, arg):
            try:
                new_profiler()  # replaces this function as the thread's profiler
            except Exception:
                sys.setprofile(None)  # never disturb the thread

        self.mode = "lsprof"
        threading.setprofile(thread_started)
        new_profiler()

    def _start_profile(self):
        add = self.codes.add

        def profile(frame, event, arg):
            if event == "call":
                add(frame.f_code)

        self.mode = "profile"
        threading.setprofile(profile)
        sys.setprofile(profile)

    def stop(self):
        if self.mode == "monitoring":
            monitoring = sys.monitoring
            monitoring.set_events(self.tool, 0)
            monitoring.register_callback(self.tool, monitoring.events.PY_START, None)
            monitoring.free_tool_id(self.tool)
            return
        threading.setprofile(None)
        if self.profilers:
            self.profilers[0].disable()  # this thread's
        sys.setprofile(None)
        for profiler in list(self.profilers):
            for _ in range(3):  # a thread still running may change the stats under us
                try:
                    entries = profiler.getstats()
                    break
                except RuntimeError:
                    entries = []
            for entry in entries:
                if not isinstance(entry.code, str):
                    self.codes.add(entry.code)


def relative(filename, roots, cwd):
    """``filename``'s ``/``-separated path under one of ``roots`` when it is repository code
    (not a test, not a dependency), else None."""
    if not filename.endswith(".py"):
        return None
    path = os.path.join(cwd, filename)
    for candidate in (os.path.abspath(path), os.path.realpath(path)):
        for root in roots:
            if candidate.startswith(root + os.sep):
                rel = candidate[len(root) + 1 :].replace(os.sep, "/")
                return None if excluded(rel) else rel
    return None


def excluded(rel):
    parts = rel.split("/")
    for part in parts[:-1]:
        low = part.lower()
        if low in TEST_DIRS or low.endswith((".test", ".tests")):
            return True
        if part in SKIP_DIRS or part.startswith("."):
            return True
    return bool(TEST_FILE_RE.match(parts[-1]))


def called(codes, root, cwd):
    """The sorted ``(relpath, firstlineno, name)`` of the repository functions in ``codes``."""
    roots = []
    for r in (os.path.abspath(root), os.path.realpath(root)):
        r = r.rstrip(os.sep) or os.sep
        if r not in roots:
            roots.append(r)
    paths = {os.path.abspath(__file__): None}  # this script, wherever it was put
    out = set()
    for code in list(codes):
        name = code.co_name
        if not code.co_flags & CO_OPTIMIZED or name.startswith("<"):
            continue
        filename = code.co_filename
        if filename not in paths and os.path.abspath(os.path.join(cwd, filename)) in paths:
            paths[filename] = None
        if filename not in paths:
            paths[filename] = relative(filename, roots, cwd)
        rel = paths[filename]
        if rel is not None:
            out.add((rel, code.co_firstlineno, name))
    return sorted(out)


def write(out_path, entries):
    folder = os.path.dirname(os.path.abspath(out_path))
    if not os.path.isdir(folder):
        os.makedirs(folder)
    tmp = out_path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"called": [list(e) for e in entries]}, fh)
    os.replace(tmp, out_path)


def usage(message):
    sys.stderr.write(
        "trace_calls.py: %s\nusage: trace_calls.py --root ROOT --out OUT.json [--mode MODE] -- "
        "(-m MODULE | -c CODE | SCRIPT) [ARGS...]\n" % message
    )
    sys.exit(2)


def parse(argv):
    root = out = None
    mode = "auto"
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest = argv[i + 1 :]
            break
        if arg in ("--root", "--out", "--mode") and i + 1 < len(argv):
            if arg == "--root":
                root = argv[i + 1]
            elif arg == "--out":
                out = argv[i + 1]
            elif argv[i + 1] in MODES:
                mode = argv[i + 1]
            else:
                usage("--mode is one of %s" % ", ".join(MODES))
            i += 2
            continue
        usage("unexpected argument %r" % arg)
    else:
        rest = []
    if root is None or out is None:
        usage("--root and --out are required")
    if not rest or (rest[0] in ("-m", "-c") and len(rest) < 2):
        usage("nothing to run after --")
    return root, out, mode, rest


def run(args):
    """Run ``python ARGS`` in this process, as the interpreter would."""
    if args[0] == "-m":
        sys.argv = [args[1]] + list(args[2:])
        sys.path[0] = os.getcwd()
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c":
        sys.argv = ["-c"] + list(args[2:])
        sys.path[0] = ""
        main = type(sys)("__main__")
        saved = sys.modules["__main__"]
        sys.modules["__main__"] = main
        try:
            exec(compile(args[1], "<string>", "exec"), main.__dict__)
        finally:
            sys.modules["__main__"] = saved
    else:
        sys.argv = list(args)
        sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
        runpy.run_path(args[0], run_name="__main__")


def main():
    root, out, mode, args = parse(sys.argv[1:])
    cwd = os.getcwd()
    recorder = Recorder(mode)
    recorder.start()
    try:
        run(args)
    finally:
        recorder.stop()
        try:
            write(out, called(recorder.codes, root, cwd))
        except Exception as exc:  # never change the command's outcome
            sys.stderr.write("trace_calls.py: cannot write %s: %s\n" % (out, exc))


if __name__ == "__main__":
    main()
