"""Graded verifier for this task (standard library only).

1. Restore the hidden test files (``/tests/hidden``) over the agent's working copy, so editing or
   deleting tests cannot help the agent.
2. Run the fail-to-pass and pass-to-pass tests with ``python -m unittest -v``.
3. Parse the per-test results and write ``/logs/verifier/reward.txt`` (f2p_rate × p2p_rate) and
   ``reward-details.json``. If the log cannot be parsed, no reward is written: the harness then
   reports "no reward" instead of a made-up 0 or 1.
"""

import json
import os
import re
import shutil
import subprocess
import sys

WORKDIR = "/workspace"
TESTS = "/tests"
LOGS = "/logs/verifier"
RESULT_RE = re.compile(
    r"^(?P<name>\w+) \((?P<id>[\w.]+)\)(?:\n.*?)? \.\.\. (?P<status>ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$",
    re.MULTILINE,
)


def restore_hidden_tests():
    hidden = os.path.join(TESTS, "hidden")
    for root, _dirs, files in os.walk(hidden):
        for name in files:
            src = os.path.join(root, name)
            dest = os.path.join(WORKDIR, os.path.relpath(src, hidden))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(src, dest)


def parse(log):
    results = {}
    for m in RESULT_RE.finditer(log):
        test_id = m.group("id")
        if test_id.count(".") == 0:
            continue
        status = m.group("status")
        if status in ("ok", "expected failure"):
            results[test_id] = "PASSED"
        elif status.startswith("skipped"):
            results[test_id] = "SKIPPED"
        else:
            results[test_id] = "FAILED"
    return results


def main():
    os.makedirs(LOGS, exist_ok=True)
    with open(os.path.join(TESTS, "f2p.json")) as fh:
        f2p = json.load(fh)
    with open(os.path.join(TESTS, "p2p.json")) as fh:
        p2p = json.load(fh)
    restore_hidden_tests()
    cmd = [sys.executable, "-m", "unittest", "-v"] + f2p + p2p
    proc = subprocess.run(cmd, cwd=WORKDIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    log = proc.stdout.decode("utf-8", "replace")
    print(log)
    results = parse(log)
    details = {"runner": "unittest", "exit_code": proc.returncode, "f2p_total": len(f2p),
               "p2p_total": len(p2p)}
    if not results and "Ran " not in log:
        details["parse_status"] = "unparsed"
        with open(os.path.join(LOGS, "reward-details.json"), "w") as fh:
            json.dump(details, fh, indent=2)
        print("verifier: could not parse the test log; no reward written", file=sys.stderr)
        return 1
    f2p_passed = [t for t in f2p if results.get(t) == "PASSED"]
    p2p_passed = [t for t in p2p if results.get(t) == "PASSED"]
    f2p_rate = len(f2p_passed) / len(f2p) if f2p else 1.0
    p2p_rate = len(p2p_passed) / len(p2p) if p2p else 1.0
    reward = f2p_rate * p2p_rate
    details.update(
        parse_status="ok",
        f2p_passed=len(f2p_passed),
        p2p_passed=len(p2p_passed),
        f2p_rate=f2p_rate,
        p2p_rate=p2p_rate,
        regressions=[t for t in p2p if t not in p2p_passed],
        resolved=bool(f2p) and len(f2p_passed) == len(f2p) and len(p2p_passed) == len(p2p),
        reward=reward,
    )
    with open(os.path.join(LOGS, "reward-details.json"), "w") as fh:
        json.dump(details, fh, indent=2)
    with open(os.path.join(LOGS, "reward.txt"), "w") as fh:
        fh.write("%.6g\n" % reward)
    print("verifier: reward %.6g (f2p %d/%d, p2p %d/%d)"
          % (reward, len(f2p_passed), len(f2p), len(p2p_passed), len(p2p)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
