"""Prebuilt environment images: what `images push` stores and how much sooner an episode starts.

    python benchmarks/images.py DATASET [--base-registry URL | --stand-in-bases] [--json]

On a copy of DATASET (tasks generated from one repository, ideally 20 or more) it:

1. starts a registry on 127.0.0.1 (Debian's ``docker-registry``) unless ``--registry`` names one;
2. pushes every task from an empty cache (``images push``): bytes sent against the sum of the
   per-task images (what a registry would store without shared layers), the median per-task
   increment, build and push seconds, upload throughput;
3. pulls every image into another empty cache (download, digest checks and unpacking each
   image's root): unique bytes downloaded, seconds for the first image and for the others;
4. times the first agent step (environment ready, a session started, one command run) of one
   task from its image on an empty cache, against a cold build of its Dockerfile (one run each).

Bases come from ``--base-registry`` (a registry that holds the Dockerfiles' ``FROM`` images);
``--stand-in-bases`` pushes the tests' Debian stand-ins of ``python:3.X-slim`` to the benchmark
registry first (``tests/engine.py``), for machines with no such registry.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._calibrate import python_loop_ms  # noqa: E402


def _first_step(sandbox: object, spec: object) -> float:
    started = time.monotonic()
    built = sandbox.build(spec)  # type: ignore[attr-defined]
    with sandbox.start(built, spec) as session:  # type: ignore[attr-defined]
        session.exec(["true"])
    return time.monotonic() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--registry", help="URL of a registry to push to (default: start one)")
    ap.add_argument("--base-registry", help="URL of a registry holding the FROM images")
    ap.add_argument("--stand-in-bases", action="store_true")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from repogym.hub.images import push_images
    from repogym.run.plan import declared_environment
    from repogym.run.trial import environment_spec
    from repogym.sandbox._image_run import pull_task_image
    from repogym.sandbox.local import LocalSandbox
    from repogym.taskdir import discover
    from tests.sandbox import _oci

    work = Path(tempfile.mkdtemp(prefix="rg-bench-images-"))
    reg = None
    try:
        url = args.registry
        if url is None:
            reg = _oci.start_registry(work / "registry")
            url = reg.url
        dataset = work / "dataset"
        shutil.copytree(args.dataset, dataset)
        if args.stand_in_bases:
            missing = _oci.push_stand_ins(url, dataset)
            if missing:
                sys.exit(f"no stand-in of {', '.join(missing)} can be made here")
        bases = {"docker.io": args.base_registry or url}
        host = url.split("://", 1)[1]

        # 2. push from an empty cache
        sb = LocalSandbox(work / "cache-push", registries=bases)
        report = push_images(dataset, f"{host}/bench", sandbox=sb, jobs=args.jobs)
        pushed = [t for t in report.tasks if t.status == "pushed"]
        totals = report.totals()
        increments = sorted(t.uploaded for t in pushed)

        # 3. pull every image into an empty cache
        pull_sb = LocalSandbox(work / "cache-pull", registries={})
        t0 = time.monotonic()
        each: list[float] = []
        for t in pushed:
            t1 = time.monotonic()
            img, why = pull_task_image(pull_sb, t.image)
            assert img is not None, why
            each.append(time.monotonic() - t1)
        pull_s = time.monotonic() - t0
        # What was downloaded: each blob once, however many images share it.
        pulled_bytes = sum(p.stat().st_size for p in pull_sb.oci.blobs.root.glob("sha256/*"))

        # 4. first agent step: from the image vs a cold build (one task, one run each)
        task = next(x for x in discover(dataset).tasks if x.id == pushed[0].task)
        from_image = _first_step(
            LocalSandbox(work / "cache-image", registries={}), environment_spec(task, "local")
        )
        cold = _first_step(
            LocalSandbox(work / "cache-cold", registries=bases), declared_environment(task)
        )
        out = {
            "tasks": len(report.tasks),
            "pushed": len(pushed),
            "failed": [t.error for t in report.tasks if t.status == "failed"][:3],
            "bytes_pushed": totals["bytes_uploaded"],
            "sum_of_images": totals["sum_of_images"],
            "stored_share": round(totals["bytes_uploaded"] / totals["sum_of_images"], 4)
            if totals["sum_of_images"]
            else None,
            "first_image_bytes": increments[-1] if increments else 0,
            "median_increment_bytes": statistics.median(increments) if increments else 0,
            "build_seconds": round(sum(t.build_seconds for t in pushed), 1),
            "push_seconds": totals["push_seconds"],
            "upload_mb_per_s": totals["upload_mb_per_s"],
            "pull_bytes": pulled_bytes,
            "pull_seconds": round(pull_s, 2),
            "pull_mb_per_s": round(pulled_bytes / 1e6 / pull_s, 2) if pull_s else None,
            "pull_first_image_s": round(each[0], 2) if each else None,
            "pull_other_images_median_s": round(statistics.median(each[1:]), 2)
            if len(each) > 1
            else None,
            "first_step_from_image_s": round(from_image, 2),
            "first_step_cold_build_s": round(cold, 2),
            "cold_over_image": round(cold / from_image, 1) if from_image else None,
            "python_loop_ms": python_loop_ms(),
        }
    finally:
        if reg is not None:
            reg.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:28} {v}")


if __name__ == "__main__":
    main()
