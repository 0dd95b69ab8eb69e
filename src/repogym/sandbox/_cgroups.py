"""Cgroups for local sandbox sessions: limits (pids, memory, cpu) and whole-tree kills.

Works with whatever this host offers: cgroup v2 (``cgroup.kill``, ``pids.max``, ``memory.max``)
and/or cgroup v1 controllers (``pids``, ``memory``, ``cpu``). Session cgroups are created below
the cgroup this process already lives in, so limits imposed on us still apply to our sandboxes.
Every exec gets its own tracking cgroup below the session's, which is how a timeout kills a
command's whole tree (daemons and ``setsid`` children included) and nothing else.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import secrets
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from repogym.sandbox._host import pid_alive

_GROUP = "repogym"
_counter = itertools.count(1)


@dataclass
class _Hierarchy:
    mount: Path
    self_path: str
    controllers: frozenset[str]

    @property
    def base(self) -> Path:
        return self.mount / self.self_path.lstrip("/") / _GROUP


@dataclass
class CgroupSupport:
    """What this host lets us do with cgroups (detected once per process)."""

    v2: _Hierarchy | None = None
    v2_limits: frozenset[str] = frozenset()
    v1: dict[str, _Hierarchy] = field(default_factory=dict)

    @property
    def can_track(self) -> bool:
        return self.v2 is not None or "pids" in self.v1

    def describe(self) -> dict[str, str]:
        """Which mechanism enforces each limit (for ``BuiltEnvironment.details``)."""

        def where(ctrl: str) -> str:
            if ctrl in self.v2_limits:
                return "cgroup2"
            if ctrl in self.v1:
                return "cgroup1"
            return "none"

        return {
            "tree_kill": "cgroup2" if self.v2 else ("cgroup1" if "pids" in self.v1 else "pgid"),
            "pids": where("pids"),
            "memory": where("memory") if where("memory") != "none" else "rlimit-as",
            "cpu": where("cpu"),
        }


_support: CgroupSupport | None = None
_support_lock = threading.Lock()


def _writable(path: Path) -> bool:
    probe = path / f".probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


def detect() -> CgroupSupport:
    """Detect usable cgroup hierarchies (cached)."""
    global _support
    with _support_lock:
        if _support is None:
            _support = _detect()
            _cleanup_stale(_support)
        return _support


def _detect() -> CgroupSupport:
    support = CgroupSupport()
    if os.geteuid() != 0:
        return support
    own: dict[str, str] = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _hid, ctrls, path = line.split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                own[c] = path
    except OSError:
        return support
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return support
    for line in mountinfo:
        left, _, right = line.partition(" - ")
        fields = left.split()
        rfields = right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        root, mnt, fstype = fields[3], Path(fields[4]), rfields[0]
        if fstype == "cgroup2" and support.v2 is None and "" in own:
            rel = _relative(own[""], root)
            if rel is None:
                continue
            h = _Hierarchy(mnt, rel, frozenset())
            if (h.mount / rel.lstrip("/") / "cgroup.procs").exists() and _writable(h.base):
                support.v2 = h
        elif fstype == "cgroup":
            opts = set(rfields[2].split(","))
            for ctrl in ("pids", "memory", "cpu"):
                if ctrl in opts and ctrl in own and ctrl not in support.v1:
                    rel = _relative(own[ctrl], root)
                    if rel is None:
                        continue
                    h = _Hierarchy(mnt, rel, frozenset(opts & {"pids", "memory", "cpu"}))
                    if _writable(h.base):
                        support.v1[ctrl] = h
    if support.v2 is not None:
        support.v2_limits = _enable_v2_controllers(support.v2)
    _lower_cpu_weight(support)
    return support


def _lower_cpu_weight(support: CgroupSupport) -> None:
    """Sandboxes as a group get a quarter of the default CPU weight: idle CPUs are theirs,
    but under contention (a fork bomb, a busy build) the host's own work comes first."""
    with contextlib.suppress(OSError):
        if "cpu" in support.v2_limits and support.v2 is not None:
            (support.v2.base / "cpu.weight").write_text("25")
        elif "cpu" in support.v1:
            (support.v1["cpu"].base / "cpu.shares").write_text("256")


