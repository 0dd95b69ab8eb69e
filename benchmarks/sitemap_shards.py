"""The sitemap of a big catalog, served shard by shard: time, peak memory and bytes.

    python benchmarks/sitemap_shards.py [--envs 7225] [--tasks 51000] [--hidden 0.02]
                                        [--private 3] [--full] [--json]

1. Builds a snapshot of ``--tasks`` synthetic tasks in ``--envs`` environments
   (``benchmarks/explorer_build.py``'s ``synth_envs``; ``--minimal`` tasks unless ``--full``:
   the sitemap reads index rows only, never task pages), ``--private`` of the environments
   marked private.
2. Serves it with the real app under uvicorn in its own process, a curator hiding a fraction
   ``--hidden`` of the environments (``$REPOGYM_BENCH_HIDDEN``, a file of ids).
3. Fetches ``/sitemap.xml`` and then every shard it names, one at a time, each twice (first
   request, then again; plus one ``If-None-Match`` revalidation), with ``Accept-Encoding:
   gzip``, and prints per answer: milliseconds, bytes (raw and on the wire), URLs, and the
   server's peak resident memory while answering it (``VmHWM`` from ``/proc``, reset through
   ``/proc/<pid>/clear_refs`` before each request), next to its memory before the first.

Target: each shard ≤ 10,000 URLs, a shard answer in tens of milliseconds, and the server's
memory growing by a few MB at most while serving one (never by the size of the task table).
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from explorer import _free_port, _stop, _wait_up  # noqa: E402
from explorer_build import synth_envs  # noqa: E402

from repogym.explorer.build import build_snapshot  # noqa: E402
from repogym.explorer.index import MemoryReader  # noqa: E402

NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
_SERVER = """
import os
from pathlib import Path
from repogym.explorer.store import open_store
from repogym.explorer.web import create_app
from repogym.explorer.web.app import settle_heap

HIDDEN = frozenset(Path(os.environ["REPOGYM_BENCH_HIDDEN"]).read_text().split())


def make():
    store = open_store(snapshot=os.environ["REPOGYM_BENCH_SNAPSHOT"])
    app = create_app(store, hidden=HIDDEN.__contains__)
    settle_heap()  # as repogym explore does before serving
    return app
