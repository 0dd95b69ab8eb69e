"""System calls, messages and identities for the fork server (standard library only).

Loaded by :mod:`._forkserver` (a script run as ``python -I -S``) by its file name, not through the
``repogym`` package: it must import nothing but the standard library. ``libc`` wrappers for
mount/unshare/setns/prctl, the ``SOCK_SEQPACKET`` + ``marshal`` message format with
``SCM_RIGHTS`` descriptors, user resolution from the sandbox's ``/etc/passwd`` and capabilities.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import marshal
import os
import resource
import socket
import stat
import struct

TYPE_CHECKING = False  # typing is not imported at run time (interpreter start-up)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    # (uid, gid, supplementary groups, home) of a user inside the sandbox root
    Ident = tuple[int, int, list[int], str]

    from repogym.sandbox._confine import Root, kernel_resolver
else:
    from _confine import Root, kernel_resolver

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SYS_MOVE_MOUNT = 429
MOVE_MOUNT_F_EMPTY_PATH = 0x4
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1

# Docker's default capability set for container processes.
KEEP_CAPS = frozenset({0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31})
MAX_MSG = 1 << 20
_FD_LIMIT = max(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 1024)
if _FD_LIMIT > 1 << 20 or _FD_LIMIT == resource.RLIM_INFINITY:
    _FD_LIMIT = 1 << 20
OOM_SCORE_ADJ = b"500"
CAP_NET_RAW = 13

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.syscall.restype = ctypes.c_long


class SetupError(Exception):
    """A command could not be started; the message is shown to the user as is."""


def check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def to_bytes(s: str | bytes | None) -> bytes | None:
    return s.encode() if isinstance(s, str) else s


def mount(
    source: str | bytes,
    target: str | bytes,
    fstype: str | bytes | None,
    flags: int = 0,
    data: str | bytes | None = None,
) -> None:
    check(
        libc.mount(to_bytes(source), to_bytes(target), to_bytes(fstype), flags, to_bytes(data)),
        "mount " + str(target),
    )


def umount(target: str | bytes) -> None:
    check(libc.umount2(to_bytes(target), MNT_DETACH), "umount " + str(target))


def unshare(flags: int) -> None:
    check(libc.unshare(flags), "unshare")


def setns(fd: int, flags: int) -> None:
    check(libc.setns(fd, flags), "setns")


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    return libc.prctl(
        option,
        ctypes.c_ulong(arg2),
        ctypes.c_ulong(arg3),
        ctypes.c_ulong(arg4),
        ctypes.c_ulong(arg5),
    )


def recv(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """Receive one message and its file descriptors; ``(None, [])`` at EOF."""
    fds: list[int] = []
    msg, ancdata, _flags, _addr = sock.recvmsg(
        MAX_MSG, socket.CMSG_LEN(64 * 4), socket.MSG_CMSG_CLOEXEC
    )
    for level, ctype, data in ancdata:
        if level == socket.SOL_SOCKET and ctype == socket.SCM_RIGHTS:
            n = len(data) - len(data) % 4
            fds.extend(struct.unpack(f"{n // 4}i", data[:n]))
    if not msg:
        for fd in fds:
            os.close(fd)
        return None, []
    return marshal.loads(msg), fds


def send(sock: socket.socket, obj: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = marshal.dumps(obj)
    if fds:
        sock.sendmsg(
            [data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
        )
    else:
        sock.send(data)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def report(fd: int, obj: dict[str, Any]) -> None:
    """Write a marshal-encoded result to a status pipe and close it."""
    try:
        write_all(fd, marshal.dumps(obj))
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------- users


def read_confined(path: str, limit: int = 1 << 22) -> bytes:
    """At most ``limit`` bytes of the regular file ``path`` of the sandbox (this process's
    root), looked up inside it and never through a magic link: the caller may hold host
    descriptors that ``/proc/self/fd`` would otherwise lead to."""
    with Root(os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) as root:
        fd = root.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        os.set_blocking(fd, True)
        chunks = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


CapSets = tuple[_CapHeader, "ctypes.Array[_CapData]"]


def cap_sets(keep: Sequence[int]) -> CapSets:
    """The ``capset`` arguments that keep only ``keep`` (built once, used many times)."""
    mask = 0
    for cap in keep:
        mask |= 1 << cap
    data = (_CapData * 2)()
    data[0].effective = data[0].permitted = mask & 0xFFFFFFFF
    data[1].effective = data[1].permitted = (mask >> 32) & 0xFFFFFFFF
    return _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), data


def keep_only_caps(sets: CapSets) -> None:
    """Reduce this process's effective and permitted capabilities to those of ``sets`` that it
    has (a container's root, for one, lacks ``CAP_DAC_READ_SEARCH``: asking for a capability
    not permitted fails the whole ``capset``)."""
    header, data = sets
    have = (_CapData * 2)()
    check(libc.capget(ctypes.byref(_CapHeader(header.version, 0)), ctypes.byref(have)), "capget")
    want = (_CapData * 2)()
    for i in (0, 1):
        want[i].effective = want[i].permitted = data[i].permitted & have[i].permitted
    check(libc.capset(ctypes.byref(header), ctypes.byref(want)), "capset")


def become_root_of_a_user_namespace(extra: int = 0) -> None:
    """Unshare a user namespace (and ``extra`` namespaces) mapping our uid and gid to 0: the
    capabilities inside it (mounts, chroot) without root on the host."""
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER | extra)
    for name, data in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, data.encode())
        finally:
            os.close(fd)


def warm_up() -> None:
    """Resolve, once in the session server, what every forked worker uses (the ``openat2``
    probe, libc symbols): a worker then only runs code, it does not look anything up."""
    kernel_resolver()
    for name in ("capget", "capset", "syscall", "umount2"):
        getattr(libc, name)


def close_other_fds(keep: Sequence[int]) -> None:
    """Close every descriptor but 0–2 and ``keep`` (the session server's host folders,
    cgroup files and sockets among them: ``/proc/self/fd`` must lead nowhere outside the
    sandbox). 0–2 are the sandbox's ``/dev/null`` already (:func:`null_stdio`)."""
    low = 3
    for fd in sorted(set(keep)):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, _FD_LIMIT)


