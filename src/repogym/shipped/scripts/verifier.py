#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP031, UP032, UP035, UP045  (runs under the task's Python, maybe 3.6)
"""Verifier of a repogym runtime task (standard library only, Python 3.6+; run as ``-I -S``).

1. **Integrity** (``/usr/lib/repogym/record.txt``, written by the Dockerfile's last step): its
   MAC must match the key in ``/tests``, every recorded interpreter / standard-library /
   test-runner / plugin file must still have its recorded sha256, and no new ``.pth``,
   ``*.dist-info`` or ``sitecustomize`` may have appeared. Any mismatch: reward 0, reason given.
2. **Test infrastructure** is reset: hidden copies (``files/``) are written over the working
   tree, test-infrastructure files added by the agent (``infra.is_infra``) and every
   ``__pycache__`` are removed, and a changed infrastructure file that has no hidden copy is a
   tamper.
3. **Tamper scan** (``tamper.py``) of every changed non-test source file: constructs that reach
   into the test runner (monkeypatching pytest/unittest, ``sys.modules`` writes, ``os._exit``,
   fake result lines, the verifier's paths) that the base and the gold patch do not have. A
   compiled module (``.so``, ``.pyc`` outside ``__pycache__``, …) added or changed cannot be
   scanned and counts as a tamper too.
4. **Run** the tests with the environment recorded at build time (not the caller's), plugin
   autoloading off and the recorded pytest plugins loaded explicitly, and our report plugin /
   unittest wrapper writing results to a file; other runners' logs are parsed.
5. **Grade**: ``reward_mode`` ``resolved`` (1 only when every F2P and P2P test passes) or
   ``graded`` (f2p_rate × p2p_rate). A log no parser understands writes no reward.

``--results FILE`` (used while a task is generated) runs steps 1–4 and writes the raw results
as JSON instead of grading: ``tests`` ({id: status}), ``skips`` ({id: reason}), ``failures``
({id: short failure message} for FAILED/ERROR ids whose runner stated one, e.g. ``TypeError:
f() got an unexpected keyword argument 'tz'``; one line, at most 300 characters, never test
source), ``parse_status``, ``source``, ``collected``, ``finished``, the tamper findings, ….
"""

import binascii
import contextlib
import hashlib
import json
import os
import random
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOGS = os.environ.get("REPOGYM_VERIFIER_LOGS", "/logs/verifier")
RECORD = "/usr/lib/repogym/record.txt"
REPORT_RUNNERS = ("pytest", "unittest")
# JavaScript runners whose main process writes a JSON report to a file of ours (when the task's
# config says the runner's version can: ``json_report``).
JSON_REPORT_RUNNERS = ("jest", "mocha")
NODE_RUNNERS = ("vitest", "node")
UNSAFE_ENV = (
    "BASH_ENV",
    "ENV",
    "PYTHONSTARTUP",
    "PYTHONINSPECT",
    "PYTHONHOME",
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "LD_PRELOAD",
    "LD_AUDIT",
    "NODE_OPTIONS",
    "PERL5OPT",
    "RUBYOPT",
    "JAVA_TOOL_OPTIONS",
)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_SCANNED = 16 << 20
"""A changed source file larger than this is not scanned: it is a tamper (no fix needs it)."""
TEST_UID = 61000
"""The first user (and group) number tried for the tests' own user."""
CHANNEL_ENV = "REPOGYM_CHANNEL_FD"
BOOT_ENV = "REPOGYM_BOOT"
PROOF_ENV = "REPOGYM_BOOT_PROOF_FD"
CHANNEL_LOW = 300
"""The channel's descriptor is moved to the first free number from here."""
MAX_RECORD = 4 << 20
RUNNER_DIR = os.path.join(HERE, "runner")
"""The runner's files the tests read; a copy of the judge's (``prepare_runner``)."""
WATCHED = [
    "_pytest.runner",
    "_pytest.reports:TestReport",
    "_pytest.reports:BaseReport",
    "_pytest.main:Session",
    "_pytest.python:Function",
    "_pytest.nodes:Item",
    "_pytest.outcomes",
    "_pytest.terminal:TerminalReporter",
    "pluggy._hooks:HookCaller",
    "pluggy._callers",
    "repogym_pytest_report",
    "repogym_pytest_report:_Recorder",
    "repogym_report_file:ReportFile",
    "repogym_unittest",
    "repogym_unittest:_Result",
    "unittest.case:TestCase",
    "unittest.result:TestResult",
    "unittest.runner:TextTestResult",
]
"""Objects of the runner whose attributes must be the same at the end of the run."""


def load_siblings(*names):
    """The modules ``names`` shipped beside this file (copies of repogym's modules), each run
    from its file here. Every module named like a file of this folder is dropped from
    ``sys.modules`` first, so that neither these nor the siblings they import by name (each
    puts this folder first on ``sys.path``) can be one that code run before the judge left
    there. (Run as ``-I -S``, no such code runs; this holds however the judge is started.)"""
    from importlib.util import module_from_spec, spec_from_file_location

    own = os.path.basename(__file__)
    for entry in os.listdir(HERE):
        if entry.endswith(".py") and entry != own:
            sys.modules.pop(entry[:-3], None)
    loaded = []
    for name in names:
        spec = spec_from_file_location(name, os.path.join(HERE, name + ".py"))
        module = sys.modules[name] = module_from_spec(spec)
        spec.loader.exec_module(module)
        loaded.append(module)
    return loaded


infra, parsers, reports, tamper, rust_tests = load_siblings(
    "infra", "parsers", "reports", "tamper", "rust_tests"
)


def load(name, default=None):
    path = os.path.join(HERE, name)
    if default is not None and not os.path.exists(path):
        return default
    with open(path) as fh:
        return json.load(fh)


def write(name, payload):
    with open(os.path.join(LOGS, name), "w") as fh:
        fh.write(payload)


# ----------------------------------------------------------------------------- integrity


def read_record():
    """(record bytes, comment lines, [(sha, path)]) or (None, [], []) when absent."""
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


