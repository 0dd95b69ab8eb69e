"""Throughput of run-style work (oracle trials) here and on Ray, and what 100 nodes would do.

    python benchmarks/scale.py [--trials 24] [--rounds 3] [--jobs 2]

Oracle trials of the example tasks ``textstats-word-count`` and ``hello-file`` (half each),
through :func:`repogym.run.job.run_job` — what ``repogym run`` does — in four set-ups:

* ``local``: ``--jobs`` threads in this process (``repogym run --jobs 2``);
* ``local-units``: the same units Ray gets (task shipped as an archive, unpacked in the
  worker cache, result returned as data) on the local executor's ``--jobs`` threads: what
  shipping costs without Ray;
* ``ray-1`` / ``ray-2``: a local Ray cluster (``ray.cluster_utils.Cluster``; a head with no
  CPUs and 1 or 2 worker nodes of 1 CPU each: as many trials at once as ``ray-2``'s nodes).

Each set-up first runs an untimed warm-up (one trial per task per slot: Ray worker processes
start, import repogym and load each environment from the warm layer cache), then ``--rounds``
timed rounds of ``--trials`` trials; the best round is reported (the least disturbed on a
shared host) with the median beside it. Printed: trials/s; the ratios ray-2/ray-1 and
ray-2/local; the trial's own time (its ``started_at``…``finished_at`` inside the worker); the
overhead per unit (slot-seconds per trial minus the trial's own time: scheduling, shipping,
returning the result, recording it); the driver process's CPU per unit (with Ray:
submitting, receiving, recording, Ray's own driver threads; in the local set-ups it also
holds the trials' Python work); and a projection for 100 nodes from those measured costs.

All nodes here share one machine (2 cores on the development hosts): ``ray-2`` cannot be twice
``ray-1`` when the trials themselves need the cores; the projection uses per-unit costs, not
this machine's ratio.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.executors import LocalExecutor, RayExecutor
from repogym.run.job import run_job
from repogym.taskdir import load_task

ROOT = Path(__file__).resolve().parent.parent
TASKS = ("textstats-word-count", "hello-file")
PROJECTED_NODES = 100


@dataclass
class Measured:
    name: str
    slots: int
    trials: int
    wall_s: float
    own_s: list[float]
    driver_cpu_s: float
    warmup_s: float
    errors: int

    @property
    def per_s(self) -> float:
        return self.trials / self.wall_s

    @property
    def own_mean(self) -> float:
        return statistics.fmean(self.own_s) if self.own_s else 0.0

    @property
    def overhead(self) -> float:
        """Slot-seconds per trial beyond the trial's own time."""
        return self.wall_s * self.slots / self.trials - self.own_mean


def _own_seconds(result: dict[str, Any]) -> float | None:
    a, b = result.get("started_at"), result.get("finished_at")
    if not a or not b:
        return None
    return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()


