"""Hostile image layers, applied the way a pull applies them (the confined unpacker): a folder
replaced by a symlink before its deferred mode, hard links and whiteouts through symlinks,
``..`` in names and link names, device nodes, setuid files, a million entries. None may read,
create, remove or re-permission anything outside the image's root."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from repogym.sandbox import _unpack
from tests.containment.conftest import Canary
from tests.sandbox import _oci


def apply(root: Path, *layers: bytes, budget: _unpack.Budget | None = None) -> _unpack.Budget:
    budget = budget or _unpack.Budget(max_bytes=1 << 30)
    for i, data in enumerate(layers):
        blob = root.parent / f"layer{i}.tar"
        blob.write_bytes(data)
        _unpack.apply_layer(blob, root, budget)
    return budget


def raw_layer(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, **attrs: object) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    for key, value in attrs.items():
        setattr(ti, key, value)
    return ti


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "image" / "rootfs"
    path.mkdir(parents=True)
    return path


def test_a_folder_replaced_by_a_symlink_before_its_mode_changes_no_host_mode(
    root: Path, canary: Canary
) -> None:
    """The attack of a hostile image: folder ``a`` (mode 6777), then symlink ``a`` to a host
    path in the same layer; the folder modes applied at the end must not follow it."""
    before = canary.state()
    targets = [str(canary.victim), str(canary.secret), "../" * 12 + str(canary.victim)[1:]]
    for i, target in enumerate(targets):
        layer = raw_layer(
            [
                (entry(f"a{i}", tarfile.DIRTYPE, mode=0o6777), None),
                (entry(f"a{i}", tarfile.SYMTYPE, linkname=target), None),
            ]
        )
        apply(root, layer)
    canary.check(before)
    assert os.readlink(root / "a0") == str(canary.victim)
    # A folder below the link is created through it inside the root, never outside it.
    apply(root, raw_layer([(entry("a0/inner", tarfile.DIRTYPE, mode=0o6777), None)]))
    assert (root / str(canary.victim)[1:] / "inner").is_dir()
    canary.check(before)


def test_hard_links_and_whiteouts_through_symlinks_stay_inside(root: Path, canary: Canary) -> None:
    before = canary.state()
    apply(root, _oci.layer([("l", "link", str(canary.root)), ("up", "link", "../" * 12)]))
    for link_name in (f"l/{canary.secret.name}", f"up{canary.secret}", str(canary.secret)):
        with pytest.raises(_unpack.UnpackError, match="not a file"):
            apply(root, _oci.layer([("h", "hard", link_name)]))
    apply(
        root,
        _oci.layer(
            [
                ("l/victim/file.txt", "whiteout", None),
                ("l/victim", "opaque", None),
                (f"up{canary.victim}/sub", "whiteout", None),
                ("l/secret.txt", "whiteout", None),
            ]
        ),
    )
    apply(root, _oci.layer([("l/victim/new.txt", "file", "x"), ("l/secret.txt", "file", "y")]))
    canary.check(before)


def test_dotdot_names_devices_and_setuid_bits(root: Path, canary: Canary) -> None:
    before = canary.state()
    for name in ("../escape", "a/../../escape", "./../escape"):
        with pytest.raises(_unpack.UnpackError, match=r"'\.\.'"):
            apply(root, raw_layer([(entry(name), b"x")]))
    with pytest.raises(_unpack.UnpackError, match=r"'\.\.'|not a file"):
        apply(root, raw_layer([(entry("h", tarfile.LNKTYPE, linkname="../../etc/passwd"), None)]))
    budget = apply(
        root,
        raw_layer(
            [
                (entry("dev/mem", tarfile.CHRTYPE, devmajor=1, devminor=1), None),
                (entry("dev/sda", tarfile.BLKTYPE, devmajor=8, devminor=0), None),
                (entry("dev/fifo", tarfile.FIFOTYPE), None),
                (entry("bin/su", mode=0o6755), b"#!/bin/sh\n"),
                (entry("srv", tarfile.DIRTYPE, mode=0o2775), None),
            ]
        ),
    )
    canary.check(before)
    assert not (root / "dev" / "mem").exists() and not (root / "dev" / "sda").exists()
    assert not (root / "dev" / "fifo").exists()
    assert sorted(budget.skipped) == ["dev/fifo", "dev/mem", "dev/sda"]
    assert stat.S_IMODE((root / "bin" / "su").stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "srv").stat().st_mode) == 0o2775  # setgid on folders stays
    assert not (root.parent / "escape").exists() and not (root.parent.parent / "escape").exists()


class MillionEntries(io.RawIOBase):
    """An uncompressed tar stream of a million empty files, made as it is read: a refusal
    after the member limit reads only what it needs."""

    def __init__(self, count: int = 1_000_000) -> None:
        self.count = count
        self.made = 0
        self.buf = b""

    def readable(self) -> bool:
        return True

    def _header(self, i: int) -> bytes:
        ti = tarfile.TarInfo(f"many/f{i:07d}")
        return ti.tobuf(format=tarfile.USTAR_FORMAT)

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        while len(self.buf) < len(b) and self.made < self.count:
            self.buf += b"".join(self._header(self.made + k) for k in range(256))
            self.made += 256
        n = min(len(b), len(self.buf))
        b[:n] = self.buf[:n]
        self.buf = self.buf[n:]
        return n


def test_a_million_entries_stop_at_the_member_limit(root: Path) -> None:
    stream = MillionEntries()
    with pytest.raises(_unpack.UnpackError, match="more than 2000 files"):
        _unpack.run("oci", stream, root, max_bytes=1 << 30, max_members=2000)
    assert stream.made < 100_000  # refused from the headers, long before the end
    assert len(os.listdir(root / "many")) <= 2000


def test_whiteouts_of_a_layer_never_remove_its_own_entries(root: Path) -> None:
    """OCI: a whiteout hides what the layers *below* put there, not an entry of its own layer
    (whatever their order in the archive)."""
    apply(root, _oci.layer([("d", "dir", None), ("d/old", "file", "1"), ("d/keep", "file", "k")]))
    apply(
        root,
        _oci.layer(
            [
                ("d/new", "file", "2"),
                ("d", "opaque", None),
                ("e", "file", "e"),
                ("e", "whiteout", None),
            ]
        ),
    )
    assert sorted(os.listdir(root / "d")) == ["new"]
    assert (root / "e").read_text() == "e"