def _loaded_already():
    """Paths this interpreter has used before any check could run: itself, libpython and its
    standard library. Re-hashing them here proves nothing (altered code would already be
    running), so when test.sh has checked every recorded file with sha256sum they are skipped."""
    import sysconfig

    prefixes = []
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            prefixes.append(os.path.realpath(path) + os.sep)
    exact = set([os.path.realpath(sys.executable)])
    libdir, lib = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
    if libdir and lib:
        exact.add(os.path.realpath(os.path.join(libdir, lib)))
    return prefixes, exact


def check_integrity(config, sha256_checked=False):
    """Reasons the environment is not the one recorded at build time (empty when it is), and
    the environment recorded then (None when unavailable)."""
    try:
        with open(os.path.join(HERE, "integrity.key")) as fh:
            key = fh.read().strip()
    except OSError:
        return [], None  # a task made before integrity records
    data, comments, files = read_record()
    if data is None:
        return ["the integrity record (%s) is missing" % RECORD], None
    try:
        with open(RECORD[: -len(".txt")] + ".mac") as fh:
            mac = fh.read().strip()
    except OSError:
        mac = ""
    want = hashlib.sha256(key.encode() + data + key.encode()).hexdigest()
    if mac != want:
        return ["the integrity record was changed after the build"], None
    problems = []
    prefixes, exact = _loaded_already() if sha256_checked else ([], set())
    for digest, path in files:
        if path in exact or any(path.startswith(p) for p in prefixes):
            continue
        try:
            if infra.sha256_file(path) != digest:
                problems.append("changed after the build: %s" % path)
        except OSError:
            problems.append("missing since the build: %s" % path)
    env = None
    if "nopreload" in comments and os.path.exists("/etc/ld.so.preload"):
        problems.append("a loader preload list (/etc/ld.so.preload) appeared after the build")
    for line in comments:
        kind, _, rest = line.partition(" ")
        if kind == "env":
            env = json.loads(rest)
        elif kind in ("site", "hooks"):
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
    return problems[:20], env


# ------------------------------------------------------------------- test infrastructure


def _remove(path):
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def splice_tests(dest, hidden_path):
    """Put the hidden inline test items (``hidden_path``) into the file the agent left at
    ``dest`` in place of its own (:func:`rust_tests.splice`). A file that is not a plain file
    counts as empty; one the scanner cannot read is a problem (returned), never appended to:
    an unclosed string or comment could swallow the hidden tests. Returns ``(problem, line)``:
    the number of lines before the hidden items in the file written (where canaries planted
    by the hidden copy's line numbers go)."""
    with open(hidden_path, "rb") as fh:
        hidden = fh.read().decode("utf-8")
    current = ""
    if os.path.isfile(dest) and not os.path.islink(dest):
        with open(dest, "rb") as fh:
            data = fh.read()
        try:
            current = data.decode("utf-8")
        except UnicodeDecodeError:
            return "a file holding hidden tests is not UTF-8: %s" % os.path.basename(dest), 0
    try:
        text, start = rust_tests.splice_at(current, hidden)
    except rust_tests.RustSyntaxError as exc:
        return "a file holding hidden tests cannot be read as Rust (%s)" % exc, 0
    if os.path.lexists(dest):
        _remove(dest)
    with open(dest, "wb") as fh:
        fh.write(text.encode("utf-8"))
    return None, text.count("\n", 0, start)


def restore(config):
    """Write the hidden copies over the working tree (splice the hidden inline test items
    into the files listed under ``splice``); remove paths the task deletes. Returns the
    problems met (each one a tamper)."""
    workdir = config["workdir"]
    files_dir = os.path.join(HERE, "files")
    splice = set(config.get("splice", []))
    problems = []
    for rel in config.get("restore", []):
        dest = os.path.join(workdir, rel)
        # Any symlink on the way could redirect the write: replace it by a real folder.
        parts = rel.split("/")
        for i in range(1, len(parts)):
            folder = os.path.join(workdir, *parts[:i])
            if os.path.islink(folder) or (os.path.exists(folder) and not os.path.isdir(folder)):
                os.unlink(folder)
        if os.path.islink(dest) or (os.path.exists(dest) and not os.path.isfile(dest)):
            _remove(dest)
        parent = os.path.dirname(dest)
        if not os.path.isdir(parent):
            os.makedirs(parent)
        if rel in splice:
            problem, line = splice_tests(dest, os.path.join(files_dir, rel))
            if problem:
                problems.append(problem)
            config.setdefault("spliced_at", {})[rel] = line
            continue
        shutil.copyfile(os.path.join(files_dir, rel), dest)
    for rel in config.get("delete", []):
        _remove(os.path.join(workdir, rel))
    return problems


def reset_infrastructure(config):
    """Restore hidden copies, remove infrastructure the agent added; return (removed, tamper)."""
    problems = restore(config)
    workdir = config["workdir"]
    hidden = set(config.get("restore", [])) | set(config.get("delete", []))
    known = load("infra.json", {})
    removed = []
    for rel, path in sorted(infra.walk(workdir).items()):
        if rel in hidden or not infra.is_infra(rel):
            continue
        if rel in known:
            try:
                same = infra.digest(path) == known[rel]
            except OSError:
                same = False
            if not same:
                problems.append("test infrastructure changed: %s" % rel)
        else:
            _remove(path)
            removed.append(rel)
    # Bytecode caches: Python loads a planted __pycache__/*.pyc whose header matches its source.
    for current, dirs, _files in os.walk(workdir):
        dirs[:] = [d for d in dirs if d not in infra.SKIP_DIRS or d == "__pycache__"]
        if os.path.basename(current) == "__pycache__":
            shutil.rmtree(current, ignore_errors=True)
            dirs[:] = []
    # Configuration or conftest.py above the working tree would be read by the runner too.
    parent = os.path.dirname(os.path.abspath(workdir))
    while True:
        for name in ("conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg"):
            path = os.path.join(parent, name)
            if os.path.lexists(path) and path not in config.get("ancestors", []):
                _remove(path)
                removed.append(path)
        if parent == os.path.dirname(parent):
            break
        parent = os.path.dirname(parent)
    return removed, problems[:20]


