#!/usr/bin/env python3
# ruff: noqa: B905, UP006, UP007, UP031, UP032, UP035, UP045  (runs under the task's Python, maybe 3.6)
"""Verifier of a repogym equivalence task (standard library only, Python 3.6+).

The agent re-implements one function; this verifier calls the agent's function on the stored
inputs (``inputs.pkl``) and compares every outcome with the reference's (``expected.pkl``): the
return value (``==`` on plain builtins, floats within a tight tolerance, NaN equal to NaN, types
exact), the arguments after the call when the reference mutated them, or the exception's type.
``reward.txt`` is the share of inputs that match (``reward_mode = "graded"``) or 1/0
(``"resolved"``); ``reward-details.json`` has the counts and ``resolved`` (every input matches).

Trust: ``test.sh`` checks the build-time record (interpreter, standard library, start-up files)
and runs this file with that interpreter as ``-I -S``. This process (the *parent*) never imports
the agent's code and never unpickles anything but plain builtins (a restricted unpickler). The
agent's function runs in **child processes** (a fresh one per batch of inputs, a per-call
timeout, the whole process group killed afterwards) that start from this same source with
``--child`` as ``-I -S`` and, before processing ``site`` or importing anything of the
workspace, lock themselves out of the hidden files: a Landlock ruleset (unprivileged, Linux
5.13+) that leaves ``/tests``, ``/logs`` and ``/solution`` unreadable and unwritable, else a
switch to the ``nobody`` user with those folders closed to it. Either way a child cannot read
the expected outputs, write a reward, or reach the parent (non-dumpable; Landlock also scopes
signals). ``reward-details.json`` says which isolation held (``isolation``); ``none`` means
neither could be set up here.

``--expect OUT`` (used while a task is generated, in the reference's environment) runs the
function on every input once and writes the raw outcomes as JSON instead of grading.
"""

import base64
import contextlib
import hashlib
import io
import json
import math
import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import time

VERSION = "repogym equivalence verifier 1"
LOGS = os.environ.get("REPOGYM_VERIFIER_LOGS", "/logs/verifier")
RECORD = "/usr/lib/repogym/record.txt"
UNSAFE_ENV = (
    "BASH_ENV",
    "ENV",
    "PYTHONSTARTUP",
    "PYTHONINSPECT",
    "PYTHONHOME",
    "PYTHONPATH",
    "LD_PRELOAD",
    "LD_AUDIT",
    "LD_LIBRARY_PATH",
)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NOBODY = 65534
MAX_VALUE = 1 << 20
"""Bytes of one pickled value (a return value, the arguments after a call)."""
MAX_LINE = 8 << 20
MAX_NODES = 100000
MAX_DEPTH = 60
GRACE = 5.0
"""Seconds a child may take beyond the per-call timeout before it is killed."""
IMPORT_TIMEOUT = 120.0
MAX_RESTARTS = 50
MAX_TIMEOUTS = 3
"""Timeouts in a row after which the remaining inputs count as timed out without a run."""
PLAIN = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    bytearray,
    list,
    tuple,
    dict,
    set,
    frozenset,
)
# What protocol-2 pickles of plain builtins name (``__builtin__`` is how Python 3 spells
# ``builtins`` for protocols < 3; bytes come through ``_codecs.encode``), and nothing else.
SAFE_GLOBALS = frozenset(
    [
        (module, name)
        for module in ("builtins", "__builtin__")
        for name in ("set", "frozenset", "complex", "bytes", "bytearray")
    ]
    + [("_codecs", "encode")]
)


# ------------------------------------------------------------------------------- values


def is_plain(value, _budget=None, _depth=0):
    """Whether ``value`` is made only of plain builtins (no subclasses), within size limits."""
    if _budget is None:
        _budget = [MAX_NODES]
    _budget[0] -= 1
    if _budget[0] < 0 or _depth > MAX_DEPTH:
        return False
    kind = type(value)
    if kind not in PLAIN:
        return False
    if kind in (list, tuple, set, frozenset):
        return all(is_plain(v, _budget, _depth + 1) for v in value)
    if kind is dict:
        return all(
            is_plain(k, _budget, _depth + 1) and is_plain(v, _budget, _depth + 1)
            for k, v in value.items()
        )
    return True


