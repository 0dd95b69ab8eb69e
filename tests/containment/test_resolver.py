"""The confined resolver itself (``repogym.sandbox.confine``), with the kernel's ``openat2`` and
with the descriptor walk used where ``openat2`` is missing: the same answers, and no lookup ever
leaves its root, whatever the links (absolute, ``..``, chains, magic links of ``/proc``)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.sandbox import _confine
from repogym.sandbox.confine import Root


@pytest.fixture(params=["openat2", "walk"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "openat2" and not _confine.kernel_resolver():
        pytest.skip("this kernel has no openat2")
    monkeypatch.setattr(_confine, "_have_openat2", request.param == "openat2")
    yield request.param


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/ with a file, folders and links of every kind; a secret beside the root."""
    (tmp_path / "secret.txt").write_text("outside\n")
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("inside\n")
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root-of-the-root\n")
    links = {
        "abs": "/etc",  # absolute: restarts at the root
        "up": "../../..",  # climbs: stops at the root
        "chain1": "chain2",
        "chain2": "a/b",
        "d": ".",
        "e": "d/..",  # inside on its text, '..' of the root once followed
        "loop1": "loop2",
        "loop2": "loop1",
        "magic": f"/proc/self/fd/3/{'../' * 16}",
        "selfroot": "/proc/self/root",
        "secret": str(tmp_path / "secret.txt"),
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    (root / "proc").mkdir()  # a /proc inside the root: no procfs there
    return root


def read(root: Root, path: str) -> bytes:
    fd = root.open(path)
    try:
        return os.read(fd, 100)
    finally:
        os.close(fd)


def test_in_root_lookups_stay_inside(tree: Path, mode: str) -> None:
    with Root.at(tree) as root:
        assert read(root, "a/b/f.txt") == b"inside\n"
        assert read(root, "/abs/passwd") == b"root-of-the-root\n"
        assert read(root, "up/etc/passwd") == b"root-of-the-root\n"
        assert read(root, "chain1/f.txt") == b"inside\n"
        assert read(root, "e/etc/passwd") == b"root-of-the-root\n"
        assert read(root, "../../../etc/passwd") == b"root-of-the-root\n"
        for path in ("secret", "magic/secret.txt", "selfroot/etc/hostname"):
            with pytest.raises(OSError):
                read(root, path)
        with pytest.raises(OSError) as info:
            read(root, "loop1")
        assert info.value.errno == errno.ELOOP


def test_beneath_refuses_every_way_out(tree: Path, mode: str) -> None:
    with Root.at(tree, beneath=True) as root:
        assert read(root, "chain1/f.txt") == b"inside\n"
        for path in ("abs/passwd", "up/etc/passwd", "e/etc/passwd", "../secret.txt", "secret"):
            with pytest.raises(OSError) as info:
                read(root, path)
            assert info.value.errno == errno.EXDEV, (path, info.value)


def test_no_symlinks_refuses_any_link(tree: Path, mode: str) -> None:
    with Root.at(tree, beneath=True, symlinks=False) as root:
        assert read(root, "a/b/f.txt") == b"inside\n"
        with pytest.raises(OSError) as info:
            read(root, "chain1/f.txt")
        assert info.value.errno == errno.ELOOP
        fd = root.open("chain1", os.O_PATH, follow=False)  # the link itself
        os.close(fd)


def test_magic_links_are_never_followed(tmp_path: Path, mode: str) -> None:
    """A root that holds a real procfs: its fd, cwd, root, exe and map_files links lead to
    whatever this process holds (the host); not one is followed."""
    outside = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    (tmp_path / "x.txt").write_text("x\n")
    try:
        with Root.at("/") as root:
            for path in (
                f"/proc/self/fd/{outside}/x.txt",
                f"/proc/thread-self/fd/{outside}/x.txt",
                "/proc/self/cwd",
                "/proc/self/root/etc/hostname",
                "/proc/self/exe",
                f"/proc/{os.getpid()}/root/etc/hostname",
            ):
                with pytest.raises(OSError):
                    read(root, path)
            maps = sorted(os.listdir("/proc/self/map_files"))[:3]
            for name in maps:
                with pytest.raises(OSError):
                    read(root, f"/proc/self/map_files/{name}")
    finally:
        os.close(outside)


def test_makedirs_creates_through_links_inside_only(tree: Path, mode: str) -> None:
    with Root.at(tree) as root:
        os.close(root.makedirs("abs/new/deeper"))
        assert (tree / "etc" / "new" / "deeper").is_dir()
        os.close(root.makedirs("up/made"))
        assert (tree / "made").is_dir()
        pfd, name = root.parent("secret", create=True)  # the link itself, never followed
        os.close(pfd)
        assert name == "secret"
    assert not (tree.parent / "made").exists()


def test_without_openat2_the_sandbox_uses_the_walk(tmp_path: Path) -> None:
    """``REPOGYM_CONFINE=walk`` (as on a kernel older than 5.6): a session's file operations
    through magic links still reach nothing of the host."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN-walk\n")
    script = f"""
import tempfile
from pathlib import Path
from repogym.sandbox import EnvironmentSpec
from repogym.sandbox.local import LocalSandbox
from repogym.sandbox import _confine
assert not _confine.kernel_resolver()
ctx = Path(tempfile.mkdtemp())
(ctx / "Dockerfile").write_text("FROM debian:bookworm-slim\\nWORKDIR /work\\n")
sb = LocalSandbox()
spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network")
with sb.start(sb.build(spec), spec) as s:
    s.exec("for n in $(seq 0 64); do ln -s /proc/self/fd/$n{"/.." * 32} /tmp/l$n; done")
    got = []
    for n in range(65):
        for op in (lambda p: s.read(p), lambda p: s.exists(p)):
            try:
                got.append(op(f"/tmp/l{{n}}{secret}"))
            except Exception as exc:
                got.append(repr(exc))
    print(repr(got))
"""
    env = {**os.environ, "REPOGYM_CONFINE": "walk"}
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert res.returncode == 0, res.stderr
    assert "TOKEN-walk" not in res.stdout + res.stderr
    assert "True" not in res.stdout
