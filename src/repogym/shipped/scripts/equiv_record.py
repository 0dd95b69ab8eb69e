#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP008, UP031, UP032, UP035, UP045  (runs under the task's Python, maybe 3.6)
"""Record the arguments the repository's functions are called with while a command runs
(standard library only, Python 3.6+; repogym's ``equivalence_tests`` pipeline).

``python equiv_record.py --root ROOT --out OUT.json [--max N] -- ARGS...`` runs ``python
ARGS...`` in this process exactly as ``trace_calls.py`` does (it must sit beside this file: its
``run(args)`` and ``relative(filename, roots, cwd)`` are reused, so the same files count as
repository code), and writes::

    {"called": [[relpath, firstlineno, name], ...],
     "functions": [{"path", "line", "name", "module", "module_level", "calls",
                    "inputs": [base64 pickle of (args, kwargs), ...], "reprs": [...],
                    "rejected": {"not plain": n, "too large": n, "round trip": n}}, ...]}

For every module-level function of the repository (the module's attribute of that name is the
function, or wraps it through ``__wrapped__``) up to N distinct argument tuples are kept, as
they were when the call started: made only of plain builtins (``equiv_verifier.is_plain``),
at most 64 KiB pickled (protocol 2), and equal to themselves after a pickle round trip.
Positional-or-keyword parameters are recorded as positional arguments, keyword-only ones as
keyword arguments, ``*args`` and ``**kwargs`` spread out: calling the function with the
recorded tuple repeats the call.
"""

import base64
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import equiv_verifier as values  # noqa: E402  (beside this file)
import trace_calls  # noqa: E402

sys.path.remove(HERE)

CO_OPTIMIZED, CO_VARARGS, CO_VARKEYWORDS = 0x1, 0x4, 0x8
MAX_PICKLE = 64 << 10


class Entry:
    def __init__(self, rel, code, module, module_level):
        self.rel, self.code, self.module = rel, code, module
        self.module_level = module_level
        self.calls = 0
        self.inputs, self.reprs, self.seen = [], [], set()
        self.rejected = {}

    def reject(self, why):
        self.rejected[why] = self.rejected.get(why, 0) + 1

    def to_json(self):
        return {
            "path": self.rel,
            "line": self.code.co_firstlineno,
            "name": self.code.co_name,
            "module": self.module,
            "module_level": self.module_level,
            "calls": self.calls,
            "inputs": self.inputs,
            "reprs": self.reprs,
            "rejected": self.rejected,
        }


def module_level(namespace, code):
    """Whether the module attribute named like ``code`` is that function (maybe wrapped)."""
    obj = namespace.get(code.co_name)
    for _ in range(8):
        if obj is None:
            return False
        if getattr(obj, "__code__", None) is code:
            return True
        obj = getattr(obj, "__wrapped__", None)
    return False


def arguments(frame, code):
    """``(args, kwargs)`` that repeat the call ``frame`` started."""
    local = frame.f_locals
    names = code.co_varnames
    count = code.co_argcount
    args = [local[names[i]] for i in range(count)]
    keywords = names[count : count + code.co_kwonlyargcount]
    kwargs = dict((name, local[name]) for name in keywords)
    at = count + code.co_kwonlyargcount
    if code.co_flags & CO_VARARGS:
        args.extend(local[names[at]])
        at += 1
    if code.co_flags & CO_VARKEYWORDS:
        kwargs.update(local[names[at]])
    return tuple(args), kwargs


class ArgRecorder:
    def __init__(self, root, limit):
        self.limit = limit
        self.cwd = os.getcwd()
        self.roots = []
        for r in (os.path.abspath(root), os.path.realpath(root)):
            r = r.rstrip(os.sep) or os.sep
            if r not in self.roots:
                self.roots.append(r)
        self.entries = {}
        self.skip = set()
        self.own = set([os.path.abspath(__file__)])

    def profile(self, frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code in self.skip:
            return
        entry = self.entries.get(code)
        if entry is None:
            entry = self.classify(frame, code)
            if entry is None:
                self.skip.add(code)
                return
            self.entries[code] = entry
        entry.calls += 1
        if entry.module_level and len(entry.inputs) < self.limit:
            try:
                self.capture(entry, frame, code)
            except Exception:
                entry.reject("not plain")

    def classify(self, frame, code):
        if not code.co_flags & CO_OPTIMIZED or code.co_name.startswith("<"):
            return None
        if os.path.abspath(os.path.join(self.cwd, code.co_filename)) in self.own:
            return None
        rel = trace_calls.relative(code.co_filename, self.roots, self.cwd)
        if rel is None:
            return None
        namespace = frame.f_globals
        return Entry(rel, code, namespace.get("__name__"), module_level(namespace, code))

    def capture(self, entry, frame, code):
        call = arguments(frame, code)
        if not values.is_plain(call):
            return entry.reject("not plain")
        data = values.dumps(call)
        if len(data) > MAX_PICKLE:
            return entry.reject("too large")
        if data in entry.seen:
            return
        if not values.same(values.loads(data), call):
            return entry.reject("round trip")
        entry.seen.add(data)
        entry.inputs.append(base64.b64encode(data).decode("ascii"))
        entry.reprs.append(values.short_repr(call, 200))

    def start(self):
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)

    def stop(self):
        sys.setprofile(None)
        threading.setprofile(None)

    def report(self):
        entries = sorted(self.entries.values(), key=lambda e: (e.rel, e.code.co_firstlineno))
        called = sorted(set((e.rel, e.code.co_firstlineno, e.code.co_name) for e in entries))
        return {
            "called": [list(c) for c in called],
            "functions": [e.to_json() for e in entries if e.module_level],
        }


def write(out_path, payload):
    import json

    folder = os.path.dirname(os.path.abspath(out_path))
    if not os.path.isdir(folder):
        os.makedirs(folder)
    tmp = out_path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(payload, fh)
    os.replace(tmp, out_path)


def parse(argv):
    """(root, out, limit, command) from ``--root ROOT --out OUT [--max N] -- ARGS...``."""
    options, command = {"--max": "40"}, []
    i = 0
    while i < len(argv):
        if argv[i] == "--":
            command = argv[i + 1 :]
            break
        if argv[i] in ("--root", "--out", "--max") and i + 1 < len(argv):
            options[argv[i]] = argv[i + 1]
            i += 2
            continue
        sys.stderr.write("equiv_record.py: unexpected argument %r\n" % argv[i])
        sys.exit(2)
    if "--root" not in options or "--out" not in options or not command:
        sys.stderr.write("usage: equiv_record.py --root ROOT --out OUT [--max N] -- ARGS...\n")
        sys.exit(2)
    return options["--root"], options["--out"], int(options["--max"]), command


def main():
    root, out, limit, args = parse(sys.argv[1:])
    recorder = ArgRecorder(root, limit)
    recorder.start()
    try:
        trace_calls.run(args)
    finally:
        recorder.stop()
        try:
            write(out, recorder.report())
        except Exception as exc:  # never change the command's outcome
            sys.stderr.write("equiv_record.py: cannot write %s: %s\n" % (out, exc))


if __name__ == "__main__":
    main()