def dumps(value):
    return pickle.dumps(value, 2)


class _Loader(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in SAFE_GLOBALS:
            raise pickle.UnpicklingError("refused global %s.%s" % (module, name))
        return pickle.Unpickler.find_class(self, module, name)


def loads(data):
    """Unpickle plain builtins only (anything naming another global is refused)."""
    if len(data) > MAX_LINE:
        raise ValueError("pickle too large")
    return _Loader(io.BytesIO(data)).load()


def same(a, b, rel_tol=1e-9, abs_tol=1e-12):
    """Deep equality of plain values: exact types, floats within the tolerance (NaN equals
    NaN, infinities by sign), containers element by element."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if math.isinf(a) or math.isinf(b):
            return a == b
        return a == b or abs(a - b) <= max(rel_tol * max(abs(a), abs(b)), abs_tol)
    if type(a) is complex:
        return same(a.real, b.real, rel_tol, abs_tol) and same(a.imag, b.imag, rel_tol, abs_tol)
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y, rel_tol, abs_tol) for x, y in zip(a, b))
    if type(a) is dict:
        if len(a) != len(b):
            return False
        for key, value in a.items():
            if key not in b or not same(value, b[key], rel_tol, abs_tol):
                return False
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def outcome_of(raw):
    """A child's JSON outcome as a comparable tuple (``("return", value, mutated args)`` or
    ``("raise", type name, None)``), or None when it is neither (timeout, crash, …)."""
    kind = raw.get("k")
    if kind == "raise":
        return ("raise", str(raw.get("t")), None)
    if kind != "return":
        return None
    value = loads(base64.b64decode(raw["v"]))
    mutated = loads(base64.b64decode(raw["m"])) if raw.get("m") else None
    return ("return", value, mutated)


def outcomes_match(expected, got, rel_tol=1e-9, abs_tol=1e-12):
    if got is None or expected[0] != got[0]:
        return False
    if expected[0] == "raise":
        return expected[1] == got[1]
    if (expected[2] is None) != (got[2] is None):
        return False
    return same(expected[1], got[1], rel_tol, abs_tol) and (
        expected[2] is None or same(expected[2], got[2], rel_tol, abs_tol)
    )


def type_name(exc):
    kind = type(exc)
    module = getattr(kind, "__module__", "builtins")
    name = getattr(kind, "__qualname__", kind.__name__)
    return name if module in ("builtins", "exceptions") else "%s.%s" % (module, name)


def short_repr(value, limit=300):
    try:
        text = repr(value)
    except Exception:
        text = "<unrepresentable>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------------------- child


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return ctypes, libc


def set_dumpable(flag):
    """prctl(PR_SET_DUMPABLE): a non-dumpable process cannot be ptraced or have its memory read
    by another process of the same user."""
    try:
        ctypes, libc = _libc()
        libc.prctl(4, int(flag), 0, 0, 0)
    except Exception:
        pass


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def landlock(hidden, writable):
    """Restrict this process (and its children) with Landlock: read and execute everywhere but
    the ``hidden`` folders (and their parents' other contents stay readable), write only under
    ``writable``. False when the kernel or libc cannot."""
    try:
        ctypes, libc = _libc()
    except Exception:
        return False
    abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return False
    handled = (1 << 13) - 1
    if abi >= 2:
        handled |= 1 << 13  # REFER
    if abi >= 3:
        handled |= 1 << 14  # TRUNCATE
    file_rights = 1 | 2 | 4 | (1 << 14 if abi >= 3 else 0)
    read_rights = 1 | 4 | 8  # EXECUTE, READ_FILE, READ_DIR

    class Attr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class Beneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]

    attr = Attr(handled, 0, 3 if abi >= 6 else 0)  # scoped: abstract sockets and signals
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return False
    hidden = [os.path.realpath(p) for p in hidden]
    writable = [os.path.realpath(p) for p in writable]

    def add(path, rights):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            import stat

            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                rights &= file_rights
            rule = Beneath(rights & handled, fd)
            libc.syscall(445, ruleset, 1, ctypes.byref(rule), ctypes.c_uint32(0))
        finally:
            os.close(fd)

    def walk(folder):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return
        for name in names:
            path = os.path.join(folder, name)
            real = os.path.realpath(path)
            if any(_inside(real, h) for h in hidden):
                continue
            if any(_inside(h, real) for h in hidden):
                if real == path:
                    walk(path)
                continue
            write = any(_inside(real, w) for w in writable)
            add(path, handled if write else read_rights)

    walk("/")
    try:
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return False
        return libc.syscall(446, ruleset, ctypes.c_uint32(0)) == 0
    finally:
        os.close(ruleset)


def drop_to_nobody():
    if os.geteuid() != 0:
        return False
    try:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    except OSError:
        return False
    return True


def _readable(path):
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as fh:
                fh.read(1)
        return True
    except OSError:
        return False


def isolate(hidden, writable, probe):
    """Lock this process out of ``hidden``; the mechanism that holds, or ``none``."""
    how = "landlock" if landlock(hidden, writable) else ""
    if not how and drop_to_nobody():
        how = "uid"
    if not how or any(os.path.exists(p) and _readable(p) for p in list(hidden) + list(probe)):
        return "none"
    return how


def _emit(channel, record):
    data = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
    while data:
        data = data[os.write(channel, data) :]


def _encode(value):
    if not is_plain(value):
        return None
    data = dumps(value)
    return base64.b64encode(data).decode("ascii") if len(data) <= MAX_VALUE else None


def call_one(fn, index, blob, timeout):
    """Run ``fn`` on one stored input; the JSON outcome (``k``: return, raise, timeout,
    unserialisable)."""
    data = base64.b64decode(blob)
    args, kwargs = loads(data)
    pristine = loads(data)
    started = time.time()
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            value = fn(*args, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Timeout:
        return {"i": index, "k": "timeout"}
    except BaseException as exc:  # the function's own exception is its outcome
        return {"i": index, "k": "raise", "t": type_name(exc), "s": time.time() - started}
    seconds = time.time() - started
    try:
        encoded = _encode(value)
        changed = not same(pristine, (args, kwargs))
        mutated = _encode((args, kwargs)) if changed else None
    except BaseException:
        return {"i": index, "k": "unserialisable", "s": seconds}
    if encoded is None or (changed and mutated is None):
        return {"i": index, "k": "unserialisable", "s": seconds, "r": short_repr(value, 120)}
    out = {"i": index, "k": "return", "v": encoded, "s": seconds, "r": short_repr(value)}
    if mutated is not None:
        out["m"] = mutated
    return out


def child_main():
    """A child: isolate, import the function from the workspace, run the batch, report one
    JSON line per input on the original stdout (the function's own output goes nowhere)."""
    channel = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    job = json.loads(sys.stdin.readline())
    os.dup2(null, 0)
    _emit(channel, {"isolation": isolate(job["hidden"], job["writable"], job["probe"])})
    # Started with -S: site-packages, .pth files and sitecustomize are processed only now,
    # inside the isolation (nothing of the workspace ran before it).
    try:
        import site

        site.main()
    except BaseException as exc:
        _emit(channel, {"import_error": ("site: %s: %s" % (type_name(exc), exc))[:300]})
        return
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", cwd)]
    sys.path.insert(0, job["root"])
    signal.signal(signal.SIGALRM, _alarm)
    try:
        import importlib

        module = importlib.import_module(job["module"])
        fn = getattr(module, job["function"])
        if not callable(fn):
            raise TypeError("%s is not callable" % job["function"])
    except BaseException as exc:
        _emit(channel, {"import_error": ("%s: %s" % (type_name(exc), exc))[:300]})
        return
    for index, blob in job["inputs"]:
        try:
            result = call_one(fn, index, blob, job["timeout"])
        except BaseException as exc:
            result = {"i": index, "k": "crash", "t": type_name(exc)}
        _emit(channel, result)
    _emit(channel, {"done": True})


# ------------------------------------------------------------------------------ parent


class Lines:
    """Lines from a pipe, each awaited with a timeout."""

    def __init__(self, fd):
        self.fd, self.buf, self.eof = fd, b"", False

    def next(self, timeout):
        """The next line (bytes), ``b""`` at end of stream, None on timeout or overflow."""
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            if self.eof:
                return b""
            if len(self.buf) > MAX_LINE:
                return None
            left = deadline - time.time()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                self.eof = True
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line


def read_record():
    """(record bytes, comment lines, [(sha, path)]) or (None, [], [])."""
    try:
        with open(RECORD, "rb") as fh:
            data = fh.read()
    except OSError:
        return None, [], []
    comments, files = [], []
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        if line.startswith("#"):
            comments.append(line[2:])
        elif "  " in line:
            digest, path = line.split("  ", 1)
            files.append((digest, path))
    return data, comments, files


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def recorded_env(comments):
    """The build's environment from the record's ``# env`` line, or None."""
    for line in comments:
        kind, _, rest = line.partition(" ")
        if kind == "env":
            return json.loads(rest)
    return None


def check_record(here, record, python, sha256_checked):
    """Why the environment is not the one recorded at build time (empty when it is): the
    record's MAC, the recorded files (unless ``test.sh`` checked them with sha256sum), the
    interpreter the children run, and new start-up files."""
    try:
        with open(os.path.join(here, "integrity.key")) as fh:
            key = fh.read().strip()
    except OSError:
        return []  # a task without a build-time record
    data, comments, files = record
    if data is None:
        return ["the integrity record (%s) is missing" % RECORD]
    try:
        with open(RECORD[: -len(".txt")] + ".mac") as fh:
            mac = fh.read().strip()
    except OSError:
        mac = ""
    if mac != hashlib.sha256(key.encode() + data + key.encode()).hexdigest():
        return ["the integrity record was changed after the build"]
    problems = []
    if not sha256_checked:
        for digest, path in files:
            try:
                if _sha256(path) != digest:
                    problems.append("changed after the build: %s" % path)
            except OSError:
                problems.append("missing since the build: %s" % path)
    if os.path.realpath(python) not in set(path for _, path in files):
        problems.append("the interpreter %s is not one recorded at build time" % python)
    if "nopreload" in comments and os.path.exists("/etc/ld.so.preload"):
        problems.append("a loader preload list (/etc/ld.so.preload) appeared after the build")
    for line in comments:
        kind, _, rest = line.partition(" ")
        if kind not in ("site", "hooks"):
            continue
        entry = json.loads(rest)
        try:
            names = os.listdir(entry["dir"])
        except OSError:
            continue
        if kind == "site":
            wanted = (".pth", ".dist-info", ".egg-info", ".egg-link")
            now = set(n for n in names if n.endswith(wanted))
        else:
            now = set(n for n in names if n in ("sitecustomize.py", "usercustomize.py"))
        for name in sorted(now - set(entry["names"])):
            problems.append("new start-up file since the build: %s/%s" % (entry["dir"], name))
    return problems[:20]


def which(name, path):
    for folder in path.split(os.pathsep):
        candidate = os.path.join(folder, name)
        if folder and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def child_environment(config, recorded, home):
    env = dict(recorded) if recorded is not None else dict(os.environ)
    for key, value in config.get("env", {}).items():
        env.setdefault(key, value)
    for key in UNSAFE_ENV:
        env.pop(key, None)
    env.setdefault("PATH", DEFAULT_PATH)
    env["HOME"] = home
    env["TMPDIR"] = home
    return env


def interpreter(config, env):
    """The project's interpreter: as generation found it, else ``python``/``python3`` on the
    recorded PATH."""
    found = config.get("python")
    if found and os.path.isfile(found):
        return found
    for name in ("python", "python3"):
        found = which(name, env.get("PATH", DEFAULT_PATH))
        if found:
            return found
    return sys.executable


class Runner:
    """Runs batches of inputs in fresh, isolated child processes."""

    def __init__(self, here, config, blobs, python, env):
        self.here, self.config, self.blobs = here, config, blobs
        self.python, self.env = python, env
        with open(os.path.abspath(__file__), "rb") as fh:
            self.source = fh.read().decode("utf-8")
        self.isolation = set()
        self.import_error = None
        self.restarts = 0
        self.timeouts_in_a_row = 0
        self.stderr_tail = None
        self.timeout = float(config.get("call_timeout", 5.0))
        workdir = config["workdir"]
        self.root = os.path.join(workdir, config.get("source_root") or "")
        self.hidden = [self.here, LOGS, "/solution"]
        self.probe = [os.path.join(self.here, n) for n in ("expected.pkl", "config.json")]

    def run_all(self, indices):
        """{index: raw outcome (JSON)} for every index (failures included)."""
        results = {}
        size = max(1, int(self.config.get("batch_size", 25)))
        pending = list(indices)
        while pending:
            batch, pending = pending[:size], pending[size:]
            while batch:
                got, status = self.run_child(batch)
                results.update(got)
                for record in got.values():
                    timed_out = record.get("k") == "timeout"
                    self.timeouts_in_a_row = self.timeouts_in_a_row + 1 if timed_out else 0
                missing = [i for i in batch if i not in got]
                if not missing:
                    break
                self.timeouts_in_a_row = self.timeouts_in_a_row + 1 if status == "timeout" else 0
                give_up = self.timeouts_in_a_row >= MAX_TIMEOUTS or self.restarts >= MAX_RESTARTS
                if status == "import error" or give_up:
                    for i in missing + pending:
                        results[i] = {"i": i, "k": status}
                    return results
                results[missing[0]] = {"i": missing[0], "k": status}
                batch = missing[1:]
                self.restarts += 1
            if self.timeouts_in_a_row >= MAX_TIMEOUTS:
                for i in pending:
                    results[i] = {"i": i, "k": "timeout"}
                return results
        return results

    def run_child(self, batch):
        """One child over ``batch``: (outcomes by index, why it stopped early)."""
        home = tempfile.mkdtemp(prefix="repogym-equiv-")
        if os.geteuid() == 0:
            with contextlib.suppress(OSError):
                os.chown(home, NOBODY, NOBODY)
        job = {
            "hidden": self.hidden,
            "writable": [home, "/tmp", "/dev"],
            "probe": self.probe,
            "root": self.root,
            "module": self.config["module"],
            "function": self.config["function"],
            "timeout": self.timeout,
            "inputs": [[i, base64.b64encode(self.blobs[i]).decode("ascii")] for i in batch],
        }
        env = dict(self.env)
        env["HOME"] = env["TMPDIR"] = home
        try:
            with tempfile.TemporaryFile() as job_file, tempfile.TemporaryFile() as err:
                job_file.write((json.dumps(job) + "\n").encode("utf-8"))
                job_file.seek(0)
                proc = subprocess.Popen(
                    [self.python, "-I", "-S", "-B", "-c", self.source, "--child"],
                    stdin=job_file,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    cwd=home,
                    env=env,
                    start_new_session=True,
                )
                try:
                    got, status = self.collect(proc, batch)
                finally:
                    with contextlib.suppress(OSError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    proc.stdout.close()
                if status not in ("ok", "import error"):
                    err.seek(0, os.SEEK_END)
                    err.seek(max(0, err.tell() - 2000))
                    tail = err.read().decode("utf-8", "replace").strip().splitlines()
                    self.stderr_tail = tail[-1][:300] if tail else ""
                return got, status
        finally:
            _rmtree(home)

    def collect(self, proc, batch):
        """Read a child's report lines: (outcomes by index, why it stopped)."""
        got = {}
        lines = Lines(proc.stdout.fileno())
        head = lines.next(IMPORT_TIMEOUT)
        record = _json(head)
        if record is None or "isolation" not in record:
            return got, "timeout" if head is None else "crash"
        self.isolation.add(str(record["isolation"]))
        wait = IMPORT_TIMEOUT
        while True:
            line = lines.next(wait)
            if line is None:
                return got, "timeout"
            record = _json(line)
            if record is None:
                return got, "crash"
            if "import_error" in record:
                self.import_error = str(record["import_error"])[:300]
                return got, "import error"
            if record.get("done"):
                return got, "ok"
            index = record.get("i")
            if index in batch and index not in got:
                got[index] = record
            wait = self.timeout + GRACE


def _json(line):
    if not line:
        return None
    try:
        value = json.loads(line.decode("utf-8"))
    except Exception:  # malformed, or nested deep enough to exhaust the recursion limit
        return None
    return value if isinstance(value, dict) else None


def _rmtree(path):
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _load_pickle(path):
    with open(path, "rb") as fh:
        return loads(fh.read())


def write_reward(reward, details):
    if not os.path.isdir(LOGS):
        os.makedirs(LOGS)
    with open(os.path.join(LOGS, "reward-details.json"), "w") as fh:
        json.dump(details, fh, indent=1, sort_keys=True)
    with open(os.path.join(LOGS, "reward.txt"), "w") as fh:
        fh.write("%r\n" % float(reward))


def grade(config, runner, expected):
    indices = list(range(len(expected)))
    results = runner.run_all(indices)
    tol = (float(config.get("rel_tol", 1e-9)), float(config.get("abs_tol", 1e-12)))
    matched, failures, examples = 0, {}, []
    for i in indices:
        raw = results.get(i) or {"k": "crash"}
        try:
            got = outcome_of(raw)
            match = outcomes_match(expected[i], got, tol[0], tol[1])
        except Exception:  # refused globals, malformed data, nesting beyond the recursion limit
            got, raw, match = None, {"k": "unreadable"}, False
        if match:
            matched += 1
            continue
        why = "mismatch" if got is not None else str(raw.get("k"))
        failures[why] = failures.get(why, 0) + 1
        if len(examples) < 5:
            examples.append({"input": i, "why": why})
    total = len(indices)
    share = matched / float(total) if total else 0.0
    resolved = total > 0 and matched == total
    mode = config.get("reward_mode", "graded")
    reward = share if mode == "graded" else (1.0 if resolved else 0.0)
    details = {
        "verifier": VERSION,
        "reward": reward,
        "reward_mode": mode,
        "graded_reward": share,
        "resolved": resolved,
        "inputs": total,
        "matched": matched,
        "failures": failures,
        "first_failures": examples,
        "isolation": sorted(runner.isolation) or ["none"],
        "restarts": runner.restarts,
        "function": "%s.%s" % (config["module"], config["function"]),
    }
    if runner.import_error:
        details["import_error"] = runner.import_error
    if runner.stderr_tail:
        details["child_stderr"] = runner.stderr_tail
    return reward, details


def parent_main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    sha256_checked = "--sha256-checked" in argv
    expect = argv[argv.index("--expect") + 1] if "--expect" in argv else None
    set_dumpable(False)
    with open(os.path.join(here, "config.json")) as fh:
        config = json.load(fh)
    with open(os.path.join(here, "inputs.pkl"), "rb") as fh:
        blobs = loads(fh.read())
    record = read_record()
    env = child_environment(config, recorded_env(record[1]), tempfile.gettempdir())
    python = interpreter(config, env)
    problems = check_record(here, record, python, sha256_checked)
    if os.geteuid() == 0:
        # Only the ``uid`` isolation needs this: the hidden files closed to ``nobody``.
        for path, mode in ((here, 0o700), (LOGS, 0o755)):
            with contextlib.suppress(OSError):
                os.chmod(path, mode)
    if problems and expect is None:
        details = {"verifier": VERSION, "tampered": True, "resolved": False, "reward": 0.0}
        details["integrity"] = problems
        write_reward(0.0, details)
        sys.stderr.write("verifier: integrity check failed, reward 0: %s\n" % problems[0])
        return 0
    runner = Runner(here, config, blobs, python, env)
    if expect is not None:
        results = runner.run_all(range(len(blobs)))
        payload = {
            "isolation": sorted(runner.isolation) or ["none"],
            "python": python,
            "integrity": problems,
            "import_error": runner.import_error,
            "stderr": runner.stderr_tail,
            "outcomes": [results.get(i, {"k": "crash"}) for i in range(len(blobs))],
        }
        with open(expect, "w") as fh:
            json.dump(payload, fh)
        return 0
    expected = _load_pickle(os.path.join(here, "expected.pkl"))
    reward, details = grade(config, runner, expected)
    write_reward(reward, details)
    sys.stdout.write(
        "equivalence: %d of %d inputs match (isolation: %s)\n"
        % (details["matched"], details["inputs"], ", ".join(details["isolation"]))
    )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child_main()
    else:
        sys.exit(parent_main(sys.argv[1:]))
