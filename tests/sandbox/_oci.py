"""Test helpers for the pull path: a real registry on 127.0.0.1 (Debian's ``docker-registry``),
small images made from files in code, and a tiny push client (OCI Distribution, monolithic
uploads)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

REGISTRY_BIN = "/usr/bin/docker-registry"
BUSYBOX = "/bin/busybox"
BUSYBOX_APPLETS = ("sh", "sleep", "cat", "echo", "ls", "mkdir", "rm", "test", "true", "env", "id")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


def ensure_registry_binary() -> str | None:
    """``docker-registry`` (installs the Debian package as root when missing)."""
    if os.access(REGISTRY_BIN, os.X_OK):
        return REGISTRY_BIN
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", "docker-registry"]
    with open(os.devnull, "wb") as null:
        if subprocess.run(cmd, env=env, stdout=null, stderr=null, timeout=600).returncode:
            subprocess.run(["apt-get", "update"], env=env, stdout=null, stderr=null, timeout=600)
            subprocess.run(cmd, env=env, stdout=null, stderr=null, timeout=600)
    return REGISTRY_BIN if os.access(REGISTRY_BIN, os.X_OK) else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Registry:
    """A ``docker-registry serve`` process on 127.0.0.1."""

    url: str
    proc: subprocess.Popen[bytes]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def registry_or_skip(workdir: Path) -> Iterator[Registry]:
    """A registry for a fixture (stopped after it), or a skip where the Debian packages it
    needs cannot be installed."""
    import pytest

    if ensure_registry_binary() is None:
        pytest.skip("docker-registry (Debian package) cannot be installed here")
    if not Path(BUSYBOX).is_file():
        pytest.skip("busybox-static (Debian package) is not installed")
    reg = start_registry(workdir)
    yield reg
    reg.stop()


def start_registry(workdir: Path) -> Registry:
    port = _free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "config.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {workdir / 'data'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = open(workdir / "registry.log", "wb")  # noqa: SIM115 - owned by the process
    proc = subprocess.Popen([REGISTRY_BIN, "serve", str(config)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v2/", timeout=1).status_code == 200:
                return Registry(url, proc)
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"docker-registry did not start: {(workdir / 'registry.log').read_text()}")


# ------------------------------------------------------------------------------ images


def layer(entries: list[tuple[str, str, object]], *, compress: bool = True) -> bytes:
    """A layer tarball from ``(path, kind, value)``: kind ``file`` (bytes or str; value may be
    ``(data, mode)``), ``dir``, ``link`` (symlink target), ``hard`` (link name), ``whiteout``
    (``path`` is what to delete), ``opaque`` (``path`` is the folder)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for path, kind, value in entries:
            ti = tarfile.TarInfo(path)
            ti.mtime = 1_700_000_000
            if kind == "file":
                data, mode = value if isinstance(value, tuple) else (value, 0o644)
                raw = data.encode() if isinstance(data, str) else data
                ti.size, ti.mode = len(raw), mode
                tf.addfile(ti, io.BytesIO(raw))
                continue
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            elif kind == "link":
                ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, str(value), 0o777
            elif kind == "hard":
                ti.type, ti.linkname = tarfile.LNKTYPE, str(value)
            elif kind == "whiteout":
                parent, _, name = path.rpartition("/")
                ti.name = f"{parent}/.wh.{name}" if parent else f".wh.{name}"
            elif kind == "opaque":
                ti.name = f"{path.rstrip('/')}/.wh..wh..opq"
            tf.addfile(ti)
    raw = buf.getvalue()
    return gzip.compress(raw, mtime=0) if compress else raw


def busybox_layer() -> bytes:
    """A root with static busybox as ``/bin/sh``, ``sleep``, … and root in ``/etc/passwd``."""
    entries: list[tuple[str, str, object]] = [
        ("bin", "dir", None),
        ("bin/busybox", "file", (Path(BUSYBOX).read_bytes(), 0o755)),
        ("etc", "dir", None),
        ("etc/passwd", "file", "root:x:0:0:root:/root:/bin/sh\n"),
        ("etc/group", "file", "root:x:0:\n"),
        ("root", "dir", None),
        ("tmp", "dir", None),
    ]
    entries += [(f"bin/{a}", "link", "busybox") for a in BUSYBOX_APPLETS]
    return layer(entries)


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Pushed:
    digest: str
    """Digest of what the tag points at (an index when pushed with ``index=True``)."""
    manifest_digest: str
    """Digest of the linux/amd64 image manifest."""


