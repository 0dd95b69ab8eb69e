"""Snapshot build, atomic publish with a pointer, and a reader that only swaps to good ones."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from repogym.explorer import snapshot as snap
from repogym.explorer.build import build_snapshot
from repogym.explorer.index import MemoryReader
from repogym.explorer.pack import pack_id
from repogym.explorer.store import Store, open_store
from tests.explorer.conftest import toy_env, toy_task


def _readers(n_envs: int = 3, n_tasks: int = 4, tag: str = "v1") -> list[MemoryReader]:
    return [
        MemoryReader(
            toy_env(f"env{e}"),
            [toy_task(f"t{t}", f"Puzzle {tag} {e}-{t}", difficulty="easy") for t in range(n_tasks)],
        )
        for e in range(n_envs)
    ]


def _poll(store: Store) -> None:
    """Let the store notice a new pointer and finish validating it in the background."""
    assert store.version
    store.reader.settle()


def test_build_and_publish(tmp_path: Path) -> None:
    info = build_snapshot(_readers(), tmp_path / "out")
    out = tmp_path / "out"
    pointer = json.loads((out / "CURRENT").read_text())
    assert pointer["file"] == f"snapshots/{info['sha256']}.sqlite"
    assert pointer["sha256"] == info["sha256"]
    assert pointer["size"] == info["bytes"] == (out / pointer["file"]).stat().st_size
    assert pointer["schema_version"] == snap.SCHEMA_VERSION
    assert pointer["counts"] == {"envs": 3, "tasks": 12}
    assert info["envs"] == 3 and info["tasks"] == 12
    assert not list((out / "snapshots").glob(".build-*"))  # no temp file left behind
    assert (out / "CURRENT").stat().st_mode & 0o777 == 0o644  # servers of any user read it
    db = sqlite3.connect(out / pointer["file"])
    meta = dict(db.execute("SELECT key, value FROM meta"))
    assert meta["schema_version"] == str(snap.SCHEMA_VERSION)
    assert meta["envs"] == "3" and meta["tasks"] == "12" and meta["built_at"]
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert {"envs", "tasks", "meta", "envs_fts", "tasks_fts"} <= tables
    assert not {"pack", "blobs"} & tables  # pages and bodies live in the pack, not the index
    sql = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE name LIKE '%_fts'"))
    assert "trigram" in sql["envs_fts"]
    assert "unicode61" in sql["tasks_fts"] and "prefix='2'" in sql["tasks_fts"]
    # every row names its page in the pack, built with the pack the pointer names
    assert meta["pack_id"] == pointer["pack_id"] == pack_id(out / "pack.sqlite")
    keys = [k for (k,) in db.execute("SELECT doc FROM tasks")]
    assert len(keys) == 12 and all(isinstance(k, bytes) and len(k) == 32 for k in keys)
    pack = sqlite3.connect(out / "pack.sqlite")
    assert pack.execute("SELECT count(*) FROM docs").fetchone()[0] == 12
    # identical file bodies across tasks are stored once: every prompt differs, the answer
    # files are withheld, so bodies == distinct prompts
    assert pack.execute("SELECT count(*) FROM blobs").fetchone()[0] == 12


def test_identical_files_are_stored_once(tmp_path: Path) -> None:
    tasks = [toy_task(f"t{i}", "Same title") for i in range(5)]
    for t in tasks:
        t.summary = "same"
        t.sections[0].body = "same body"
        t.files[0].data = b"same bytes " * 100
    build_snapshot([MemoryReader(toy_env("dup"), tasks)], tmp_path)
    pack = sqlite3.connect(tmp_path / "pack.sqlite")
    assert pack.execute("SELECT count(*) FROM blobs").fetchone()[0] == 1


def test_reader_serves_and_swaps(tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_snapshot(_readers(tag="v1"), out)
    store = open_store(snapshot=out, poll_seconds=0)
    v1 = store.version
    assert store.search()["total"] == 3
    build_snapshot(_readers(n_envs=5, tag="v2"), out)
    _poll(store)
    assert store.search()["total"] == 5
    assert store.version != v1
    assert store.reader.swaps == 1


def _publish_then(out: Path, damage) -> tuple[Store, str]:
    build_snapshot(_readers(tag="good"), out)
    store = open_store(snapshot=out, poll_seconds=0)
    good = store.version
    info = build_snapshot(_readers(n_envs=2, tag="bad"), out / "staging")
    bad = Path(info["snapshot"])
    pointer = json.loads((out / "staging" / "CURRENT").read_text())
    target = out / pointer["file"]
    target.write_bytes(bad.read_bytes())
    pointer = damage(target, pointer) or pointer
    (out / "CURRENT").write_text(json.dumps(pointer))
    return store, good


def _flip(target: Path, pointer: dict) -> None:
    data = bytearray(target.read_bytes())
    for i in range(4096, len(data), 997):
        data[i] ^= 0xFF
    target.write_bytes(bytes(data))


def _truncate(target: Path, pointer: dict) -> None:
    target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])


def _wrong_sha(target: Path, pointer: dict) -> dict:
    return {**pointer, "sha256": "0" * 64}


def _wrong_schema_pointer(target: Path, pointer: dict) -> dict:
    return {**pointer, "schema_version": 999}


def _wrong_schema_db(target: Path, pointer: dict) -> dict:
    db = sqlite3.connect(target)
    db.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    import hashlib

    data = target.read_bytes()
    return {**pointer, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _missing(target: Path, pointer: dict) -> None:
    target.unlink()


def _bad_counts(target: Path, pointer: dict) -> dict:
    return {**pointer, "counts": {"envs": 7, "tasks": 1}}


def _corrupt_but_rehashed(target: Path, pointer: dict) -> dict:
    """Bytes changed and the pointer updated to match: only quick_check can tell."""
    import hashlib

    data = bytearray(target.read_bytes())
    page = 8192
    for i in range(page * 2, min(len(data), page * 6)):
        data[i] = 0x5A
    target.write_bytes(bytes(data))
    return {**pointer, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


@pytest.mark.parametrize(
    "damage",
    [
        _flip,
        _truncate,
        _wrong_sha,
        _wrong_schema_pointer,
        _wrong_schema_db,
        _missing,
        _bad_counts,
        _corrupt_but_rehashed,
    ],
)
def test_reader_rejects_bad_snapshots_and_keeps_the_current_one(
    tmp_path: Path, damage, caplog: pytest.LogCaptureFixture
) -> None:
    store, good = _publish_then(tmp_path / "out", damage)
    with caplog.at_level(logging.WARNING, logger="repogym.explorer"):
        _poll(store)
        result = store.search()
    assert store.version == good
    assert result["total"] == 3
    assert store.reader.rejected
    assert "snapshot rejected" in caplog.text
    assert store.task("env0", "t0")["title"] == "Puzzle good 0-0"


def test_garbage_pointer_is_rejected(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "out"
    build_snapshot(_readers(), out)
    store = open_store(snapshot=out, poll_seconds=0)
    good = store.version
    for text in ("{not json", json.dumps({"file": "../../etc/passwd"}), json.dumps([1])):
        (out / "CURRENT").write_text(text)
        with caplog.at_level(logging.WARNING, logger="repogym.explorer"):
            _poll(store)
            assert store.search()["total"] == 3
        assert store.version == good
    assert len(store.reader.rejected) == 3


def test_no_snapshot_yet_serves_empty_then_picks_one_up(tmp_path: Path) -> None:
    out = tmp_path / "out"
    store = open_store(snapshot=out, poll_seconds=0)
    assert store.version == "empty"
    assert store.search() == {
        "items": [],
        "total": 0,
        "page": 1,
        "size": 24,
        "facets": {f: {} for f in store.search()["facets"]},
    }
    build_snapshot(_readers(), out)
    _poll(store)
    assert store.search()["total"] == 3


def test_polling_is_rate_limited(tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_snapshot(_readers(tag="v1"), out)
    store = open_store(snapshot=out, poll_seconds=3600)
    v1 = store.version
    build_snapshot(_readers(n_envs=5, tag="v2"), out)
    assert store.version == v1  # not polled again yet
    assert store.search()["total"] == 3


def test_swap_under_concurrent_queries(tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_snapshot(_readers(tag="g0"), out)
    store = open_store(snapshot=out, poll_seconds=0)
    errors: list[BaseException] = []
    seen: set[int] = set()
    stop = threading.Event()

    def query() -> None:
        while not stop.is_set():
            try:
                r = store.search("env")
                seen.add(r["total"])
                t = store.search_tasks("puzzle", size=5)
                assert t["total"] >= 12
                env = r["items"][0]["id"]
                assert store.env(env) is not None
                assert store.task(env, "t1")["sections"]
                assert store.file(env, "t1", "prompt.txt")
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)
                stop.set()

    threads = [threading.Thread(target=query) for _ in range(6)]
    for t in threads:
        t.start()
    try:
        for gen in range(1, 6):
            build_snapshot(_readers(n_envs=3 + gen, tag=f"g{gen}"), out)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[:3]
    _poll(store)
    _poll(store)
    assert store.search()["total"] == 8
    assert store.reader.swaps >= 1
    assert len(seen) >= 2


def test_early_listing_snapshot(tmp_path: Path) -> None:
    out = tmp_path / "out"
    published: list[dict] = []
    stores: list[dict] = []

    class Slow(MemoryReader):
        def task(self, task_id: str):
            if not stores:  # the first task read happens after the listing was published
                s = open_store(snapshot=out, poll_seconds=0)
                stores.append({"envs": s.search()["total"], "task": s.task("slow", "t0")})
            return super().task(task_id)

    reader = Slow(toy_env("slow"), [toy_task(f"t{i}", f"Title {i}") for i in range(3)])
    build_snapshot([reader], out, early=True, progress=lambda ev, d: published.append(ev))
    assert "published-listing" in published
    assert stores[0]["envs"] == 1
    listing = stores[0]["task"]
    assert listing["title"] == "t0" and listing["sections"] == []
    full = open_store(snapshot=out).task("slow", "t0")
    assert full["title"] == "Title 0" and full["sections"]


def test_private_env_stays_out_of_a_snapshot(tmp_path: Path) -> None:
    private = toy_env("secret-org/private-set")
    private.private = True
    readers = [MemoryReader(private, [toy_task("t0", "Hidden")]), *_readers(n_envs=1)]
    info = build_snapshot(readers, tmp_path)
    assert info["envs"] == 1
    store = open_store(snapshot=tmp_path)
    assert store.env("secret-org/private-set") is None
    assert store.search_tasks("Hidden")["total"] == 0


def test_in_process_store_is_removed_on_close(tmp_path: Path) -> None:
    store = open_store(_readers(n_envs=1))
    folder = store.reader.out_dir
    assert folder.is_dir()
    assert store.search()["total"] == 1
    store.close()
    assert not folder.exists()


def test_bad_source_fails_with_nothing_published(tmp_path: Path) -> None:
    from repogym.explorer.adapters import AdapterError

    with pytest.raises(AdapterError):
        build_snapshot([str(tmp_path / "nowhere")], tmp_path / "out")
    assert not (tmp_path / "out" / "CURRENT").exists()
    assert not list((tmp_path / "out" / "snapshots").glob("*"))


def test_background_store_serves_the_listing_then_the_full_snapshot() -> None:
    gate = threading.Event()

    class Gated(MemoryReader):
        def task(self, task_id: str):
            gate.wait(timeout=60)
            return super().task(task_id)

    reader = Gated(toy_env("big"), [toy_task(f"t{i}", f"Title {i}") for i in range(4)])
    store = open_store([reader], background=True, poll_seconds=0)
    try:
        assert not store.ready.is_set()
        assert store.search()["items"][0]["id"] == "big"
        assert store.search_tasks(env="big")["total"] == 4
        assert store.task("big", "t2")["title"] == "t2"  # listed, not read yet
        gate.set()
        assert store.ready.wait(timeout=60)
        _poll(store)
        assert store.task("big", "t2")["title"] == "Title 2"
        assert store.task("big", "t2")["sections"]
        assert store.build_errors == []
    finally:
        gate.set()
        store.close()


def test_background_validation_keeps_serving_until_the_swap(tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_snapshot(_readers(tag="v1"), out)
    reader = snap.SnapshotReader(out, poll_seconds=0.001, background=True)
    store = Store(reader)
    v1 = store.version
    build_snapshot(_readers(n_envs=5, tag="v2"), out)
    time.sleep(0.01)
    store.search()  # notices the new pointer; validation runs on another thread
    reader.settle()
    time.sleep(0.01)
    assert store.search()["total"] == 5
    assert store.version != v1 and reader.swaps == 1


def test_same_environment_id_twice_keeps_both(tmp_path: Path) -> None:
    a = MemoryReader(toy_env("tasks"), [toy_task("t0", "First")])
    b = MemoryReader(toy_env("tasks"), [toy_task("t0", "Second")])
    info = build_snapshot([a, b], tmp_path)
    assert info["envs"] == 2
    store = open_store(snapshot=tmp_path)
    assert store.task("tasks", "t0")["title"] == "First"
    assert store.task("tasks-2", "t0")["title"] == "Second"
