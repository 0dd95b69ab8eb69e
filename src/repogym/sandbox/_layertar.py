"""A build layer as one tar stream, and back: the shared environment cache's file format.

A layer folder (``meta.json`` + ``fs/<part>/…``, see :mod:`._layers`) is written as a PAX tar:
``meta.json`` first, then every entry of ``fs/`` (folders before what they hold), then a
trailer member :data:`TRAILER` holding the layer key, the member count and a SHA-256 over
every member's name, type, mode, owner, link target and bytes. A reader that finds no
trailer, a different count or digest, or a key other than the one it asked for refuses the
whole file: a truncated or corrupt upload is never mistaken for a layer.

What an overlayfs lower layer needs survives the trip: whiteouts (character device 0/0) and
the ``overlay.{opaque,redirect,metacopy,whiteout}`` extended attributes (``trusted.`` as root,
``user.`` without root, mapped to this host's prefix on unpacking). Other extended attributes
(``overlay.origin`` and friends name the filesystem the layer was built on) are left out.

Unpacking is as strict as the local layer store: member names must be relative, without
``.``/``..`` components, inside ``meta.json``/``fs/``; every parent must already be a real
folder (never a symlink: nothing is written through one); only folders, regular files,
symlinks, hard links to files already unpacked, and whiteouts are accepted — any other device,
FIFO or special file refuses the layer; setuid/setgid bits of files are dropped (as
``_layerfs.strip_layer`` does); folder modes are applied last.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import stat
import tarfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING or __package__ not in (None, ""):
    from repogym.sandbox._confine import (
        Root,
        copy_exact,
        link_meta,
        open_entry,
        same_entry,
        set_meta,
    )
else:  # loaded by the confined unpacker by its file name
    from _confine import Root, copy_exact, link_meta, open_entry, same_entry, set_meta

FORMAT = 1
TRAILER = ".repogym-layer.json"
META = "meta.json"
_XATTR_PREFIXES = ("trusted.overlay.", "user.overlay.")
_KEPT_XATTRS = ("opaque", "redirect", "metacopy", "whiteout")
_PAX_XATTR = "REPOGYM.overlay."
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class LayerTarError(ValueError):
    """A layer archive that cannot be trusted or written (one line, never file contents)."""


def _digest_header(h: Any, ti: tarfile.TarInfo, xattrs: dict[str, str]) -> None:
    fields = [ti.name, str(ti.type[0]), oct(stat.S_IMODE(ti.mode)), str(ti.uid), str(ti.gid)]
    fields += [ti.linkname, str(ti.size), json.dumps(xattrs, sort_keys=True)]
    h.update("\0".join(fields).encode("utf-8", "surrogateescape") + b"\n")


def _overlay_xattrs(path: str) -> dict[str, str]:
    """The overlay attributes of ``path`` a lower layer needs (name → hex value)."""
    out: dict[str, str] = {}
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return out
    for full in names:
        for prefix in _XATTR_PREFIXES:
            if full.startswith(prefix) and full[len(prefix) :] in _KEPT_XATTRS:
                with contextlib.suppress(OSError):
                    value = os.getxattr(path, full, follow_symlinks=False)
                    out[full[len(prefix) :]] = value.hex()
    return out


class _HashingReader:
    def __init__(self, fh: IO[bytes], h: Any) -> None:
        self.fh, self.h = fh, h

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.h.update(data)
        return data


def pack_layer(layer: Path, key: str, out: IO[bytes]) -> int:
    """Write the layer folder ``layer`` (of ``key``) to ``out`` as a tar stream; returns the
    number of members. Raises :class:`LayerTarError` for an entry a layer cannot hold."""
    h = hashlib.sha256()
    count = 0
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tf:

        def add(path: str, arcname: str) -> None:
            nonlocal count
            ti = tf.gettarinfo(path, arcname)
            if ti is None or not (
                ti.isdir() or ti.isreg() or ti.issym() or ti.islnk() or _whiteout_info(ti)
            ):
                raise LayerTarError(f"{arcname}: a layer cannot hold this kind of file")
            ti.uname = ti.gname = ""
            xattrs = _overlay_xattrs(path) if ti.isdir() or ti.isreg() else {}
            ti.pax_headers = {_PAX_XATTR + k: v for k, v in xattrs.items()}
            _digest_header(h, ti, xattrs)
            count += 1
            if ti.isreg():
                with open(path, "rb") as fh:
                    tf.addfile(ti, _HashingReader(fh, h))
            else:
                tf.addfile(ti)

        add(str(layer / META), META)
        fs = layer / "fs"
        for dirpath, dirnames, filenames in os.walk(fs, onerror=_unreadable):
            dirnames.sort()
            rel = os.path.relpath(dirpath, layer)
            add(dirpath, rel)
            for name in sorted(filenames):
                add(os.path.join(dirpath, name), f"{rel}/{name}")
            # Symlinks to folders are listed in dirnames and not walked into: entries too.
            for name in [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                add(os.path.join(dirpath, name), f"{rel}/{name}")
                dirnames.remove(name)
        trailer = json.dumps(
            {"format": FORMAT, "key": key, "members": count, "sha256": h.hexdigest()}
        ).encode()
        ti = tarfile.TarInfo(TRAILER)
        ti.size = len(trailer)
        tf.addfile(ti, io.BytesIO(trailer))
    return count


def _unreadable(exc: OSError) -> None:
    raise LayerTarError(f"cannot read the layer ({exc.strerror or exc})")


def _whiteout_info(ti: tarfile.TarInfo) -> bool:
    return ti.ischr() and ti.devmajor == 0 and ti.devminor == 0


def _check_name(name: str) -> list[str]:
    parts = name.split("/")
    if name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise LayerTarError(f"member {name!r} is not a plain relative path")
    if not (name in (META, TRAILER) or parts[0] == "fs"):
        raise LayerTarError(f"member {name!r} is outside meta.json and fs/")
    return parts


def xattr_prefix() -> str:
    return "trusted.overlay." if os.geteuid() == 0 else "user.overlay."


def unpack_layer(src: IO[bytes], dest: Path, key: str) -> dict[str, Any]:
    """Unpack a layer stream into the (fresh, empty but for ``fs/``) folder ``dest`` and
    return its ``meta.json``. Raises :class:`LayerTarError` for anything untrusted,
    truncated or corrupt (``dest`` is then left half-filled for the caller to discard).

    The stream is unpacked by a confined process whose root is ``dest`` (see
    :mod:`._untar`)."""
    from repogym.sandbox import _unpack

    try:
        result = _unpack.run("layer", src, dest, key=key, xattr_prefix=xattr_prefix())
    except _unpack.UnpackError as exc:
        raise LayerTarError(str(exc)) from None
    meta = result.get("meta")
    if not isinstance(meta, dict):
        raise LayerTarError("unreadable meta.json")
    return meta


def unpack_into(src: IO[bytes], root: Root, key: str, *, xattr_prefix: str) -> dict[str, Any]:
    """:func:`unpack_layer`'s work, under ``root`` (the confined unpacker's ``/``): every
    parent must be a real folder reached without any link (``RESOLVE_NO_SYMLINKS``), every
    entry is created by name in its folder's descriptor, metadata set through the entry's own
    descriptor, folder modes last and only on the folder that was created."""
    strict = Root(root.fd, beneath=True, symlinks=False, owned=False)
    h = hashlib.sha256()
    count = 0
    trailer: dict[str, Any] | None = None
    dirs: list[tuple[list[str], tuple[int, int], tarfile.TarInfo]] = []
    as_root = os.geteuid() == 0
    try:
        with tarfile.open(fileobj=src, mode="r|") as tf:
            for m in tf:
                if trailer is not None:
                    raise LayerTarError("members after the trailer")
                parts = _check_name(m.name)
                if m.name == TRAILER:
                    f = tf.extractfile(m) if m.isreg() and m.size < 4096 else None
                    if f is None:
                        raise LayerTarError("unreadable trailer")
                    trailer = json.loads(f.read())
                    continue
                xattrs = {
                    k[len(_PAX_XATTR) :]: v
                    for k, v in m.pax_headers.items()
                    if k.startswith(_PAX_XATTR)
                }
                if any(k not in _KEPT_XATTRS for k in xattrs):
                    raise LayerTarError(f"{m.name}: unexpected extended attribute")
                _digest_header(h, m, xattrs)
                count += 1
                _entry(tf, m, strict, parts, xattrs, h, dirs, as_root, xattr_prefix)
    except tarfile.TarError as exc:
        raise LayerTarError(f"not a readable tar stream ({exc})") from None
    except (EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LayerTarError(f"truncated or corrupt ({type(exc).__name__})") from None
    if not isinstance(trailer, dict):
        raise LayerTarError("no trailer (truncated upload?)")
    if trailer.get("format") != FORMAT or trailer.get("key") != key:
        raise LayerTarError("the trailer names another format or layer")
    if trailer.get("members") != count or trailer.get("sha256") != h.hexdigest():
        raise LayerTarError("the content does not match its digest")
    for parts, ident, m in reversed(dirs):
        fd = _open_parent(strict, parts)
        try:
            d = open_entry(fd, parts[-1], directory=True)
        finally:
            os.close(fd)
        try:
            if same_entry(d, ident):
                _meta(d, m, as_root)
        finally:
            os.close(d)
    try:
        fd = strict.open(META, os.O_RDONLY | os.O_NONBLOCK, follow=False)
        with os.fdopen(fd, "rb") as fh:
            meta = json.loads(fh.read(1 << 20))
    except (OSError, ValueError) as exc:
        raise LayerTarError(f"unreadable meta.json ({type(exc).__name__})") from None
    if not isinstance(meta, dict) or meta.get("key") != key:
        raise LayerTarError("meta.json names another layer")
    return meta


def _open_parent(strict: Root, parts: list[str]) -> int:
    """The folder of ``parts``' last entry: every component a real folder, no link."""
    try:
        return strict.dir("/".join(parts[:-1]))
    except FileNotFoundError:
        raise LayerTarError(f"{'/'.join(parts)}: its folder comes later or not at all") from None
    except OSError:
        raise LayerTarError(f"{'/'.join(parts)}: a parent is not a folder") from None


