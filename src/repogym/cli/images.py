"""``repogym images push``: every task's environment as an image in an OCI registry."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from repogym.cli.app import app, new_group
from repogym.cli.common import CaBundleOpt, JsonOpt, LimitOpt, bad_input, trusted_or_exit
from repogym.ui import err, escape, out

images_app = new_group(help="Prebuilt environment images in an OCI registry (push, run from).")
app.add_typer(images_app, name="images")

BaseRegistryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--base-registry",
        metavar="HOST=URL",
        help="Where the build pulls FROM images (repeatable; a bare URL serves every "
        "registry). An image needs a real base: a FROM mapped onto this host is refused. "
        "Default: $REPOGYM_REGISTRY_MIRROR.",
    ),
]


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


@images_app.command("push")
def push(
    path: Annotated[Path, typer.Argument(help="The dataset (or task) folder.")],
    registry: Annotated[
        str,
        typer.Option(
            "--registry",
            metavar="HOST/PREFIX",
            help="Where images go: HOST[:PORT]/PATH (e.g. ghcr.io/OWNER, 127.0.0.1:5000/gym); "
            "each task becomes PREFIX/<source repository>:<task id>. Credentials: "
            "REPOGYM_REGISTRY_USERNAME/PASSWORD or `docker login`.",
        ),
    ],
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, max=64, help="Tasks at once.")] = 1,
    base_registry: BaseRegistryOpt = None,
    record: Annotated[
        bool,
        typer.Option(
            "--record/--no-record",
            help="Write docker_image and the registry reproducibility mode into each "
            "task.toml (default) or only push.",
        ),
    ] = True,
    ca_bundle: CaBundleOpt = None,
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Build each task's environment on the local backend (cached), make it an OCI image
    (same inputs, same digest) and push it; tasks of one repository share their layers.
    Exit 1 when a task failed (the others are pushed and recorded)."""
    from repogym.hub.images import ImagesError, push_images

    trusted_or_exit(path, limit, quiet=True)
    sandbox = local_sandbox(base_registry, ca_bundle)
    try:
        report = push_images(
            path,
            registry,
            sandbox=sandbox,
            jobs=jobs,
            record=record,
            progress=None if json_out else _progress,
        )
    except ImagesError as exc:
        raise bad_input(str(exc)) from None
    totals = report.totals()
    if json_out:
        sys.stdout.write(json.dumps(report.to_json()) + "\n")
    else:
        out.print(
            f"{totals['pushed']} image(s) pushed to {escape(report.registry)}, "
            f"{totals['skipped']} skipped, {totals['failed']} failed in {totals['seconds']:.1f}s: "
            f"sent {_mb(totals['bytes_uploaded'])} of {_mb(totals['sum_of_images'])} "
            f"({_mb(totals['bytes_deduplicated'])} already there or shared)"
        )
        for t in report.tasks:
            if t.status == "failed":
                out.print(f"  {escape(t.task)}: failed: {escape(t.error)}")
    if not report.ok:
        raise typer.Exit(1)


def local_sandbox(
    base_registry: list[str] | None, ca_bundle: Path | None, cache_dir: str | None = None
) -> object:
    """The local backend images are built in (``cache_dir``: another cache than the usual);
    one line and exit 2 when it cannot run here."""
    from repogym.sandbox import SandboxError
    from repogym.sandbox.images import parse_registries
    from repogym.sandbox.local import LocalSandbox

    registries = parse_registries(",".join(base_registry)) if base_registry else None
    try:
        return LocalSandbox(cache_dir, registries=registries, ca_bundle=ca_bundle)
    except SandboxError as exc:
        raise bad_input(str(exc)) from None


@images_app.command("export")
def export(
    path: Annotated[Path, typer.Argument(help="The dataset (or task) folder.")],
    out_file: Annotated[
        Path, typer.Option("--out", help="The archive to write (a tar; replaced atomically).")
    ],
    base_registry: BaseRegistryOpt = None,
    ca_bundle: CaBundleOpt = None,
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Write every task's image into one tar that is at once an OCI image layout (for
    `images import`, Apptainer's `oci-archive:`, skopeo, podman) and a `docker load` archive;
    shared layers are stored once. Builds what is not built yet; no registry needed."""
    from repogym.hub.image_archive import export_images
    from repogym.hub.images import ImagesError

    trusted_or_exit(path, limit, quiet=True)
    sandbox = local_sandbox(base_registry, ca_bundle)
    try:
        report = export_images(
            path, out_file, sandbox=sandbox, progress=None if json_out else _progress
        )
    except ImagesError as exc:
        raise bad_input(str(exc)) from None
    if json_out:
        sys.stdout.write(json.dumps(report.to_json()) + "\n")
    else:
        out.print(
            f"{len(report.images)} image(s), {report.blobs} blobs ({_mb(report.bytes)}) in "
            f"{escape(str(out_file))}; {len(report.skipped)} task(s) without an environment"
        )


@images_app.command("import")
def import_(
    archive: Annotated[Path, typer.Argument(help="An archive written by `images export`.")],
    json_out: JsonOpt = False,
) -> None:
    """Load the images of an archive into the local backend's cache: tasks recorded with
    `images push` then start from their image with no registry (found by digest)."""
    from repogym.hub.image_archive import import_images
    from repogym.hub.images import ImagesError

    if not archive.is_file():
        raise bad_input(f"{archive}: no such file")
    sandbox = local_sandbox(None, None)
    try:
        report = import_images(archive, sandbox=sandbox, progress=None if json_out else _progress)
    except ImagesError as exc:
        raise bad_input(str(exc)) from None
    if json_out:
        sys.stdout.write(json.dumps(report.to_json()) + "\n")
    else:
        out.print(f"{len(report.images)} image(s) imported ({_mb(report.bytes)} of blobs)")


@images_app.command("check")
def check(
    path: Annotated[Path, typer.Argument(help="The dataset (or task) folder.")],
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh", help="Build in an empty, temporary cache (proves a build from scratch)."
        ),
    ] = False,
    base_registry: BaseRegistryOpt = None,
    ca_bundle: CaBundleOpt = None,
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Build each published task's image again and compare its digest with the one its
    task.toml records; name the build steps whose layers differ. Exit 1 when one differs or
    cannot be built."""
    import tempfile

    from repogym.hub.images import ImagesError, check_images

    trusted_or_exit(path, limit, quiet=True)
    with tempfile.TemporaryDirectory(prefix="repogym-images-check-") as tmp:
        sandbox = local_sandbox(base_registry, ca_bundle, tmp if fresh else None)
        try:
            results = check_images(path, sandbox=sandbox, progress=None if json_out else _progress)
        except ImagesError as exc:
            raise bad_input(str(exc)) from None
    if json_out:
        sys.stdout.write(json.dumps([r.to_json() for r in results]) + "\n")
    else:
        for r in results:
            line = f"{escape(r.task)}: {r.status}"
            if r.layers:
                line += " at " + "; ".join(escape(x[:80]) for x in r.layers)
            out.print(line)
    if any(r.status in ("different", "failed") for r in results):
        raise typer.Exit(1)


def _progress(line: str) -> None:
    err.print(escape(line))
