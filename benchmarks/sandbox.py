"""Local sandbox benchmark: session start (without and with a network), exec round trip,
first build vs cached rebuild, and a cold build of the embedded example's task.

Run: ``.venv/bin/python benchmarks/sandbox.py [--starts 50] [--execs 200] [--keep-cache]
[--example-task DIR | --no-example]``. Uses a fresh temporary ``REPOGYM_CACHE`` unless
``--cache`` is given, so the first build really builds (toolchain layer, a pip install of a
local package, thousands of files). The example task is generated from ``repogym
example-repo`` (one task, ``--limit 1``, in a throwaway cache: ~30 s) unless ``--example-task``
names a task folder; its environment (``pip install pytest`` from PyPI, the repository, an
editable install) is then built in another fresh cache. Pass the same ``--example-task`` to
compare two versions of repogym on the same task.

``--pull`` (or ``--pull-only``) adds the pull path: a ``docker-registry`` on 127.0.0.1 (Debian
package), a small busybox image pushed to it, its first pull + build in a fresh cache, the
cached rebuild, and session starts on the pulled root.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repogym.sandbox import EnvironmentSpec  # noqa: E402
from repogym.sandbox.local import LocalSandbox  # noqa: E402
from tests.sandbox.conftest import write_tiny_package  # noqa: E402

PREFIX = """\
FROM python:3.11-slim
ENV APP=/app
WORKDIR /app
COPY pkg /src/pkg
RUN pip install --no-index --no-build-isolation /src/pkg
RUN mkdir -p /app/data && for d in $(seq 1 50); do mkdir /app/data/$d; \\
    for f in $(seq 1 100); do echo "$d $f" > /app/data/$d/$f.txt; done; done
"""


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[k]


def ms(values: list[float]) -> str:
    return (
        f"p50 {pct(values, 0.5) * 1000:7.2f} ms   p95 {pct(values, 0.95) * 1000:7.2f} ms   "
        f"mean {statistics.fmean(values) * 1000:7.2f} ms   (n={len(values)})"
    )


def context(root: Path, last: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_tiny_package(root / "pkg")
    (root / "Dockerfile").write_text(PREFIX + last + "\n")
    return root


def example_task(work: Path) -> Path:
    """One task mined from the embedded example repository (commit_runtime, --limit 1)."""
    from repogym.example_repo import build_example_repo

    repo = build_example_repo(work / "statkit")
    out = work / "dataset"
    env = {**os.environ, "REPOGYM_CACHE": str(work / "gen-cache")}
    cmd = [sys.executable, "-m", "repogym.cli", "generate", "--repo", str(repo), "--limit", "1"]
    subprocess.run([*cmd, "--out", str(out)], env=env, check=True, capture_output=True)
    tasks = sorted(p.parent for p in (out / "tasks").glob("*/task.toml"))
    if not tasks:
        raise SystemExit("generating the example task emitted nothing")
    return tasks[0]


def cold_build(task: Path, cache: Path) -> None:
    """Build a task's environment in a fresh cache, then again (all cached)."""
    os.environ["REPOGYM_CACHE"] = str(cache)
    t = time.perf_counter()
    sb = LocalSandbox()
    init = time.perf_counter() - t
    spec = EnvironmentSpec(
        context_dir=task / "environment", network_mode="no-network", build_timeout_sec=1800
    )
    print(f"\n== cold build of the example task {task.name} ==")
    print(f"sandbox init (fresh cache)  {init:8.3f} s")
    for label in ("cold build", "cached rebuild"):
        t = time.perf_counter()
        built = sb.build(spec)
        took = time.perf_counter() - t
        d = built.details
        print(f"{label:<27} {took:8.3f} s   hits {d['cache_hits']}  misses {d['cache_misses']}")


def _starts(sb: LocalSandbox, built, spec: EnvironmentSpec, n: int) -> None:
    """Start, first exec and close of ``n`` sessions; prints percentiles."""
    starts, firsts, closes = [], [], []
    for _ in range(n):
        t0 = time.perf_counter()
        s = sb.start(built, spec)
        t1 = time.perf_counter()
        res = s.exec(["true"])
        t2 = time.perf_counter()
        s.close()
        t3 = time.perf_counter()
        assert res.exit_code == 0, res
        starts.append(t2 - t0)
        firsts.append(t1 - t0)
        closes.append(t3 - t2)
    print(f"start + first exec  {ms(starts)}")
    print(f"  start only        {ms(firsts)}")
    print(f"  close             {ms(closes)}")


