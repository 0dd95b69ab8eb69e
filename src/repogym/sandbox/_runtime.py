"""Host side of the local sandbox runtime: the fork server client and running sandboxes.

See ``_forkserver.py`` for the process tree. This module starts the fork server once per host
process, asks it for sessions, and talks to each session server directly.
"""

from __future__ import annotations

import contextlib
import itertools
import marshal
import os
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.sandbox._cgroups import SessionCgroups
from repogym.sandbox.base import SandboxError

_SERVER_SCRIPT = Path(__file__).with_name("_forkserver.py")
_MAX_MSG = 1 << 20


def _send(sock: socket.socket, obj: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
    data = marshal.dumps(obj)
    if fds:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
        sock.sendmsg([data], anc)
    else:
        sock.send(data)


def _recv(sock: socket.socket) -> object:
    msg = sock.recv(_MAX_MSG)
    if not msg:
        return None
    return marshal.loads(msg)


def _read_status(fd: int) -> dict[str, Any]:
    """Read a status pipe to EOF and decode it (empty ⇒ the reporter died)."""
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    data = b"".join(chunks)
    if not data:
        return {"error": "sandbox helper died without reporting"}
    return marshal.loads(data)


class ForkServer:
    """The per-process fork server (started lazily, restarted after a fork of the host)."""

    _instance: ForkServer | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", str(_SERVER_SCRIPT), str(child.fileno())],
            pass_fds=[child.fileno()],
            stdin=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,  # a Ctrl-C of the host must not kill live sessions
        )
        child.close()
        self.sock = parent
        self.owner = os.getpid()
        hello = _recv(parent)
        if not isinstance(hello, dict) or not hello.get("ready"):
            raise SandboxError("the local sandbox fork server failed to start")
        self.send_lock = threading.Lock()

    @classmethod
    def get(cls) -> ForkServer:
        with cls._lock:
            inst = cls._instance
            if inst is None or inst.owner != os.getpid() or inst.proc.poll() is not None:
                inst = cls._instance = ForkServer()
            return inst

    def start(
        self,
        *,
        plan: dict[str, object],
        bwrap: list[str],
        network: bool,
        cgroups: SessionCgroups | None,
        slirp: list[str] | None = None,
        netns_factory: Callable[[], tuple[int, int]] | None = None,
        netns_fd: int | None = None,
        timeout_s: float = 30.0,
    ) -> SandboxProcess:
        """Start one sandbox (mounts + bwrap) and return a handle to its session server.

        ``network``: slirp4netns (``slirp``, its argv without target) wires the sandbox's own
        network namespace out. ``netns_factory`` makes one on request for commands that need
        a network in a session without (see :meth:`netns`). ``netns_fd``: join that network
        namespace (shared with other sessions, see :meth:`netns`) instead of a new one; bwrap
        must then run without ``--unshare-net`` and ``network`` says whether it is wired out.
        """
        if network and not slirp and netns_fd is None:
            raise SandboxError("a networked sandbox needs slirp4netns")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fs_ours, fs_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cg_fds = []
        try:
            for path in cgroups.session_procs() if cgroups else []:
                cg_fds.append(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
            req = {
                "kind": "session",
                "bwrap": bwrap,
                "network": network,
                "slirp": slirp or [],
                "join_netns": netns_fd is not None,
                "file_server": True,
                **plan,
            }
            joined = [netns_fd] if netns_fd is not None else []
            with self.send_lock:
                _send(self.sock, req, [theirs.fileno(), fs_theirs.fileno(), *joined, *cg_fds])
        finally:
            theirs.close()
            fs_theirs.close()
            for fd in cg_fds:
                os.close(fd)
        ours.settimeout(timeout_s)
        try:
            reply = _recv(ours)
        except TimeoutError:
            reply = {"error": "timed out starting the sandbox"}
        ours.settimeout(None)
        if not isinstance(reply, dict) or "error" in reply or reply is None:
            ours.close()
            fs_ours.close()
            err = reply.get("error") if isinstance(reply, dict) else "session server died"
            raise SandboxError(f"could not start the local sandbox: {err}")
        return SandboxProcess(ours, reply, cgroups, network, netns_factory, fs_sock=fs_ours)

    def netns(self, slirp: list[str], timeout_s: float = 30.0) -> tuple[int, int]:
        """A new network namespace wired out by slirp4netns: (namespace fd, exit fd).

        Closing the exit fd ends that slirp4netns; the namespace lives while its fd is open.
        An empty ``slirp`` gives a namespace with only its loopback.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self.send_lock:
                _send(self.sock, {"kind": "netns", "slirp": slirp}, [theirs.fileno()])
        finally:
            theirs.close()
        ours.settimeout(timeout_s)
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ours, _MAX_MSG, 4, socket.MSG_CMSG_CLOEXEC)
        except TimeoutError:
            msg, fds = b"", []
        finally:
            ours.close()
        reply = marshal.loads(msg) if msg else {"error": "timed out making a network namespace"}
        if not isinstance(reply, dict) or "error" in reply or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            err = reply.get("error") if isinstance(reply, dict) else "no reply"
            raise SandboxError(f"could not give the command a network: {err}")
        return fds[0], fds[1]


@dataclass
class RawResult:
    exit_code: int | None
    signal: int | None
    stdout: bytes
    stderr: bytes
    duration_s: float
    timed_out: bool
    error: str | None = None


_GONE_POLL_S = 0.5
"""How often a command's reader looks whether its sandbox was closed under it."""
_CLOSED_DRAIN_S = 0.5
"""How long the pipes of a command whose sandbox was closed are still read."""


class _ExecPipes:
    """One command's stdout, stderr and status pipes, read until the status arrives (then
    drained briefly) or the deadline passes (then the command is killed and its status
    awaited)."""

    def __init__(
        self,
        out_r: int,
        err_r: int,
        st_r: int,
        max_output: int,
        on_output: Callable[[bytes], None] | None,
    ) -> None:
        self.out_r, self.err_r, self.st_r = out_r, err_r, st_r
        self.max_output = max_output
        self.on_output = on_output
        self.out, self.err = bytearray(), bytearray()
        self.status: dict[str, Any] | None = None
        self.timed_out = False

    def pump(
        self,
        deadline: float | None,
        kill: Callable[[], None],
        gone: Callable[[], bool] = lambda: False,
    ) -> None:
        """Read the pipes; ``kill`` is called once when ``deadline`` passes.

        ``gone`` tells that the sandbox was closed under the command (an interrupted run): the
        pipes are then read for a moment more and left, whoever still holds them.
        """
        st_r = self.st_r
        sel = selectors.DefaultSelector()
        sel.register(self.out_r, selectors.EVENT_READ, self.out)
        sel.register(self.err_r, selectors.EVENT_READ, self.err)
        sel.register(st_r, selectors.EVENT_READ, None)
        status_buf = bytearray()
        drain_until: float | None = None
        closed = False
        try:
            while sel.get_map():
                now = time.monotonic()
                if not closed and gone():
                    closed = True
                    deadline = None
                    if drain_until is None:
                        drain_until = now + _CLOSED_DRAIN_S
                wait: float | None = None if closed else _GONE_POLL_S
                if deadline is not None and not self.timed_out:
                    wait = min(_GONE_POLL_S, max(0.0, deadline - now))
                if drain_until is not None:
                    left = drain_until - now
                    if left <= 0:
                        break
                    wait = left if wait is None else min(wait, left)
                events = sel.select(wait)
                if not events:
                    if deadline is not None and not self.timed_out and time.monotonic() >= deadline:
                        self.timed_out = True
                        kill()
                        drain_until = None
                        deadline = None
                        # The status arrives once the killed command is reaped.
                        continue
                    continue
                for key, _ in events:
                    fd = key.fd
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        sel.unregister(fd)
                        if fd == st_r:
                            self.status = marshal.loads(bytes(status_buf)) if status_buf else {}
                            # Background jobs may keep the pipes open: drain briefly.
                            drain_until = time.monotonic() + 0.05
                        continue
                    if fd == st_r:
                        status_buf += chunk
                        continue
                    if self.on_output is not None:
                        self.on_output(chunk)
                    if len(key.data) < self.max_output:
                        key.data.extend(chunk[: self.max_output - len(key.data)])
        finally:
            sel.close()


_LIVE: weakref.WeakSet[SandboxProcess] = weakref.WeakSet()
_STOPPING = threading.Event()


def interrupt_all() -> None:
    """Close every sandbox this process has running and refuse new ones (an interrupted run:
    work waiting on a sandbox ends at once instead of finishing first)."""
    _STOPPING.set()
    for proc in list(_LIVE):
        with contextlib.suppress(Exception):
            proc.close()


def resume_all() -> None:
    """Let sandboxes start again after :func:`interrupt_all`."""
    _STOPPING.clear()


def interrupted() -> bool:
    return _STOPPING.is_set()


class SandboxProcess:
    """A running sandbox: exec commands and run file operations inside its root."""

    def __init__(
        self,
        sock: socket.socket,
        info: dict[str, Any],
        cgroups: SessionCgroups | None,
        network: bool,
        netns_factory: Callable[[], tuple[int, int]] | None = None,
        fs_sock: socket.socket | None = None,
    ) -> None:
        self.sock = sock
        self.fs_sock = fs_sock
        """The session's file server (file operations but mounts); None: every operation
        gets a worker from the session server."""
        self.fs_lock = threading.Lock()
        self.init_pid = int(info["init_pid"])
        self.server_pid = int(info["server_pid"])
        self.bwrap_pid = int(info["bwrap_pid"])
        self.server_pidfd = os.pidfd_open(self.server_pid)
        self.pidfds: list[int] = []
        for pid in (self.init_pid, self.bwrap_pid):
            with contextlib.suppress(ProcessLookupError):
                self.pidfds.append(os.pidfd_open(pid))
        self.cgroups = cgroups
        self.network = network
        self.netns_factory = netns_factory
        self._netns: tuple[int, int] | None = None
        """(namespace fd, slirp4netns exit fd) for commands with ``network=True``, made once."""
        self.lock = threading.Lock()
        self.closed = False
        self._ids = itertools.count(1)
        _LIVE.add(self)

    # ------------------------------------------------------------------ exec

    def exec(
        self,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: str,
        user: str | None,
        network: bool | None,
        rlimits: dict[str, int],
        timeout_s: float | None,
        max_output: int = 64 << 20,
        on_output: Callable[[bytes], None] | None = None,
    ) -> RawResult:
        """Run ``argv`` in the sandbox; on timeout its whole process tree is killed."""
        if self.closed:
            raise SandboxError("session is closed")
        netns_fd = self._network_for(network)
        start = time.monotonic()
        cgroups = self.cgroups
        exec_cg = cgroups.new_exec() if cgroups else None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        st_r, st_w = os.pipe()
        send_fds = [out_w, err_w, st_w]
        if exec_cg is not None:
            send_fds.append(os.open(exec_cg / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
        exec_id = next(self._ids)
        req = {
            "kind": "exec",
            "id": exec_id,
            "argv": argv,
            "env": env,
            "cwd": cwd,
            "user": user,
            "network": network,
            "netns": netns_fd is not None,
            "rlimits": rlimits,
        }
        try:
            with self.lock:
                _send(self.sock, req, [*send_fds, *([netns_fd] if netns_fd is not None else [])])
        except OSError as exc:
            for fd in (out_r, err_r, st_r):
                os.close(fd)
            raise SandboxError(f"sandbox session is gone: {exc}") from exc
        finally:
            for fd in send_fds:
                os.close(fd)
        run = _ExecPipes(out_r, err_r, st_r, max_output, on_output)
        try:
            run.pump(
                start + timeout_s if timeout_s else None,
                lambda: self._kill(exec_cg, exec_id),
                lambda: self.closed,
            )
        finally:
            for fd in (out_r, err_r, st_r):
                with contextlib.suppress(OSError):
                    os.close(fd)
            if cgroups is not None and exec_cg is not None:
                if run.timed_out:
                    cgroups.kill_exec(exec_cg)
                cgroups.exec_done(exec_cg)
        duration = time.monotonic() - start
        status = run.status or {}
        error = status.get("error")
        code = status.get("exit")
        sig = status.get("signal")
        timed_out = run.timed_out
        if not status and not timed_out:
            error = "sandbox session ended while the command ran"
        return RawResult(
            exit_code=int(code) if code is not None and not timed_out else None,
            signal=int(sig) if sig is not None else None,
            stdout=bytes(run.out),
            stderr=bytes(run.err),
            duration_s=duration,
            timed_out=timed_out,
            error=str(error) if error else None,
        )

    def _network_for(self, network: bool | None) -> int | None:
        """The namespace fd a command with ``network=True`` joins in a session without one."""
        if not network or self.network:
            return None
        with self.lock:
            if self._netns is None:
                if self.netns_factory is None:
                    raise SandboxError("this sandbox cannot give a command a network")
                self._netns = self.netns_factory()
            return self._netns[0]

    def _kill(self, exec_cg: Path | None, exec_id: int) -> None:
        if exec_cg is not None and self.cgroups is not None:
            self.cgroups.kill_exec(exec_cg)
            return
        # No cgroup to track the tree: the session server kills the command's process group
        # and session from inside the sandbox; wait until that is done.
        st_r, st_w = os.pipe()
        try:
            with self.lock:
                _send(self.sock, {"kind": "kill_exec", "id": exec_id}, [st_w])
        except OSError:
            os.close(st_r)
            return
        finally:
            os.close(st_w)
        _read_status(st_r)

    # ------------------------------------------------------------ file ops

    def file_op(
        self,
        op: str,
        *,
        fds: list[int] | None = None,
        data_in: bytes | None = None,
        data_out: bool = False,
        **args: object,
    ) -> object:
        """Run one file operation in a worker confined to the sandbox root."""
        if self.closed:
            raise SandboxError("session is closed")
        st_r, st_w = os.pipe()
        send = list(fds or [])
        pipe_r = pipe_w = None
        if data_in is not None or data_out:
            pipe_r, pipe_w = os.pipe()
            send.append(pipe_r if data_in is not None else pipe_w)
        send.append(st_w)
        # Arguments left None are not sent (the worker reads them as absent).
        req = {"kind": "file", "op": op, **{k: v for k, v in args.items() if v is not None}}
        try:
            self._send_file_op(req, send)
        finally:
            os.close(st_w)
            if pipe_r is not None and pipe_w is not None:
                os.close(pipe_r if data_in is not None else pipe_w)
        payload = b""
        if data_in is not None and pipe_w is not None:
            try:
                view = memoryview(data_in)
                while view:
                    n = os.write(pipe_w, view)
                    view = view[n:]
            except BrokenPipeError:
                pass
            finally:
                os.close(pipe_w)
        elif data_out and pipe_r is not None:
            chunks = []
            while True:
                chunk = os.read(pipe_r, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
            os.close(pipe_r)
            payload = b"".join(chunks)
        status = _read_status(st_r)
        if "error" in status:
            raise _file_error(op, args.get("path"), status)
        return payload if data_out else status.get("result")

    def _send_file_op(self, req: dict[str, Any], fds: list[int]) -> None:
        """Mounts go to the session server (they need its privileges), and so do paths
        under ``/proc`` (the file server is outside the sandbox's pid namespace, where
        ``/proc/self`` names nothing); every other file operation to the file server, started
        again once if it is gone."""
        path = str(req.get("path") or "")
        in_proc = path == "/proc" or path.startswith("/proc/")
        if req["op"] in ("mount", "umount") or in_proc or self.fs_sock is None:
            with self.lock:
                _send(self.sock, req, fds)
            return
        for attempt in (0, 1):
            try:
                with self.fs_lock:
                    _send(self.fs_sock, req, fds)
                return
            except OSError:  # the server is gone (EPIPE, ECONNRESET, …)
                if attempt:
                    raise
                self._restart_file_server()

    def _restart_file_server(self) -> None:
        """A new file server for this session (the sandbox may have killed the old one)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        st_r, st_w = os.pipe()
        try:
            with self.lock:
                _send(self.sock, {"kind": "file_server"}, [theirs.fileno(), st_w])
        finally:
            theirs.close()
            os.close(st_w)
        status = _read_status(st_r)
        if "error" in status:
            ours.close()
            raise SandboxError(f"could not restart the sandbox's file server: {status['error']}")
        with self.fs_lock:
            old, self.fs_sock = self.fs_sock, ours
        if old is not None:
            old.close()

    def kill_all(self) -> None:
        """Kill every process started by :meth:`exec`, keeping the sandbox itself."""
        if self.closed:
            return
        if self.cgroups is not None and self.cgroups.kill_execs():
            return
        # Without cgroups: a worker in the sandbox's pid namespace kills all but its init.
        st_r, st_w = os.pipe()
        try:
            with self.lock:
                _send(self.sock, {"kind": "killall"}, [st_w])
        finally:
            os.close(st_w)
        _read_status(st_r)

    # --------------------------------------------------------------- close

    def alive(self) -> bool:
        if self.closed:
            return False
        import select

        r, _, _ = select.select([self.server_pidfd], [], [], 0)
        return not r

    def close(self) -> None:
        """Kill every process of the sandbox and wait until its namespaces are gone."""
        if self.closed:
            return
        self.closed = True
        ok = True
        if self.cgroups is not None:
            ok = self.cgroups.destroy()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        if self.fs_sock is not None:
            self.fs_sock.close()
        if self._netns is not None:
            for fd in self._netns:  # the exit fd: its slirp4netns ends
                os.close(fd)
            self._netns = None
        if not ok or self.cgroups is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.bwrap_pid, 9)
        import select

        # The session server exits when its socket closes (or bwrap dies); once it and bwrap
        # are gone the private mount namespace, and with it every mount, is released.
        select.select([self.server_pidfd], [], [], 10)
        os.close(self.server_pidfd)
        for fd in self.pidfds:
            select.select([fd], [], [], 10)
            os.close(fd)


def _file_error(op: str, path: object, status: dict[str, Any]) -> Exception:
    import errno as _errno

    code = status.get("errno")
    msg = f"{op} {path}: {status.get('error')}"
    if code == _errno.ENOENT:
        return FileNotFoundError(code, msg)
    if code in (_errno.EISDIR, _errno.ENOTDIR):
        return (
            IsADirectoryError(code, msg) if code == _errno.EISDIR else NotADirectoryError(code, msg)
        )
    if code in (_errno.EACCES, _errno.EPERM):
        return PermissionError(code, msg)
    if code in (_errno.EXDEV, _errno.ELOOP):
        # The lookup would have left its root or folder, or met a link it may not follow.
        return OSError(code, msg)
    return SandboxError(msg)
