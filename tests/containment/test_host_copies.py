"""Copies that land on the host from what a sandbox or an engine sent: the docker backend's
archives (``download``, the change set), the Harbor plugin's downloads, artifact excludes. What
they hold is the sandbox's to choose: links to host paths, entries below such links, names that
climb; nothing may be written, removed or read outside the destination."""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from pathlib import Path

from repogym.integrations._harbor_support import merge_into
from repogym.run.artifacts import drop_excluded
from tests.containment.conftest import Canary
from tests.sandbox_docker.test_docker_changes import FakeContainer, session


class HostileContainer(FakeContainer):
    """A container (or engine) that answers every ``get_archive`` with ``archive``."""

    def __init__(self, archive: bytes) -> None:
        super().__init__(Path("/nonexistent"), [("/work/x", 1)])
        self.archive = archive

    def get_archive(self, path: str):  # type: ignore[no-untyped-def]
        self.fetched.append(path)
        return iter([self.archive]), {"mode": 1 << 31}


def archive(members: list[tuple[str, str, str]]) -> bytes:
    """A tar of ``(name, kind, value)``: ``file`` (content), ``dir``, ``link`` (target),
    ``hard`` (link name)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, kind, value in members:
            ti = tarfile.TarInfo(name)
            if kind == "file":
                data = value.encode()
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
                continue
            ti.type = {"dir": tarfile.DIRTYPE, "link": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[
                kind
            ]
            ti.linkname = value
            tf.addfile(ti)
    return buf.getvalue()


def hostile_archives(canary: Canary) -> list[bytes]:
    return [
        archive([("x", "link", str(canary.root)), ("x/victim/file.txt", "file", "pwned")]),
        archive([("x", "dir", ""), ("x/l", "link", str(canary.victim)), ("x/l/new", "file", "p")]),
        archive([("x", "dir", ""), ("x/h", "hard", str(canary.secret)[1:])]),
        archive([("x", "dir", ""), ("x/../../escape", "file", "p")]),
        archive([("x", "dir", ""), ("x/su", "file", "s")]),
    ]


def test_docker_download_of_hostile_archives_writes_nothing_outside(
    canary: Canary, tmp_path: Path
) -> None:
    before = canary.state()
    for i, data in enumerate(hostile_archives(canary)):
        out = tmp_path / f"out{i}"
        neighbour = tmp_path / "x"  # a host file named like the archive's top entry
        neighbour.write_text("keep me\n")
        # A refusal is fine: what the host holds afterwards decides.
        with contextlib.suppress(Exception):
            session(HostileContainer(data)).download("/work/x", out)
        assert neighbour.read_text() == "keep me\n"
        canary.check(before)
        if out.is_dir():
            for dirpath, _dirs, files in os.walk(out):
                for name in files:
                    assert canary.token not in Path(dirpath, name).read_text()
    assert not (tmp_path.parent / "escape").exists()


def test_docker_change_set_of_hostile_archives_stays_in_the_staging_folder(
    canary: Canary, tmp_path: Path
) -> None:
    before = canary.state()
    for i, data in enumerate(hostile_archives(canary)):
        staged = tmp_path / f"staged{i}"
        changes = session(HostileContainer(data)).export_changes("/work", staged)
        canary.check(before)
        for change in changes.changes:
            assert not change.path.startswith("..") and not change.path.startswith("/")


def test_harbor_downloads_drop_links_that_leave_even_through_a_chain(
    canary: Canary, tmp_path: Path
) -> None:
    before = canary.state()
    src = tmp_path / "src"
    (src / "logs").mkdir(parents=True)
    (src / "logs" / "reward.txt").write_text("0\n")
    os.symlink(".", src / "d")
    os.symlink("d/..", src / "e")  # inside on its text, the folder above once followed
    os.symlink(str(canary.secret), src / "abs")
    os.symlink("logs/reward.txt", src / "ok")
    dest = tmp_path / "trial"
    (dest / "verifier").mkdir(parents=True)
    os.symlink(str(canary.victim), dest / "verifier" / "planted")  # left by an earlier copy
    (src / "verifier").mkdir()
    (src / "verifier" / "planted").mkdir()
    (src / "verifier" / "planted" / "file.txt").write_text("overwritten\n")
    dropped = merge_into(src, dest)
    assert {"e", "abs"} <= set(dropped)
    assert (dest / "ok").read_text() == "0\n"
    assert not (dest / "e").exists() and not (dest / "abs").is_symlink()
    canary.check(before)


def test_artifact_excludes_never_match_through_a_link(canary: Canary, tmp_path: Path) -> None:
    before = canary.state()
    folder = tmp_path / "artifact"
    (folder / "keep").mkdir(parents=True)
    (folder / "keep" / "a.log").write_text("x")
    (folder / "keep" / "b.txt").write_text("x")
    os.symlink(str(canary.victim), folder / "cache")
    os.symlink(str(canary.root), folder / "deep")
    drop_excluded(folder, ["cache/*", "**/*.txt", "deep/**", "keep/*.log"])
    assert sorted(os.listdir(folder / "keep")) == []
    assert os.path.islink(folder / "cache")
    canary.check(before)
