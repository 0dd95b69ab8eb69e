"""The per-snapshot cache of ranked environment hits answers exactly as a cold store does,
for every filter, sort and page over the same words, and a new snapshot starts empty."""

from __future__ import annotations

from pathlib import Path

from repogym.explorer.build import build_snapshot
from repogym.explorer.index import MemoryReader
from repogym.explorer.model import EnvDoc
from repogym.explorer.store import open_store


def _readers(n: int, word: str) -> list[MemoryReader]:
    langs = ("python", "go", "rust")
    return [
        MemoryReader(
            EnvDoc(
                f"env-{i}",
                ("harbor", "rows")[i % 2],
                f"{word} cache {i}" if i % 3 else f"router {i}",
                f"About things, number {i}.",
                facets={"language": langs[i % 3]},
            ),
            [],
        )
        for i in range(60)
    ]


def test_cached_hits_answer_like_a_cold_store(tmp_path: Path) -> None:
    build_snapshot(_readers(60, "parser"), tmp_path / "snap")
    warm = open_store(snapshot=tmp_path / "snap")
    combos = [
        {"q": q, "kind": kind, "filters": flt, "sort": sort, "page": page, "size": 7}
        for q in ("parser", "pars", "parser cache", "router x", "cache")
        for kind in (None, "rows")
        for flt in (None, {"language": ["go", "rust"]})
        for sort in ("relevance", "name", "tasks")
        for page in (1, 3)
    ]
    first = [warm.search(**c) for c in combos]
    again = [warm.search(**c) for c in combos]  # from the cache
    assert first == again
    for combo, answer in zip(combos, first, strict=True):
        cold = open_store(snapshot=tmp_path / "snap")
        assert cold.search(**combo) == answer
        cold.close()
    assert first[0]["total"] == 40
    warm.close()


def test_a_new_snapshot_does_not_reuse_hits(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    build_snapshot(_readers(60, "parser"), out)
    store = open_store(snapshot=out, poll_seconds=0)
    assert store.search(q="parser")["total"] == 40
    build_snapshot(_readers(60, "lexer"), out)
    store.reader.settle()
    assert store.search(q="parser")["total"] == 0
    assert store.search(q="lexer")["total"] == 40
    store.close()


def test_few_matches_in_a_long_order_keep_the_order(tmp_path: Path) -> None:
    """A handful of matches sorted by name or task count, paged: the same as the full walk."""
    from repogym.explorer.model import Section, TaskDoc

    readers = []
    for i in range(80):
        title = f"{'rare ' if i % 20 == 3 else ''}{'zeta' if i % 2 else 'alpha'} {i:02d}"
        tasks = [
            TaskDoc(f"t{j}", "T", "", {}, "tests", "x", "no-network", True,
                    [Section("instruction", "I", "x")], [])
            for j in range(i % 7)
        ]  # fmt: skip
        readers.append(MemoryReader(EnvDoc(f"e{i}", "harbor", title, "s"), tasks))
    build_snapshot(readers, tmp_path / "snap")
    store = open_store(snapshot=tmp_path / "snap")
    everything = store.search(size=100, sort="name")["items"]
    rare = [c for c in everything if c["title"].startswith("rare")]
    assert len(rare) == 4
    by_name = [c["id"] for c in rare]
    by_tasks = [c["id"] for c in sorted(rare, key=lambda c: -c["task_count"])]
    for sort, want in (("name", by_name), ("tasks", by_tasks)):
        got = [c["id"] for p in (1, 2, 3) for c in store.search(q="rare", sort=sort, page=p, size=2)["items"]]  # fmt: skip
        assert got == want, sort
    store.close()


def test_search_json_is_the_serialised_answer(tmp_path: Path) -> None:
    import json

    readers = _readers(60, "parser")
    readers.append(MemoryReader(EnvDoc("über-€", "rows", 'Ünïcode "quoted" \\ parser', "ß"), []))
    build_snapshot(readers, tmp_path / "snap")
    store = open_store(snapshot=tmp_path / "snap")
    for combo in (
        {},
        {"q": "parser", "sort": "name", "size": 5, "page": 2},
        {"q": "ünïcode"},
        {"kind": "rows", "filters": {"language": ["go"]}},
        {"q": "nothing-like-this"},
        {"page": 99},
    ):
        for _ in range(2):  # cards serialised, then reused
            want = json.dumps(store.search(**combo), ensure_ascii=False, separators=(",", ":"))
            assert store.search_json(**combo) == want.encode()
    store.close()
