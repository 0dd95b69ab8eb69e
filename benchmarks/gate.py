"""What the gate's red-team candidates cost: generation on the embedded example repository with
``adversarial`` off and on.

    python benchmarks/gate.py [--limit 3] [--mutants 0] [--jobs 1] [--no-warmup]

Builds the example repository and runs ``commit_runtime`` on it twice with the same options
(``--mutants``, default 0, so that the red-team candidates are the only extra trials; the other
options are the pipeline's defaults), once with ``adversarial = false`` and once with
``adversarial = true``, each into a fresh output folder and stopping after ``--limit`` kept
tasks. A first, untimed generation of one task warms the sandbox layer cache (``--no-warmup``
skips it). Prints for each: kept tasks, wall seconds, seconds per kept task and the drops; the
added cost of the red-team candidates (the ratio of seconds per kept task, on / off); and, from
each kept task's ``[metadata.repo2env.evaluation]``, the red-team candidates run on it, how many
earned no more than nop (killed) and its adversarial floor.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from _calibrate import python_loop_ms

from repogym.example_repo import build_example_repo
from repogym.pipelines import generate
from repogym.spec import GenerationInput
from repogym.taskdir import load_task


def run(repo: Path, out: Path, limit: int, jobs: int, options: dict) -> dict:
    """One generation: its wall seconds, stats and each kept task's evaluation block."""
    start = time.monotonic()
    result = generate(
        GenerationInput(
            repo=str(repo),
            pipeline="commit_runtime",
            out=out,
            limit=limit,
            jobs=jobs,
            options=options,
        )
    )
    wall = time.monotonic() - start
    tasks = {}
    for o in result.outcomes:
        if o.kept and o.task_dir:
            task = load_task(o.task_dir)
            tasks[task.id] = (task.repo2env or {}).get("evaluation") or {}
    return {"wall": wall, "stats": result.stats, "tasks": tasks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=3, help="kept tasks per generation")
    ap.add_argument("--mutants", type=int, default=0, help="mutants per task (both runs)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--no-warmup", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="repogym-gatebench-"))
    try:
        repo = build_example_repo(work / "statkit")
        base = {"mutants": args.mutants}
        if not args.no_warmup:
            warm = {**base, "adversarial": False, "reruns": 0, "verify_reruns": 0}
            run(repo, work / "warmup", 1, 1, warm)
        runs = {
            flag: run(
                repo, work / f"out-{flag}", args.limit, args.jobs, {**base, "adversarial": flag}
            )
            for flag in (False, True)
        }
        print(
            f"commit_runtime on the example repository, limit {args.limit}, mutants "
            f"{args.mutants}, jobs {args.jobs}"
        )
        per_task = {}
        for flag, r in runs.items():
            s = r["stats"]
            per_task[flag] = r["wall"] / s.kept if s.kept else float("nan")
            drops = ", ".join(f"{k}: {v}" for k, v in s.drops.items()) or "none"
            print(
                f"  adversarial={str(flag).lower():5}  {s.kept} kept of {s.seen} seen in "
                f"{r['wall']:.1f} s ({per_task[flag]:.1f} s per kept task; "
                f"{s.test_seconds:.1f} s inside test runs); drops: {drops}"
            )
        ratio = per_task[True] / per_task[False]
        print(
            f"  added cost of the red-team candidates (s per kept task, on / off): {ratio:.3f} "
            f"({(ratio - 1) * 100:+.1f} %)"
        )
        counts = []
        for task_id, ev in runs[True]["tasks"].items():
            results = ev.get("adversarial_results") or []
            n = ev.get("adversarial_candidates", len(results))
            counts.append(n)
            killed = sum(1 for r in results if r.get("killed"))
            rewards = [r.get("reward") for r in results]
            note = f"; note: {ev['adversarial_note']}" if ev.get("adversarial_note") else ""
            print(
                f"    {task_id}: {n} red-team candidates ({killed} killed; rewards {rewards}); "
                f"adversarial floor {ev.get('adversarial_floor')}, nop {ev.get('nop_reward')}, "
                f"gap {ev.get('gameability_gap')}{note}"
            )
        if counts:
            print(
                f"  red-team candidates per kept task: mean {sum(counts) / len(counts):.1f} "
                f"(min {min(counts)}, max {max(counts)})"
            )
        print(f"  python loop: {python_loop_ms()} ms (machine speed now)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
