"""What containment costs: the host-side file operations of a local session and a layer unpack,
timed here and (``--baseline REV``) at another revision of repogym, with ratios.

Run: ``.venv/bin/python benchmarks/confine.py [--baseline HEAD~1] [--n 400] [--files 10000]``.

Measured (each the best of ``--rounds`` rounds, so a busy moment does not count):

* ``read``  — ``Session.read`` of a small file, per call;
* ``write`` — ``Session.write`` of a small file, per call;
* ``download`` — ``Session.download`` of a folder of ``--files`` small files;
* ``unpack`` — one image layer of ``--files`` files in 100 folders applied onto an empty root
  (on ``/dev/shm`` when there is one, so that the disk's write-back does not drown the CPU cost).

With ``--baseline``, the revision is checked out in a temporary git worktree and this same
script runs there (its own fork server, its own sandbox code) on the same machine, one after the
other; the ratio is this revision's time over the baseline's.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def best(fn: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return min(times)


def layer_bytes(files: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        per = max(files // 100, 1)
        for d in range(100):
            ti = tarfile.TarInfo(f"usr/lib/pkg{d}")
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            tf.addfile(ti)
            for f in range(per):
                data = b"x" * 300
                ti = tarfile.TarInfo(f"usr/lib/pkg{d}/m{f}.py")
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def measure(n: int, files: int, rounds: int, ops: set[str]) -> dict[str, float]:
    """Seconds per operation (read, write) or per job (download, unpack), in this process."""
    from repogym.sandbox import EnvironmentSpec, _unpack
    from repogym.sandbox.local import LocalSandbox

    scratch = Path(
        tempfile.mkdtemp(
            prefix="confine-bench-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None
        )
    )
    try:
        ctx = scratch / "ctx"
        ctx.mkdir()
        (ctx / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /work\n")
        sb = LocalSandbox()
        spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network")
        out: dict[str, float] = {}
        with sb.start(sb.build(spec), spec) as s:
            s.write("/work/small.txt", "hello\n")
            for _ in range(20):  # warm the fork server and the session
                s.read("/work/small.txt")
            if "read" in ops:
                reads = best(lambda: [s.read("/work/small.txt") for _ in range(n)], rounds)
                out["read"] = reads / n
            if "write" in ops:
                writes = best(lambda: [s.write("/work/w.txt", "data\n") for _ in range(n)], rounds)
                out["write"] = writes / n
            if "download" not in ops:
                return out
            per = files // 100
            res = s.exec(
                f"for d in $(seq 1 100); do mkdir -p /work/tree/$d; for f in $(seq 1 {per}); "
                "do echo $d-$f > /work/tree/$d/$f.txt; done; done",
                timeout_s=600,
            )
            assert res.exit_code == 0, res.stderr
            k = iter(range(1000))
            out["download"] = best(
                lambda: s.download("/work/tree", scratch / f"dl{next(k)}"), rounds
            )
        blob = scratch / "layer.tar"
        blob.write_bytes(layer_bytes(files))
        k2 = iter(range(1000))

        def unpack() -> None:
            root = scratch / f"root{next(k2)}"
            root.mkdir()
            _unpack.apply_layer(blob, root, _unpack.Budget(max_bytes=1 << 30))

        if "unpack" in ops:
            out["unpack"] = best(unpack, rounds)
        return out
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def baseline(rev: str, args: argparse.Namespace) -> dict[str, float]:
    tree = Path(tempfile.mkdtemp(prefix="confine-baseline-"))
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), rev], check=True
    )
    try:
        env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}:{tree}"}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--json", "--n", str(args.n)]
        cmd += [
            "--files",
            str(args.files),
            "--rounds",
            str(args.rounds),
            "--src",
            str(tree / "src"),
        ]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        return json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", help="a git revision to compare with (e.g. HEAD~1)")
    ap.add_argument("--n", type=int, default=400, help="reads and writes per round")
    ap.add_argument("--files", type=int, default=10_000, help="files downloaded and unpacked")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--ops", default="read,write,download,unpack", help="which to measure (comma-separated)"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    ap.add_argument("--src", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sys.path.insert(0, args.src or str(ROOT / "src"))
    here = measure(args.n, args.files, args.rounds, set(args.ops.split(",")))
    if args.json:
        print(json.dumps(here))
        return
    base = baseline(args.baseline, args) if args.baseline else None
    units = {
        "read": "per call",
        "write": "per call",
        "download": f"{args.files} files",
        "unpack": f"{args.files} files",
    }
    print(
        f"{'operation':<10} {'this tree':>12} "
        + (f"{args.baseline:>12} {'ratio':>7}" if base else "")
    )
    for key, value in here.items():
        line = f"{key:<10} {value * 1000:10.3f}ms "
        if base:
            line += f"{base[key] * 1000:10.3f}ms {value / base[key]:6.2f}x"
        print(f"{line}  ({units[key]})")


if __name__ == "__main__":
    main()