def scan_sources(config):
    """Tamper hits in changed non-test files (sigs the base and gold do not have), reading
    what an interpreter or a loader would: Python source in its declared encoding, the file a
    symlink names inside the tree (one leading out of it is a hit), and any file holding native
    code, whatever its name. What cannot be decided is a hit too."""
    workdir = config["workdir"]
    base = load("sources.json", {})
    baseline = load("tamper_baseline.json", {})
    waived = set(config.get("tamper_waived", []))
    real_tree = os.path.realpath(workdir)
    hits = []

    def unscannable(rel, why):
        hits.append({"path": rel, "line": 1, "sig": "unscannable", "detail": why})

    for rel, path in sorted(infra.walk(workdir).items()):
        if infra.is_infra(rel) or infra.is_build_output(rel):
            continue
        try:
            if base.get(rel) == infra.digest(path):
                continue
            if os.path.islink(path):
                real = os.path.realpath(path)
                if real != real_tree and not real.startswith(real_tree + os.sep):
                    unscannable(rel, "a symlink leading out of the working tree")
                    continue
                if not os.path.isfile(real):
                    continue
                if infra.is_infra(real[len(real_tree) + 1 :]) and tamper.language_of(rel):
                    # Source code whose content sits in a test file: never scanned there.
                    unscannable(rel, "a symlink to a test-infrastructure file")
                    continue
                path = real
            native = infra.is_native(path)
            compiled = rel.endswith(infra.COMPILED_EXT) or native
            language = tamper.language_of(rel)
            if language is None and not compiled:
                continue
            size = os.path.getsize(path)
            data = None
            if not compiled and size <= MAX_SCANNED:
                with open(path, "rb") as fh:
                    data = fh.read()
        except OSError:
            continue
        if compiled or data is None:
            why = "compiled module added or changed" if compiled else "too large to scan"
            if native and not rel.endswith(infra.COMPILED_EXT):
                why = "native code under a name that is not a compiled module's"
            unscannable(rel, why)
            continue
        text, why = decode_source(data, language)
        if text is None:
            unscannable(rel, why)
            continue
        for hit in tamper.new_hits(rel, text, baseline.get(rel, []), waived):
            hit = dict(hit)
            hit["path"] = rel
            hits.append(hit)
    return hits


def decode_source(data, language):
    """``(text, None)`` as the interpreter reads ``data``: Python in its declared source
    encoding (PEP 263 cookie, BOM), other languages in UTF-8; ``(None, why)`` when it cannot
    be decided."""
    if language != "python":
        return data.decode("utf-8", "replace"), None
    import io
    import tokenize

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except (SyntaxError, LookupError) as exc:
        return None, "source encoding cannot be decided (%s)" % (str(exc).splitlines() or [""])[0]
    if encoding.replace("_", "-").lower() not in ("utf-8", "utf-8-sig", "ascii", "us-ascii"):
        # Code in another encoding reads differently to the scan than to the interpreter:
        # scanned as the interpreter decodes it, and a sign of its own.
        try:
            text = data.decode(encoding)
        except (LookupError, UnicodeDecodeError) as exc:
            return None, "source not decodable as its declared %s (%s)" % (encoding, exc)
        return text, None
    return data.decode("utf-8-sig" if encoding == "utf-8-sig" else "utf-8", "replace"), None


# --------------------------------------------------------------------------------- run


def test_environment(config, recorded, home=None):
    """The tests' environment: as recorded at build time when available, never the caller's
    shell profile additions, plus what the judge's channel needs."""
    if recorded is not None:
        env = dict(recorded)
    else:
        env = dict((k, v) for k, v in os.environ.items() if k not in UNSAFE_ENV)
    for key, value in config.get("env", {}).items():
        env.setdefault(key, value)
    env.setdefault("PATH", DEFAULT_PATH)
    env.setdefault("HOME", "/root")
    if home is not None:
        env["HOME"] = home
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    for key in ("REPOGYM_REPORT", CHANNEL_ENV, BOOT_ENV, PROOF_ENV):
        env.pop(key, None)
    if config.get("runner") in REPORT_RUNNERS:
        env["PYTHONPATH"] = RUNNER_DIR + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if config.get("runner") == "pytest":
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def json_report(config):
    return config.get("runner") in JSON_REPORT_RUNNERS and bool(config.get("json_report"))


STOP_FLAGS = re.compile(
    r"(?<!\S)(?:--bail(?:=\S+)?(?: \d+(?!\S))?|--exitfirst|--failfast|--stepwise|--sw"
    r"|--test-bail|--maxfail(?:=| )\d+)(?!\S)"
)
SHORT_STOP = {"pytest": "-x", "mocha": "-b", "jest": "-b", "unittest": "-f"}
GO_ON = {"pytest": " --maxfail=0", "mocha": " --no-bail"}
"""Appended for runners whose configuration files may stop the run too (the command wins)."""


def keep_going(command, runner):
    """The command without the flags that stop a run at its first failure (``--bail``, ``-x``,
    ``--failfast``, ``--maxfail N`` ...): a planted canary fails by design, and the tests after
    it must still run."""
    command = STOP_FLAGS.sub("", command)
    short = SHORT_STOP.get(runner)
    if short:
        command = re.sub(r"(?<!\S)%s(?!\S)" % re.escape(short), "", command)
    return re.sub(r"  +", " ", command).strip() + GO_ON.get(runner, "")


def hardened_command(config, report_path=None, canaries=False):
    runner = config.get("runner")
    command = keep_going(config["command"], runner) if canaries else config["command"]
    if json_report(config) and report_path:
        if runner == "jest":
            return command + " --json --outputFile=%s" % report_path
        json_flags = "--reporter json --reporter-option output=%s" % report_path
        if re.search(r"--reporter[= ]spec\b", command):
            return re.sub(r"--reporter[= ]spec\b", json_flags, command, count=1)
        return command + " " + json_flags
    boot = os.path.join(RUNNER_DIR, "repogym_boot.py")
    if runner == "pytest":
        disabled = disabled_plugins(config)
        # One test module that fails to import must not abort the whole session (its own
        # tests are then ERROR, the others still run and count).
        plugins = ["--continue-on-collection-errors", "-p repogym_pytest_report"]
        for name, module in config.get("pytest_plugins", []):
            if name not in disabled and module.split(".")[0] not in disabled:
                plugins.append("-p %s" % module)
        return re.sub(r"-m pytest\b", boot + " -m pytest " + " ".join(plugins), command, count=1)
    if runner == "unittest":
        wrapper = os.path.join(RUNNER_DIR, "repogym_unittest.py")
        return re.sub(r"-m unittest\b", boot + " " + wrapper, command, count=1)
    return command


