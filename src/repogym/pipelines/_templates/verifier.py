#!/usr/bin/env python3
# ruff: noqa: UP031, UP032  (runs under the task's Python, possibly 3.6)
"""Graded verifier of a repogym runtime task (standard library only, Python 3.6+).

1. Restore the hidden test files over whatever the agent did to them (``/tests/files/<path>``
   is written to ``<workdir>/<path>``; paths listed under ``delete`` are removed).
2. Run the targeted tests with the command in ``/tests/config.json``.
3. Parse the log with ``/tests/parsers.py`` and grade: reward = f2p_rate * p2p_rate, where
   f2p_rate is the share of ``f2p.json`` tests that pass and p2p_rate the share of ``p2p.json``
   tests that still pass. ``resolved`` = every F2P and P2P test passes.
4. Write ``/logs/verifier/reward.txt`` and ``reward-details.json``. A log that no parser
   understands writes NO reward (the harness then reports None, never a guessed number).
"""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LOGS = os.environ.get("REPOGYM_VERIFIER_LOGS", "/logs/verifier")
sys.path.insert(0, HERE)

import parsers  # noqa: E402  (the copy of repogym's log parsers beside this file)


def load(name):
    with open(os.path.join(HERE, name)) as fh:
        return json.load(fh)


def restore(config):
    workdir = config["workdir"]
    files_dir = os.path.join(HERE, "files")
    for rel in config.get("restore", []):
        dest = os.path.join(workdir, rel)
        if os.path.islink(dest) or (os.path.exists(dest) and not os.path.isfile(dest)):
            if os.path.isdir(dest) and not os.path.islink(dest):
                shutil.rmtree(dest)
            else:
                os.unlink(dest)
        parent = os.path.dirname(dest)
        if os.path.islink(parent):
            os.unlink(parent)
        if not os.path.isdir(parent):
            os.makedirs(parent)
        shutil.copyfile(os.path.join(files_dir, rel), dest)
    for rel in config.get("delete", []):
        dest = os.path.join(workdir, rel)
        if os.path.islink(dest) or os.path.isfile(dest):
            os.unlink(dest)
        elif os.path.isdir(dest):
            shutil.rmtree(dest)


def write(name, payload):
    with open(os.path.join(LOGS, name), "w") as fh:
        fh.write(payload)


def main():
    if not os.path.isdir(LOGS):
        os.makedirs(LOGS)
    config = load("config.json")
    f2p, p2p = load("f2p.json"), load("p2p.json")
    restore(config)
    proc = subprocess.Popen(
        ["bash", "-c", config["command"]],
        cwd=config["workdir"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    raw, _ = proc.communicate()
    log = raw.decode("utf-8", "replace")
    write("test-output.log", log)
    sys.stdout.write(log[-20000:])
    result = parsers.parse_log(log, config.get("runner"))
    details = {
        "runner": result.runner or config.get("runner"),
        "exit_code": proc.returncode,
        "parse_status": result.status,
        "parse_warnings": list(result.warnings),
        "f2p_total": len(f2p),
        "p2p_total": len(p2p),
    }
    if result.status == "unparsed":
        write("reward-details.json", json.dumps(details, indent=2))
        sys.stderr.write("verifier: no parser understood the test log; no reward written\n")
        return 1
    tests = result.tests
    f2p_passed = [t for t in f2p if tests.get(t) == "PASSED"]
    p2p_passed = [t for t in p2p if tests.get(t) == "PASSED"]
    f2p_rate = float(len(f2p_passed)) / len(f2p) if f2p else 1.0
    p2p_rate = float(len(p2p_passed)) / len(p2p) if p2p else 1.0
    reward = f2p_rate * p2p_rate
    details.update(
        {
            "f2p_passed": len(f2p_passed),
            "p2p_passed": len(p2p_passed),
            "f2p_rate": f2p_rate,
            "p2p_rate": p2p_rate,
            "f2p_failing": [t for t in f2p if t not in f2p_passed],
            "regressions": [t for t in p2p if t not in p2p_passed],
            "missing": [t for t in f2p + p2p if t not in tests],
            "resolved": bool(f2p) and len(f2p_passed) == len(f2p) and len(p2p_passed) == len(p2p),
            "reward": reward,
        }
    )
    write("reward-details.json", json.dumps(details, indent=2))
    write("reward.txt", "%.6g\n" % reward)
    sys.stdout.write(
        "\nverifier: reward %.6g (f2p %d/%d, p2p %d/%d)\n"
        % (reward, len(f2p_passed), len(f2p), len(p2p_passed), len(p2p))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
