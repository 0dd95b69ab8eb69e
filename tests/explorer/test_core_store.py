"""The Store API: search (FTS words are data), facet counts, pages from the pack, safe files."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.explorer.adapters import AdapterError, adapters, register, unregister
from repogym.explorer.index import MemoryReader
from repogym.explorer.model import EnvDoc, TaskDoc
from repogym.explorer.query import env_match, tasks_match
from repogym.explorer.store import Store, Withheld, open_store
from tests.explorer.conftest import GOLD, toy_env, toy_task, write_generated_dataset


@pytest.fixture(scope="module")
def facet_store() -> Iterator[Store]:
    """Four environments with known facets, for exact facet-count checks."""
    data = [
        (toy_env("alpha", kind="harbor"), [("python", "easy"), ("python", "hard")]),
        (toy_env("bravo", kind="harbor"), [("go", "easy")]),
        (toy_env("charlie", kind="rows"), [("python", "easy"), ("rust", "medium")]),
        (toy_env("delta", kind="rows"), [("go", "hard")]),
    ]
    readers = [
        MemoryReader(
            env,
            [
                toy_task(
                    f"{env.id}-{i}", f"{env.id} task {i} about {lang}", language=lang, difficulty=d
                )
                for i, (lang, d) in enumerate(tasks)
            ],
        )
        for env, tasks in data
    ]
    store = open_store(readers)
    yield store
    store.close()


def test_facets_are_counted_over_what_the_other_filters_leave(facet_store: Store) -> None:
    r = facet_store.search()
    assert r["total"] == 4
    assert r["facets"]["kind"] == {"harbor": 2, "rows": 2}
    assert r["facets"]["language"] == {"go": 2, "python": 2, "rust": 1}

    r = facet_store.search(filters={"language": ["python"]})
    assert sorted(i["id"] for i in r["items"]) == ["alpha", "charlie"]
    # the language facet ignores its own filter: every language stays selectable
    assert r["facets"]["language"] == {"go": 2, "python": 2, "rust": 1}
    # other facets count only what the language filter leaves
    assert r["facets"]["kind"] == {"harbor": 1, "rows": 1}
    assert r["facets"]["difficulty"] == {"easy": 2, "hard": 1, "medium": 1}

    r = facet_store.search(kind="rows", filters={"language": ["python", "go"]})
    assert sorted(i["id"] for i in r["items"]) == ["charlie", "delta"]
    assert r["facets"]["kind"] == {"harbor": 2, "rows": 2}  # languages python|go: all four
    assert r["facets"]["language"] == {"go": 1, "python": 1, "rust": 1}  # within rows

    r = facet_store.search(filters={"language": ["cobol"]})
    assert r["total"] == 0
    assert r["facets"]["language"]["cobol"] == 0  # a selected value stays visible


def test_search_sorts_and_pages(facet_store: Store) -> None:
    names = [i["id"] for i in facet_store.search(sort="name")["items"]]
    assert names == ["alpha", "bravo", "charlie", "delta"]
    by_tasks = [i["task_count"] for i in facet_store.search(sort="tasks")["items"]]
    assert by_tasks == sorted(by_tasks, reverse=True)
    page2 = facet_store.search(sort="name", page=2, size=3)
    assert [i["id"] for i in page2["items"]] == ["delta"]
    assert page2["total"] == 4 and page2["page"] == 2 and page2["size"] == 3
    card = page2["items"][0]
    assert set(card) == {"id", "kind", "title", "summary", "task_count", "facets", "source"}
    assert facet_store.search(page=-3, size=10**9)["page"] == 1


def test_env_search_by_words(facet_store: Store) -> None:
    assert [i["id"] for i in facet_store.search("charl")["items"]] == ["charlie"]
    assert [i["id"] for i in facet_store.search("ALPHA set")["items"]] == ["alpha"]
    assert [i["id"] for i in facet_store.search("lt")["items"]] == ["delta"]  # short: substring


def test_task_search_and_facets(facet_store: Store) -> None:
    r = facet_store.search_tasks("pyth")  # prefix of the last word
    assert r["total"] == 3
    assert r["facets"]["language"] == {"python": 3}
    r = facet_store.search_tasks("", env="alpha")
    assert [i["id"] for i in r["items"]] == ["alpha-0", "alpha-1"]
    card = r["items"][0]
    assert set(card) == {
        "env", "id", "title", "summary", "facets", "grading", "environment", "network", "runnable"
    }  # fmt: skip
    r = facet_store.search_tasks(filters={"difficulty": ["easy"]})
    assert r["total"] == 3
    assert r["facets"]["difficulty"] == {"easy": 3, "hard": 2, "medium": 1}
    assert r["facets"]["language"] == {"python": 2, "go": 1}
    assert facet_store.search_tasks(filters={"kind": ["rows"]})["total"] == 3
    assert facet_store.search_tasks(filters={"runnable": ["true"]})["total"] == 0
    assert facet_store.search_tasks(env="nope")["total"] == 0


def test_broad_task_searches_are_listed_in_index_order(
    facet_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import repogym.explorer.store as store_mod

    ranked = [i["id"] for i in facet_store.search_tasks("task", size=50)["items"]]
    monkeypatch.setattr(store_mod, "RANK_LIMIT", 2)
    broad = facet_store.search_tasks("task", size=50)
    assert broad["total"] == 6
    assert sorted(i["id"] for i in broad["items"]) == sorted(ranked)
    everything = facet_store.search_tasks(size=4, page=2)
    assert everything["total"] == 6 and len(everything["items"]) == 2


INJECTIONS = [
    "NEAR(a b)",
    "NEAR(python go, 2)",
    "title:foo",
    "{title summary}: python",
    '"',
    '""',
    '"python',
    "*",
    "py*",
    "a OR b",
    "python OR go",
    "-x",
    "NOT python",
    "^",
    "^python",
    ")(",
    "(",
    "AND",
    "OR",
    "python AND",
    "+",
    ":",
    "'",
    "\\",
    "\x00",
    "日本語 ünïcødé",
    "🐍",
    "",
    "   ",
    "x" * 5000,
    "python " * 1000,
    "a" * 3 + '"' * 3,
    "rank:1",
    "rowid",
    "'; DROP TABLE tasks; --",
]


@pytest.mark.parametrize("q", INJECTIONS)
def test_fts_injection_strings_are_plain_words(facet_store: Store, q: str) -> None:
    envs = facet_store.search(q)
    tasks = facet_store.search_tasks(q)
    assert isinstance(envs["total"], int) and isinstance(tasks["total"], int)
    assert envs["total"] <= 4 and tasks["total"] <= 6
    # operators never widen a query: "a OR b" means the words a and b
    if q in ("python OR go", "NOT python"):
        assert tasks["total"] == 0
    assert facet_store.search()["total"] == 4  # the database is intact


def test_fts_query_text_is_quoted() -> None:
    assert tasks_match('say "hi" NEAR(x)') == '"say" """hi""" "NEAR(x)"*'
    assert tasks_match("* ^ )(") is None
    assert tasks_match("") is None
    fts, short = env_match("ab NEAR(abc OR")
    assert fts == '"NEAR(abc"' and short == ["ab", "or"]


@pytest.fixture
def harbor_store(tmp_path: Path) -> Iterator[tuple[Store, Path]]:
    ds = write_generated_dataset(tmp_path)
    store = open_store([str(ds)])
    yield store, ds
    store.close()


def test_task_page_comes_from_the_pack_only(harbor_store: tuple[Store, Path]) -> None:
    store, ds = harbor_store
    shutil.rmtree(ds)  # the source is gone: pages and files still come from the snapshot
    task = store.task("acme-widgets", "acme__widgets-7")
    assert task["title"] == "Fix the acme__widgets-7 parser on empty input"
    assert [s["id"] for s in task["sections"]][:2] == ["instruction", "environment"]
    assert task["aliases"] and task["aliases"][0].startswith("sha256:")
    assert any("solution/" in n for n in task["withheld"])
    files = {f["path"]: f for f in task["files"]}
    assert files["solution/patch.diff"]["withheld"] == "solution (the answer)"
    assert files["tests/test.patch"]["withheld"] == "hidden test patch (grader data)"
    assert store.file("acme-widgets", "acme__widgets-7", "environment/repo/pkg/mod.py").startswith(
        b"def parse"
    )
    env = store.env("acme-widgets")
    assert env["task_count"] == 3
    assert env["task_facets"]["pipeline"] == {"pr_runtime": 2, "commit_runtime": 1}
    assert env["run_options"] and env["runs_in"]
    assert store.env("nope") is None and store.task("acme-widgets", "nope") is None


def test_no_answer_on_any_store_route(harbor_store: tuple[Store, Path]) -> None:
    store, _ = harbor_store
    dump = json.dumps(
        [store.search(), store.search_tasks(), store.env("acme-widgets")]
        + [store.task("acme-widgets", t["id"]) for t in store.search_tasks()["items"]]
    )
    assert GOLD not in dump
    for t in store.search_tasks()["items"]:
        for f in store.task("acme-widgets", t["id"])["files"]:
            try:
                assert GOLD.encode() not in store.file("acme-widgets", t["id"], f["path"])
            except Withheld as w:
                assert w.reason == f["withheld"]


@pytest.mark.parametrize(
    "path",
    [
        "../acme__widgets-9/instruction.md",
        "environment/../solution/patch.diff",
        "environment/repo/../../solution/solve.sh",
        "/etc/passwd",
        "/instruction.md",
        "instruction.md/",
        "./instruction.md",
        "%2e%2e/solution/patch.diff",
        "solution%2Fpatch.diff",
        "environment%2F..%2F..%2Fsolution%2Fpatch.diff",
        "environment\\Dockerfile",
        "environment//Dockerfile",
        "instruction.md\x00",
        "",
        "environment",
        "tests",
    ],
)
def test_file_paths_outside_the_list_are_not_found(
    harbor_store: tuple[Store, Path], path: str
) -> None:
    store, _ = harbor_store
    with pytest.raises(KeyError):
        store.file("acme-widgets", "acme__widgets-7", path)


def test_withheld_files_raise_withheld(harbor_store: tuple[Store, Path]) -> None:
    store, _ = harbor_store
    with pytest.raises(Withheld) as exc:
        store.file("acme-widgets", "acme__widgets-7", "solution/patch.diff")
    assert exc.value.reason == "solution (the answer)"
    with pytest.raises(KeyError):
        store.file("nope", "acme__widgets-7", "instruction.md")
    with pytest.raises(KeyError):
        store.file("acme-widgets", "nope", "instruction.md")


def test_examples_end_to_end() -> None:
    store = open_store([str(Path(__file__).resolve().parents[2] / "examples" / "tasks")])
    try:
        assert store.search()["items"][0]["id"] == "tasks"
        assert store.search_tasks("greeting")["items"][0]["id"] == "hello-file"
        hello = store.task("tasks", "hello-file")
        assert hello["runnable"] is True
        with pytest.raises(Withheld):
            store.file("tasks", "hello-file", "solution/solve.sh")
    finally:
        store.close()


class ToyReader:
    """A whole environment held in a JSON file: {"name": ..., "puzzles": {id: [q, a]}}."""

    def __init__(self, path: Path) -> None:
        self.data = json.loads(path.read_text())

    def env(self) -> EnvDoc:
        return EnvDoc(id=self.data["name"], kind="toy", title="Toy puzzles", summary="Riddles")

    def task_ids(self) -> Iterator[str]:
        yield from self.data["puzzles"]

    def task(self, task_id: str) -> TaskDoc:
        question, answer = self.data["puzzles"][task_id]
        doc = toy_task(task_id, question, category="riddle")
        doc.sections.append(
            __import__("repogym.explorer.model", fromlist=["Section"]).Section(
                "metadata", "Metadata", f"category: riddle\nanswer: {answer}\n", "code", "yaml"
            )
        )
        return doc


class ToyAdapter:
    name = "toy-json"

    def detect(self, location: str) -> float:
        return 0.9 if location.endswith(".toy.json") else 0.0

    def open(self, location: str) -> ToyReader:
        try:
            return ToyReader(Path(location))
        except (OSError, ValueError) as exc:
            raise AdapterError(f"{location}: {exc}") from None


def test_toy_adapter_registered_from_outside_goes_end_to_end(tmp_path: Path) -> None:
    src = tmp_path / "riddles.toy.json"
    src.write_text(json.dumps({"name": "riddles", "puzzles": {"r1": ["What has keys?", "piano"]}}))
    register(ToyAdapter())
    try:
        assert "toy-json" in [a.name for a in adapters()]
        from repogym.explorer.build import build_snapshot

        info = build_snapshot([str(src)], tmp_path / "out")
        assert info["envs"] == 1 and info["tasks"] == 1
        store = open_store(snapshot=tmp_path / "out")
        assert store.search("riddles")["items"][0]["kind"] == "toy"
        task = store.task("riddles", "r1")
        meta = next(s for s in task["sections"] if s["id"] == "metadata")
        assert "piano" not in meta["body"] and "«withheld»" in meta["body"]
        assert "piano" not in json.dumps(task)
        with pytest.raises(Withheld):
            store.file("riddles", "r1", "solution/answer.txt")
        with pytest.raises(AdapterError):
            open_store([str(tmp_path / "broken.toy.json")])
    finally:
        unregister("toy-json")
    assert "toy-json" not in [a.name for a in adapters()]


@pytest.mark.parametrize("word", ["a", "e", "lt", "ha", "zz", "A", "Ch", "é"])
def test_short_words_match_substrings(facet_store: Store, word: str) -> None:
    h, db = facet_store.reader.acquire()
    texts = facet_store._envs(h, db).text
    expected = sorted(texts[r].split()[0] for r in texts if word.lower() in texts[r])
    got = sorted(i["id"] for i in facet_store.search(word, size=50)["items"])
    assert got == expected
    assert facet_store.search("-")["total"] == 4  # no letter or digit: no constraint


def test_environment_relevance_and_paging(tmp_path: Path) -> None:
    """Environments whose id or title hold every word come first, then those matching only in
    their summary or tags; each group by task count (most first), then name; pages and sorts
    slice that order exactly."""

    def env(eid: str, title: str, summary: str, n: int) -> MemoryReader:
        tasks = [toy_task(f"{eid}-{i}", f"Task {i}") for i in range(n)]
        return MemoryReader(EnvDoc(eid, "harbor", title, summary), tasks)

    readers = [
        env("e1", "Widget tools", "Nothing about it here.", 1),
        env("e2", "Plain", "A widget parser in the summary.", 5),
        env("e3", "Big widget set", "Many tasks.", 3),
        env("e4", "Other", "Unrelated text.", 9),
        env("e5", "Small Widget", "Few tasks.", 2),
        env("e6", "Cogs", "widgetry in the summary too.", 4),
    ]
    store = open_store(readers)
    order = [i["id"] for i in store.search("widget", size=10)["items"]]
    assert order == ["e3", "e5", "e1", "e2", "e6"]  # title hits by tasks, then summary hits
    pages = [store.search("widget", size=2, page=p)["items"] for p in (1, 2, 3)]
    assert [i["id"] for page in pages for i in page] == order
    assert [i["id"] for i in store.search("widget", sort="name")["items"]] == [
        "e3", "e6", "e2", "e5", "e1"
    ]  # fmt: skip
    assert [i["id"] for i in store.search("widget", sort="tasks", size=3)["items"]] == [
        "e2", "e6", "e3"
    ]  # fmt: skip
    assert [i["id"] for i in store.search("", size=3, page=2)["items"]] == ["e3", "e5", "e1"]
    store.close()
