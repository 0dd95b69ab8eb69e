"""A long-lived ``git cat-file --batch`` process: how
:class:`~repogym.sources.local.LocalGitSource` reads revisions, blobs and files."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import weakref

from repogym.sources import SourceError

OBJ_TYPES = (b"blob", b"tree", b"commit", b"tag")


class CatFile:
    """A long-lived ``git cat-file --batch`` process (thread-safe, restarted if it dies)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        self._argv, self._env, self._cwd = argv, env, cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._finalizer: weakref.finalize | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            try:
                self._proc = subprocess.Popen(
                    [*self._argv, "cat-file", "--batch"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env=self._env,
                    cwd=self._cwd,
                )
            except OSError as exc:
                raise SourceError(f"cannot run git: {exc}") from None
            self._finalizer = weakref.finalize(self, stop_process, self._proc)
        return self._proc

    def get(self, name: bytes) -> tuple[bytes, bytes, bytes] | None:
        """(sha, type, content) of an object name, or None when missing/ambiguous."""
        with self._lock:
            for attempt in (0, 1):
                proc = self._start()
                assert proc.stdin is not None and proc.stdout is not None
                stdout = proc.stdout
                try:
                    proc.stdin.write(name + b"\n")
                    proc.stdin.flush()
                    header = proc.stdout.readline()
                except (BrokenPipeError, OSError):
                    header = b""
                if header:
                    break
                self._proc = None
                if attempt:
                    raise SourceError("git cat-file exited unexpectedly")
            parts = header.split()
            if len(parts) != 3 or parts[1] not in OBJ_TYPES or not parts[2].isdigit():
                return None
            size = int(parts[2])
            data = stdout.read(size)
            stdout.read(1)
            return parts[0], parts[1], data

    def close(self) -> None:
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
            self._proc = None


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Close the process's pipes and wait for it (killed after 5 seconds)."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
