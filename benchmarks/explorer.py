"""Explorer end to end: snapshot build, /api/search under 50 concurrent clients, first paint.

    python benchmarks/explorer.py [--envs 7225] [--tasks 51498] [--clients 50] [--seconds 10]
                                  [--requests 4000] [--workers 2] [--json]

1. Indexes the synthetic environments of ``benchmarks/explorer_build.py`` (``synth_envs``)
   and prints the two stages of ``build_snapshot``: the snapshot build (index rows -> checked,
   published SQLite with FTS; target < 1 s) and the ingest before it (read, withhold, pack).
2. Serves the snapshot with ``repogym.explorer.web.create_app`` under uvicorn in separate
   processes (``--workers``, default 2: one per core here) and loads ``GET /api/search`` with
   ``--clients`` keep-alive connections in a closed loop (each sends its next request as soon
   as it has an answer) over ``--requests`` varied URLs (words, prefixes, kinds, facet filters,
   sorts, pages; no ``If-None-Match``). The load generator is ``wrk`` when it is on PATH
   (``apt-get install wrk``: C, little CPU taken from the server it shares the cores with),
   else Python socket clients in two processes. Each server (result cache off, then on) is
   loaded twice: fresh (its caches empty) and again (warm). Then paced Python clients
   (exponential think time) and one client alone.
3. Fetches the home page, its CSS and its JS with ``Accept-Encoding: gzip`` and prints the
   bytes on the wire (headers + compressed bodies) needed for the first paint.

Targets: snapshot build < 1 s, search p95 < 20 ms at 50 clients, first paint < 12 KB. The
machine's load average is printed beside the numbers.
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

from _calibrate import python_loop_ms  # noqa: E402
from explorer_build import _LANGS, _TECH, synth_envs  # noqa: E402

from repogym.explorer.build import build_snapshot  # noqa: E402
from repogym.explorer.index import MemoryReader  # noqa: E402

_SERVER = """
import os
from repogym.explorer.store import open_store
from repogym.explorer.web import create_app
from repogym.explorer.web.app import settle_heap


def make():
    store = open_store(snapshot=os.environ["REPOGYM_BENCH_SNAPSHOT"])
    app = create_app(store, result_cache=int(os.environ["REPOGYM_BENCH_CACHE"]))
    settle_heap()  # as repogym explore does before serving
    return app
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