def _set_xattrs(fd: int, xattrs: dict[str, str], prefix: str) -> None:
    for name, value in xattrs.items():
        try:
            os.setxattr(fd, prefix + name, bytes.fromhex(value))
        except (OSError, ValueError) as exc:
            raise LayerTarError(f"cannot set overlay.{name} here ({exc})") from None


def _entry(
    tf: tarfile.TarFile,
    m: tarfile.TarInfo,
    strict: Root,
    parts: list[str],
    xattrs: dict[str, str],
    h: Any,
    dirs: list[tuple[list[str], tuple[int, int], tarfile.TarInfo]],
    as_root: bool,
    prefix: str,
) -> None:
    if xattrs and not (m.isdir() or m.isreg()):
        raise LayerTarError(f"{m.name}: extended attributes on a link or whiteout")
    pfd = _open_parent(strict, parts)
    name = parts[-1]
    try:
        try:
            st: os.stat_result | None = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if m.isdir():
            if st is not None and not stat.S_ISDIR(st.st_mode):
                raise LayerTarError(f"{m.name}: given twice")
            if st is None:
                os.mkdir(name, 0o700, dir_fd=pfd)
            fd = open_entry(pfd, name, directory=True)
            try:
                _set_xattrs(fd, xattrs, prefix)
                ident = os.fstat(fd)
            finally:
                os.close(fd)
            dirs.append((parts, (ident.st_dev, ident.st_ino), m))
            return
        if st is not None:
            raise LayerTarError(f"{m.name}: given twice")
        if m.isreg():
            fobj = tf.extractfile(m)
            if fobj is None:
                raise LayerTarError(f"{m.name}: unreadable")
            fd = os.open(name, _NEW, 0o600, dir_fd=pfd)
            try:
                if not copy_exact(fobj.read, fd, m.size, h.update):
                    raise LayerTarError(f"{m.name}: truncated")
                _set_xattrs(fd, xattrs, prefix)
                _meta(fd, m, as_root)
            finally:
                os.close(fd)
        elif m.issym():
            os.symlink(m.linkname, name, dir_fd=pfd)
            with contextlib.suppress(OSError):
                link_meta(pfd, name, owner=(m.uid, m.gid) if as_root else None, mtime=m.mtime)
        elif m.islnk():
            src_parts = _check_name(m.linkname)
            sfd = _open_parent(strict, src_parts)
            try:
                try:
                    sst = os.stat(src_parts[-1], dir_fd=sfd, follow_symlinks=False)
                except FileNotFoundError:
                    raise LayerTarError(
                        f"{m.name}: hard link to a file not (yet) unpacked"
                    ) from None
                if not stat.S_ISREG(sst.st_mode):
                    raise LayerTarError(f"{m.name}: hard link to something other than a file")
                os.link(src_parts[-1], name, src_dir_fd=sfd, dst_dir_fd=pfd, follow_symlinks=False)
            finally:
                os.close(sfd)
        elif _whiteout_info(m):
            os.mknod(name, stat.S_IFCHR | (m.mode & 0o777), os.makedev(0, 0), dir_fd=pfd)
            if as_root:
                with contextlib.suppress(OSError):
                    link_meta(pfd, name, owner=(m.uid, m.gid))
        else:
            raise LayerTarError(f"{m.name}: devices, FIFOs and special files are refused")
    finally:
        os.close(pfd)


def _meta(fd: int, m: tarfile.TarInfo, as_root: bool) -> None:
    mode = stat.S_IMODE(m.mode)
    if not m.isdir():
        mode &= ~(stat.S_ISUID | stat.S_ISGID)  # setgid on folders (group inheritance) stays
    owner = (m.uid, m.gid) if as_root else None
    try:
        set_meta(fd, owner=owner, mode=mode)
    except PermissionError:
        set_meta(fd, mode=mode)
    with contextlib.suppress(OSError):
        os.utime(fd, (m.mtime, m.mtime))
