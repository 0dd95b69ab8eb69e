"""The host a malicious dataset attacks: a canary file, a canary variable, a loopback listener
and an abstract UNIX socket listener, all holding or recording random tokens."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.corpus import Host, write_host_task_toml


class Listener:
    """Accepts connections (TCP on 127.0.0.1 and an abstract UNIX socket) and keeps every byte."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.connections = 0
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(16)
        self.port = self.tcp.getsockname()[1]
        self.abstract_name = "repogym-canary-" + uuid.uuid4().hex[:12]
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.abstract_name)
        self.unix.listen(16)
        self._lock = threading.Lock()
        for sock in (self.tcp, self.unix):
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            # One thread per connection: a connection an attack leaves open cannot hold up
            # what later ones send.
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            with self._lock:
                self.connections += 1
            with contextlib.suppress(OSError):
                while chunk := conn.recv(65536):
                    with self._lock:
                        self.received += chunk

    def close(self) -> None:
        for sock in (self.tcp, self.unix):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture(scope="session")
def listener() -> Iterator[Listener]:
    srv = Listener()
    yield srv
    srv.close()


def _plant_host_files(token: str) -> list[Path]:
    """Canary files in the host's /var and /opt (what a minimal root must hide); root only."""
    planted = []
    if os.geteuid() != 0:
        return planted
    for folder in (Path("/var/tmp"), Path("/opt")):
        path = folder / f"repogym-canary-{uuid.uuid4().hex[:8]}"
        with contextlib.suppress(OSError):
            path.write_text(token + "\n")
            planted.append(path)
    return planted


@pytest.fixture(scope="session")
def host(tmp_path_factory: pytest.TempPathFactory, listener: Listener) -> Iterator[Host]:
    token = "CANARY-FILE-" + uuid.uuid4().hex
    env_token = "CANARY-ENV-" + uuid.uuid4().hex
    env_name = "REPOGYM_TEST_CANARY_TOKEN"
    folder = tmp_path_factory.mktemp("host")
    canary = folder / "secret.txt"
    canary.write_text(token + "\n")
    planted = _plant_host_files(token)
    h = Host(
        canary_file=canary,
        token=token,
        env_name=env_name,
        env_token=env_token,
        listen_port=listener.port,
        abstract_name=listener.abstract_name,
        host_files=tuple(str(p) for p in planted),
    )
    write_host_task_toml(h)
    old = os.environ.get(env_name)
    os.environ[env_name] = env_token
    try:
        yield h
    finally:
        if old is None:
            os.environ.pop(env_name, None)
        else:
            os.environ[env_name] = old
        for p in planted:
            p.unlink(missing_ok=True)


def tree_bytes(path: Path) -> bytes:
    """Every regular file's bytes and every symlink's target under ``path``, never following a
    link or opening a special file: what an output folder holds."""
    chunks: list[bytes] = []
    for dirpath, dirs, files in os.walk(path):
        for name in [*files, *dirs]:
            p = Path(dirpath) / name
            st = p.lstat()
            chunks.append(str(p.relative_to(path)).encode("utf-8", "surrogateescape"))
            if stat.S_ISLNK(st.st_mode):
                chunks.append(os.readlink(p).encode("utf-8", "surrogateescape"))
            elif stat.S_ISREG(st.st_mode):
                chunks.append(p.read_bytes())
    return b"\n".join(chunks)


def listing(path: Path) -> dict[str, tuple[int, int, int]]:
    """(mode, size, mtime) of everything under ``path`` without following links."""
    out = {}
    for dirpath, dirs, files in os.walk(path):
        for name in [*files, *dirs]:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(path))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out
