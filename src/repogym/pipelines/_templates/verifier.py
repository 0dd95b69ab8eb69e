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

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOGS = os.environ.get("REPOGYM_VERIFIER_LOGS", "/logs/verifier")
RECORD = "/usr/lib/repogym/record.txt"
REPORT_RUNNERS = ("pytest", "unittest")
# JavaScript runners whose main process writes a JSON report to a file of ours (when the task's
# config says the runner's version can: ``json_report``).
JSON_REPORT_RUNNERS = ("jest", "mocha")
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
sys.path.insert(0, HERE)

import infra  # noqa: E402  (copies of repogym's modules beside this file)
import parsers  # noqa: E402
import reports  # noqa: E402
import tamper  # noqa: E402


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


def restore(config):
    """Write the hidden copies over the working tree; remove paths the task deletes."""
    workdir = config["workdir"]
    files_dir = os.path.join(HERE, "files")
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
        shutil.copyfile(os.path.join(files_dir, rel), dest)
    for rel in config.get("delete", []):
        _remove(os.path.join(workdir, rel))


def reset_infrastructure(config):
    """Restore hidden copies, remove infrastructure the agent added; return (removed, tamper)."""
    restore(config)
    workdir = config["workdir"]
    hidden = set(config.get("restore", [])) | set(config.get("delete", []))
    known = load("infra.json", {})
    removed, problems = [], []
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
    """Tamper hits in changed non-test source files (sigs the base and gold do not have)."""
    workdir = config["workdir"]
    base = load("sources.json", {})
    baseline = load("tamper_baseline.json", {})
    waived = set(config.get("tamper_waived", []))
    hits = []
    for rel, path in sorted(infra.walk(workdir).items()):
        if infra.is_infra(rel) or os.path.islink(path):
            continue
        compiled = rel.endswith(infra.COMPILED_EXT)
        if tamper.language_of(rel) is None and not compiled:
            continue
        try:
            if base.get(rel) == infra.sha256_file(path):
                continue
            size = os.path.getsize(path)
            if not compiled and size <= MAX_SCANNED:
                with open(path, "rb") as fh:
                    data = fh.read()
        except OSError:
            continue
        if compiled or size > MAX_SCANNED:
            why = "compiled module added or changed" if compiled else "too large to scan"
            hits.append({"path": rel, "line": 1, "sig": "unscannable", "detail": why})
            continue
        text = data.decode("utf-8", "replace")
        for hit in tamper.new_hits(rel, text, baseline.get(rel, []), waived):
            hit = dict(hit)
            hit["path"] = rel
            hits.append(hit)
    return hits


# --------------------------------------------------------------------------------- run


def test_environment(config, recorded, report_path):
    """The tests' environment: as recorded at build time when available, never the caller's
    shell profile additions, plus what the report plugin needs."""
    if recorded is not None:
        env = dict(recorded)
    else:
        env = dict((k, v) for k, v in os.environ.items() if k not in UNSAFE_ENV)
    for key, value in config.get("env", {}).items():
        env.setdefault(key, value)
    env.setdefault("PATH", DEFAULT_PATH)
    env.setdefault("HOME", "/root")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    if config.get("runner") in REPORT_RUNNERS:
        env["REPOGYM_REPORT"] = report_path
        runner_dir = os.path.join(HERE, "runner")
        env["PYTHONPATH"] = runner_dir + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if config.get("runner") == "pytest":
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def json_report(config):
    return config.get("runner") in JSON_REPORT_RUNNERS and bool(config.get("json_report"))


def hardened_command(config, report_path=None):
    command = config["command"]
    runner = config.get("runner")
    if json_report(config) and report_path:
        if runner == "jest":
            return command + " --json --outputFile=%s" % report_path
        json_flags = "--reporter json --reporter-option output=%s" % report_path
        if re.search(r"--reporter[= ]spec\b", command):
            return re.sub(r"--reporter[= ]spec\b", json_flags, command, count=1)
        return command + " " + json_flags
    if runner == "pytest":
        disabled = set(re.findall(r"-p\s+no:(\S+)", command))
        # One test module that fails to import must not abort the whole session (its own
        # tests are then ERROR, the others still run and count).
        plugins = ["--continue-on-collection-errors", "-p repogym_pytest_report"]
        for name, module in config.get("pytest_plugins", []):
            if name not in disabled and module.split(".")[0] not in disabled:
                plugins.append("-p %s" % module)
        return re.sub(r"-m pytest\b", "-m pytest " + " ".join(plugins), command, count=1)
    if runner == "unittest":
        wrapper = os.path.join(HERE, "runner", "repogym_unittest.py")
        return re.sub(r"-m unittest\b", wrapper, command, count=1)
    return command


