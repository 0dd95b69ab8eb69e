"""Curation settings: the atomic settings file, its audit log, the reader that follows it, and
the curated store (hidden environments gone from every answer, pins first)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.explorer.curated import CuratedStore, StopWatcher
from repogym.explorer.curation import (
    AUDIT_FILE,
    SETTINGS_FILE,
    CurationError,
    CurationReader,
    SettingsFile,
    read_audit,
)
from repogym.explorer.store import open_store

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
HELLO = "hello-file"


def _bump(path: Path) -> None:
    """Move the file's mtime on, so a same-second rewrite is seen as a change."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


def _hide(env: str) -> object:
    def edit(s: dict) -> None:
        s["hidden"].append(env)

    return edit


def test_change_is_atomic_validated_and_audited(tmp_path: Path) -> None:
    sf = SettingsFile(tmp_path)
    assert sf.read().hidden == ()
    sf.change("alice", "hide", _hide("beta"))
    sf.change("bob", "banner", lambda s: s.update(banner={"text": "Hi <b>", "link": "/x"}))
    on_disk = json.loads((tmp_path / SETTINGS_FILE).read_text())
    assert on_disk["hidden"] == ["beta"]
    assert on_disk["banner"]["text"] == "Hi <b>"
    audit = read_audit(tmp_path)
    assert [(a["who"], a["action"]) for a in audit] == [("alice", "hide"), ("bob", "banner")]
    assert audit[0]["before"] == {"hidden": []} and audit[0]["after"] == {"hidden": ["beta"]}
    assert audit[1]["before"] == {"banner": None} and audit[1]["at"] >= audit[0]["at"]
    # a refused change writes nothing: neither the settings nor the audit log
    before = (tmp_path / SETTINGS_FILE).read_bytes()
    with pytest.raises(CurationError, match="banner.link"):
        sf.change("eve", "banner", lambda s: s.update(banner={"text": "x", "link": "javascript:1"}))
    with pytest.raises(CurationError, match="hidden"):
        sf.change("eve", "hide", lambda s: s.update(hidden="beta"))
    assert (tmp_path / SETTINGS_FILE).read_bytes() == before
    assert len((tmp_path / AUDIT_FILE).read_text().splitlines()) == 2
    # no temporary file is left next to the settings
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".curation")) == [
        AUDIT_FILE,
        SETTINGS_FILE,
    ]


