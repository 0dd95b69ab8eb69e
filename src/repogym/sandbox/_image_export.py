"""A local build as an OCI image: the base image's layers as pulled, then one layer per build
step, with the configuration the Dockerfile declared.

**Reproducible.** The same build gives the same bytes on any machine with the same ``zlib``:
entries are written in byte order of their names, with numeric owners only (no user or group
names), modification times clamped to an epoch (``SOURCE_DATE_EPOCH`` semantics: a time after
it becomes it, an earlier one is kept), no extended attributes, a gzip stream without a name
or time; the config's times are the epoch too, and every JSON document is written with sorted
keys. What a step wrote differently on a second build (a cache file with the time in it) still
makes a different layer: ``images push`` reports such layers.

**From overlay layers.** A build step's layer (:mod:`._layers`) is the upper directory of each
root part. Whiteouts (character device 0/0, or the ``overlay.whiteout`` attribute) become
``.wh.<name>`` entries and opaque folders a ``.wh..wh..opq`` entry, as the image spec says. A
renamed folder (``overlay.redirect``) or a metadata-only copy (``overlay.metacopy``) has no image
form: such a layer is refused with the reason (the local backend mounts without those
features, so builds do not make them).

**Bases.** An image needs a real root under its layers: a base pulled from a registry (its
blobs are kept by the pull, :mod:`._pull`) is used as it is. A base that the ``FROM`` mapping
stood in for with this host's own ``/usr`` is not an image anyone else could run, so such a
build is refused with the way out (a registry that has the base).

Exported layers are remembered by layer key under ``<cache>/oci/exported``: a second push of
the same environment, or of another task built on the same steps, tars nothing again.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import errno
import gzip
import json
import os
import stat
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.sandbox._blobs import BlobStore, HashingWriter
from repogym.sandbox._rootfs import ROOT_PART

FORMAT = 1
DEFAULT_EPOCH = 1_704_067_200
"""2024-01-01T00:00:00Z: times after it are written as it (``$SOURCE_DATE_EPOCH`` overrides)."""
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
_LAYER_TYPES = {
    "application/vnd.docker.image.rootfs.diff.tar.gzip": OCI_LAYER_GZIP,
    OCI_LAYER_GZIP: OCI_LAYER_GZIP,
    "application/vnd.docker.image.rootfs.diff.tar": OCI_LAYER_TAR,
    OCI_LAYER_TAR: OCI_LAYER_TAR,
}
_XATTR_PREFIXES = ("trusted.overlay.", "user.overlay.")
_GZIP_LEVEL = 6


class ExportError(ValueError):
    """The build cannot become an image; the message is one line that says why."""


def epoch_from_env() -> int:
    raw = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if raw:
        try:
            return int(raw)
        except ValueError:
            raise ExportError(f"SOURCE_DATE_EPOCH={raw!r} is not a whole number") from None
    return DEFAULT_EPOCH


def iso(epoch: int) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def canonical_json(doc: object) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Layer:
    """One layer of an image: its descriptor and where its bytes are."""

    digest: str
    size: int
    diff_id: str
    media_type: str
    origin: str
    """``base`` (as pulled) or the build step's layer key."""
    created_by: str = ""
    """The step that made it (``base <ref>`` for a base layer)."""

    @property
    def descriptor(self) -> dict[str, object]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass
class Image:
    """An image ready to push or export: every blob is in the store."""

    manifest: bytes
    config: bytes
    layers: list[Layer]
    base: str | None = None
    """The base image (``ref@digest``) its first layers come from."""
    notes: list[str] = field(default_factory=list)

    @property
    def digest(self) -> str:
        import hashlib

        return "sha256:" + hashlib.sha256(self.manifest).hexdigest()

    @property
    def config_digest(self) -> str:
        import hashlib

        return "sha256:" + hashlib.sha256(self.config).hexdigest()


# ---------------------------------------------------------------------------- layer tars


def _xattr(path: str, name: str) -> bytes | None:
    for prefix in _XATTR_PREFIXES:
        try:
            return os.getxattr(path, prefix + name, follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EPERM, errno.EACCES):
                raise
    return None


def _sorted_names(path: str) -> list[str]:
    return sorted(os.listdir(path), key=os.fsencode)


