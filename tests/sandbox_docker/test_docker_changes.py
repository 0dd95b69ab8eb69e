"""The docker backend's clean-room half (export a container's changes, merge them into another)
against a stand-in container that answers ``diff`` / ``get_archive`` / ``put_archive`` the way
the Docker engine does, from a folder on disk (no engine is reachable here)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from repogym.sandbox import BuiltEnvironment, EnvironmentSpec
from repogym.sandbox.docker import DockerSession

DIR_BIT = 1 << 31


class FakeContainer:
    """A container whose filesystem is ``root`` and whose engine diff is ``changes``."""

    def __init__(self, root: Path, changes: list[tuple[str, int]]) -> None:
        self.root = root
        self.changes = changes
        self.fetched: list[str] = []
        self.put: list[tuple[str, bytes]] = []

    def diff(self) -> list[dict]:
        return [{"Path": p, "Kind": k} for p, k in self.changes]

    def get_archive(self, path: str):  # type: ignore[no-untyped-def]
        self.fetched.append(path)
        host = self.root / path.lstrip("/")
        if not os.path.lexists(host):
            raise FileNotFoundError(path)
        mode = DIR_BIT if host.is_dir() and not host.is_symlink() else 0o644
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(host), arcname=host.name)
        data = buf.getvalue()
        return iter([data[i : i + 4096] for i in range(0, len(data), 4096)]), {"mode": mode}

    def put_archive(self, path: str, data: bytes) -> bool:
        self.put.append((path, data))
        return True

    def exec_run(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        class R:
            exit_code = 0
            output = (b"", b"")

        return R()


def session(container: FakeContainer) -> DockerSession:
    built = BuiltEnvironment(backend="docker", key="img", workdir="/work", env={})
    spec = EnvironmentSpec(context_dir=None, workdir="/work", network_mode="no-network")
    return DockerSession(None, container, built, spec)


def test_export_reads_the_engine_diff(tmp_path: Path) -> None:
    root = tmp_path / "fs"
    (root / "work" / "pkg" / "new").mkdir(parents=True)
    (root / "work" / "pkg" / "mod.py").write_text("print(2)\n")
    (root / "work" / "pkg" / "new" / "a.py").write_text("a = 1\n")
    (root / "work" / "pkg" / "new" / "b.py").write_text("b = 1\n")
    (root / "work" / "link").symlink_to("/etc/passwd")
    container = FakeContainer(
        root,
        [
            ("/work", 0),
            ("/work/pkg", 0),
            ("/work/pkg/mod.py", 0),
            ("/work/pkg/new", 1),
            ("/work/pkg/new/a.py", 1),
            ("/work/pkg/new/b.py", 1),
            ("/work/gone.py", 2),
            ("/work/link", 1),
            ("/etc/planted", 1),
        ],
    )
    changes = session(container).export_changes("/work", tmp_path / "staged")
    got = {(c.path, c.kind) for c in changes.changes}
    assert got == {
        ("pkg", "dir"),
        ("pkg/mod.py", "file"),
        ("pkg/new", "dir"),
        ("pkg/new/a.py", "file"),
        ("pkg/new/b.py", "file"),
        ("gone.py", "deleted"),
        ("link", "symlink"),
    }
    assert (tmp_path / "staged" / "pkg" / "new" / "b.py").read_text() == "b = 1\n"
    assert os.readlink(tmp_path / "staged" / "link") == "/etc/passwd"
    # An added folder is fetched once, with its content; nothing outside /work is read.
    assert "/work/pkg/new/a.py" not in container.fetched
    assert not any(p.startswith("/etc") for p in container.fetched)


def test_merge_sends_one_archive_of_the_kept_paths(tmp_path: Path) -> None:
    staged = tmp_path / "staged"
    (staged / "pkg").mkdir(parents=True)
    (staged / "pkg" / "mod.py").write_text("print(2)\n")
    (staged / "pkg" / "conftest.py").write_text("# dropped\n")
    container = FakeContainer(tmp_path, [])
    session(container).merge(staged, "/work", ["pkg", "pkg/mod.py"])
    [(path, data)] = container.put
    assert path == "/work"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert sorted(tar.getnames()) == ["pkg", "pkg/mod.py"]
