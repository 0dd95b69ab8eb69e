"""Explorer end to end: snapshot build, /api/search under 50 concurrent clients, first paint.

    python benchmarks/explorer.py [--envs 7225] [--tasks 51498] [--clients 50]
                                  [--requests 4000] [--workers 1] [--json]

1. Builds and publishes a snapshot from the synthetic environments of
   ``benchmarks/explorer_build.py`` (``synth_envs``) and prints build time and size.
2. Serves it with ``repogym.explorer.web.create_app`` under uvicorn in a separate process
   (``--workers`` processes), then runs ``--clients`` concurrent keep-alive HTTP clients
   (threads in two client processes, so the clients' own GIL does not sit in the numbers; a lean
   socket client, so they take little of the CPU the server needs) on
   ``GET /api/search`` with varied words, prefixes, kinds, facet filters, sorts and pages. No
   ``If-None-Match`` is sent: every request runs a query. Prints p50/p95/p99 latency as the
   clients saw it, requests per second, and the server's own ``Server-Timing`` db time, with
   the search result cache off and on, plus one client alone (service time, no queueing).
3. Fetches the home page, its CSS and its JS with ``Accept-Encoding: gzip`` and prints the
   bytes on the wire (headers + compressed bodies) needed for the first paint.

Targets: search p95 < 20 ms at 50 clients, first paint < 12 KB. The machine's load average is
printed beside the numbers: on a shared 2-core machine the latency is mostly queueing.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))

from explorer_build import _LANGS, _TECH, synth_envs  # noqa: E402

from repogym.explorer.index import MemoryReader  # noqa: E402
from repogym.explorer.store import build_snapshot  # noqa: E402

_SERVER = """
import os
from repogym.explorer.store import open_store
from repogym.explorer.web import create_app


def make():
    store = open_store(snapshot=os.environ["REPOGYM_BENCH_SNAPSHOT"])
    return create_app(store, result_cache=int(os.environ["REPOGYM_BENCH_CACHE"]))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _queries(n: int, seed: int = 11) -> list[str]:
    """Varied /api/search URLs: words, prefixes, two words, kinds, facets, sorts, pages."""
    rng = random.Random(seed)
    syllables = ("ka", "lo", "mi", "ne", "ra", "tu", "vi", "so", "pe", "du")
    cats = ("bugfix", "feature", "refactor", "performance", "docs")
    out = []
    for _ in range(n):
        params: list[tuple[str, str]] = []
        r = rng.random()
        if r < 0.35:
            params.append(("q", rng.choice(_TECH)))
        elif r < 0.55:
            params.append(("q", rng.choice(_TECH)[: rng.randint(3, 5)]))  # prefix
        elif r < 0.70:
            params.append(
                ("q", f"{rng.choice(_TECH)} {rng.choice(syllables)}{rng.choice(syllables)}")
            )
        elif r < 0.80:
            params.append(("q", rng.choice(syllables) + rng.choice(syllables)))
        if rng.random() < 0.3:
            params.append(("kind", rng.choice(("harbor", "rows", "openenv"))))
        if rng.random() < 0.4:
            params.append(("f", f"language:{rng.choice(_LANGS)[0]}"))
        if rng.random() < 0.25:
            params.append(("f", f"category:{rng.choice(cats)}"))
        if rng.random() < 0.2:
            params.append(("sort", rng.choice(("name", "tasks"))))
        if rng.random() < 0.2:
            params.append(("page", str(rng.randint(2, 4))))
        out.append("/api/search" + ("?" + urlencode(params) if params else ""))
    return out


_DB_DUR = re.compile(rb"(?im)^server-timing:\s*db;dur=([\d.]+)")
_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)")