class _TarWriter:
    """Writes one layer's parts as a tar stream, the way the module docstring says."""

    def __init__(self, tf: tarfile.TarFile, epoch: int) -> None:
        self.tf = tf
        self.epoch = epoch
        self.links: dict[tuple[int, int], str] = {}
        self.entries = 0
        self.skipped: list[str] = []

    def info(self, name: str, st: os.stat_result, kind: bytes) -> tarfile.TarInfo:
        ti = tarfile.TarInfo(name)
        ti.type = kind
        ti.mode = stat.S_IMODE(st.st_mode)
        ti.uid, ti.gid = st.st_uid, st.st_gid
        ti.uname = ti.gname = ""
        ti.mtime = min(int(st.st_mtime), self.epoch)
        return ti

    def marker(self, name: str) -> None:
        ti = tarfile.TarInfo(name)
        ti.mode = 0o644
        ti.mtime = self.epoch
        self.tf.addfile(ti)
        self.entries += 1

    def tree(self, top: str, prefix: str) -> None:
        """Every entry below ``top`` (the part's upper directory), named ``prefix + rel``."""
        for name in _sorted_names(top):
            self.entry(os.path.join(top, name), prefix + name)

    def entry(self, path: str, name: str) -> None:
        st = os.lstat(path)
        mode = st.st_mode
        for what in ("redirect", "metacopy"):
            if _xattr(path, what) is not None:
                raise ExportError(
                    f"{name}: a layer with an overlay {what} entry has no image form "
                    "(build it again with a Dockerfile that does not rename folders of "
                    "lower layers)"
                )
        parent, _, base = name.rpartition("/")
        wh_prefix = f"{parent}/" if parent else ""
        if (stat.S_ISCHR(mode) and st.st_rdev == 0) or (
            stat.S_ISREG(mode) and st.st_size == 0 and _xattr(path, "whiteout") is not None
        ):
            self.marker(f"{wh_prefix}.wh.{base}")
            return
        if stat.S_ISDIR(mode):
            self.tf.addfile(self.info(name, st, tarfile.DIRTYPE))
            self.entries += 1
            if _xattr(path, "opaque") == b"y":
                self.marker(f"{name}/.wh..wh..opq")
            self.tree(path, name + "/")
            return
        if stat.S_ISLNK(mode):
            ti = self.info(name, st, tarfile.SYMTYPE)
            ti.linkname = os.readlink(path)
            self.tf.addfile(ti)
            self.entries += 1
            return
        if stat.S_ISREG(mode):
            ident = (st.st_dev, st.st_ino)
            if st.st_nlink > 1 and ident in self.links:
                ti = self.info(name, st, tarfile.LNKTYPE)
                ti.linkname = self.links[ident]
                self.tf.addfile(ti)
                self.entries += 1
                return
            if st.st_nlink > 1:
                self.links[ident] = name
            ti = self.info(name, st, tarfile.REGTYPE)
            ti.size = st.st_size
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fh:
                self.tf.addfile(ti, fh)
            self.entries += 1
            return
        self.skipped.append(name)  # devices, FIFOs, sockets: never in a build layer


def write_layer_tar(fs_dir: Path, parts: list[str], out: Any, epoch: int) -> tuple[int, list[str]]:
    """Write the tar of a layer folder's ``fs/<part>`` trees to ``out``: (entries, skipped)."""
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tf:
        w = _TarWriter(tf, epoch)
        for part in sorted(parts, key=lambda p: "" if p == ROOT_PART else p):
            top = fs_dir / part
            if not top.is_dir():
                continue
            w.tree(str(top), "" if part == ROOT_PART else part + "/")
    return w.entries, w.skipped


def export_layer(
    blobs: BlobStore, memo_dir: Path, layer_dir: Path, key: str, parts: list[str], epoch: int
) -> Layer:
    """The gzip-compressed image layer of build layer ``key`` (made once, then remembered)."""
    memo = memo_dir / f"{key}-{FORMAT}-{epoch}.json"
    if memo.is_file():
        info = json.loads(memo.read_text())
        if blobs.has(info["digest"]):
            return Layer(info["digest"], info["size"], info["diff_id"], OCI_LAYER_GZIP, key)
    if not (layer_dir / "meta.json").is_file():
        raise ExportError(f"build layer {key[:12]} is not in the cache (build the task again)")
    with blobs.writer() as packed:
        gz = gzip.GzipFile(
            filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=_GZIP_LEVEL
        )
        plain = HashingWriter(gz)  # type: ignore[arg-type]
        entries, skipped = write_layer_tar(layer_dir / "fs", parts, plain, epoch)
        gz.close()
    info = {
        "digest": packed.digest,
        "size": packed.size,
        "diff_id": plain.digest,
        "entries": entries,
        "skipped": skipped[:50],
    }
    memo_dir.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(info))
    tmp.replace(memo)
    return Layer(packed.digest, packed.size, plain.digest, OCI_LAYER_GZIP, key)