_WRK_SCRIPT = """
local urls = {}
for line in io.lines(os.getenv("REPOGYM_BENCH_URLS")) do urls[#urls + 1] = line end
local threads = 0
function setup(thread)
  thread:set("first", threads * math.floor(#urls / 2))
  threads = threads + 1
end
function init(args)
  n = first or 0
end
function request()
  n = n + 1
  return wrk.format("GET", urls[(n % #urls) + 1])
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'REPOGYM {"p50_ms": %.3f, "p95_ms": %.3f, "p99_ms": %.3f, "max_ms": %.3f, '
    .. '"requests": %d, "seconds": %.3f, "errors": %d}\\n',
    latency:percentile(50) / 1000, latency:percentile(95) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000, summary.requests,
    summary.duration / 1e6, e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def _wrk_load(port: int, urls: list[str], clients: int, seconds: float, folder: Path) -> dict:
    """Closed-loop load with wrk (2 threads, ``clients`` connections) for ``seconds``."""
    url_file = folder / "urls.txt"
    url_file.write_text("\n".join(urls) + "\n")
    script = folder / "search.lua"
    script.write_text(_WRK_SCRIPT)
    proc = subprocess.run(
        ["wrk", "-t2", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--timeout", "10s",
         "-s", str(script), f"http://127.0.0.1:{port}"],
        env={**os.environ, "REPOGYM_BENCH_URLS": str(url_file)},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    line = next(x for x in proc.stdout.splitlines() if x.startswith("REPOGYM "))
    r = json.loads(line.removeprefix("REPOGYM "))
    r["req_per_s"] = round(r["requests"] / r["seconds"], 1)
    r["load_average"] = round(os.getloadavg()[0], 1)
    r["generator"] = "wrk"
    return r


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
    ap.add_argument("--workers", type=int, default=2, help="uvicorn worker processes")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each wrk run (s)")
    ap.add_argument(
        "--think", type=float, default=0.25, help="paced run: mean think time per client (s)"
    )
    ap.add_argument("--paced-seconds", type=float, default=15.0, help="paced run length (s)")
    ap.add_argument(
        "--python-clients", action="store_true", help="use the Python clients even if wrk is here"
    )
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
            build_seconds=round(float(info["snapshot_seconds"]), 3),
            ingest_seconds=round(float(info["ingest_seconds"]), 3),
            snapshot_mb=round(info["bytes"] / 1e6, 1),
            pack_mb=round(info["pack_bytes"] / 1e6, 1),
        )
        (out / "_bench_app.py").write_text(_SERVER)
        urls = _queries(args.requests)
        result["distinct_queries"] = len(set(urls))
        wrk = shutil.which("wrk") and not args.python_clients
        result["generator"] = "wrk" if wrk else "python"

        def saturated(port: int) -> dict:
            if wrk:
                return _wrk_load(port, urls, args.clients, args.seconds, out)
            return _load(port, urls, args.clients)

        for label, cache in (("no_cache", 0), ("cached", 2048)):
            server, port = _start_server(out, cache, args.workers)
            try:
                result[f"fresh_{label}"] = saturated(port)  # a fresh server: caches empty
                result[f"search_{label}"] = saturated(port)  # the same server, warm
                if label == "no_cache":
                    result["search_one_client"] = _load(port, urls[:500], 1)
                result[f"paced_{label}"] = _load(
                    port, urls, args.clients, think=args.think, duration=args.paced_seconds
                )
                if label == "cached":
                    result["first_paint"] = _first_paint(port)
            finally:
                _stop(server)
        result["load_average"] = round(os.getloadavg()[0], 1)
        result["cpus"] = os.cpu_count()
        result["python_loop_ms"] = python_loop_ms()
    finally:
        shutil.rmtree(out, ignore_errors=True)

    if args.json:
        print(json.dumps(result))
        return 0
    r: dict = result
    print(
        f"build: {r['envs']} envs, {r['tasks']} tasks; snapshot build {r['build_seconds']:.2f} s "
        f"(index rows -> checked, published SQLite), snapshot {r['snapshot_mb']} MB; before "
        f"it, ingest {r['ingest_seconds']:.2f} s (read, withhold, pack {r['pack_mb']} MB)"
    )
    print(
        f"server: {r['workers']} uvicorn worker(s); load generator: {r['generator']}; "
        f"{r['distinct_queries']} distinct URLs"
    )
    runs = [
        ("fresh_no_cache", "saturated, fresh server (caches empty), result cache off"),
        ("search_no_cache", "saturated, warm, result cache off"),
        ("fresh_cached", "saturated, fresh server (caches empty), result cache on"),
        ("search_cached", "saturated, warm, result cache on"),
        ("paced_no_cache", f"paced (think time mean {r['think_ms']:.0f} ms), result cache off"),
        ("paced_cached", f"paced (think time mean {r['think_ms']:.0f} ms), result cache on"),
    ]
    for key, how in runs:
        s = r[key]
        print(
            f"/api/search, {r['clients']} clients {how}: {s['requests']} requests, "
            f"{s['errors']} errors; p50 {s['p50_ms']:.2f} ms, p95 {s['p95_ms']:.2f} ms, "
            f"p99 {s['p99_ms']:.2f} ms; {s['req_per_s']} req/s; load average {s['load_average']}"
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
        f"targets: snapshot build < 1 s, search p95 < 20 ms, first paint < 12 KB; machine: "
        f"{r['cpus']} CPUs, a fixed Python loop takes {r['python_loop_ms']} ms (lower is faster), "
        f"load average {r['load_average']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