def _run(tasks: list[Any], attempts: int, out: Path, executor: Any, jobs: int) -> tuple:
    cpu0, t0 = time.process_time(), time.perf_counter()
    outcomes, summary, _ = run_job(
        tasks, "oracle", jobs=jobs, attempts=attempts, out_dir=out, executor=executor
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    own = [s for o in outcomes if (s := _own_seconds(o.result)) is not None]
    bad = sum(1 for o in outcomes if o.reward != 1.0)
    return wall, cpu, own, bad


def measure(
    name: str, tasks: list[Any], args: argparse.Namespace, slots: int, work: Path, executor: Any
) -> Measured:
    """A warm-up, then ``--rounds`` timed rounds; the best round is kept (on a shared host the
    least disturbed one), the median throughput printed beside it."""
    jobs = args.jobs if executor is None else 1
    t0 = time.perf_counter()
    _run(tasks, slots, work / f"{name}-warmup", executor, jobs)
    warmup = time.perf_counter() - t0
    attempts = max(1, args.trials // len(tasks))
    rounds = []
    for r in range(args.rounds):
        wall, cpu, own, bad = _run(tasks, attempts, work / f"{name}-{r}", executor, jobs)
        rounds.append(Measured(name, slots, attempts * len(tasks), wall, own, cpu, warmup, bad))
    m = max(rounds, key=lambda x: x.per_s)
    median = statistics.median(x.per_s for x in rounds)
    bad = sum(x.errors for x in rounds)
    print(
        f"{name:12s} {m.per_s:6.2f} trials/s (median {median:5.2f}; {m.trials} trials in "
        f"{m.wall_s:5.2f}s, {slots} at once; trial {m.own_mean * 1000:4.0f} ms, overhead/unit "
        f"{m.overhead * 1000:4.0f} ms, driver CPU/unit {m.driver_cpu_s / m.trials * 1000:4.1f} "
        f"ms; warm-up {warmup:.1f}s" + (f"; {bad} trials without reward 1" if bad else "") + ")",
        flush=True,
    )
    return m


def ray_cluster(workers: int) -> Any:
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
    )
    for _ in range(workers):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    return cluster


def on_ray(
    name: str, workers: int, tasks: list[Any], args: argparse.Namespace, work: Path
) -> Measured:
    import ray

    cluster = ray_cluster(workers)
    try:
        return measure(name, tasks, args, workers, work, RayExecutor(cluster.address))
    finally:
        ray.shutdown()
        cluster.shutdown()


def project(ray1: Measured, ray2: Measured, slots_per_node: int) -> None:
    trial = ray1.own_mean  # one trial at a time: no contention between trials
    overhead = max(ray1.overhead, 0.0)
    driver = (ray1.driver_cpu_s + ray2.driver_cpu_s) / max(ray1.trials + ray2.trials, 1)
    nodes_bound = PROJECTED_NODES * slots_per_node / (trial + overhead)
    driver_bound = 1.0 / driver if driver > 0 else float("inf")
    print(
        f"\nprojection for {PROJECTED_NODES} nodes × {slots_per_node} trial(s) at once each:\n"
        f"  nodes:  {PROJECTED_NODES} × {slots_per_node} / ({trial * 1000:.0f} ms trial + "
        f"{overhead * 1000:.0f} ms overhead) = {nodes_bound:,.0f} trials/s\n"
        f"  driver: 1 / {driver * 1000:.1f} ms CPU per unit (submit, receive, record) = "
        f"{driver_bound:,.0f} trials/s\n"
        f"  => about {min(nodes_bound, driver_bound):,.0f} trials/s "
        f"({'driver' if driver_bound < nodes_bound else 'nodes'}-bound)\n"
        "  assumptions: every node like this one running trials of this size uncontended "
        "(the ray-1 trial time); the per-unit overhead measured on ray-1 (scheduling, "
        "shipping, result) does not grow with the cluster; one driver process records every "
        "result serially; each node already holds the environment's layers (a warm local or "
        "shared cache) and the task archives; Ray's own scheduler (GCS, thousands of "
        "tasks/s) is not the limit at this rate."
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=24, help="timed trials per round")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per set-up (best kept)")
    ap.add_argument("--jobs", type=int, default=2, help="threads of the local set-ups")
    ap.add_argument(
        "--slots-per-node", type=int, default=8, help="trials at once per node in the projection"
    )
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="repogym-scalebench-"))
    try:
        for name in TASKS:
            shutil.copytree(ROOT / "examples" / "tasks" / name, work / "tasks" / name)
        tasks = [load_task(work / "tasks" / name) for name in TASKS]
        print(
            f"oracle trials of {', '.join(TASKS)}; {os.cpu_count()} cores; "
            f"Python {sys.version.split()[0]}",
            flush=True,
        )
        local = measure("local", tasks, args, args.jobs, work, None)
        units = measure("local-units", tasks, args, args.jobs, work, LocalExecutor(args.jobs))
        ray1 = on_ray("ray-1", 1, tasks, args, work)
        ray2 = on_ray("ray-2", 2, tasks, args, work)
        print(
            f"\nray-2 / ray-1: {ray2.per_s / ray1.per_s:.2f}×   ray-2 / local: "
            f"{ray2.per_s / local.per_s:.2f}×   local-units / local: "
            f"{units.per_s / local.per_s:.2f}×"
        )
        print(
            f"scheduler overhead per unit (Ray time minus the trial's own): ray-1 "
            f"{ray1.overhead * 1000:.0f} ms, ray-2 {ray2.overhead * 1000:.0f} ms "
            f"(local threads {local.overhead * 1000:.0f} ms, local units "
            f"{units.overhead * 1000:.0f} ms)"
        )
        project(ray1, ray2, args.slots_per_node)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