def disabled_plugins(config):
    """Plugins the command or the repository's own pytest configuration turns off (``-p
    no:NAME``): never loaded again by name, whoever asked for them."""
    found = set(re.findall(r"-p\s*no:([\w.-]+)", config["command"]))
    workdir = config["workdir"]
    for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
        try:
            with open(os.path.join(workdir, name), "rb") as fh:
                text = fh.read(1 << 20).decode("utf-8", "replace")
        except OSError:
            continue
        for line in re.findall(r"(?m)^\s*addopts\s*=(.*(?:\n[ \t]+.*)*)", text):
            found.update(re.findall(r"-p[\"',\s]*no:([\w.-]+)", line))
    return found


def failures_of(tests, failures):
    """The failure messages of the ids that ended FAILED or ERROR."""
    return dict(
        (t, m)
        for t, m in failures.items()
        if tests.get(t) in ("FAILED", "ERROR") and isinstance(m, str) and m
    )


# ---------------------------------------------------------------------- the judge's split


def test_identity():
    """``(uid, gid)`` the tests run as: numbers the image's users and groups do not use, so
    the tests own nothing but what the judge gives them (None when the judge is not root)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    used = set()
    for db in ("/etc/passwd", "/etc/group"):
        try:
            with open(db) as fh:
                for line in fh:
                    fields = line.split(":")
                    if len(fields) > 2 and fields[2].isdigit():
                        used.add(int(fields[2]))
        except OSError:
            pass
    for number in range(TEST_UID, TEST_UID + 1000):
        if number not in used:
            return number, number
    return None


def hand_over(workdir, ident):
    """Give the working tree to the tests' user, and a fresh home folder (returned). A file
    with several names (a hard link) is copied first: the tests may write only this tree."""
    uid, gid = ident
    for current, dirs, files in os.walk(workdir):
        for name in dirs + files:
            path = os.path.join(current, name)
            try:
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    tmp = path + ".repogym-unlink"
                    shutil.copy2(path, tmp)
                    os.rename(tmp, path)
                os.lchown(path, uid, gid)
            except OSError:
                continue
    os.lchown(workdir, uid, gid)
    home = tempfile.mkdtemp(prefix="repogym-home-")
    os.chown(home, uid, gid)
    return home


def grant_traversal(paths):
    """Let the tests' user pass through (``o+x``, never list) every folder above ``paths``: an
    interpreter under ``/root`` (pyenv) or a tree in a private folder must still run as that
    user. Folders are only opened to passing through; their contents keep their modes."""
    done = set()
    for path in paths:
        if not path:
            continue
        folder = os.path.dirname(os.path.realpath(path))
        chain = []
        while folder not in done:
            done.add(folder)
            chain.append(folder)
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
        for folder in chain:
            with contextlib.suppress(OSError):
                st = os.stat(folder)
                if stat.S_ISDIR(st.st_mode) and not st.st_mode & stat.S_IXOTH:
                    os.chmod(folder, stat.S_IMODE(st.st_mode) | stat.S_IXOTH)


def runnable_paths(config, env):
    """What the tests' user must reach: the tree, this interpreter and its libraries, and the
    programs the test command starts by name."""
    import sysconfig

    out = [os.path.join(config["workdir"], "."), sys.executable, os.path.realpath(sys.executable)]
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix):
        out.append(os.path.join(prefix, "."))
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        with contextlib.suppress(KeyError):
            out.append(os.path.join(sysconfig.get_paths()[key], "."))
    for name in ("python3", "python", "node", "npx", "bash"):
        found = shutil.which(name, path=env.get("PATH", DEFAULT_PATH))
        if found:
            out += [found, os.path.realpath(found)]
    return out


def lock_judge():
    """The hidden tests' folder (this script, its key, the hidden copies) is the judge's
    alone while the tests run (best effort: a read-only mount stays as it is)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        with contextlib.suppress(OSError):
            os.chmod(HERE, 0o700)


def lock_logs():
    """Only the judge may read or write the verifier's logs (where rewards are written)."""
    if not os.path.isdir(LOGS):
        os.makedirs(LOGS)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.chown(LOGS, 0, 0)
        os.chmod(LOGS, 0o700)


def prepare_runner():
    """A copy of the runner's files (boot, report plugin, unittest stand-in) the tests may
    read, in a folder of the judge's; the hidden tests' folder stays out of their sight."""
    global RUNNER_DIR
    folder = tempfile.mkdtemp(prefix="repogym-runner-")
    source = os.path.join(HERE, "runner")
    for name in sorted(os.listdir(source)) if os.path.isdir(source) else []:
        if name.endswith((".py", ".js")):
            shutil.copyfile(os.path.join(source, name), os.path.join(folder, name))
            os.chmod(os.path.join(folder, name), 0o644)
    os.chmod(folder, 0o755)
    RUNNER_DIR = folder
    return folder


EXIT_GUARD = "repogym_exit_guard"
"""The C exit guard for ctest runs (``runner/repogym_exit_guard.c``): a test program of the
build tree that ends with status 0 before its ``main`` returned fails instead."""


def exit_guard(config):
    """``(library, build tree)`` for a ctest run: the guard compiled by the judge into the
    runner folder the tests may read, or ``(None, why not)``."""
    if config.get("runner") != "ctest":
        return None, "not a ctest run"
    found = re.search(r"--test-dir[= ]+(/[^\s'\";]+)", config.get("command", ""))
    source = os.path.join(HERE, "runner", EXIT_GUARD + ".c")
    compiler = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if found is None or not os.path.isfile(source) or compiler is None:
        return None, "no build tree, guard source or C compiler"
    library = os.path.join(RUNNER_DIR, EXIT_GUARD + ".so")
    try:
        done = subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", library, source, "-ldl"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, "the guard did not compile: %s" % exc
    if done.returncode != 0:
        return None, "the guard did not compile: %s" % done.stdout.decode("utf-8", "replace")[-300:]
    os.chmod(library, 0o755)
    return library, found.group(1).rstrip("/")


