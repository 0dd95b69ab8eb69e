"""The cost of clean-room verification against in-place verification, per trial.

    python benchmarks/verify.py [--runs 5] [--agent oracle|nop|command:'...']

Generates one task from the embedded example repository (the sandbox layer cache is warm after
the first run), then runs the same agent on it ``--runs`` times with each verification mode,
alternating the modes so a busy host affects both alike. Prints each mode's median trial wall
time, its verifier phase, the clean room's own export/apply seconds, and the ratio clean room /
in place (the target: clean room adds less than 15 % to a trial).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path

from _calibrate import python_loop_ms

from repogym.example_repo import build_example_repo
from repogym.harbor import load_task
from repogym.pipelines import generate
from repogym.run.agents import make_agent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.spec import GenerationInput


def _phase(result: dict, name: str) -> float:
    t = result.get(name) or {}
    if not t.get("started_at") or not t.get("finished_at"):
        return 0.0
    return (
        datetime.fromisoformat(t["finished_at"]) - datetime.fromisoformat(t["started_at"])
    ).total_seconds()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--agent", default="oracle")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="repogym-verifybench-"))
    try:
        repo = build_example_repo(work / "statkit")
        result = generate(
            GenerationInput(
                repo=str(repo),
                pipeline="commit_runtime",
                out=work / "out",
                limit=1,
                options={"mutants": 0, "reruns": 0, "verify_reruns": 0},
            )
        )
        kept = [o for o in result.outcomes if o.kept and o.task_dir]
        if not kept:
            raise SystemExit("no task was generated from the example repository")
        task = load_task(kept[0].task_dir)
        backend = get_backend("local")
        runners = {
            "in_place": TrialRunner(backend, verification="in_place"),
            "clean_room": TrialRunner(backend, verification="clean_room"),
        }
        for runner in runners.values():
            runner.run(task, make_agent(args.agent))  # warm-up: build, caches
        walls: dict[str, list[float]] = {m: [] for m in runners}
        verifier: dict[str, list[float]] = {m: [] for m in runners}
        carry: list[float] = []
        rewards: dict[str, set] = {m: set() for m in runners}
        for _ in range(args.runs):
            for mode, runner in runners.items():
                t0 = time.monotonic()
                outcome = runner.run(task, make_agent(args.agent))
                walls[mode].append(time.monotonic() - t0)
                verifier[mode].append(_phase(outcome.result, "verifier"))
                rewards[mode].add(outcome.reward)
                if mode == "clean_room":
                    seconds = (outcome.result.get("verification") or {}).get("seconds", {})
                    carry.append(sum(seconds.values()))
        print(f"task {task.id} ({args.agent}, {args.runs} runs per mode)")
        for mode in runners:
            print(
                f"  {mode:10}  trial median {statistics.median(walls[mode]):.2f} s "
                f"(min {min(walls[mode]):.2f}, max {max(walls[mode]):.2f}); verifier phase "
                f"{statistics.median(verifier[mode]):.2f} s; rewards {sorted(rewards[mode])}"
            )
        ratio = statistics.median(walls["clean_room"]) / statistics.median(walls["in_place"])
        print(f"  clean room's export + apply: median {statistics.median(carry):.3f} s")
        print(f"  ratio clean room / in place: {ratio:.3f} ({(ratio - 1) * 100:+.1f} %)")
        print(f"  python loop: {python_loop_ms()} ms (machine speed now)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