class _Conn:
    """A lean HTTP/1.1 keep-alive client for GET (the clients share the server's two cores,
    so they spend as little CPU per request as they can: one send, a few recv)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def get(self, url: str) -> tuple[int, bytes, bytes]:
        """(status, header block, body) of ``GET url``."""
        self.sock.sendall(f"GET {url} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        buf = self.buf
        while (end := buf.find(b"\r\n\r\n")) < 0:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ValueError("connection closed")
            buf += chunk
        head = buf[:end]
        m = _LENGTH.search(head)
        if m is None:
            raise ValueError("no content-length")
        stop = end + 4 + int(m.group(1))
        while len(buf) < stop:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ValueError("connection closed")
            buf += chunk
        self.buf = buf[stop:]
        return int(head[9:12]), head, buf[end + 4 : stop]

    def close(self) -> None:
        self.sock.close()


def _client_proc(
    port: int,
    urls: list[str],
    threads: int,
    start_at: float,
    q: mp.Queue,
    think: float = 0.0,
    duration: float = 0.0,
) -> None:
    """One client process: ``threads`` keep-alive connections sharing ``urls``.

    ``think`` 0: closed loop, each connection sends its next request as soon as it has an
    answer, until ``urls`` are used up. ``think`` > 0: each connection waits a random
    (exponential, mean ``think`` seconds) time before each request, for ``duration`` seconds.
    """
    lat: list[float] = []
    db: list[float] = []
    errors = [0]
    lock = threading.Lock()
    it = itertools.cycle(urls) if think > 0 else iter(urls)
    stop_at = start_at + duration

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        conn = _Conn(port)
        mine, mine_db = [], []
        while True:
            if think > 0:
                time.sleep(rng.expovariate(1.0 / think))
                if time.time() >= stop_at:
                    break
            with lock:
                url = next(it, None)
            if url is None:
                break
            t0 = time.perf_counter()
            try:
                status, head, _body = conn.get(url)
            except (OSError, ValueError):
                errors[0] += 1
                conn.close()
                conn = _Conn(port)
                continue
            mine.append(time.perf_counter() - t0)
            if status != 200:
                errors[0] += 1
            m = _DB_DUR.search(head)
            if m:
                mine_db.append(float(m.group(1)) / 1000)
        conn.close()
        with lock:
            lat.extend(mine)
            db.extend(mine_db)

    while time.time() < start_at:
        time.sleep(0.005)
    ts = [threading.Thread(target=worker, args=(port * 1000 + i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    q.put((lat, db, errors[0]))


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def _wire_bytes(port: int, path: str) -> tuple[int, int, str]:
    """(bytes on the wire incl. status line and headers, status, content-encoding)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip, br\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    status = int(head.split(" ", 2)[1])
    enc = re.search(r"(?im)^content-encoding:\s*(\S+)", head)
    return len(data), status, enc.group(1) if enc else "identity"


def _wait_up(port: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the server exited before it was ready")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the server did not come up")


def _start_server(out: Path, cache: int, workers: int) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable, "-m", "uvicorn", "--factory", "_bench_app:make",
            "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
            "--log-level", "error", "--no-access-log",
        ],
        env={
            **os.environ,
            "REPOGYM_BENCH_SNAPSHOT": str(out / "publish"),
            "REPOGYM_BENCH_CACHE": str(cache),
            "PYTHONPATH": str(out) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        },
    )  # fmt: skip
    try:
        _wait_up(port, server)
    except BaseException:
        _stop(server)
        raise
    return server, port