def test_reader_follows_changes_and_keeps_the_last_good_settings(tmp_path: Path) -> None:
    sf = SettingsFile(tmp_path)
    reader = CurationReader(tmp_path, interval=0)
    assert not reader.hidden("beta") and reader.revision == 0
    sf.change("alice", "hide", _hide("beta"))
    _bump(sf.path)
    assert reader.hidden("beta") and reader.visible(["alpha", "beta"]) == ["alpha"]
    rev = reader.revision
    # a half-written (torn) file: reported, the last good settings stay in force
    good = sf.path.read_bytes()
    sf.path.write_bytes(good[: len(good) // 2])
    _bump(sf.path)
    assert reader.hidden("beta")
    assert reader.error is not None and "not valid JSON" in reader.error
    assert reader.revision == rev
    # a file that parses but is invalid is refused the same way
    sf.path.write_text(json.dumps({"hidden": "beta", "banner": {"text": "x"}}))
    _bump(sf.path)
    assert reader.hidden("beta") and reader.banner() is None
    assert reader.error is not None and "hidden" in reader.error
    # a good file again: taken in, the error cleared
    sf.path.write_text(json.dumps({"hidden": [], "pinned": ["b", "a"], "runs": {"off": ["a"]}}))
    _bump(sf.path)
    assert not reader.hidden("beta") and reader.error is None
    assert reader.pinned() == ["b", "a"] and reader.revision == rev + 1
    assert reader.runs_refusal("a") == "runs are turned off for a"
    assert reader.runs_refusal("b") is None
    # the admin app refuses to build on a file it cannot read
    sf.path.write_text("{")
    with pytest.raises(CurationError):
        sf.change("alice", "hide", _hide("x"))


def test_reader_stats_at_most_once_per_interval(tmp_path: Path) -> None:
    sf = SettingsFile(tmp_path)
    reader = CurationReader(tmp_path, interval=3600)
    sf.change("alice", "hide", _hide("beta"))
    _bump(sf.path)
    assert not reader.hidden("beta")  # not looked at again yet
    reader.refresh(force=True)
    assert reader.hidden("beta")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    root = tmp_path_factory.mktemp("curated")
    for name in ("alpha", "beta", "gamma"):
        shutil.copytree(EXAMPLES, root / name)
    s = open_store([str(root / n) for n in ("alpha", "beta", "gamma")])
    yield s
    s.close()


def test_curated_store_hides_everywhere_and_pins_first(store: object, tmp_path: Path) -> None:
    sf = SettingsFile(tmp_path)
    reader = CurationReader(tmp_path, interval=0)
    cs = CuratedStore(store, reader)
    plain = [c["id"] for c in cs.search()["items"]]
    assert sorted(plain) == ["alpha", "beta", "gamma"]
    v0 = cs.version
    sf.change("alice", "hide", _hide("beta"))
    _bump(sf.path)
    assert cs.version != v0  # caches and ETags turn over
    res = cs.search()
    assert [c["id"] for c in res["items"]] == [e for e in plain if e != "beta"]
    assert res["total"] == 2
    assert "beta" not in json.loads(cs.search_json())["items"].__repr__()
    assert sum(res["facets"]["kind"].values()) == 2
    assert cs.search(q="beta")["total"] == 0 or all(
        c["id"] != "beta" for c in cs.search(q="beta")["items"]
    )
    tasks = cs.search_tasks(size=100)
    assert {t["env"] for t in tasks["items"]} == {"alpha", "gamma"} and tasks["total"] == 4
    assert cs.search_tasks(env="beta")["total"] == 0
    assert cs.env("beta") is None and cs.task("beta", HELLO) is None
    with pytest.raises(KeyError):
        cs.file("beta", HELLO, "instruction.md")
    assert cs.task("alpha", HELLO) is not None
    assert cs.file("alpha", HELLO, "instruction.md")
    # pins lead the plain listing, in their order; paging stays whole and exact
    sf.change("alice", "pin", lambda s: s.update(pinned=["gamma", "beta"]))
    _bump(sf.path)
    first = cs.search()["items"]
    assert [c["id"] for c in first] == ["gamma", "alpha"] and first[0]["pinned"] is True
    paged = [cs.search(page=p, size=1)["items"][0]["id"] for p in (1, 2)]
    assert paged == ["gamma", "alpha"] and cs.search(page=3, size=1)["items"] == []
    assert json.loads(cs.search_json())["items"][0]["id"] == "gamma"
    assert cs.env("gamma")["pinned"] is True
    # words or filters: the store's own order, still without the hidden ones
    assert "beta" not in [c["id"] for c in cs.search(sort="name")["items"]]


class _Service:
    def __init__(self) -> None:
        self.running = {"r1"}
        self.asked: list[tuple[str, str]] = []

    def stop(self, run_id: str, reason: str) -> bool:
        self.asked.append((run_id, reason))
        return run_id in self.running


def test_stop_watcher_asks_the_service(tmp_path: Path) -> None:
    sf = SettingsFile(tmp_path)
    reader = CurationReader(tmp_path, interval=0)
    service = _Service()
    watcher = StopWatcher(reader, service)
    assert watcher.check() == []
    sf.change("alice", "stop", lambda s: s["stop"].update(r1=1.0, r2=2.0))
    _bump(sf.path)
    assert watcher.check() == ["r1"]
    assert ("r2", "stopped by an administrator") in service.asked
    assert watcher.check() == []  # asked once per run
