"""Rollouts started from the explorer's web API, many at once.

Run: ``.venv/bin/python benchmarks/explorer_runs.py [--runs 8] [--agent oracle]``.

Starts ``repogym explore examples/tasks --max-concurrent-runs N`` as its own process (the real
command, on 127.0.0.1, a fresh runs folder), then N visitors, each with its own cookies and
CSRF token, ``POST /api/runs`` at the same moment and follow their run's events over SSE. Prints
per run: time from the start request to the first event (target < 300 ms), to the first phase
event (the trial has started: ``environment_setup``), to the reward, and the reward; then the
wall time, errors and the median/max of each column. A first warm-up run builds the task's
environment so the numbers are of rollouts, not of the one-time build.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
TASK = "textstats-word-count"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_explorer(port: int, runs_dir: Path, concurrent: int) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "repogym.cli",
        "explore",
        str(ROOT / "examples" / "tasks"),
        "--port",
        str(port),
        "--runs-dir",
        str(runs_dir),
        "--max-concurrent-runs",
        str(concurrent),
        "--runs-per-hour",
        "1000",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            doc = httpx.get(f"http://127.0.0.1:{port}/api/tasks/tasks/{TASK}", timeout=1)
            if doc.status_code == 200 and not doc.json().get("pending"):
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the explorer did not start: " + (proc.stderr.read() or b"").decode()[-500:])


def one_run(base: str, agent: str, barrier: threading.Barrier | None) -> dict[str, Any]:
    with httpx.Client(base_url=base, timeout=300) as http:
        csrf = http.get("/api/runs/session").json()["csrf"]
        if barrier is not None:
            barrier.wait()
        t0 = time.perf_counter()
        r = http.post(
            "/api/runs",
            json={"env": "tasks", "task": TASK, "agent": agent},
            headers={"X-CSRF-Token": csrf, "Origin": base},
        )
        if r.status_code != 202:
            return {"error": f"{r.status_code} {r.text}"}
        out: dict[str, Any] = {"accepted": time.perf_counter() - t0}
        name = ""
        with http.stream("GET", r.json()["events"]) as resp:
            for line in resp.iter_lines():
                now = time.perf_counter() - t0
                if line.startswith("event: "):
                    name = line[7:]
                    continue
                if not line.startswith("data: "):
                    continue
                if name == "end":
                    break
                ev = json.loads(line[6:])
                out.setdefault("first_event", now)
                if ev["kind"] == "phase":
                    out.setdefault("first_phase", now)
                if ev["kind"] == "reward":
                    out["reward_at"], out["reward"] = now, ev["data"].get("reward")
        out["status"] = http.get(f"/api/runs/{r.json()['id']}").json()["status"]
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--agent", default="oracle", choices=["oracle", "nop"])
    args = ap.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="repogym-bench-runs-") as tmp:
        env = dict(os.environ)
        proc = start_explorer(port, Path(tmp), args.runs)
        try:
            warm = one_run(base, args.agent, None)
            print(
                f"warm-up run (builds the environment): reward {warm.get('reward')}, "
                f"{warm.get('reward_at', 0):.2f} s"
            )
            barrier = threading.Barrier(args.runs)
            results: list[dict[str, Any]] = [{} for _ in range(args.runs)]

            def worker(i: int) -> None:
                try:
                    results[i] = one_run(base, args.agent, barrier)
                except Exception as exc:  # noqa: BLE001 - counted as an error
                    results[i] = {"error": str(exc)}

            t0 = time.perf_counter()
            threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.runs)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        del env
    print(
        f"{args.runs} concurrent {args.agent} runs of {TASK} from the web API "
        f"(os.cpu_count()={os.cpu_count()})"
    )
    print(
        f"{'run':>4} {'accepted ms':>12} {'first event ms':>15} {'first phase ms':>15} "
        f"{'reward s':>9} {'reward':>7} status"
    )
    for i, r in enumerate(results):
        if "error" in r:
            print(f"{i:>4} error: {r['error']}")
            continue
        print(
            f"{i:>4} {r['accepted'] * 1000:>12.1f} {r['first_event'] * 1000:>15.1f} "
            f"{r.get('first_phase', float('nan')) * 1000:>15.1f} {r.get('reward_at', 0):>9.2f} "
            f"{r.get('reward')!s:>7} {r.get('status')}"
        )
    ok = [r for r in results if "error" not in r]
    errors = len(results) - len(ok) + sum(1 for r in ok if r.get("status") != "done")
    if ok:
        for key, label, scale in (
            ("first_event", "start → first event", 1000),
            ("first_phase", "start → first phase event", 1000),
            ("reward_at", "start → reward", 1),
        ):
            vals = [r[key] * scale for r in ok if key in r]
            unit = "ms" if scale == 1000 else "s"
            print(
                f"{label}: median {statistics.median(vals):.1f} {unit}, max {max(vals):.1f} {unit}"
            )
    print(
        f"wall {wall:.2f} s for {args.runs} runs; errors {errors}; "
        f"rewards {sorted(str(r.get('reward')) for r in ok)}"
    )


if __name__ == "__main__":
    main()
