"""The pack beside the snapshots: incremental index runs, resume, collection, damage."""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from pathlib import Path

import pytest

from repogym.explorer import index as index_mod
from repogym.explorer import pack as pack_mod
from repogym.explorer.build import build_snapshot
from repogym.explorer.index import MemoryReader
from repogym.explorer.pack import PackError, PackWriter
from repogym.explorer.snapshot import SnapshotError, read_pointer, validate
from repogym.explorer.store import open_store
from tests.explorer.conftest import GOLD, toy_env, toy_task, write_generated_dataset
from tests.explorer.web_fixtures import MARK, planted_dataset


def _touch_later(path: Path, text: str) -> None:
    """Rewrite ``path`` so that its size or times change even on coarse clocks."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


def test_unchanged_sources_are_not_read_again(tmp_path: Path, monkeypatch) -> None:
    ds = write_generated_dataset(tmp_path)
    out = tmp_path / "out"
    first = build_snapshot([ds], out)
    assert first["tasks"] == 3 and first["pages_new"] == 3 and first["pages_reused"] == 0
    store = open_store(snapshot=out, poll_seconds=0)
    page1 = store.task("acme-widgets", "acme__widgets-7")
    store.close()

    # a second run over the same folder reads no task: reading one would fail the test
    from repogym.explorer.adapters.harbor import HarborReader

    def no_read(self, task_id):  # noqa: ANN001
        raise AssertionError(f"{task_id} was read again")

    monkeypatch.setattr(HarborReader, "task", no_read)
    second = build_snapshot([ds], out)
    assert second["pages_new"] == 0 and second["pages_reused"] == 3 and second["tasks"] == 3
    store = open_store(snapshot=out, poll_seconds=0)
    assert store.task("acme-widgets", "acme__widgets-7") == page1
    assert store.search_tasks("parser")["total"] == 3
    store.close()


def test_a_changed_task_is_read_again(tmp_path: Path) -> None:
    ds = write_generated_dataset(tmp_path)
    out = tmp_path / "out"
    build_snapshot([ds], out)
    instruction = ds / "tasks" / "acme__widgets-9" / "instruction.md"
    _touch_later(instruction, "# Zebra crossing\n\nHandle the zebra crossing case.\n")
    info = build_snapshot([ds], out)
    assert info["pages_new"] == 1 and info["pages_reused"] == 2
    store = open_store(snapshot=out, poll_seconds=0)
    page = store.task("acme-widgets", "acme__widgets-9")
    assert "zebra crossing" in page["sections"][0]["body"]
    assert store.search_tasks("zebra")["total"] == 1
    assert store.file("acme-widgets", "acme__widgets-9", "instruction.md").startswith(b"# Zebra")
    store.close()


def test_new_indexing_code_reads_everything_again(tmp_path: Path, monkeypatch) -> None:
    """Cached pages are tied to the code that made them: a new withholding rule is applied to
    every task at the next run, never skipped by the cache."""
    ds = write_generated_dataset(tmp_path)
    out = tmp_path / "out"
    build_snapshot([ds], out)
    monkeypatch.setattr(index_mod, "_code_version", lambda: b"another version of the code")
    info = build_snapshot([ds], out)
    assert info["pages_reused"] == 0 and info["tasks"] == 3


def test_pack_holds_no_answer(tmp_path: Path) -> None:
    """Every page and body in the pack, decompressed, is free of the planted answers."""
    planted = planted_dataset(tmp_path / "src")
    generated = write_generated_dataset(tmp_path / "src")
    out = tmp_path / "out"
    build_snapshot([planted, generated], out)
    db = sqlite3.connect(out / "pack.sqlite")
    texts = [bytes(d) for (d,) in db.execute("SELECT doc FROM docs")]
    texts += [
        zlib.decompress(d) if e else bytes(d) for e, d in db.execute("SELECT enc, data FROM blobs")
    ]
    texts += [bytes(r) for (r,) in db.execute("SELECT row FROM seen")]
    assert len(texts) > 10
    for blob in texts:
        assert MARK.encode() not in blob and GOLD.encode() not in blob
    for f in out.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert MARK.encode() not in data and GOLD.encode() not in data, f


def test_interrupted_run_publishes_nothing_and_is_resumed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(pack_mod, "_COMMIT_EVERY", 2)
    out = tmp_path / "out"
    build_snapshot([MemoryReader(toy_env("old"), [toy_task("t0", "Old puzzle")])], out)
    pointer = (out / "CURRENT").read_text()

    class Dies(MemoryReader):
        def __init__(self, env, tasks, at: int) -> None:  # noqa: ANN001
            super().__init__(env, tasks)
            self.at, self.n = at, 0

        def fingerprint(self, task_id: str) -> str:
            return "fp-" + task_id

        def task(self, task_id: str):  # noqa: ANN201
            self.n += 1
            if self.n > self.at:
                raise KeyboardInterrupt
            return super().task(task_id)

    tasks = [toy_task(f"t{i}", f"Puzzle {i}") for i in range(6)]
    with pytest.raises(KeyboardInterrupt):
        build_snapshot([Dies(toy_env("big"), tasks, at=4)], out)
    assert (out / "CURRENT").read_text() == pointer  # the old snapshot is still the one served
    assert not list((out / "snapshots").glob(".build-*"))
    store = open_store(snapshot=out, poll_seconds=0)
    assert store.search()["total"] == 1
    store.close()
    # the next run reuses the pages packed before the interruption
    info = build_snapshot([Dies(toy_env("big"), tasks, at=100)], out)
    assert info["tasks"] == 6 and info["pages_reused"] == 4 and info["pages_new"] == 2


def test_unused_pages_are_collected(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for gen in range(8):  # each run indexes entirely new tasks; 3 snapshots are kept
        tasks = [toy_task(f"t{i}", f"Puzzle gen{gen} {i}") for i in range(4)]
        build_snapshot([MemoryReader(toy_env("rolling"), tasks)], out)
    db = sqlite3.connect(out / "pack.sqlite")
    n_docs = db.execute("SELECT count(*) FROM docs").fetchone()[0]
    n_blobs = db.execute("SELECT count(*) FROM blobs").fetchone()[0]
    # 32 pages were made; collection keeps the 12 of the kept snapshots and lets garbage grow
    # to at most as much again before it runs (so its cost is paid rarely)
    assert 12 <= n_docs <= 24
    assert n_blobs <= n_docs
    kept = list((out / "snapshots").glob("*.sqlite"))
    assert len(kept) == 3
    # every kept snapshot still resolves all its pages
    for snap in kept:
        s = sqlite3.connect(snap)
        for (key,) in s.execute("SELECT doc FROM tasks"):
            assert db.execute("SELECT 1 FROM docs WHERE key = ?", (key,)).fetchone()


def test_missing_or_foreign_pack_rejects_the_snapshot(tmp_path: Path, caplog) -> None:
    out = tmp_path / "out"
    build_snapshot([MemoryReader(toy_env("a"), [toy_task("t0", "First")])], out)
    store = open_store(snapshot=out, poll_seconds=0)
    good = store.version
    # another folder's snapshot and pack id: pointed at here, it is rejected
    other = tmp_path / "other"
    build_snapshot([MemoryReader(toy_env("b"), [toy_task("t0", "Second")])], other)
    pointer = json.loads((other / "CURRENT").read_text())
    (out / pointer["file"]).write_bytes((other / pointer["file"]).read_bytes())
    (out / "CURRENT").write_text(json.dumps(pointer))
    store.reader.settle()
    assert store.version == good
    assert any("another pack" in r for r in store.reader.rejected)
    assert store.task("a", "t0")["title"] == "First"
    store.close()
    # with its pack gone, a snapshot cannot be opened at all
    (out / "pack.sqlite").unlink()
    pointer = read_pointer(out)
    with pytest.raises(SnapshotError, match="its pack pack.sqlite: missing"):
        validate(out / pointer["file"], pointer)


def test_damaged_pack_is_set_aside_and_rebuilt(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "pack.sqlite").write_bytes(b"this is not a database" * 100)
    info = build_snapshot([MemoryReader(toy_env("a"), [toy_task("t0", "First")])], out)
    assert info["pages_new"] == 1
    assert list(out.glob("pack.sqlite.bad-*"))
    store = open_store(snapshot=out, poll_seconds=0)
    assert store.task("a", "t0")["sections"][0]["body"].startswith("First")
    store.close()


def test_second_writer_is_refused(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "pack.sqlite"
    first = PackWriter(path)
    real_connect = sqlite3.connect
    monkeypatch.setattr(
        pack_mod.sqlite3, "connect", lambda *a, **k: real_connect(*a, **{**k, "timeout": 0.2})
    )
    with pytest.raises(PackError, match="another index run"):
        PackWriter(path)
    first.close()
    PackWriter(path).close()  # free again


@pytest.mark.parametrize("helper", [True, False], ids=["helper-process", "in-place"])
def test_task_index_is_whole(tmp_path: Path, monkeypatch, helper: bool) -> None:
    """The task FTS index, built by a helper process and copied in (big builds) or in place
    (small ones): FTS5's own integrity check passes on the published file and every word
    finds its task."""
    from repogym.explorer import snapshot_write as snap_mod

    monkeypatch.setattr(snap_mod, "HELPER_MIN_TASKS", 0 if helper else 10**9)
    out = tmp_path / "out"
    tasks = [toy_task(f"t{i}", f"Puzzle word{i} common") for i in range(30)]
    info = build_snapshot([MemoryReader(toy_env("side"), tasks)], out)
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(Path(info["snapshot"]).read_bytes())
    db = sqlite3.connect(copy)
    db.execute("INSERT INTO tasks_fts(tasks_fts) VALUES ('integrity-check')")
    db.execute("INSERT INTO envs_fts(envs_fts) VALUES ('integrity-check')")
    db.close()
    store = open_store(snapshot=out, poll_seconds=0)
    assert store.search_tasks("common")["total"] == 30
    for i in (0, 7, 29):
        hits = store.search_tasks(f"word{i}")["items"]
        assert [h["id"] for h in hits] == [f"t{i}"]
    store.close()


def test_helper_failure_is_one_line_and_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    from repogym.explorer import snapshot_write as snap_mod

    monkeypatch.setattr(snap_mod, "HELPER_MIN_TASKS", 0)
    out = tmp_path / "out"
    build_snapshot([MemoryReader(toy_env("a"), [toy_task("t0", "First")])], out)
    pointer = (out / "CURRENT").read_text()
    monkeypatch.setattr(snap_mod, "_FTS_HELPER", "raise SystemExit('disk full, say')")
    with pytest.raises(SnapshotError, match="task search index build failed: disk full, say"):
        build_snapshot([MemoryReader(toy_env("b"), [toy_task("t0", "Second")])], out)
    assert (out / "CURRENT").read_text() == pointer
    assert [p.name for p in (out / "snapshots").iterdir() if p.name.startswith(".")] == []


def test_rows_of_environments_interleaved(tmp_path: Path) -> None:
    """Rows added out of environment order still give each environment its own tasks."""
    from repogym.explorer.index import index_row, prepare
    from repogym.explorer.snapshot_write import SnapshotWriter, publish

    a, b = toy_env("a"), toy_env("b")
    writer = SnapshotWriter(tmp_path / "out" / "snapshots" / ".build-x.sqlite")
    (tmp_path / "out" / "snapshots").mkdir(parents=True)
    writer.add_env(a)
    writer.add_env(b)
    for i in range(4):
        env = a if i % 2 == 0 else b
        writer.add_row(env, index_row(prepare(toy_task(f"t{i}", f"Task {i}"))), None)
    publish(writer.path, tmp_path / "out", writer.finish())
    store = open_store(snapshot=tmp_path / "out", poll_seconds=0)
    assert sorted(t["id"] for t in store.search_tasks(env="a")["items"]) == ["t0", "t2"]
    assert sorted(t["id"] for t in store.search_tasks(env="b")["items"]) == ["t1", "t3"]
    assert store.task("b", "t3")["title"] == "Task 3"
    assert store.task("a", "t3") is None
    store.close()


def test_a_pack_that_held_private_pages_is_not_reused_publicly(tmp_path: Path) -> None:
    from repogym.explorer.model import EnvDoc

    out = tmp_path / "out"
    secret = EnvDoc("secret", "harbor", "Secret", "Private tasks.", private=True)
    build_snapshot([MemoryReader(secret, [toy_task("t0", "Hidden")])], out, include_private=True)
    pointer = (out / "CURRENT").read_text()
    with pytest.raises(PackError, match="holds pages of private datasets"):
        build_snapshot([MemoryReader(toy_env("open"), [toy_task("t0", "Open")])], out)
    assert (out / "CURRENT").read_text() == pointer
    # a private build may go on using it
    build_snapshot([MemoryReader(secret, [toy_task("t1", "More")])], out, include_private=True)


def test_a_server_follows_a_pack_rebuilt_in_place(tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_snapshot([MemoryReader(toy_env("a"), [toy_task("t0", "First")])], out)
    store = open_store(snapshot=out, poll_seconds=0)
    assert store.task("a", "t0")["title"] == "First"
    (out / "pack.sqlite").write_bytes(b"damaged " * 512)  # set aside and rebuilt by the next run
    build_snapshot([MemoryReader(toy_env("a"), [toy_task("t0", "Second")])], out)
    store.reader.settle()
    assert store.version and store.reader.settle() is None
    assert store.task("a", "t0")["sections"][0]["body"].startswith("Second")
    store.close()


def test_no_helper_on_this_host_builds_in_place(tmp_path: Path, monkeypatch, caplog) -> None:
    from repogym.explorer import snapshot_write as snap_mod

    monkeypatch.setattr(snap_mod, "HELPER_MIN_TASKS", 0)
    monkeypatch.setattr(snap_mod.sys, "executable", str(tmp_path / "no-such-python"))
    out = tmp_path / "out"
    tasks = [toy_task(f"t{i}", f"Puzzle word{i}") for i in range(5)]
    build_snapshot([MemoryReader(toy_env("a"), tasks)], out)
    assert any("building the index in place" in r.getMessage() for r in caplog.records)
    store = open_store(snapshot=out, poll_seconds=0)
    assert [t["id"] for t in store.search_tasks("word3")["items"]] == ["t3"]
    store.close()