def _relative(path: str, mount_root: str) -> str | None:
    if mount_root == "/":
        return path
    if path == mount_root or path.startswith(mount_root.rstrip("/") + "/"):
        return path[len(mount_root.rstrip("/")) :] or "/"
    return None


def _enable_v2_controllers(h: _Hierarchy) -> frozenset[str]:
    """Enable pids/memory/cpu for our sandboxes' cgroups where the kernel allows it."""
    base = h.base
    try:
        available = set((base.parent / "cgroup.controllers").read_text().split())
    except OSError:
        return frozenset()
    enabled: set[str] = set()
    for ctrl in ("pids", "memory", "cpu"):
        if ctrl not in available:
            continue
        try:
            for d in (base.parent, base):
                cur = set((d / "cgroup.subtree_control").read_text().split())
                if ctrl not in cur:
                    (d / "cgroup.subtree_control").write_text(f"+{ctrl}")
            enabled.add(ctrl)
        except OSError:
            continue
    return frozenset(enabled)


def cleanup_stale() -> None:
    """Remove session cgroups of repogym processes that died (cheap; safe to call often)."""
    _cleanup_stale(detect())


def _cleanup_stale(support: CgroupSupport) -> None:
    """Remove session cgroups left behind by repogym processes that died."""
    bases = [h.base for h in support.v1.values()]
    if support.v2:
        bases.append(support.v2.base)
    for base in bases:
        with contextlib.suppress(OSError):
            for d in base.iterdir():
                owner = d.name.split("-", 1)[0]
                if d.is_dir() and owner.isdigit() and not pid_alive(int(owner)):
                    _kill_tree_dir(d, v2=support.v2 is not None and base == support.v2.base)
                    _rmdir_tree(d)


