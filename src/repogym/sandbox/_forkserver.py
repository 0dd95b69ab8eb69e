"""Fork server for the local sandbox backend (runs as its own process, standard library only).

Started once per host process with ``python -I -S _forkserver.py FD``. Keeping interpreter startup
out of the hot path makes a session start a fork plus one ``bwrap`` exec, and a command exec a
single fork.

Process tree::

    host (repogym)
      └─ fork server                      this file, single-threaded, host namespaces
           └─ session server (one per session)
                │   private mount ns: tmpfs + overlayfs mounts of the session root; then it
                │   enters the sandbox's mount/pid/ipc/uts/net namespaces and chroots into its
                │   root, so everything it forks lives inside the sandbox
                ├─ bwrap → sandbox init           holds the namespaces (pid 1 = bwrap's reaper)
                ├─ slirp4netns (networked only)   host namespaces; user-mode TCP/IP for tap0
                ├─ command (one per exec)         cgroups joined, caps dropped, user switched
                ├─ file server (one per session)  reads/writes/copies, confined by the chroot and
                │    │                            the resolver; outside the sandbox's pid ns
                │    └─ file worker               long copies, operations as another user
                └─ file worker (mounts, /proc)    one per such operation

The sandbox never shares the host's network namespace: bwrap makes a new one (only loopback),
or the session joins one made for a task's services (``join_netns``: the main session and its
sidecars share it, wired out once or not at all); a networked sandbox gets slirp4netns attached,
so it reaches the outside through ordinary host sockets but not the host's loopback or abstract
UNIX sockets. A command that needs a network in a session without one joins a namespace made
on request (``netns``).

The host talks to the fork server, to each session server and to each file server over
``SOCK_SEQPACKET`` sockets; messages are ``marshal``-encoded dicts, file descriptors travel as
``SCM_RIGHTS``. Results of execs and file operations come back on a per-request status pipe, so
requests are independent and may run concurrently (the file server answers its short
operations in order).

The server is four files, all standard library only: this one (fork server, session server,
commands, networks), :mod:`._forkserver_sys` (system calls, messages, users, capabilities),
:mod:`._forkserver_files` (the file server and its operations) and :mod:`._confine` (the
resolver every path of the sandbox goes through). Run with ``-I -S`` nothing but the standard
library is importable, so this script puts its own folder at the end of ``sys.path`` to load
the others by file name.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import resource
import select
import signal
import socket
import sys
import time
import warnings  # noqa: F401 - imported lazily by os.get_exec_path; unreachable after chroot

TYPE_CHECKING = False  # typing is not imported at run time (interpreter start-up)
if TYPE_CHECKING:  # the checker sees the siblings as what they are, modules of the package
    from typing import Any, NoReturn

    from repogym.sandbox._confine import Root
    from repogym.sandbox._forkserver_files import file_op, file_server
    from repogym.sandbox._forkserver_sys import (
        CLONE_NEWIPC,
        CLONE_NEWNET,
        CLONE_NEWNS,
        CLONE_NEWPID,
        CLONE_NEWUSER,
        CLONE_NEWUTS,
        MS_BIND,
        MS_NODEV,
        MS_NOSUID,
        MS_PRIVATE,
        MS_RDONLY,
        MS_REC,
        MS_REMOUNT,
        OOM_SCORE_ADJ,
        PR_SET_CHILD_SUBREAPER,
        PR_SET_PDEATHSIG,
        Ident,
        SetupError,
        become_root_of_a_user_namespace,
        close_other_fds,
        drop_caps,
        loopback_up,
        mount,
        null_stdio,
        prctl,
        recv,
        report,
        resolve_user_cached,
        send,
        setns,
        unshare,
        warm_up,
    )

    Msg = dict[str, Any]  # a request or reply (marshal-encoded)
    State = dict[str, Any]  # a session server's state (fds, running commands, ids, ...)
else:  # run as a script: the siblings by file name (same names as above)
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))

    from _confine import Root
    from _forkserver_files import file_op, file_server
    from _forkserver_sys import (
        CLONE_NEWIPC,
        CLONE_NEWNET,
        CLONE_NEWNS,
        CLONE_NEWPID,
        CLONE_NEWUSER,
        CLONE_NEWUTS,
        MS_BIND,
        MS_NODEV,
        MS_NOSUID,
        MS_PRIVATE,
        MS_RDONLY,
        MS_REC,
        MS_REMOUNT,
        OOM_SCORE_ADJ,
        PR_SET_CHILD_SUBREAPER,
        PR_SET_PDEATHSIG,
        SetupError,
        become_root_of_a_user_namespace,
        close_other_fds,
        drop_caps,
        loopback_up,
        mount,
        null_stdio,
        prctl,
        recv,
        report,
        resolve_user_cached,
        send,
        setns,
        unshare,
        warm_up,
    )

# ------------------------------------------------------------------------------ commands


def child_exec(req: Msg, fds: list[int], state: State, ident: Ident | BaseException) -> NoReturn:
    """In the forked command process: enter limits, switch user, exec. Never returns."""
    gc.disable()
    out_fd, err_fd, status_fd = fds[0], fds[1], fds[2]
    extra = fds[3:]
    netns_fd = extra.pop() if req.get("netns") and extra else None
    cg_fds = list(state["cg_fds"]) + extra
    try:
        if isinstance(ident, BaseException):
            raise SetupError(str(ident))
        os.setsid()
        for fd in cg_fds:
            os.write(fd, b"0")
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        net = req.get("network")
        if net is not None and net != state["network"]:
            if net:
                # Never the host's namespace: one of its own, wired out by slirp4netns.
                if netns_fd is None:
                    raise SetupError("no network namespace was prepared for this command")
                setns(netns_fd, CLONE_NEWNET)
            else:
                unshare(CLONE_NEWNET)
                loopback_up()
        for name, value in req.get("rlimits", {}).items():
            which = getattr(resource, name)
            hard = resource.getrlimit(which)[1]
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)  # raising a hard limit needs CAP_SYS_RESOURCE
            resource.setrlimit(which, (value, value))
        uid, gid, groups, home = ident
        env = dict(req["env"])
        env.setdefault("HOME", home)
        # Nothing of the session server's (host folders, cgroup files, sockets) may be
        # reachable through /proc/self/fd while the working directory and the program are
        # looked up (0 is the sandbox's /dev/null already).
        close_other_fds([out_fd, err_fd, status_fd])
        cwd = req.get("cwd") or "/"
        try:
            with Root(os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) as root:
                cwd_fd = root.dir(cwd)
            os.fchdir(cwd_fd)
            os.close(cwd_fd)
        except OSError as exc:
            raise SetupError(f"cannot change to working directory {cwd}: {exc.strerror}") from None
        # Commands are the OOM killer's first choice, never the sandbox init (that would
        # end the session). Raising the score needs no privilege; lowering would.
        oom = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        os.write(oom, OOM_SCORE_ADJ)
        os.close(oom)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        drop_caps(networked=net if net is not None else state["network"])
        if state.get("rootless"):
            if uid != 0 or gid != 0:
                raise SetupError(
                    f"user {req.get('user')} (uid {uid}) does not exist in a rootless sandbox: "
                    "only root is mapped without privileges"
                )
        else:
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)
        os.umask(0o022)
        argv = req["argv"]
        try:
            os.execvpe(argv[0], argv, env)
        except FileNotFoundError:
            raise SetupError(f"executable file not found: {argv[0]}") from None
        except PermissionError:
            raise SetupError(f"permission denied executing {argv[0]}") from None
    except BaseException as exc:  # noqa: BLE001 - reported to the host, then exit
        try:
            msg = str(exc) if isinstance(exc, SetupError) else f"{type(exc).__name__}: {exc}"
            report(status_fd, {"error": msg})
        finally:
            os._exit(127)


# --------------------------------------------------------------------------- session server


def setup_root(req: Msg) -> None:
    """Mount the session root (tmpfs + overlays) in this process's private mount namespace.

    Without root (``rootless``) a user namespace mapping our uid to 0 comes first: it grants
    the capabilities to mount tmpfs and overlayfs (``userxattr``) and to run bwrap inside.
    """
    if req.get("rootless"):
        become_root_of_a_user_namespace(CLONE_NEWNS)
    else:
        unshare(CLONE_NEWNS)
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    tmpfs = req.get("tmpfs")
    if tmpfs:
        mount("tmpfs", tmpfs["path"], "tmpfs", MS_NOSUID | MS_NODEV, tmpfs["options"])
    for path in req.get("mkdirs", ()):
        os.makedirs(path, mode=0o755, exist_ok=True)
    os.chdir(req.get("mount_cwd") or "/")
    for target, options in req["overlays"]:
        mount("overlay", target, "overlay", 0, options)
    os.chdir("/")
    for src, target in req.get("binds") or ():
        # Host toolchains the root needs (e.g. under /opt): visible, never writable.
        if not os.path.isdir(target):
            continue
        mount(src, target, None, MS_BIND | MS_REC)
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
        mount("none", target, None, flags)


def start_slirp(
    argv: list[str], target_pid: int, parent_death: bool = True, timeout: float = 20.0
) -> tuple[int, int]:
    """Wire ``target_pid``'s network namespace to the outside with slirp4netns.

    slirp4netns runs here, in the host's network namespace (user-mode TCP/IP: its sockets are
    ordinary host sockets); it configures ``tap0`` (10.0.2.100, gateway 10.0.2.2, DNS 10.0.2.3)
    and reports on ``--ready-fd``. It exits when the returned fd (its ``--exit-fd``'s other end)
    is closed, i.e. when the last holder (the session server, the host) is gone, and with
    ``parent_death`` also when we die. Returns (pid, exit fd).
    """
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    err_r, err_w = os.pipe()
    full = [*argv, f"--ready-fd={ready_w}", f"--exit-fd={exit_r}", str(target_pid), "tap0"]
    pid = os.fork()
    if pid == 0:
        try:
            if parent_death:
                prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            null = os.open("/dev/null", os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.dup2(err_w, 2)
            os.set_inheritable(ready_w, True)
            os.set_inheritable(exit_r, True)
            # Its stderr pipe is closed once it is up: later warnings must not kill it.
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            for sig in (signal.SIGXFSZ, signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            os.execve(full[0], full, {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        except BaseException as exc:  # noqa: BLE001 - reported through the stderr pipe
            with contextlib.suppress(OSError):
                os.write(err_w, f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(127)
    os.close(ready_w)
    os.close(exit_r)
    os.close(err_w)
    ok = False
    try:
        r, _, _ = select.select([ready_r], [], [], timeout)
        ok = bool(r) and os.read(ready_r, 1) == b"1"
    finally:
        os.close(ready_r)
    if not ok:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        err = _drain(err_r)
        os.close(err_r)
        os.close(exit_w)
        detail = " ".join(err.split())[-300:] or "it exited without a message"
        raise RuntimeError(f"slirp4netns could not set up the sandbox network: {detail}")
    os.close(err_r)
    return pid, exit_w


def make_netns(slirp: list[str] | None) -> tuple[int, int]:
    """A new network namespace wired out by slirp4netns; returns (namespace fd, exit fd).

    For commands that need a network in a session that has none: they ``setns`` into it; and
    for sessions that share one network (a task's services). Without ``slirp`` it has only
    its loopback (the exit fd is then a placeholder).
    """
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            os.close(hold_w)
            unshare(CLONE_NEWNET)
            loopback_up()
            os.write(ready_w, b"1")
            os.read(hold_r, 1)  # until our parent is done with us
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(hold_r)
    try:
        if os.read(ready_r, 1) != b"1":
            raise RuntimeError("could not create a network namespace")
        ns_fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        try:
            if not slirp:  # a private network: loopback only, nothing to end
                return ns_fd, os.open("/dev/null", os.O_RDONLY)
            _slirp_pid, exit_fd = start_slirp(slirp, pid, parent_death=False)
        except BaseException:
            os.close(ns_fd)
            raise
    finally:
        os.close(ready_r)
        os.close(hold_w)
        os.waitpid(pid, 0)
    return ns_fd, exit_fd


def netns_main(sock: socket.socket, req: Msg) -> None:
    """Fork server request ``netns``: reply with the fds of :func:`make_netns`."""
    try:
        fds = make_netns(req["slirp"])
    except BaseException as exc:  # noqa: BLE001 - reported to the host
        msg = str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}"
        send(sock, {"error": msg})
        return
    send(sock, {"ok": True}, list(fds))


def spawn_bwrap(req: Msg, state: State) -> tuple[int, int]:
    """Start bwrap on the prepared root; return (bwrap pid, sandbox init pid)."""
    info_r, info_w = os.pipe()
    err_r, err_w = os.pipe()
    argv = [a if a != "{INFO_FD}" else str(info_w) for a in req["bwrap"]]
    pid = os.fork()
    if pid == 0:
        try:
            for fd in state["cg_fds"]:
                os.write(fd, b"0")
            os.set_inheritable(info_w, True)
            null = os.open("/dev/null", os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.dup2(err_w, 2)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            os.execve(
                argv[0],
                argv,
                {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
            )
        except BaseException as exc:  # noqa: BLE001 - reported through bwrap's stderr pipe
            os.write(err_w, f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(127)
    os.close(info_w)
    os.close(err_w)
    data = b""
    while True:
        chunk = os.read(info_r, 65536)
        if not chunk:
            break
        data += chunk
        if b"}" in data:
            break
    os.close(info_r)
    if b"child-pid" not in data:
        _, status = os.waitpid(pid, 0)
        err = b""
        while True:
            chunk = os.read(err_r, 65536)
            if not chunk:
                break
            err += chunk
        raise RuntimeError(
            f"bwrap failed (status {status}): {err.decode(errors='replace').strip()}"
        )
    state["bwrap_err"] = err_r
    info = json.loads(data[: data.index(b"}") + 1].decode())
    init_pid = int(info["child-pid"])
    # bwrap reports the pid before it has switched to the new root: wait for the switch.
    want = os.stat(req["root"])
    deadline = time.monotonic() + 20
    while True:
        try:
            st = os.stat(f"/proc/{init_pid}/root")
            if (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
                break
        except OSError:
            pass
        done, status = os.waitpid(pid, os.WNOHANG)
        if done or time.monotonic() > deadline:
            raise RuntimeError(f"bwrap did not set up the sandbox root: {_drain(err_r)}")
        time.sleep(0.0002)
    return pid, init_pid


def _drain(fd: int) -> str:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 65536).decode(errors="replace").strip()
    except OSError:
        return ""


def enter_sandbox(init_pid: int) -> int | None:
    """Join the sandbox's namespaces and root, all but its pid namespace: its descriptor is
    returned (None: shared with us) for the caller to join once it forked what must stay out
    of the sandbox's sight (the file server)."""
    root_fd = os.open(f"/proc/{init_pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    pid_ns: int | None = None
    ns_fds: list[tuple[int, int]] = []
    # Unprivileged, bwrap nests a user namespace of its own: join it first.
    if os.stat(f"/proc/{init_pid}/ns/user").st_ino != os.stat("/proc/self/ns/user").st_ino:
        ns_fds.append((os.open(f"/proc/{init_pid}/ns/user", os.O_RDONLY), CLONE_NEWUSER))
    for ns, flag in (
        ("ipc", CLONE_NEWIPC),
        ("uts", CLONE_NEWUTS),
        ("net", CLONE_NEWNET),
        ("pid", CLONE_NEWPID),
        ("mnt", CLONE_NEWNS),
    ):
        # Namespaces the sandbox shares with us (e.g. the network) need no setns, and when
        # rootless we would lack the privilege over them anyway.
        if os.stat(f"/proc/{init_pid}/ns/{ns}").st_ino != os.stat(f"/proc/self/ns/{ns}").st_ino:
            ns_fds.append((os.open(f"/proc/{init_pid}/ns/{ns}", os.O_RDONLY), flag))
    for fd, flag in ns_fds:
        if flag == CLONE_NEWPID:
            pid_ns = fd
            continue
        try:
            setns(fd, flag)
        except OSError as exc:
            raise OSError(
                exc.errno, f"entering the sandbox's namespaces ({flag:#x}): {exc}"
            ) from None
        os.close(fd)
    os.fchdir(root_fd)
    os.chroot(".")
    os.chdir("/")
    os.close(root_fd)
    return pid_ns


def join_pid_namespace(fd: int | None) -> None:
    """Join the sandbox's pid namespace (for the processes forked from now on)."""
    if fd is None:
        return
    try:
        setns(fd, CLONE_NEWPID)
    except OSError as exc:
        raise OSError(exc.errno, f"entering the sandbox's pid namespace: {exc}") from None
    finally:
        os.close(fd)


def session_main(sock: socket.socket, req: Msg, fds: list[int]) -> NoReturn:
    """The session server: set up the root, start bwrap, then serve exec and file requests."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # The file server's socket comes first (``file_server``), then a shared network's
    # (``join_netns``), which bwrap inherits.
    fs_fd = fds.pop(0) if req.get("file_server") and fds else None
    netns_fd = fds.pop(0) if req.get("join_netns") and fds else None
    state = {
        "cg_fds": fds,
        "network": req["network"],
        "running": {},
        "rootless": bool(req.get("rootless")),
    }
    try:
        state["host_proc"] = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
        setup_root(req)
        if netns_fd is not None:
            setns(netns_fd, CLONE_NEWNET)
            os.close(netns_fd)
        bwrap_pid, init_pid = spawn_bwrap(req, state)
        bwrap_pidfd = os.pidfd_open(bwrap_pid)
        if req["network"] and netns_fd is None:
            # bwrap made a namespace of its own (--unshare-net): wire it out. The exit fd
            # stays open as long as we live; slirp4netns ends with us.
            state["slirp"] = start_slirp(req["slirp"], init_pid)
        pid_ns = enter_sandbox(init_pid)
        null_stdio()
        warm_up()
        if fs_fd is not None:
            # Forked before we join the sandbox's pid namespace: no process of the sandbox
            # can see, signal or stop it.
            start_file_server(state, fs_fd)
        join_pid_namespace(pid_ns)
    except BaseException as exc:  # noqa: BLE001 - reported to the host
        send(sock, {"error": f"{type(exc).__name__}: {exc}"})
        os._exit(1)
    state["init_pid"] = init_pid
    send(
        sock, {"ok": True, "init_pid": init_pid, "bwrap_pid": bwrap_pid, "server_pid": os.getpid()}
    )
    running = state["running"]
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    poller.register(bwrap_pidfd, select.POLLIN)
    while True:
        for fd, _ev in poller.poll():
            if fd == bwrap_pidfd:
                # The sandbox init is gone: nothing can run any more.
                os._exit(0)
            if fd == sock.fileno():
                msg, mfds = recv(sock)
                if msg is None:
                    os._exit(0)
                handle_request(msg, mfds, state, poller)
                continue
            pid, status_fd = running.pop(fd)
            poller.unregister(fd)
            ids = state.get("ids", {})
            for k in [k for k, v in ids.items() if v == pid]:
                del ids[k]
            os.close(fd)
            _, status = os.waitpid(pid, 0)
            if os.WIFEXITED(status):
                result = {"exit": os.WEXITSTATUS(status)}
            else:
                result = {"signal": os.WTERMSIG(status)}
            with contextlib.suppress(OSError):
                report(status_fd, result)


def _ns_pid(state: State, host_pid: int) -> int | None:
    """The sandbox-namespace pid of one of our children (via the host /proc kept open)."""
    try:
        fd = os.open(f"{host_pid}/status", os.O_RDONLY, dir_fd=state["host_proc"])
        try:
            text = os.read(fd, 8192).decode()
        finally:
            os.close(fd)
    except (OSError, KeyError):
        return None
    for line in text.splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return None


def _proc_table() -> list[tuple[int, int, int]]:
    """(pid, ppid, sid) of every process in this (the sandbox's) pid namespace."""
    table: list[tuple[int, int, int]] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            table.append((int(name), int(fields[1]), int(fields[3])))
        except (OSError, IndexError, ValueError):
            continue
    return table


def _init_command_pid(state: State) -> int | None:
    """Sandbox pid of the init's command (``sleep infinity``): the init's oldest child."""
    if "keep" not in state:
        init = state["init_pid"]
        kids: list[tuple[int, int]] = []
        for name in os.listdir(state["host_proc"]):
            if not name.isdigit():
                continue
            try:
                sfd = os.open(f"{name}/stat", os.O_RDONLY, dir_fd=state["host_proc"])
                try:
                    fields = os.read(sfd, 4096).rsplit(b")", 1)[1].split()
                finally:
                    os.close(sfd)
            except OSError:
                continue
            if int(fields[1]) == init:
                kids.append((int(fields[19]), int(name)))  # (start time, host pid)
        if not kids:
            return None
        state["keep"] = _ns_pid(state, min(kids)[1])
    return state["keep"]


def _freeze_and_kill(root: int | None, keep: set[int | None]) -> None:
    """SIGKILL ``root``'s tree (``root`` None: every process not in ``keep``). Freeze first
    (SIGSTOP) until the set stops growing, so a fork bomb cannot outrun us."""
    frozen: set[int] = set()
    for _ in range(500):
        table = _proc_table()
        alive = {p for p, _pp, _sid in table}
        if root is None:
            doomed = alive - keep
        else:
            doomed = {root} & alive
            grew = True
            while grew:
                grew = False
                for p, pp, sid in table:
                    if p not in doomed and p not in keep and (pp in doomed or sid == root):
                        doomed.add(p)
                        grew = True
        new = doomed - frozen
        if not new:
            break
        for p in new:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGSTOP)
        frozen |= new
    for p in frozen:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)


def _fork_or_none(tries: int = 40) -> int | None:
    """``os.fork()``, retried while the process limit is exhausted (a fork bomb holding every
    slot); None when it never succeeds."""
    for i in range(tries):
        try:
            return os.fork()
        except BlockingIOError:
            time.sleep(min(0.005 * (i + 1), 0.05))
    return None


def _spawn_killer(
    state: State, poller: select.poll, root: int | None, status_fd: int | None = None
) -> None:
    """Without cgroups: SIGKILL a command's tree (``root``: its pid in the sandbox), or every
    process but the sandbox init (``root`` None), from a worker inside the pid namespace (or,
    when no process can be started, from the session server itself)."""
    keep = {1, _init_command_pid(state)} if root is None else set()
    pid = _fork_or_none()
    if pid is None:  # every process slot taken: kill from here, blocking the loop briefly
        keep.add(os.getpid())
        try:
            _freeze_and_kill(root, keep)
        finally:
            if status_fd is not None:
                with contextlib.suppress(OSError):
                    report(status_fd, {"ok": True})  # closes it
        return
    if pid == 0:
        try:
            keep.add(os.getpid())
            _freeze_and_kill(root, keep)
            if status_fd is not None:
                report(status_fd, {"ok": True})
        finally:
            os._exit(0)
    if status_fd is not None:
        os.close(status_fd)
    pidfd = os.pidfd_open(pid)
    state["running"][pidfd] = (pid, _nowhere())
    poller.register(pidfd, select.POLLIN)


def _nowhere() -> int:
    """A descriptor a reaped worker's exit status is written to and forgotten: a copy of
    stdout (the sandbox's /dev/null since the session started), never a path looked up now
    (the sandbox's /dev/null may be anything by then)."""
    return os.dup(1)


def start_file_server(state: State, sock_fd: int) -> None:
    """Fork the session's file server on ``sock_fd`` (see :func:`file_server`). Started with
    the session it lives outside the sandbox's pid namespace; one started again later (the
    first died) inside it."""
    pid = os.fork()
    if pid == 0:
        file_server(sock_fd, state["rootless"])
    os.close(sock_fd)
    state["file_server"] = pid


def handle_request(msg: Msg, fds: list[int], state: State, poller: select.poll) -> None:
    kind = msg.get("kind", "")
    try:
        if kind == "exec":
            status_fd = fds[2]
            ident: Ident | LookupError
            try:
                ident = resolve_user_cached(msg.get("user"))
            except LookupError as exc:
                ident = exc
            pid = os.fork()
            if pid == 0:
                child_exec(msg, fds, state, ident)
            os.set_blocking(status_fd, True)
            pidfd = os.pidfd_open(pid)
            state["running"][pidfd] = (pid, status_fd)
            state.setdefault("pgids", set()).add(pid)
            if msg.get("id") is not None:
                state.setdefault("ids", {})[msg["id"]] = pid
            poller.register(pidfd, select.POLLIN)
            for fd in fds[:2] + fds[3:]:
                os.close(fd)
        elif kind == "file":
            # Mounts (and any operation when there is no file server): a worker of its own.
            pid = os.fork()
            if pid == 0:
                file_op(msg, fds, state["rootless"])
            pidfd = os.pidfd_open(pid)
            # The worker reports on its own; the server only reaps it.
            state["running"][pidfd] = (pid, _nowhere())
            poller.register(pidfd, select.POLLIN)
            for fd in fds:
                os.close(fd)
        elif kind == "file_server":
            # A new file server (the last one died): fds[0] is its socket, fds[1] a status.
            start_file_server(state, fds[0])
            report(fds[1], {"ok": True})
        elif kind == "kill_exec":
            done_fd = fds[0] if fds else None
            cmd_pid = state.get("ids", {}).pop(msg["id"], None)
            ns_pid = _ns_pid(state, cmd_pid) if cmd_pid is not None else None
            if cmd_pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(cmd_pid, signal.SIGKILL)
            if ns_pid is not None:
                _spawn_killer(state, poller, root=ns_pid, status_fd=done_fd)
            elif done_fd is not None:
                report(done_fd, {"ok": True})
        elif kind == "killall":
            for pgid in state.pop("pgids", ()):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
            _spawn_killer(state, poller, root=None, status_fd=fds[0] if fds else None)
        elif kind == "signal":
            with contextlib.suppress(ProcessLookupError):
                os.killpg(msg["pgid"], msg["sig"])
            for fd in fds:
                os.close(fd)
    except BaseException as exc:  # noqa: BLE001 - reported to the host
        at = {"file": -1, "killall": 0}.get(kind, 2)
        if fds and -len(fds) <= at < len(fds):
            with contextlib.suppress(OSError):
                report(fds[at], {"error": f"{type(exc).__name__}: {exc}"})


# ------------------------------------------------------------------------------ fork server


def main() -> None:
    ctl = socket.socket(fileno=int(sys.argv[1]))
    # No parent-death signal here: it fires when the *thread* that started us exits. The
    # host's end of the control socket closing (it exited or died) is what ends us.
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    # Children are reaped by the kernel; the host watches them through pidfds.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    gc.collect()
    gc.freeze()
    send(ctl, {"ready": True, "pid": os.getpid()})
    while True:
        msg, fds = recv(ctl)
        if msg is None:
            return
        if msg.get("kind") not in ("session", "netns") or not fds:
            for fd in fds:
                os.close(fd)
            continue
        sess_sock = socket.socket(fileno=fds[0])
        pid = os.fork()
        if pid == 0:
            ctl.close()
            try:
                if msg["kind"] == "netns":
                    netns_main(sess_sock, msg)
                else:
                    session_main(sess_sock, msg, fds[1:])
            finally:
                os._exit(1)
        sess_sock.close()
        for fd in fds[1:]:
            os.close(fd)


if __name__ == "__main__":
    main()