def null_stdio() -> None:
    """Make 0, 1 and 2 the sandbox's ``/dev/null`` (the session server's, once it entered
    the sandbox, so that everything it forks inherits nothing of the host on them)."""
    with Root(os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) as root:
        null = root.open("/dev/null", os.O_RDWR | os.O_NOCTTY)
    try:
        if not stat.S_ISCHR(os.fstat(null).st_mode):
            raise OSError(errno.ENODEV, "the sandbox's /dev/null is not a device")
        for fd in (0, 1, 2):
            os.dup2(null, fd)
    finally:
        os.close(null)


def _read_db(path: str) -> list[list[str]]:
    try:
        text = read_confined(path).decode("utf-8", errors="replace")
    except OSError:
        return []
    return [
        line.split(":") for line in text.splitlines() if line.strip() and not line.startswith("#")
    ]


def resolve_user(spec: str | None) -> Ident:
    """``user``/``uid``[``:group``/``:gid``] → (uid, gid, groups, home) inside the root."""
    spec = (spec or "root").strip()
    name, _, group = spec.partition(":")
    passwd = _read_db("/etc/passwd")
    uid: int | None = None
    gid = 0
    home = "/"
    username = None
    for row in passwd:
        if len(row) >= 7 and (row[0] == name or (name.isdigit() and row[2] == name)):
            username, uid, gid, home = row[0], int(row[2]), int(row[3]), row[5] or "/"
            break
    if uid is None:
        if name == "root":  # the default user needs no passwd entry (e.g. a broken one)
            uid, gid = 0, 0
        elif not name.isdigit():
            raise LookupError(f"unable to find user {name}: no matching entries in passwd file")
        else:
            uid, gid = int(name), int(name)
    groups_db = _read_db("/etc/group")
    if group:
        group_gid: int | None = None
        for row in groups_db:
            if len(row) >= 3 and (row[0] == group or (group.isdigit() and row[2] == group)):
                group_gid = int(row[2])
                break
        if group_gid is None:
            if not group.isdigit():
                raise LookupError(
                    f"unable to find group {group}: no matching entries in group file"
                )
            group_gid = int(group)
        gid = group_gid
        groups = [gid]
    else:
        groups = [gid]
        if username is not None:
            for row in groups_db:
                if len(row) >= 4 and username in row[3].split(",") and row[2].isdigit():
                    groups.append(int(row[2]))
    return uid, gid, sorted(set(groups)), home


_user_cache: dict[tuple[str | None, tuple[tuple[int, int, int] | None, ...]], Ident] = {}


def resolve_user_cached(spec: str | None) -> Ident:
    """``resolve_user`` memoized on the identity of /etc/passwd and /etc/group."""
    stamp: list[tuple[int, int, int] | None] = []
    with Root(os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) as root:
        for path in ("/etc/passwd", "/etc/group"):
            try:
                st = root.stat(path)
            except OSError:
                st = None
            stamp.append((st.st_ino, st.st_mtime_ns, st.st_size) if st else None)
    key = (spec, tuple(stamp))
    if key not in _user_cache:
        if len(_user_cache) > 64:
            _user_cache.clear()
        _user_cache[key] = resolve_user(spec)
    return _user_cache[key]


# ------------------------------------------------------------------------------- commands


def _caps_to_drop() -> list[int]:
    last = 40
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except (OSError, ValueError):
        pass
    return [cap for cap in range(last + 1) if cap not in KEEP_CAPS]


CAPS_TO_DROP = _caps_to_drop()


def drop_caps(networked: bool = False) -> None:
    """Reduce the bounding set to Docker's default capabilities (root keeps only those).

    With a network (slirp4netns) ``CAP_NET_RAW`` goes too: a raw frame on ``tap0`` addressed
    to 127.0.0.1 would be forwarded by slirp to the *host's* loopback (its
    ``--disable-host-loopback`` only guards the 10.0.2.2 alias).
    """
    fn = libc.prctl
    for cap in CAPS_TO_DROP:
        fn(PR_CAPBSET_DROP, cap, 0, 0, 0)
    if networked:
        fn(PR_CAPBSET_DROP, CAP_NET_RAW, 0, 0, 0)
    fn(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def loopback_up() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))
    finally:
        sock.close()