def pull_path(work: Path, n: int) -> None:
    """First pull and cached start of a small image from a registry on 127.0.0.1."""
    from tests.sandbox import _oci

    if _oci.ensure_registry_binary() is None or not Path(_oci.BUSYBOX).is_file():
        print("\n== pull path: skipped (needs docker-registry and busybox-static) ==")
        return
    reg = _oci.start_registry(work / "registry")
    try:
        layers = [_oci.busybox_layer(), _oci.layer([("etc/motd", "file", "bench")])]
        pushed = _oci.push_image(reg.url, "bench/bb", "1", layers, index=True)
        host = reg.url.removeprefix("http://")
        ctx = work / "pull-ctx"
        ctx.mkdir(parents=True)
        (ctx / "Dockerfile").write_text(f"FROM {host}/bench/bb:1\nRUN echo built > /built\n")
        spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network")
        sb = LocalSandbox(work / "pull-cache", registries={host: reg.url})
        print(f"\n== pull path: {host}/bench/bb:1 ({pushed.manifest_digest[:19]}) ==")
        for label in ("first pull + build", "cached rebuild"):
            t = time.perf_counter()
            built = sb.build(spec)
            took = time.perf_counter() - t
            d = built.details
            print(f"{label:<27} {took:8.3f} s   hits {d['cache_hits']}  misses {d['cache_misses']}")
        m = built.base_mapping
        print(
            f"image size                  {int(m['size']) / 1e6:8.2f} MB unpacked, "
            f"{int(m['compressed_size']) / 1e6:.2f} MB compressed"
        )
        print(f"== sessions on the pulled root, {n} sessions ==")
        _starts(sb, built, spec, n)
    finally:
        reg.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--starts", type=int, default=50)
    ap.add_argument("--execs", type=int, default=200)
    ap.add_argument("--cache", type=Path, default=None, help="use this cache (default: fresh)")
    ap.add_argument("--keep-cache", action="store_true")
    ap.add_argument("--example-task", type=Path, default=None, help="task folder to cold-build")
    ap.add_argument("--no-example", action="store_true", help="skip the example task's build")
    ap.add_argument("--pull", action="store_true", help="also measure the pull path")
    ap.add_argument("--pull-only", action="store_true", help="only measure the pull path")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="repogym-bench-"))
    cache = args.cache or work / "cache"
    os.environ["REPOGYM_CACHE"] = str(cache)
    try:
        if args.pull_only:
            pull_path(work, args.starts)
            return
        sb = LocalSandbox()
        print(f"cache: {cache}   limits: {sb.cgroups.describe()}")
        a = context(work / "a", "RUN echo variant-a > /app/variant")
        b = context(work / "b", "RUN echo variant-b > /app/variant")
        spec_a = EnvironmentSpec(context_dir=a, network_mode="no-network")
        spec_b = EnvironmentSpec(context_dir=b, network_mode="no-network")

        print("\n== build (two Dockerfiles sharing a 6-step prefix) ==")
        rows = []
        for label, spec in (
            ("A first build", spec_a),
            ("B (shared prefix)", spec_b),
            ("A cached rebuild", spec_a),
            ("B cached rebuild", spec_b),
        ):
            t = time.perf_counter()
            built = sb.build(spec)
            took = time.perf_counter() - t
            d = built.details
            rows.append((label, took, d["cache_hits"], d["cache_misses"]))
            print(f"{label:<20} {took:8.3f} s   hits {d['cache_hits']}  misses {d['cache_misses']}")
        built = sb.build(spec_a)

        public = replace(spec_a, network_mode="public")
        for title, spec in (
            ("trial start: fresh root + first exec", spec_a),
            ("public (networked) session: root + first exec", public),
        ):
            print(f"\n== {title}, {args.starts} sessions ==")
            _starts(sb, built, spec, args.starts)

        print(f"\n== exec round trip, {args.execs} execs in one session ==")
        with sb.start(built, spec_a) as s:
            for form, cmd in (("argv ['true']", ["true"]), ("string 'true' (bash -c)", "true")):
                times = []
                for _ in range(args.execs):
                    t = time.perf_counter()
                    res = s.exec(cmd)
                    times.append(time.perf_counter() - t)
                    assert res.exit_code == 0, res
                print(f"{form:<26} {ms(times)}")
            times = []
            for _ in range(args.execs // 4):
                t = time.perf_counter()
                s.read("/app/variant")
                times.append(time.perf_counter() - t)
            print(f"{'read a file':<26} {ms(times)}")

        if not args.no_example:
            task = args.example_task or example_task(work / "example")
            cold_build(task.resolve(), work / "example-cache")
        if args.pull:
            pull_path(work, args.starts)
    finally:
        if not args.keep_cache and args.cache is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
