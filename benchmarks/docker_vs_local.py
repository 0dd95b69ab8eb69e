"""Per-trial overhead of the docker backend against the local one, side by side.

    python benchmarks/docker_vs_local.py [--starts 10] [--execs 50] [--trials 5]

For each backend, on the example task ``textstats-word-count`` (built once first, so builds are
cached): session start, one ``exec`` round trip (``true``), teardown (``close``), each the median
of its repetitions; then whole oracle trials (build lookup, agent, clean-room verifier) with the
trial runner, median wall time and phase times. Backends alternate so a busy host affects both
alike. Prints each number and the ratio docker / local.

The engine: ``DOCKER_HOST`` when it is set; otherwise one started here as the tests start theirs
(``tests/engine.py``: offline, stand-in base images made from Debian's packages; needs root).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TASK = ROOT / "examples" / "tasks" / "textstats-word-count"


def median_s(fn: Callable[[], object], times: int) -> float:
    took = []
    for _ in range(times):
        t0 = time.perf_counter()
        fn()
        took.append(time.perf_counter() - t0)
    return statistics.median(took)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--execs", type=int, default=50)
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()

    engine = None
    if not os.environ.get("DOCKER_HOST"):
        from tests.engine import stand_in, start_engine

        engine = start_engine()
        os.environ["DOCKER_HOST"] = engine.host
        stand_in(engine, "python:3.11-slim")
    try:
        run(args)
    finally:
        if engine is not None:
            engine.stop()


def run(args: argparse.Namespace) -> None:
    from repogym.run.agents import OracleAgent
    from repogym.run.trial import TrialRunner, environment_spec
    from repogym.sandbox import get_backend
    from repogym.taskdir import load_task

    task = load_task(TASK)
    spec = environment_spec(task)
    backends = {name: get_backend(name) for name in ("local", "docker")}
    built = {name: sb.build(spec) for name, sb in backends.items()}  # warm the caches
    rows: dict[str, dict[str, float]] = {name: {} for name in backends}

    for name, sb in backends.items():
        session = sb.start(built[name], spec)
        session.exec("true")
        rows[name]["exec"] = median_s(lambda s=session: s.exec("true"), args.execs)
        session.close()

    starts: dict[str, list[float]] = {name: [] for name in backends}
    closes: dict[str, list[float]] = {name: [] for name in backends}
    for _ in range(args.starts):
        for name, sb in backends.items():
            t0 = time.perf_counter()
            session = sb.start(built[name], spec)
            session.exec("true")
            starts[name].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            session.close()
            closes[name].append(time.perf_counter() - t0)
    for name in backends:
        rows[name]["start (+ first exec)"] = statistics.median(starts[name])
        rows[name]["close"] = statistics.median(closes[name])

    walls: dict[str, list[float]] = {name: [] for name in backends}
    phases: dict[str, dict[str, list[float]]] = {name: {} for name in backends}
    with tempfile.TemporaryDirectory(prefix="rg-bench-") as tmp:
        runners = {name: TrialRunner(sb) for name, sb in backends.items()}
        for i in range(args.trials):
            for name, runner in runners.items():
                t0 = time.perf_counter()
                outcome = runner.run(task, OracleAgent(), out_dir=Path(tmp) / f"{name}-{i}")
                walls[name].append(time.perf_counter() - t0)
                assert outcome.reward == 1.0, (name, outcome.error)
                for phase, timing in outcome.timings.items():
                    if timing.started_at and timing.finished_at:
                        took = datetime.fromisoformat(timing.finished_at) - datetime.fromisoformat(
                            timing.started_at
                        )
                        phases[name].setdefault(phase, []).append(took.total_seconds())
    for name in backends:
        rows[name]["oracle trial"] = statistics.median(walls[name])
        for phase, values in phases[name].items():
            rows[name][f"  {phase}"] = statistics.median(values)

    print(f"{'':28} {'local':>9} {'docker':>9} {'ratio':>7}")
    for key in rows["local"]:
        local, docker = rows["local"][key], rows["docker"].get(key, float("nan"))
        ratio = docker / local if local else float("nan")
        print(f"{key:28} {local:9.3f} {docker:9.3f} {ratio:7.2f}")
    print(
        f"(seconds, medians: {args.starts} starts, {args.execs} execs, {args.trials} trials; "
        f"task {TASK.name})"
    )


if __name__ == "__main__":
    main()