def boot_config(config, home):
    """What the test interpreter's boot needs (``runner/repogym_boot.py``)."""
    tmp = tempfile.gettempdir()
    preload = []
    tops = []
    if config.get("runner") == "pytest":
        preload = ["pytest", "_pytest.config", "_pytest.main", "_pytest.runner", "pluggy"]
        # Plugins are imported by pytest itself (one imported before it is not rewritten, and
        # its warning is an error under filterwarnings = error); the boot checks at exit that
        # none came from the tree.
        tops = sorted(set(m.split(".")[0] for _n, m in config.get("pytest_plugins", [])))
    else:
        preload = ["unittest", "unittest.main", "unittest.runner"]
    return {
        "workdir": config["workdir"],
        "writable": [tmp, "/tmp", "/var/tmp", "/dev/shm", "/dev/null"] + ([home] if home else []),
        "forbidden": [
            folder
            for folder in (os.path.dirname(LOGS), LOGS, HERE, "/tests", "/solution")
            # never a folder the tree itself is in (the logs' parent when they sit beside it)
            if not (config["workdir"] + "/").startswith(folder.rstrip("/") + "/")
        ],
        "preload": preload,
        "runner_dir": RUNNER_DIR,
        "watch": WATCHED,
        "trusted": [r for r in config.get("restore", []) if r not in config.get("splice", [])],
        "shadow_tops": tops,
    }


def _high_fd(fd):
    """``fd`` moved to a number of its own above the usual ones (inheritable)."""
    for number in range(CHANNEL_LOW, CHANNEL_LOW + 512):
        try:
            os.fstat(number)
        except OSError:
            os.dup2(fd, number)
            os.close(fd)
            return number
    os.set_inheritable(fd, True)
    return fd


def _become(ident):
    uid, gid = ident

    def switch():
        os.setsid()
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return switch


class ReportPipe:
    """The JSON report of a JavaScript runner, received through a named pipe at the path the
    runner is told to write (the judge reads it as it is written, in a thread).

    A file could be rewritten after the runner wrote it (by the tests, in the same process,
    at exit); a pipe cannot: every write session is read as it happens. The first one is the
    report; any other is a tamper (``sessions``). The pipe's folder is the judge's (the tests'
    user may only pass through it), the pipe is writable by anyone who reaches it."""

    def __init__(self, path):
        self.path = path
        self.sessions = []
        self.stopping = False
        folder = os.path.dirname(path)
        os.chmod(folder, 0o711)
        os.mkfifo(path)
        os.chmod(path, 0o622)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                return
            chunks, size = [], 0
            try:
                while size <= MAX_RECORD * 16:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
            finally:
                os.close(fd)
            if chunks:
                self.sessions.append(b"".join(chunks))
            if self.stopping:
                return

    def finish(self):
        """Stop reading (a reader waiting for a writer is woken by an empty one)."""
        self.stopping = True
        with contextlib.suppress(OSError):
            os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
        self.thread.join(10)

    def report(self):
        """(the report's text or None, tamper reasons). A second writer that opened the pipe
        before the judge saw the first one close lands in the same session: the report is one
        JSON document, so anything after it counts as another write."""
        if not self.sessions:
            return None, []
        text = self.sessions[0].decode("utf-8", "replace")
        extra = len(self.sessions) - 1
        decoder = json.JSONDecoder()
        try:
            _doc, end = decoder.raw_decode(text, len(text) - len(text.lstrip()))
        except ValueError:
            end = len(text)
        if text[end:].strip():
            extra += 1
            text = text[:end]
        why = ["the runner's report was written %d more time(s)" % extra] if extra else []
        return text, why


class ChannelReader:
    """Reads the judge's channel while the tests run (a thread), record by record."""

    def __init__(self, fd, ordered, reruns, proof=None):
        self.fd = fd
        self.chan = reports.Channel(ordered=ordered, reruns=reruns, proof=proof)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.daemon = True
        self.thread.start()

    def run(self):
        buf = b""
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if not ready:
                if self.stop.is_set():
                    break
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.chan.line(line)
                if len(buf) > MAX_RECORD:
                    buf = b""
                    self.chan.broken("a record longer than %d bytes" % MAX_RECORD)
        if buf.strip():
            self.chan.broken("a record cut short")
        os.close(self.fd)

    def finish(self, grace=2.0):
        """Stop after the test process ended (children of it may hold the channel open)."""
        self.stop.set()
        self.thread.join(grace + 1.0)


def open_channel(config, env, home):
    """The judge's channel to the tests' boot (Python runners): a pipe the outcomes come back
    through and one carrying the boot's secret, their numbers and the boot's configuration put
    into ``env``. Returns (the judge's end, the ends the tests inherit, the secret)."""
    chan_r, chan_w = os.pipe()
    chan_w = _high_fd(chan_w)
    # The boot's secret travels in a pipe of its own, read and closed by the boot before
    # any other code runs (never in the environment, which /proc keeps a copy of).
    proof = binascii.hexlify(os.urandom(16)).decode("ascii")
    key_r, key_w = os.pipe()
    os.write(key_w, proof.encode("ascii"))
    os.close(key_w)
    key_r = _high_fd(key_r)
    env[CHANNEL_ENV] = str(chan_w)
    env[PROOF_ENV] = str(key_r)
    env[BOOT_ENV] = json.dumps(boot_config(config, home))
    return chan_r, (chan_w, key_r), proof


def channel_results(reader, proc, parsed, config):
    """The run's outcomes as the boot streamed them through the channel (the log only tells
    which PASSED lines were printed by the code under test: ``forged_lines``)."""
    reader.finish()
    rep = reader.chan.result(killed=proc.returncode < 0, exit_code=proc.returncode)
    allowed = set(config.get("audit_allowed", []))
    findings = [a for a in rep["audit"] if a.get("key") not in allowed]
    out = dict(
        source="channel",
        tests=rep["tests"],
        skips=rep["skips"],
        failures=failures_of(rep["tests"], rep.get("failures", {})),
        collected=rep["collected"],
        finished=bool(rep["finished"]),
        problems=rep["problems"],
        channel_tamper=rep["tamper"],
        audit=rep["audit"],
        audit_keys=sorted(set(a.get("key") for a in rep["audit"] if a.get("key"))),
        audit_findings=findings,
    )
    if rep["runner"] is None:
        out["parse_status"] = "no report"
    elif not rep["finished"]:
        out["parse_status"] = "incomplete"
    else:
        out["parse_status"] = "ok" if rep["tests"] else "empty"
    # What the log claims but the runner did not record: printed by code under test.
    out["forged_lines"] = sorted(
        t
        for t, s in parsed.tests.items()
        if s == "PASSED" and rep["tests"].get(t) not in (None, "PASSED")
    )[:20]
    return out