def push_image(
    url: str,
    repo: str,
    tag: str,
    layers: list[bytes],
    *,
    env: list[str] | None = None,
    workdir: str = "",
    index: bool = False,
    docker_types: bool = False,
    image_config: dict[str, object] | None = None,
) -> Pushed:
    """Push an image (config + layers [+ an index with amd64 and arm64 entries])."""
    with httpx.Client(base_url=url, timeout=30) as http:

        def blob(data: bytes) -> str:
            digest = sha(data)
            if http.head(f"/v2/{repo}/blobs/{digest}").status_code == 200:
                return digest
            start = http.post(f"/v2/{repo}/blobs/uploads/")
            assert start.status_code == 202, start.text
            loc = start.headers["location"]
            sep = "&" if "?" in loc else "?"
            done = http.put(
                f"{loc}{sep}digest={digest}",
                content=data,
                headers={"Content-Type": "application/octet-stream"},
            )
            assert done.status_code == 201, done.text
            return digest

        def put_manifest(ref: str, doc: dict[str, object], media: str) -> str:
            body = json.dumps(doc).encode()
            r = http.put(
                f"/v2/{repo}/manifests/{ref}", content=body, headers={"Content-Type": media}
            )
            assert r.status_code == 201, r.text
            return sha(body)

        diff_ids = [sha(gzip.decompress(x)) if x[:2] == b"\x1f\x8b" else sha(x) for x in layers]
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Env": env or ["PATH=/bin:/usr/bin"],
                "WorkingDir": workdir,
                **(image_config or {}),
            },
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }
        cfg_bytes = json.dumps(config).encode()
        cfg_media = (
            "application/vnd.docker.container.image.v1+json"
            if docker_types
            else "application/vnd.oci.image.config.v1+json"
        )
        layer_media = (
            "application/vnd.docker.image.rootfs.diff.tar.gzip"
            if docker_types
            else "application/vnd.oci.image.layer.v1.tar+gzip"
        )
        manifest = {
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST if docker_types else OCI_MANIFEST,
            "config": {"mediaType": cfg_media, "digest": blob(cfg_bytes), "size": len(cfg_bytes)},
            "layers": [
                {
                    "mediaType": layer_media
                    if x[:2] == b"\x1f\x8b"
                    else layer_media[: -len("+gzip")],
                    "digest": blob(x),
                    "size": len(x),
                }
                for x in layers
            ],
        }
        media = DOCKER_MANIFEST if docker_types else OCI_MANIFEST
        if not index:
            digest = put_manifest(tag, manifest, media)
            return Pushed(digest, digest)
        amd = put_manifest(sha(json.dumps(manifest).encode()), manifest, media)
        # An arm64 entry whose manifest is broken on purpose: it must never be chosen here.
        arm_doc = {**manifest, "layers": []}
        arm = put_manifest(sha(json.dumps(arm_doc).encode()), arm_doc, media)
        idx = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": media,
                    "digest": arm,
                    "size": len(json.dumps(arm_doc)),
                    "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"},
                },
                {
                    "mediaType": media,
                    "digest": amd,
                    "size": len(json.dumps(manifest)),
                    "platform": {"os": "linux", "architecture": "amd64"},
                },
            ],
        }
        return Pushed(put_manifest(tag, idx, OCI_INDEX), amd)


def push_stand_ins(url: str, dataset: Path) -> list[str]:
    """Push into the registry at ``url`` the tests' Debian stand-in (:mod:`tests.engine`) of
    every image the Dockerfiles under ``dataset`` name ``FROM``; returns the names no stand-in
    can be made of here."""
    import gzip as _gzip

    from repogym.dockerfile import parse
    from tests import engine

    names = set()
    for df in dataset.rglob("environment/Dockerfile"):
        for ins in parse(df.read_text()).instructions:
            if ins.keyword == "FROM":
                names.add(ins.args.split()[0])
    missing = []
    for name in sorted(names):
        if name not in engine.STAND_INS:
            missing.append(name)
            continue
        tarball, env = engine._image_tarball(name, engine.STAND_INS[name])
        blob = _gzip.compress(tarball.read_bytes(), compresslevel=1, mtime=0)
        repo, tag = name.split(":")
        push_image(url, f"library/{repo}", tag, [blob], env=env)
    return missing
