"""The new mount API (``open_tree``/``mount_setattr``) for adding host folders to sandboxes."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_SYS_OPEN_TREE = 428
_SYS_MOUNT_SETATTR = 442
_OPEN_TREE_CLONE = 1
_OPEN_TREE_CLOEXEC = 0o2000000
_AT_RECURSIVE = 0x8000
_AT_FDCWD = -100
_MOUNT_ATTR_RDONLY = 0x1
_MOUNT_ATTR_NOSUID = 0x2
_MOUNT_ATTR_NODEV = 0x4

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def clone_tree(src: Path, *, read_only: bool = True) -> int:
    """A detached copy of the mount tree at ``src`` (fd), ready to be attached elsewhere."""
    fd = _libc.syscall(
        _SYS_OPEN_TREE,
        _AT_FDCWD,
        os.fsencode(str(src)),
        _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_RECURSIVE,
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"open_tree {src}: {os.strerror(err)}")
    attr = _MountAttr(
        _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV | (_MOUNT_ATTR_RDONLY if read_only else 0)
    )
    ret = _libc.syscall(
        _SYS_MOUNT_SETATTR,
        int(fd),
        b"",
        0x1000 | _AT_RECURSIVE,  # AT_EMPTY_PATH
        ctypes.byref(attr),
        ctypes.sizeof(attr),
    )
    if ret < 0:
        err = ctypes.get_errno()
        os.close(fd)
        raise OSError(err, f"mount_setattr {src}: {os.strerror(err)}")
    return int(fd)