def _stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def _load(
    port: int, urls: list[str], clients: int, think: float = 0.0, duration: float = 0.0
) -> dict[str, object]:
    """Run ``clients`` concurrent keep-alive clients over ``urls``; latency percentiles.

    ``think`` > 0: paced clients (mean think time ``think`` s, for ``duration`` s)."""
    warm = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for url in _queries(100, seed=5):  # imports, first connections, the env cache
        warm.request("GET", url)
        warm.getresponse().read()
    warm.close()
    procs_n = 2 if clients >= 2 else 1
    per = [clients // procs_n + (i < clients % procs_n) for i in range(procs_n)]
    q: mp.Queue = mp.Queue()
    start_at = time.time() + 1.0
    procs = [
        mp.Process(
            target=_client_proc,
            args=(port, urls[i::procs_n], per[i], start_at, q, think, duration),
        )
        for i in range(procs_n)
    ]
    for p in procs:
        p.start()
    lat: list[float] = []
    db: list[float] = []
    errors = 0
    for _ in procs:
        a, b, c = q.get()
        lat += a
        db += b
        errors += c
    for p in procs:
        p.join()
    wall = time.time() - start_at
    return {
        "requests": len(lat),
        "errors": errors,
        "p50_ms": round(_pct(lat, 50) * 1000, 2),
        "p95_ms": round(_pct(lat, 95) * 1000, 2),
        "p99_ms": round(_pct(lat, 99) * 1000, 2),
        "mean_ms": round(statistics.fmean(lat) * 1000, 2) if lat else None,
        "req_per_s": round(len(lat) / wall, 1),
        "server_db_p50_ms": round(_pct(db, 50) * 1000, 2),
        "server_db_p95_ms": round(_pct(db, 95) * 1000, 2),
        "load_average": round(os.getloadavg()[0], 1),
    }


def _first_paint(port: int) -> dict[str, object]:
    """Bytes on the wire for the home page plus the render-blocking CSS and JS it links."""
    home_bytes, status, enc = _wire_bytes(port, "/")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/")
    html = conn.getresponse().read().decode()
    conn.close()
    css = re.search(r'<link rel="stylesheet" href="([^"]+)"', html).group(1)  # type: ignore[union-attr]
    js = re.search(r'<script src="([^"]+)"', html).group(1)  # type: ignore[union-attr]
    css_bytes, _, css_enc = _wire_bytes(port, css)
    js_bytes, _, js_enc = _wire_bytes(port, js)
    return {
        "bytes": home_bytes + css_bytes + js_bytes,
        "html_bytes": home_bytes,
        "css_bytes": css_bytes,
        "js_bytes": js_bytes,
        "encodings": f"html {enc}, css {css_enc}, js {js_enc}",
        "home_status": status,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", type=int, default=7225)
    ap.add_argument("--tasks", type=int, default=51498)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    ap.add_argument(
        "--think", type=float, default=0.25, help="paced run: mean think time per client (s)"
    )
    ap.add_argument("--paced-seconds", type=float, default=15.0, help="paced run length (s)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    result: dict[str, object] = {
        "clients": args.clients,
        "workers": args.workers,
        "think_ms": args.think * 1000,
    }
    out = Path(tempfile.mkdtemp(prefix="repogym-explorer-web-bench-"))
    try:
        readers = [MemoryReader(env, tasks) for env, tasks in synth_envs(args.envs, args.tasks)]
        info = build_snapshot(readers, out / "publish")
        del readers
        result.update(
            envs=info["envs"],
            tasks=info["tasks"],
            build_seconds=round(float(info["seconds"]), 3),
            snapshot_mb=round(info["bytes"] / 1e6, 1),
        )
        (out / "_bench_app.py").write_text(_SERVER)
        urls = _queries(args.requests)
        result["distinct_queries"] = len(set(urls))
        for label, cache in (("no_cache", 0), ("cached", 2048)):
            server, port = _start_server(out, cache, args.workers)
            try:
                if label == "no_cache":  # service time without queueing, for comparison
                    result["search_one_client"] = _load(port, urls[:500], 1)
                result[f"search_{label}"] = _load(port, urls, args.clients)
                result[f"paced_{label}"] = _load(
                    port, urls, args.clients, think=args.think, duration=args.paced_seconds
                )
                if label == "cached":
                    result["first_paint"] = _first_paint(port)
            finally:
                _stop(server)
        result["load_average"] = round(os.getloadavg()[0], 1)
        result["cpus"] = os.cpu_count()
    finally:
        shutil.rmtree(out, ignore_errors=True)

    if args.json:
        print(json.dumps(result))
        return 0
    r: dict = result
    print(
        f"build: {r['envs']} envs, {r['tasks']} tasks in {r['build_seconds']:.2f} s, "
        f"snapshot {r['snapshot_mb']} MB"
    )
    print(f"server: {r['workers']} uvicorn worker(s); clients in 2 separate processes")
    for label, title in (("no_cache", "result cache off"), ("cached", "result cache on")):
        for run, how in (
            ("search", "saturated (closed loop, no think time)"),
            ("paced", f"paced (think time mean {r['think_ms']:.0f} ms, exponential)"),
        ):
            s = r[f"{run}_{label}"]
            print(
                f"/api/search, {r['clients']} clients {how}, {title}: {s['requests']} requests, "
                f"{s['errors']} errors; p50 {s['p50_ms']} ms, p95 {s['p95_ms']} ms, "
                f"p99 {s['p99_ms']} ms; {s['req_per_s']} req/s; server db p50 "
                f"{s['server_db_p50_ms']} ms, p95 {s['server_db_p95_ms']} ms; "
                f"load average {s['load_average']}"
            )
    one = r["search_one_client"]
    print(
        f"/api/search, 1 client, result cache off: {one['requests']} requests; p50 "
        f"{one['p50_ms']} ms, p95 {one['p95_ms']} ms; server db p50 {one['server_db_p50_ms']} ms, "
        f"p95 {one['server_db_p95_ms']} ms"
    )
    fp = r["first_paint"]
    print(
        f"first paint: {fp['bytes']} bytes on the wire (HTML {fp['html_bytes']}, CSS "
        f"{fp['css_bytes']}, JS {fp['js_bytes']}; {fp['encodings']})"
    )
    print(
        f"targets: search p95 < 20 ms, first paint < 12 KB; machine: {r['cpus']} CPUs, "
        f"load average {r['load_average']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
