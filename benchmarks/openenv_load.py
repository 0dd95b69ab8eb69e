"""OpenEnv server load: N concurrent sessions, each reset + 20 exec steps + evaluate.

Run: ``.venv/bin/python benchmarks/openenv_load.py [--sessions 16 32] [--steps 20]``.
Columns: ``left`` = sandboxes the server still counts open, ``procs`` = processes left below it.
Starts ``repogym serve examples/tasks`` on a free port, drives it with OpenEnv's own async client
(one WebSocket per session), and prints p50/p95 step latency, reset/evaluate latency, errors,
and sandboxes left behind: the server's open-sandbox count and the processes still running
under the server once every session has closed (both must be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from openenv.core.generic_client import GenericEnvClient

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "examples" / "tasks"
TOKEN = "bench-orchestrator-token"
FIX = "sed -i 's/text.split(\" \")/text.split()/' textstats/counts.py"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))] if values else 0.0


def descendants(pid: int) -> list[int]:
    """Processes below ``pid`` (from /proc), except the local backend's fork server, which
    lives as long as the server; sandbox sessions run below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return [p for p in out if b"_forkserver.py" not in _cmdline(p)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


async def episode(url: str, steps: int, lat: dict[str, list[float]], errors: list[str]) -> None:
    client = GenericEnvClient(base_url=url, message_timeout_s=600)
    try:
        await client.connect()
        t = time.perf_counter()
        await client.reset(task_id="textstats-word-count")
        lat["reset"].append(time.perf_counter() - t)
        for i in range(steps):
            cmd = FIX if i == steps - 1 else f"echo step {i} && ls textstats | wc -l"
            t = time.perf_counter()
            res = await client.step({"type": "exec", "command": cmd})
            lat["step"].append(time.perf_counter() - t)
            if res.observation.get("exit_code") != 0 or res.observation.get("error"):
                errors.append(f"exec {i}: {res.observation}")
        t = time.perf_counter()
        res = await client.step({"type": "evaluate", "metadata": {"orchestrator_token": TOKEN}})
        lat["evaluate"].append(time.perf_counter() - t)
        if res.reward != 1.0:
            errors.append(f"evaluate: reward {res.reward} ({res.observation.get('error')})")
    except Exception as exc:  # noqa: BLE001 - a benchmark counts failures, it does not stop
        errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        await client.close()


async def wave(url: str, sessions: int, steps: int) -> tuple[dict[str, list[float]], list[str]]:
    lat: dict[str, list[float]] = {"reset": [], "step": [], "evaluate": []}
    errors: list[str] = []
    await asyncio.gather(*(episode(url, steps, lat, errors) for _ in range(sessions)))
    return lat, errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sessions", type=int, nargs="+", default=[16, 32])
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "repogym.cli", "serve", str(TASKS), "--port", str(port),
           "--max-sessions", str(max(args.sessions)), "--orchestrator-token", TOKEN]  # fmt: skip
    log = open(os.devnull, "wb")  # noqa: SIM115 - lives as long as the server
    server = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/health", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("server did not start") from None
                time.sleep(0.2)
        asyncio.run(wave(url, 1, 1))  # build the environment once, outside the measurement
        head = ("sessions", "wall s", "step p50", "step p95", "reset p50", "eval p50", "eval p95")
        print("{:>8} {:>7} {:>9} {:>9} {:>10} {:>9} {:>9}".format(*head), end=" ")
        print(f"{'errors':>6} {'left':>4} {'procs':>5}")
        for n in args.sessions:
            t0 = time.perf_counter()
            lat, errors = asyncio.run(wave(url, n, args.steps))
            wall = time.perf_counter() - t0
            left = -1
            for _ in range(50):  # sockets close asynchronously on the server side
                left = httpx.get(f"{url}/repogym/status", timeout=10).json()["open_sandboxes"]
                if left == 0:
                    break
                time.sleep(0.1)
            procs = len(descendants(server.pid))
            print(
                f"{n:>8} {wall:>7.1f} {pct(lat['step'], 0.5) * 1e3:>7.1f}ms "
                f"{pct(lat['step'], 0.95) * 1e3:>7.1f}ms {pct(lat['reset'], 0.5) * 1e3:>8.1f}ms "
                f"{pct(lat['evaluate'], 0.5):>8.2f}s {pct(lat['evaluate'], 0.95):>8.2f}s "
                f"{len(errors):>6} {left:>4} {procs:>5}"
            )
            for e in errors[:5]:
                print("   error:", e[:300])
            if lat["step"]:
                print(f"   step mean {statistics.fmean(lat['step']) * 1e3:.1f} ms over "
                      f"{len(lat['step'])} steps")  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