# ---------------------------------------------------------------------------- the image


def _base_layers(
    blobs: BlobStore, base: dict[str, Any]
) -> tuple[list[Layer], list[dict[str, Any]], str]:
    """Layers, history and ``ref@digest`` of a pulled base recorded by the pull."""
    manifest = base.get("manifest")
    config = base.get("config") or {}
    ref = f"{base.get('ref', '?')}@{base.get('digest', '?')}"
    if not isinstance(manifest, dict):
        raise ExportError(
            f"the base {ref} was pulled before repogym kept image manifests: remove its "
            "folder under the cache's oci/ and build again"
        )
    diff_ids = list((config.get("rootfs") or {}).get("diff_ids") or [])
    descs = list(manifest.get("layers") or [])
    if len(diff_ids) != len(descs):
        raise ExportError(f"the base {ref} lists {len(descs)} layers but {len(diff_ids)} diff ids")
    out = []
    for desc, diff_id in zip(descs, diff_ids, strict=True):
        media = _LAYER_TYPES.get(str(desc.get("mediaType")))
        if media is None:
            raise ExportError(
                f"the base {ref} has a layer of type {desc.get('mediaType')!r}, which cannot be "
                "pushed again"
            )
        digest = str(desc["digest"])
        if not blobs.has(digest):
            raise ExportError(
                f"layer {digest} of the base {ref} is not in the cache: remove its folder under "
                "the cache's oci/ and build again"
            )
        out.append(Layer(digest, blobs.size(digest), str(diff_id), media, "base", f"base {ref}"))
    history = [h for h in config.get("history") or [] if isinstance(h, dict)]
    if sum(not h.get("empty_layer") for h in history) != len(out):
        # A base without (consistent) history: one entry per layer, as the spec pairs them.
        history = [{"created_by": x.created_by} for x in out]
    return out, history, ref


def assemble(
    *,
    blobs: BlobStore,
    layers_root: Path,
    memo_dir: Path,
    built_layers: list[tuple[str, list[str]]],
    base: dict[str, Any] | None,
    mapping: dict[str, str],
    config: dict[str, Any],
    steps: list[dict[str, Any]],
    platform: str,
    epoch: int,
    progress: Callable[[str], None] | None = None,
) -> Image:
    """The image of a local build (see the module docstring).

    ``base`` is the pulled base's ``image.json`` (None: the ``FROM`` was mapped onto the host,
    refused); ``config`` holds ``Env`` (a dict), ``WorkingDir``, ``User``, ``Cmd``,
    ``Entrypoint``, ``Labels``, ``ExposedPorts``, ``Volumes``, ``StopSignal``.
    """
    if base is None:
        raise ExportError(
            f"its base {mapping.get('from', '?')} was mapped onto this host "
            f"({mapping.get('host', 'host toolchain')}), which no other machine has: give the "
            "build a registry that holds the base (REPOGYM_REGISTRY_MIRROR, docs/publish.md)"
        )
    layers, history, base_ref = _base_layers(blobs, base)
    by_key = {str(s.get("key")): str(s.get("instruction", "")) for s in steps}
    for key, parts in built_layers:
        if not parts:
            continue
        if progress is not None:
            progress(f"layer {key[:12]}")
        layer = export_layer(blobs, memo_dir, layers_root / key, key, parts, epoch)
        step = by_key.get(key, f"layer {key[:12]}")
        layers.append(dataclasses.replace(layer, created_by=step))
        history.append({"created": iso(epoch), "created_by": step})
    os_, arch = platform.split("/")[:2]
    image_config: dict[str, Any] = {}
    env = config.get("Env") or {}
    if env:
        image_config["Env"] = [f"{k}={v}" for k, v in env.items()]
    for name in ("WorkingDir", "User", "Cmd", "Entrypoint", "Labels", "StopSignal"):
        if config.get(name):
            image_config[name] = config[name]
    for name in ("ExposedPorts", "Volumes"):
        if config.get(name):
            image_config[name] = {str(k): {} for k in config[name]}
    doc = {
        "architecture": arch,
        "os": os_,
        "created": iso(epoch),
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": [x.diff_id for x in layers]},
        "history": history,
    }
    config_bytes = canonical_json(doc)
    config_digest = blobs.put(config_bytes)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config_bytes)},
        "layers": [x.descriptor for x in layers],
    }
    manifest_bytes = canonical_json(manifest)
    blobs.put(manifest_bytes)
    return Image(manifest_bytes, config_bytes, layers, base=base_ref)
