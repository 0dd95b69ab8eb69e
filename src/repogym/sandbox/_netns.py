"""A network namespace shared by several local sessions (a task's main session and sidecars).

Made by the fork server (``ForkServer.netns``): loopback only, or wired out by one slirp4netns.
Sessions started with it (``LocalSandbox.start(..., shared=...)``) run bwrap inside it instead
of a namespace of their own, so they reach each other on the loopback address and, when it is
public, the outside through that one slirp4netns; never the host's network.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass


@dataclass
class SharedNetwork:
    fd: int
    """The namespace (``/proc/<pid>/ns/net`` opened); it lives while this is open."""
    exit_fd: int
    """Closing it ends the namespace's slirp4netns (a placeholder when not public)."""
    public: bool
    closed: bool = False

    def close(self) -> None:
        """Release the namespace (after every session in it is closed). Idempotent."""
        if self.closed:
            return
        self.closed = True
        for fd in (self.exit_fd, self.fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> SharedNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