def report_results(pipe, proc, config):
    """The run's outcomes from the JSON report the runner's main process wrote, as it wrote it
    (through the pipe); the log is for people only."""
    runner = config.get("runner")
    report, rewritten = pipe.report()
    rep = parsers.parse_log(report or "", runner)
    prefix = config["workdir"].rstrip("/") + "/"

    def relative(t):
        return t[len(prefix) :] if t.startswith(prefix) else t

    tests = dict((relative(t), st) for t, st in rep.tests.items())
    failures = dict((relative(t), m) for t, m in getattr(rep, "failures", {}).items())
    if (
        runner == "mocha"
        and report is not None
        and proc.returncode > 0
        and tests
        and not any(st in ("FAILED", "ERROR") for st in tests.values())
    ):
        # mocha exits with the number of failures it counted: a report without any, from
        # a run that counted some, was changed on its way out of the tests' process.
        rewritten = rewritten + [
            "mocha exited %d but its report shows no failure" % proc.returncode
        ]
    return dict(
        source="report",
        tests=tests,
        skips={},
        failures=failures_of(tests, failures),
        collected=None,
        finished=report is not None,
        parse_status="no report" if report is None else rep.status,
        problems=list(rep.warnings),
        channel_tamper=rewritten,
    )


def run_tests(config, recorded, report_path, canaries=False):
    """Run the tests as their own user, their outcomes streamed to this judge (Python
    runners) or read from the runner's JSON report (JavaScript ones); see the module doc."""
    json_path = report_path + ".json"
    for path in (report_path, json_path):
        if os.path.lexists(path):
            os.unlink(path)
    runner = config.get("runner")
    prepare_runner()
    ident = test_identity()
    home = hand_over(config["workdir"], ident) if ident is not None else None
    env = test_environment(config, recorded, home)
    pipe = ReportPipe(json_path) if json_report(config) else None
    if config.get("language") == "javascript" or runner in JSON_REPORT_RUNNERS + NODE_RUNNERS:
        env["NODE_OPTIONS"] = "--require " + os.path.join(RUNNER_DIR, "repogym_node_boot.js")
    guard, guard_root = exit_guard(config) if runner == "ctest" else (None, None)
    if guard is not None:
        env["LD_PRELOAD"] = guard
        env["REPOGYM_EXIT_GUARD_ROOT"] = guard_root
    if ident is not None:
        lock_judge()
        grant_traversal(runnable_paths(config, env))
    reader = chan_r = proof = None
    pass_fds = ()
    if runner in REPORT_RUNNERS:
        chan_r, pass_fds, proof = open_channel(config, env, home)
    started = time.time()
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-c", hardened_command(config, json_path, canaries)],
        cwd=config["workdir"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        pass_fds=pass_fds,
        preexec_fn=_become(ident) if ident is not None else os.setsid,
    )
    if pass_fds:
        for fd in pass_fds:
            os.close(fd)
        params = runner_params(config)
        reader = ChannelReader(
            chan_r, ordered=not params["parallel"], reruns=params["reruns"], proof=proof
        )
    raw, _ = proc.communicate()
    # Whatever the tests left running (a daemon holding the channel) goes with them.
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)
    if pipe is not None:
        pipe.finish()
    log = raw.decode("utf-8", "replace")
    parsed = parsers.parse_log(log, runner)
    out = {
        "exit_code": proc.returncode,
        "seconds": round(time.time() - started, 3),
        "log": log,
        "runner": parsed.runner or runner,
        "parse_warnings": list(parsed.warnings),
        "judge_split": ident is not None,
    }
    if runner == "ctest":
        out["exit_guard"] = True if guard is not None else guard_root
    if reader is not None:
        out.update(channel_results(reader, proc, parsed, config))
    elif json_report(config):
        out.update(report_results(pipe, proc, config))
    else:
        out.update(
            source="stdout",
            tests=dict(parsed.tests),
            skips={},
            failures=failures_of(parsed.tests, getattr(parsed, "failures", {})),
            collected=None,
            finished=parsed.status != "unparsed",
            parse_status=parsed.status,
        )
    return out


# ------------------------------------------------------------------------------ canaries

CANARY_MARK = "\x00"
CANARY_FAILED = ("FAILED", "ERROR")


def disguise_tests(config, data, known):
    """Rename the fail-to-pass tests in the hidden files just restored (``canaries.json``
    ``disguise``: where each is named and the names it may take, formed as a canary's are).

    The instruction names the failing tests; code that forges outcomes by name (a report
    rewritten for the named tests, a process that exits 0 when asked for one, a function that
    answers what a named caller expects) then finds no such test, and one that picks the new
    names cannot tell the renamed tests from the canaries. Returns (renamed id -> graded id,
    the names taken)."""
    sites = data.get("disguise") if isinstance(data, dict) else None
    rng = random.SystemRandom()
    back, named, edits = {}, [], {}
    for site in sites or []:
        title = site.get("title") or ""
        if not title or title in config.get("command", ""):
            continue  # a command that names the test would no longer find it
        names = [
            n
            for n in site.get("names") or []
            if not any(k.endswith(n) for k in known)
            and not any(m.endswith(n) or n.endswith(m) for m in named)
        ]
        if not names:
            continue
        name = rng.choice(names)
        line = int(site["line"]) + int(config.get("spliced_at", {}).get(site["file"], 0))
        edits.setdefault(site["file"], []).append((line, int(site["col"]), title, name, site))
        named.append(name)
    for rel, items in edits.items():
        path = os.path.join(config["workdir"], rel)
        try:
            with open(path, "rb") as fh:
                lines = fh.read().decode("utf-8").split("\n")
        except (OSError, UnicodeDecodeError):
            lines = []
        changed = False
        for line, col, title, name, site in items:
            if line >= len(lines) or lines[line][col : col + len(title)] != title:
                named.remove(name)
                continue
            lines[line] = lines[line][:col] + name + lines[line][col + len(title) :]
            changed = True
            for ident, at in site.get("ids") or []:
                back[ident[:at] + name + ident[at + len(title) :]] = ident
        if changed:
            with open(path, "wb") as fh:
                fh.write("\n".join(lines).encode("utf-8"))
    return back, named