def _read_pids(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _populated(d: Path, v2: bool) -> bool:
    if v2:
        try:
            for line in (d / "cgroup.events").read_text().splitlines():
                if line.startswith("populated "):
                    return line.split()[1] != "0"
        except OSError:
            return False
    return any(_read_pids(x) for x in _walk(d))


def _walk(d: Path) -> list[Path]:
    out = [d]
    with contextlib.suppress(OSError):
        for sub in d.iterdir():
            if sub.is_dir():
                out.extend(_walk(sub))
    return out


def _kill_tree_dir(d: Path, *, v2: bool, wait_s: float = 5.0) -> bool:
    """SIGKILL every process in cgroup ``d`` (and below); True when it is empty afterwards."""
    if v2 and (d / "cgroup.kill").exists():
        with contextlib.suppress(OSError):
            (d / "cgroup.kill").write_text("1")
    deadline = time.monotonic() + wait_s
    delay = 0.0005
    while True:
        if not v2 or not (d / "cgroup.kill").exists():
            for sub in _walk(d):
                for pid in _read_pids(sub):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
        if not _populated(d, v2):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def _rmdir_tree(d: Path) -> None:
    for sub in sorted(_walk(d), key=lambda p: len(p.parts), reverse=True):
        for _ in range(50):
            try:
                sub.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    break
                time.sleep(0.005)


class SessionCgroups:
    """The cgroups of one sandbox session."""

    def __init__(
        self,
        support: CgroupSupport,
        *,
        pids_max: int | None,
        memory_bytes: int | None,
        cpus: float | None,
    ) -> None:
        self.support = support
        self.sid = f"{os.getpid()}-{next(_counter)}-{secrets.token_hex(3)}"
        self.dirs: list[tuple[Path, bool]] = []  # (session dir, is v2)
        self.limited: set[str] = set()
        self._exec_counter = itertools.count(1)
        v2 = support.v2
        if v2 is not None:
            d = v2.base / self.sid
            d.mkdir(parents=True)
            self.dirs.append((d, True))
            self._limit(d, "cgroup2", pids_max, memory_bytes, cpus)
        for ctrl, h in support.v1.items():
            if ctrl in self.limited:
                continue
            d = h.base / self.sid
            if any(d == x for x, _ in self.dirs):
                continue
            d.mkdir(parents=True, exist_ok=True)
            self.dirs.append((d, False))
            self._limit(d, "cgroup1", pids_max, memory_bytes, cpus, only=h.controllers)

    def _limit(
        self,
        d: Path,
        kind: str,
        pids_max: int | None,
        memory_bytes: int | None,
        cpus: float | None,
        only: frozenset[str] | None = None,
    ) -> None:
        ctrls = self.support.v2_limits if kind == "cgroup2" else (only or frozenset())
        if "pids" in ctrls and pids_max:
            (d / "pids.max").write_text(str(pids_max))
            self.limited.add("pids")
        if "memory" in ctrls and memory_bytes:
            if kind == "cgroup2":
                (d / "memory.max").write_text(str(memory_bytes))
                with contextlib.suppress(OSError):
                    (d / "memory.swap.max").write_text("0")
            else:
                (d / "memory.limit_in_bytes").write_text(str(memory_bytes))
                with contextlib.suppress(OSError):
                    (d / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            self.limited.add("memory")
        if "cpu" in ctrls and cpus:
            period = 100_000
            quota = max(1000, int(cpus * period))
            if kind == "cgroup2":
                (d / "cpu.max").write_text(f"{quota} {period}")
            else:
                (d / "cpu.cfs_period_us").write_text(str(period))
                (d / "cpu.cfs_quota_us").write_text(str(quota))
            self.limited.add("cpu")

    def session_procs(self) -> list[str]:
        """``cgroup.procs`` files every process of the session joins."""
        return [str(d / "cgroup.procs") for d, _ in self.dirs]

    def limit_hits(self) -> dict[str, int]:
        """How often the session ran into its limits so far: ``memory`` (processes killed by
        the OOM killer) and ``pids`` (forks refused)."""
        hits = {"memory": 0, "pids": 0}
        files = (
            ("memory", "memory.events", "oom_kill"),
            ("memory", "memory.oom_control", "oom_kill"),
            ("pids", "pids.events", "max"),
        )
        for d, _v2 in self.dirs:
            for what, name, field_name in files:
                with contextlib.suppress(OSError, ValueError):
                    for line in (d / name).read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == field_name:
                            hits[what] = max(hits[what], int(value))
        return hits

    @property
    def _track(self) -> tuple[Path, bool] | None:
        for d, v2 in self.dirs:
            if v2:
                return d, True
        pids = self.support.v1.get("pids")
        if pids is not None:
            return pids.base / self.sid, False
        return None

    def new_exec(self) -> Path | None:
        """Create the tracking cgroup of one exec; its ``cgroup.procs`` is joined by the command."""
        track = self._track
        if track is None:
            return None
        d = track[0] / f"e{next(self._exec_counter)}"
        d.mkdir()
        return d

    def kill_exec(self, d: Path) -> bool:
        """Kill every process of one exec; True when none is left."""
        track = self._track
        return _kill_tree_dir(d, v2=bool(track and track[1]))

    def exec_done(self, d: Path) -> None:
        """Remove an exec's cgroup if nothing runs in it any more (background jobs may)."""
        track = self._track
        if not _populated(d, bool(track and track[1])):
            with contextlib.suppress(OSError):
                d.rmdir()

    def kill_execs(self) -> bool:
        """Kill the processes of every exec (background jobs too); the sandbox init stays."""
        track = self._track
        if track is None:
            return False
        ok = True
        with contextlib.suppress(OSError):
            for d in sorted(track[0].iterdir()):
                if d.is_dir() and d.name.startswith("e"):
                    ok = _kill_tree_dir(d, v2=track[1]) and ok
                    _rmdir_tree(d)
        return ok

    def destroy(self) -> bool:
        """Kill everything in the session and remove its cgroups; True when all died."""
        ok = True
        for d, v2 in self.dirs:
            ok = _kill_tree_dir(d, v2=v2) and ok
        for d, _ in self.dirs:
            _rmdir_tree(d)
        return ok
