"""``bug_synth`` throughput: verified tasks per core-hour and the overhead ratio.

    python benchmarks/bug_synth.py [--repo PATH] [--limit 20] [--jobs 2] [--pipeline bug_synth]
        [--opt key=value …]

Runs the pipeline on ``--repo`` (default: the embedded example repository) into a fresh
folder and prints candidates examined, kept, the drop reasons, the mutant kill rate (candidates
whose edit broke at least one test / candidates run), wall time, the time spent inside test
runs, **verified tasks per core-hour** (kept / (wall hours × cores used), cores used =
min(--jobs, CPUs)) and the **overhead ratio** (wall / time in test runs). Run it twice to see
the warm-cache number (the first run also builds the environment layers).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from repogym.example_repo import build_example_repo
from repogym.pipelines import generate
from repogym.spec import GenerationInput, parse_opts

SURVIVED = "no test fails (the edit survives)"
NOT_RUN = {"function not called by the tests", "already emitted"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=None)
    ap.add_argument("--pipeline", default="bug_synth")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--opt", action="append", default=[])
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="repogym-synthbench-"))
    try:
        repo = args.repo or build_example_repo(work / "statkit")
        t0 = time.perf_counter()
        result = generate(
            GenerationInput(
                repo=str(repo),
                pipeline=args.pipeline,
                out=work / "out",
                limit=args.limit,
                jobs=args.jobs,
                options=parse_opts(args.opt),
            )
        )
        wall = time.perf_counter() - t0
        stats = result.stats
        kept = stats.kept
        cores = min(args.jobs, os.cpu_count() or 1)
        ran = [o for o in result.outcomes if o.reason not in NOT_RUN]
        killed = [o for o in ran if o.reason != SURVIVED]
        print(f"repository: {repo}  pipeline: {args.pipeline}  jobs: {args.jobs}")
        print(f"candidates examined: {stats.seen}  kept (verified): {kept}")
        for reason, n in stats.drops.most_common():
            print(f"  dropped: {reason}: {n}")
        if ran:
            print(
                f"edits run against the suite: {len(ran)}, killed: {len(killed)} "
                f"(kill rate {len(killed) / len(ran):.2f})"
            )
        ratio = wall / stats.test_seconds if stats.test_seconds else float("nan")
        per_core_hour = kept / (wall / 3600 * cores)
        print(
            f"wall: {wall:.1f} s  in test runs: {stats.test_seconds:.1f} s  "
            f"overhead ratio: {ratio:.2f}"
        )
        print(f"verified tasks per core-hour: {per_core_hour:.0f}  (cores used: {cores})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
