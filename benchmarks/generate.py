"""Generation speed on the embedded example repository.

    python benchmarks/generate.py [--jobs 1] [--runs 1]

Builds the example repository, runs ``commit_runtime`` on it with a fresh output folder (the
sandbox layer cache stays warm after the first run, as it would for repeated tasks of one
repository), and prints tasks per hour and the overhead ratio: total wall time / time spent
inside test runs (before/after runs, reruns and the verify gate's oracle and verifier phases).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from repogym.example_repo import build_example_repo
from repogym.pipelines import generate
from repogym.spec import GenerationInput


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--runs", type=int, default=2, help="the first run may also warm the cache")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="repogym-genbench-"))
    try:
        repo = build_example_repo(work / "statkit")
        for run in range(1, args.runs + 1):
            out = work / f"out{run}"
            start = time.monotonic()
            result = generate(
                GenerationInput(repo=str(repo), pipeline="commit_runtime", out=out, jobs=args.jobs)
            )
            wall = time.monotonic() - start
            s = result.stats
            per_hour = s.kept / wall * 3600 if wall else 0.0
            ratio = wall / s.test_seconds if s.test_seconds else float("nan")
            print(
                f"run {run}: {s.seen} candidates, {s.kept} tasks in {wall:.1f} s "
                f"({per_hour:,.0f} tasks/hour, {wall / max(s.kept, 1):.1f} s/task); "
                f"{s.test_seconds:.1f} s inside test runs; overhead ratio {ratio:.2f} "
                f"(jobs={args.jobs})"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