def failures_of(tests, failures):
    """The failure messages of the ids that ended FAILED or ERROR."""
    return dict(
        (t, m)
        for t, m in failures.items()
        if tests.get(t) in ("FAILED", "ERROR") and isinstance(m, str) and m
    )


def run_tests(config, recorded, report_path):
    json_path = report_path + ".json"
    for path in (report_path, json_path):
        if os.path.lexists(path):
            os.unlink(path)
    env = test_environment(config, recorded, report_path)
    started = time.time()
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-c", hardened_command(config, json_path)],
        cwd=config["workdir"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    raw, _ = proc.communicate()
    log = raw.decode("utf-8", "replace")
    runner = config.get("runner")
    parsed = parsers.parse_log(log, runner)
    out = {
        "exit_code": proc.returncode,
        "seconds": round(time.time() - started, 3),
        "log": log,
        "runner": parsed.runner or runner,
        "parse_warnings": list(parsed.warnings),
    }
    if runner in REPORT_RUNNERS:
        rep = reports.read_report(report_path)
        out.update(
            source="report",
            tests=rep["tests"],
            skips=rep["skips"],
            failures=failures_of(rep["tests"], rep.get("failures", {})),
            collected=rep["collected"],
            finished=bool(rep["finished"]),
            problems=rep["problems"],
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
    elif json_report(config):
        # The JSON report the runner's main process wrote; the log is for people only.
        try:
            with open(json_path, "rb") as fh:
                report = fh.read().decode("utf-8", "replace")
        except OSError:
            report = None
        rep = parsers.parse_log(report or "", runner)
        prefix = config["workdir"].rstrip("/") + "/"

        def relative(t):
            return t[len(prefix) :] if t.startswith(prefix) else t

        tests = dict((relative(t), st) for t, st in rep.tests.items())
        failures = dict((relative(t), m) for t, m in getattr(rep, "failures", {}).items())
        out.update(
            source="report",
            tests=tests,
            skips={},
            failures=failures_of(tests, failures),
            collected=None,
            finished=report is not None,
            parse_status="no report" if report is None else rep.status,
            problems=list(rep.warnings),
        )
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
    args = list(argv[1:])
    sha256_checked = "--sha256-checked" in args
    args = [a for a in args if a != "--sha256-checked"]
    results_out = None
    if len(args) >= 2 and args[0] == "--results":
        results_out = args[1]
    if results_out is None and not os.path.isdir(LOGS):
        os.makedirs(LOGS)
    config = load("config.json")
    integrity, recorded = check_integrity(config, sha256_checked)
    removed, infra_problems = reset_infrastructure(config)
    hits = scan_sources(config)
    report_path = (
        os.path.join(LOGS, "report.jsonl") if results_out is None else results_out + ".report"
    )
    details = {
        "runner": config.get("runner"),
        "verifier": "repogym runtime verifier 2",
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
            tamper=tampered,
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
        details.update(
            tampered=True,
            tamper=tampered,
            resolved=False,
            reward=0.0,
            reward_mode=config.get("reward_mode", "graded"),
        )
        write("reward-details.json", json.dumps(details, indent=2))
        write("reward.txt", "0\n")
        sys.stdout.write("verifier: tampering detected, reward 0:\n  %s\n" % "\n  ".join(tampered))
        return 0
    result = run_tests(config, recorded, report_path)
    log = result.pop("log")
    write("test-output.log", log)
    sys.stdout.write(log[-20000:])
    details.update(
        exit_code=result["exit_code"],
        parse_status=result["parse_status"],
        source=result["source"],
        parse_warnings=result["parse_warnings"],
        collected=result.get("collected"),
        collected_expected=config.get("collected"),
        forged_lines=result.get("forged_lines", []),
        report_problems=result.get("problems", [])[:10],
        tampered=False,
    )
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
