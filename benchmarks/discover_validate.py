"""Discovery and validation throughput on N synthetic tasks.

    python benchmarks/discover_validate.py [--tasks 50000] [--jobs 2] [--dir PATH] [--keep]

Generates N realistic graded tasks (task.toml with provenance and content_hash, instruction,
Dockerfile, test.sh, verifier, f2p/p2p, solve.sh, patch.diff) spread over nested groups, then
times discovery (finding every task.toml), loading (parsing every task.toml into the model) and
full validation (every static check, content hash included). Prints tasks/s and peak memory
(RSS of this process and of the validation workers). Files are in the page cache (warm).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from repogym.taskdir import iter_task_dirs, load_task
from repogym.taskdir.hashing import content_hash
from repogym.taskdir.validate import default_jobs, validate_many

TOML = """\
schema_version = "1.4"

[task]
name = "bench/{tid}"
description = "Synthetic benchmark task {i}."
keywords = ["bench"]

[metadata]
difficulty = "medium"
category = "bugfix"

[metadata.repo2env]
spec_version = "0.2.0"
pipeline = "commit_runtime"
repo = "bench/repo{g}"
ref = "{ref}"
reward_kinds = ["test_execution"]

[metadata.repo2env.commit_runtime]
fail_to_pass = ["tests/test_m.py::test_fix_{i}"]
pass_to_pass = ["tests/test_m.py::test_a", "tests/test_m.py::test_b"]

[agent]
timeout_sec = 600.0

[verifier]
timeout_sec = 300.0

[environment]
network_mode = "no-network"
workdir = "/workspace"
"""


def generate(root: Path, n: int) -> None:
    for i in range(n):
        g = i % 97
        tid = f"bench__repo{g}-{i:08x}"
        task = root / f"group{g:02d}" / "tasks" / tid
        (task / "environment").mkdir(parents=True)
        (task / "tests").mkdir()
        (task / "solution").mkdir()
        toml = TOML.format(tid=tid, i=i, g=g, ref=f"{i:040x}")
        (task / "task.toml").write_text(toml)
        (task / "instruction.md").write_text(
            f"# Bug {i}\n\nThe function `compute_{i}` returns the wrong value for empty input.\n"
        )
        (task / "environment" / "Dockerfile").write_text(
            "FROM python:3.11-slim\nWORKDIR /workspace\nCOPY repo/ /workspace/\n"
        )
        (task / "tests" / "test.sh").write_text("#!/bin/bash\nexec python3 /tests/verifier.py\n")
        (task / "tests" / "f2p.json").write_text(json.dumps([f"tests/test_m.py::test_fix_{i}"]))
        (task / "tests" / "p2p.json").write_text(
            json.dumps(["tests/test_m.py::test_a", "tests/test_m.py::test_b"])
        )
        (task / "solution" / "solve.sh").write_text(
            "#!/bin/bash\npatch -p1 < /solution/patch.diff\n"
        )
        (task / "solution" / "patch.diff").write_text(
            "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-    return None\n"
            f"+    return compute_{i}(x) or 0\n"
        )
        digest = content_hash(task)
        (task / "task.toml").write_text(
            toml.replace(
                "[metadata.repo2env.commit_runtime]",
                f'content_hash = "{digest}"\n\n[metadata.repo2env.commit_runtime]',
            )
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=50_000)
    ap.add_argument("--jobs", type=int, default=default_jobs())
    ap.add_argument("--dir", type=Path, default=None, help="where to generate (default: a tmp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated tasks")
    args = ap.parse_args()

    root = args.dir or Path(tempfile.mkdtemp(prefix="repogym-bench-"))
    try:
        t0 = time.perf_counter()
        if not any(root.iterdir()) if root.exists() else True:
            root.mkdir(parents=True, exist_ok=True)
            generate(root, args.tasks)
            os.sync()  # let write-back finish so it does not slow the measurements
        print(f"generated {args.tasks} tasks in {time.perf_counter() - t0:.1f} s under {root}")

        t0 = time.perf_counter()
        dirs = list(iter_task_dirs(root))
        t_disc = time.perf_counter() - t0
        print(f"discover: {len(dirs)} tasks in {t_disc:.2f} s  ({len(dirs) / t_disc:,.0f} tasks/s)")

        t0 = time.perf_counter()
        for d in dirs:
            load_task(d)
        t_load = time.perf_counter() - t0
        print(
            f"load:     {len(dirs)} task.toml in {t_load:.2f} s  "
            f"({len(dirs) / t_load:,.0f} tasks/s)"
        )

        t0 = time.perf_counter()
        reports = list(validate_many(dirs, jobs=args.jobs))
        t_val = time.perf_counter() - t0
        bad = sum(not r.ok for r in reports)
        print(
            f"validate: {len(reports)} tasks in {t_val:.2f} s  "
            f"({len(reports) / t_val:,.0f} tasks/s, jobs={args.jobs}, invalid={bad})"
        )
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"peak RSS: {own:.0f} MiB (this process), {kids:.0f} MiB (largest worker)")
        if bad:
            raise SystemExit(f"{bad} synthetic tasks failed validation: {reports[0].problems}")
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
