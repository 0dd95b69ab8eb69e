"""The host an attacker inside a sandbox goes for: a canary folder with a secret file (a random
token), a victim folder whose entries, modes and contents must not change, and an empty folder
in which nothing may be created. Every attack in this folder ends with :meth:`Canary.check`."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from repogym.sandbox import BuiltEnvironment, EnvironmentSpec
from repogym.sandbox.local import LocalSandbox, LocalSession
from tests.sandbox.conftest import make_context

DEPTH = 32
"""``..`` components that climb from any host folder to ``/``."""
FDS = range(65)
"""Descriptor numbers every attack tries (0–64)."""


def climb(start: str, host_path: Path | str) -> str:
    """A link target that, followed by the host, would lead from ``start`` to ``host_path``."""
    return start.rstrip("/") + "/.." * DEPTH + str(host_path)


def magic_starts() -> list[str]:
    """Every magic link a process of the sandbox can name to reach what another holds."""
    starts = [f"/proc/self/fd/{n}" for n in FDS]
    starts += [f"/proc/thread-self/fd/{n}" for n in FDS]
    starts += ["/proc/self/cwd", "/proc/self/root", "/proc/1/root", "/proc/1/cwd"]
    starts += ["/proc/thread-self/cwd", "/proc/thread-self/root"]
    return starts


@dataclass
class Canary:
    """Host files an attack must leave unread and unchanged."""

    root: Path
    token: str

    @property
    def secret(self) -> Path:
        return self.root / "secret.txt"

    @property
    def victim(self) -> Path:
        return self.root / "victim"

    @property
    def empty(self) -> Path:
        return self.root / "empty"

    def state(self) -> dict[str, tuple[int, int, int, bytes | None]]:
        """(type+mode, uid, nlink, content) of every entry below the canary folder."""
        out: dict[str, tuple[int, int, int, bytes | None]] = {}
        for dirpath, dirs, files in os.walk(self.root):
            for name in [".", *dirs, *files]:
                p = Path(dirpath, name) if name != "." else Path(dirpath)
                st = os.lstat(p)
                data = p.read_bytes() if stat.S_ISREG(st.st_mode) else None
                out[str(p.relative_to(self.root))] = (st.st_mode, st.st_uid, st.st_nlink, data)
        return out

    def check(self, before: dict[str, tuple[int, int, int, bytes | None]], *texts: object) -> None:
        """Nothing under the canary folder changed, and the token is in none of ``texts``."""
        assert self.state() == before
        for text in texts:
            shown = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
            assert self.token not in shown


@pytest.fixture
def canary(tmp_path: Path) -> Canary:
    root = tmp_path / "host-canary"
    (root / "victim" / "sub").mkdir(parents=True)
    (root / "empty").mkdir()
    token = "CANARY-" + secrets.token_hex(12)
    c = Canary(root, token)
    c.secret.write_text(token + "\n")
    (c.victim / "file.txt").write_text("victim " + token + "\n")
    (c.victim / "sub" / "deep.txt").write_text("deep\n")
    os.chmod(c.secret, 0o600)
    os.chmod(c.victim, 0o755)
    return c


@pytest.fixture(scope="session")
def sandbox() -> LocalSandbox:
    ok, why = LocalSandbox.available()
    if not ok:
        pytest.skip(why)
    return LocalSandbox()


Env = tuple[BuiltEnvironment, EnvironmentSpec]


@pytest.fixture(scope="session")
def env(sandbox: LocalSandbox, tmp_path_factory: pytest.TempPathFactory) -> Env:
    """``FROM debian:bookworm-slim`` with a user ``agent`` and a root-only file."""
    ctx = make_context(
        tmp_path_factory.mktemp("containment-ctx"),
        """\
        FROM debian:bookworm-slim
        RUN useradd -m -u 1234 agent && mkdir -p /work && chown agent /work \\
            && echo root-only > /root-only.txt && chmod 600 /root-only.txt
        WORKDIR /work
        """,
    )
    spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network")
    return sandbox.build(spec), spec


@pytest.fixture
def session(sandbox: LocalSandbox, env: Env) -> Iterator[LocalSession]:
    with sandbox.start(*env) as s:
        yield s  # type: ignore[misc]