"""


def _kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _get(conn: http.client.HTTPConnection, path: str, etag: str = "") -> tuple[int, bytes, dict]:
    headers = {"Accept-Encoding": "gzip"}
    if etag:
        headers["If-None-Match"] = etag
    conn.request("GET", path, headers=headers)
    r = conn.getresponse()
    return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}


def _measure(conn: http.client.HTTPConnection, pid: int, path: str, etag: str = "") -> dict:
    resettable = _reset_peak(pid)
    before = _kb(pid, "VmRSS")
    t0 = time.perf_counter()
    status, wire, headers = _get(conn, path, etag)
    ms = (time.perf_counter() - t0) * 1000
    body = gzip.decompress(wire) if headers.get("content-encoding") == "gzip" else wire
    peak = _kb(pid, "VmHWM") if resettable else _kb(pid, "VmRSS")
    return {
        "path": path,
        "status": status,
        "ms": round(ms, 2),
        "bytes": len(body),
        "wire_bytes": len(wire),
        "rss_before_mb": round(before / 1024, 1),
        "peak_rss_mb": round(peak / 1024, 1),
        "etag": headers.get("etag", ""),
        "body": body,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", type=int, default=7225)
    ap.add_argument("--tasks", type=int, default=51_000)
    ap.add_argument("--hidden", type=float, default=0.02, help="fraction of environments hidden")
    ap.add_argument("--private", type=int, default=3, help="environments marked private")
    ap.add_argument("--full", action="store_true", help="Harbor-shaped tasks (slower to build)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    out = Path(tempfile.mkdtemp(prefix="repogym-sitemap-bench-"))
    server = None
    try:
        t0 = time.perf_counter()
        readers = []
        for i, (env, tasks) in enumerate(synth_envs(args.envs, args.tasks, minimal=not args.full)):
            env.private = i < args.private
            readers.append(MemoryReader(env, tasks))
        info = build_snapshot(readers, out / "publish", include_private=True)
        rng = random.Random(5)
        ids = [r.env().id for r in readers[args.private :]]
        hidden = rng.sample(ids, int(len(ids) * args.hidden))
        (out / "hidden.txt").write_text("\n".join(hidden) + "\n")
        del readers
        result: dict = {
            "envs": info["envs"],
            "tasks": info["tasks"],
            "private_envs": args.private,
            "hidden_envs": len(hidden),
            "build_seconds": round(time.perf_counter() - t0, 2),
        }
        (out / "_bench_app.py").write_text(_SERVER)
        port = _free_port()
        server = subprocess.Popen(
            [
                sys.executable, "-m", "uvicorn", "--factory", "_bench_app:make",
                "--host", "127.0.0.1", "--port", str(port), "--log-level", "error",
                "--no-access-log",
            ],
            env={
                **os.environ,
                "REPOGYM_BENCH_SNAPSHOT": str(out / "publish"),
                "REPOGYM_BENCH_HIDDEN": str(out / "hidden.txt"),
                "PYTHONPATH": str(out) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            },
        )  # fmt: skip
        _wait_up(port, server)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        _get(conn, "/")  # the app's first request (imports, caches) is not the sitemap's
        result["server_rss_mb"] = round(_kb(server.pid, "VmRSS") / 1024, 1)
        index = _measure(conn, server.pid, "/sitemap.xml")
        shards = [
            (loc.text or "").split("127.0.0.1:" + str(port), 1)[1]
            for loc in ET.fromstring(index["body"]).iter(NS + "loc")
        ]
        rows = [index]
        urls_total = 0
        for path in shards:
            first = _measure(conn, server.pid, path)
            again = _measure(conn, server.pid, path)
            revalidated = _measure(conn, server.pid, path, first["etag"])
            n = sum(1 for _ in ET.fromstring(first["body"]).iter(NS + "url"))
            urls_total += n
            first.update(urls=n, again_ms=again["ms"], revalidate_ms=revalidated["ms"])
            first["revalidate_status"] = revalidated["status"]
            rows.append(first)
        result["shards"] = len(shards)
        result["urls"] = urls_total
        result["answers"] = [
            {k: v for k, v in r.items() if k not in ("body", "etag")} for r in rows
        ]
        result["max_urls_per_shard"] = max(r.get("urls", 0) for r in rows)
        result["max_peak_rss_mb"] = max(r["peak_rss_mb"] for r in rows)
        result["max_shard_ms"] = max(r["ms"] for r in rows[1:])
        conn.close()
    finally:
        if server is not None:
            _stop(server)
        shutil.rmtree(out, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"snapshot: {result['envs']} environments ({result['private_envs']} private, "
        f"{result['hidden_envs']} hidden), {result['tasks']} tasks, built in "
        f"{result['build_seconds']} s; server RSS {result['server_rss_mb']} MB before the sitemap"
    )
    print(f"{result['shards']} shards, {result['urls']} URLs\n")
    print(f"{'answer':<18}{'URLs':>7}{'ms':>9}{'again':>8}{'304':>7}{'bytes':>10}{'wire':>9}"
          f"{'RSS MB':>9}{'peak MB':>9}")  # fmt: skip
    for r in result["answers"]:
        print(
            f"{r['path']:<18}{r.get('urls', ''):>7}{r['ms']:>9.1f}{r.get('again_ms', ''):>8}"
            f"{r.get('revalidate_ms', ''):>7}{r['bytes']:>10}{r['wire_bytes']:>9}"
            f"{r['rss_before_mb']:>9}{r['peak_rss_mb']:>9}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