def unmask(result, back):
    """Give the renamed tests' outcomes their graded ids again. A graded id of a renamed test
    in the run's own results is a tamper: no test of that name existed in it."""
    if not back:
        return []
    tests = result.get("tests") or {}
    posing = sorted(t for t in set(back.values()) if t in tests)
    for key in ("tests", "skips", "failures"):
        table = result.get(key)
        if isinstance(table, dict):
            result[key] = dict((back.get(t, t), v) for t, v in table.items() if t not in posing)
    return ["a test named %s ran, but that test was renamed for this run" % t for t in posing[:5]]


def plant_canaries(config, known, taken=()):
    """Write a few of the task's canaries (``canaries.json``: copies of its tests with one
    expectation contradicted, which must fail) into the hidden test files just restored.

    Which candidates, their names and their places (before or after the test each copies) come
    from this process's own randomness, afresh for every run; nothing the tests can see says
    which tests are canaries. Candidates not yet confirmed by the gate are all planted, and
    their outcomes reported (``calibrating``) instead of judged. None when the task has none.
    ``known``: the graded ids (a canary's name never ends one of them); ``taken``: names
    given to renamed tests."""
    data = load("canaries.json", {})
    pool = list(enumerate(data.get("pool") or [])) if isinstance(data, dict) else []
    if not pool:
        return None
    calibrating = data.get("status") != "confirmed"
    rng = random.SystemRandom()
    if calibrating:
        chosen = pool
    else:
        want = min(max(1, int(data.get("per_run") or 3)), len(pool))
        rng.shuffle(pool)
        # Copies of the failing tests first: those are the tests the instruction names, the
        # ones code that forges outcomes by name (or by how names start) goes after.
        pool.sort(key=lambda item: item[1].get("origin", "f2p") != "f2p")
        chosen, copied = [], set()
        for item in pool:  # different tests first, then more of the same
            where = (item[1]["file"], item[1]["before"])
            if len(chosen) < want and where not in copied:
                chosen.append(item)
                copied.add(where)
        chosen += [item for item in pool if item not in chosen][: want - len(chosen)]
    planted, inserts, named = {}, {}, list(taken)
    for index, cand in chosen:
        # A name no graded id ends with, and no other canary's name ends with or in (the
        # judge may find a canary's id by its name).
        names = [
            n
            for n in cand["names"]
            if not any(k.endswith(n) for k in known)
            and not any(m.endswith(n) or n.endswith(m) for m in named)
        ]
        if not names:
            continue
        name = rng.choice(names)
        named.append(name)
        code = cand["code"].replace(CANARY_MARK, name)
        gap = "\n" * int(cand.get("gap") or 0)
        if calibrating or rng.random() < 0.5:
            at, text = int(cand["after"]), gap + code
        else:
            at, text = int(cand["before"]), code + gap
        # Lines of a spliced file's hidden copy start where its items landed.
        at += int(config.get("spliced_at", {}).get(cand["file"], 0))
        inserts.setdefault(cand["file"], []).append((at, rng.random(), text))
        if cand.get("match") == "suffix":
            planted[name] = (index, None)
        else:
            planted[name] = (
                index,
                cand["source"][: len(cand["source"]) - len(cand["title"])] + name,
            )
    for rel, items in inserts.items():
        path = os.path.join(config["workdir"], rel)
        with open(path, "rb") as fh:
            lines = fh.read().decode("utf-8").splitlines(True)
        for at, _order, text in sorted(items, reverse=True):
            at = min(at, len(lines))
            if at and not lines[at - 1].endswith("\n"):
                lines[at - 1] += "\n"
            lines[at:at] = [text]
        with open(path, "wb") as fh:
            fh.write("".join(lines).encode("utf-8"))
    return {"calibrating": calibrating, "planted": planted}


def judge_canaries(canaries, result, known):
    """Take the canaries' outcomes out of ``result["tests"]``; return (details, tamper).

    A canary that does not fail, in a run the runner finished, is a tamper: whatever made it
    pass would make any test pass. While calibrating, the outcomes go to the gate instead."""
    if canaries is None:
        return {"run": 0}, []
    tests = result.get("tests") or {}
    outcomes = {}
    exact = set(ident for _i, ident in canaries["planted"].values() if ident)
    for name, (index, ident) in sorted(canaries["planted"].items()):
        if ident is None:  # the one new id that ends with the name
            found = [t for t in tests if t.endswith(name) and t not in known and t not in exact]
            ident = found[0] if len(found) == 1 else name
        outcomes[ident] = (index, tests.pop(ident, None))
    failed = sum(1 for _i, st in outcomes.values() if st in CANARY_FAILED)
    details = {
        "status": "calibrating" if canaries["calibrating"] else "confirmed",
        "run": len(outcomes),
        "failed": failed,
    }
    if canaries["calibrating"]:
        details["outcomes"] = dict((str(i), st) for i, st in outcomes.values())
        return details, []
    finished = result.get("parse_status") not in ("no report", "incomplete", "unparsed")
    tamper = []
    for ident, (_index, status) in sorted(outcomes.items()):
        if finished and status not in CANARY_FAILED:
            what = {"PASSED": "passed", None: "did not run"}.get(status, (status or "").lower())
            tamper.append("canary %s %s (a test that must fail)" % (ident, what))
    return details, tamper


def run_tamper(result):
    """What the run itself did against the judge's rules: a channel out of its grammar, and
    audit findings the reference runs did not have."""
    out = ["channel: %s" % why for why in result.get("channel_tamper", [])]
    for finding in result.get("audit_findings", [])[:20]:
        where = (" at %s" % finding["at"]) if finding.get("at") else ""
        out.append("audit: %s %s%s" % (finding.get("audit"), finding.get("detail", ""), where))
    return out


def runner_params(config):
    """Whether outcomes may come out of order (several processes) or twice (reruns)."""
    command = config.get("command", "")
    plugins = [m for _n, m in config.get("pytest_plugins", [])]
    parallel = bool(re.search(r"(^|\s)(-n|--numprocesses)[ =]?\S", command)) and any(
        m.startswith("xdist") for m in plugins
    )
    reruns = any(m.startswith("pytest_rerunfailures") for m in plugins)
    return {"parallel": parallel, "reruns": reruns}


# ------------------------------------------------------------------------------- grade


def grade(config, result, f2p, p2p):
    tests = result["tests"]
    f2p_passed = [t for t in f2p if tests.get(t) == "PASSED"]
    p2p_passed = [t for t in p2p if tests.get(t) == "PASSED"]
    f2p_rate = float(len(f2p_passed)) / len(f2p) if f2p else 1.0
    p2p_rate = float(len(p2p_passed)) / len(p2p) if p2p else 1.0
    resolved = bool(f2p) and len(f2p_passed) == len(f2p) and len(p2p_passed) == len(p2p)
    mode = config.get("reward_mode", "graded")
    reward = (1.0 if resolved else 0.0) if mode == "resolved" else f2p_rate * p2p_rate
    skipped = [t for t, s in tests.items() if s == "SKIPPED"]
    reasons = {}
    for t in skipped:
        why = result["skips"].get(t) or "(no reason)"
        reasons[why] = reasons.get(why, 0) + 1
    return reward, {
        "f2p_passed": len(f2p_passed),
        "p2p_passed": len(p2p_passed),
        "f2p_rate": f2p_rate,
        "p2p_rate": p2p_rate,
        "graded_reward": f2p_rate * p2p_rate,
        "f2p_failing": [t for t in f2p if t not in f2p_passed][:200],
        "regressions": [t for t in p2p if t not in p2p_passed][:200],
        "missing": [t for t in f2p + p2p if t not in tests][:200],
        "skipped": len(skipped),
        "skip_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:10]),
        "resolved": resolved,
        "reward_mode": mode,
        "reward": reward,
    }


def main(argv):
    work = tempfile.mkdtemp(prefix="repogym-report-")
    try:
        return judge_run(argv, os.path.join(work, "report"))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def judge_run(argv, report_path):
    """Everything of :func:`main` but the clean-up of the report's folder."""
    args = list(argv[1:])
    sha256_checked = "--sha256-checked" in args
    args = [a for a in args if a != "--sha256-checked"]
    results_out = None
    if len(args) >= 2 and args[0] == "--results":
        results_out = args[1]
    if results_out is None:
        lock_logs()
    config = load("config.json")
    integrity, recorded = check_integrity(config, sha256_checked)
    removed, infra_problems = reset_infrastructure(config)
    hits = scan_sources(config)
    details = {
        "runner": config.get("runner"),
        "verifier": "repogym runtime verifier 3",
        "integrity": integrity or "ok",
        "infra_removed": removed[:50],
    }
    tampered = (
        integrity
        + infra_problems
        + ["%s:%s %s" % (h["path"], h["line"], h["detail"]) for h in hits]
    )
    if results_out is not None:
        result = run_tests(config, recorded, report_path)
        result.update(
            tamper_sigs=sorted(set(h["sig"] for h in hits)),
            tamper=tampered + run_tamper(result),
            infra_removed=removed,
        )
        log = result.pop("log")
        sys.stdout.write(log[-20000:])
        with open(results_out, "w") as fh:
            json.dump(result, fh)
        return 0
    f2p, p2p = load("f2p.json"), load("p2p.json")
    details.update(f2p_total=len(f2p), p2p_total=len(p2p))
    if tampered:
        return deny(details, config, tampered)
    known = set(f2p + p2p)
    back, renamed = disguise_tests(config, load("canaries.json", {}), known)
    canaries = plant_canaries(config, known | set(back), renamed)
    result = run_tests(config, recorded, report_path, canaries is not None)
    log = result.pop("log")
    write("test-output.log", log)
    sys.stdout.write(log[-20000:])
    posing = unmask(result, back)
    details["disguised"] = len(renamed)
    details["canaries"], canary_tamper = judge_canaries(canaries, result, known)
    during = run_tamper(result) + posing + canary_tamper
    if during:
        # The run itself broke the judge's rules: nothing it reported counts.
        return deny(
            details,
            config,
            during,
            exit_code=result["exit_code"],
            judge_split=result.get("judge_split"),
        )
    return reward_run(details, config, result, f2p, p2p)


def deny(details, config, reasons, **more):
    """Reward 0 for a tamper, with the reasons in the details."""
    details.update(
        tampered=True,
        tamper=reasons,
        resolved=False,
        reward=0.0,
        reward_mode=config.get("reward_mode", "graded"),
        **more,
    )
    write("reward-details.json", json.dumps(details, indent=2))
    write("reward.txt", "0\n")
    sys.stdout.write("verifier: tampering detected, reward 0:\n  %s\n" % "\n  ".join(reasons))
    return 0


def reward_run(details, config, result, f2p, p2p):
    """Grade a run that broke no rule: write its reward and details (no reward when no parser
    understood the log); the exit status of :func:`main`."""
    details.update(
        exit_code=result["exit_code"],
        parse_status=result["parse_status"],
        source=result["source"],
        parse_warnings=result["parse_warnings"],
        collected=result.get("collected"),
        collected_expected=config.get("collected"),
        forged_lines=result.get("forged_lines", []),
        report_problems=result.get("problems", [])[:10],
        judge_split=result.get("judge_split"),
        audit_allowed=len(result.get("audit_keys", [])),
        tampered=False,
    )
    if "exit_guard" in result:
        details["exit_guard"] = result["exit_guard"]
    if result["parse_status"] == "unparsed":
        write("reward-details.json", json.dumps(details, indent=2))
        sys.stderr.write("verifier: no parser understood the test log; no reward written\n")
        return 1
    if result["parse_status"] in ("no report", "incomplete"):
        # The test process died before the runner finished (a crash, os._exit, a kill):
        # nothing it reported can be trusted, and the tests did not pass.
        result["tests"] = {}
    reward, graded = grade(config, result, f2p, p2p)
    details.update(graded)
    write("reward-details.json", json.dumps(details, indent=2))
    write("reward.txt", "%.6g\n" % reward)
    sys.stdout.write(
        "\nverifier: reward %.6g (%s; f2p %d/%d, p2p %d/%d)\n"
        % (
            reward,
            graded["reward_mode"],
            graded["f2p_passed"],
            len(f2p),
            graded["p2p_passed"],
            len(p2p),
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
