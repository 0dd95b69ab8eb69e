"""An adapter written outside repogym plugs in with ``register()`` and works end to end:
snapshot build, search, task sections, withheld answers, and the web pages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.explorer.adapters import AdapterError, adapters, pick, register, unregister
from repogym.explorer.build import build_snapshot
from repogym.explorer.model import EnvDoc, FileDoc, Section, TaskDoc
from repogym.explorer.store import Withheld, open_store

ANSWER_MARK = "toyanswerzq"


class ToyReader:
    """A ``.toy`` file: each line ``question = answer`` is a task."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        if not all(" = " in ln for ln in self.lines):
            raise AdapterError(f"{path.name}: every line must read 'question = answer'")

    def env(self) -> EnvDoc:
        return EnvDoc(
            id=self.path.stem,
            kind="toy",
            title=f"Toy riddles ({self.path.stem})",
            summary="Riddles, one per line",
            source=str(self.path),
            runs_in="your head",
            run_options=[{"label": "Think", "command": "think hard"}],
            facets={"category": "riddles"},
            task_count=len(self.lines),
        )

    def task_ids(self) -> Iterator[str]:
        for i in range(len(self.lines)):
            yield f"riddle-{i + 1}"

    def task(self, task_id: str) -> TaskDoc:
        n = int(task_id.removeprefix("riddle-")) - 1
        if not 0 <= n < len(self.lines):
            raise KeyError(task_id)
        question, answer = self.lines[n].split(" = ", 1)
        return TaskDoc(
            id=task_id,
            title=question,
            summary=question,
            facets={"category": "riddles", "difficulty": "easy" if n == 0 else "hard"},
            grading="exact-match",
            environment="text only",
            network="no-network",
            runnable=False,
            sections=[
                Section("instruction", "Instruction", f"Solve this riddle: *{question}*"),
                Section("grading", "How it is graded", "Exact match with the answer."),
            ],
            files=[
                FileDoc("riddle.txt", len(question), question.encode()),
                # the central withhold step must keep this out, whatever the adapter forgot
                FileDoc("solution/answer.txt", len(answer), answer.encode()),
            ],
        )


class ToyAdapter:
    name = "toy"

    def detect(self, location: str) -> float:
        return 1.0 if location.endswith(".toy") and Path(location).is_file() else 0.0

    def open(self, location: str) -> ToyReader:
        return ToyReader(Path(location))


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sphinx.toy"
    path.write_text(
        f"What walks on four legs in the morning = man {ANSWER_MARK}\n"
        f"What has keys but opens no locks = piano {ANSWER_MARK}\n"
    )
    register(ToyAdapter())
    try:
        yield path
    finally:
        unregister("toy")


def test_toy_adapter_end_to_end_through_a_snapshot(toy: Path, tmp_path: Path) -> None:
    assert "toy" in [a.name for a in adapters()]
    assert pick(str(toy)).name == "toy"
    out = tmp_path / "snap"
    result = build_snapshot([str(toy)], out)
    assert (result["envs"], result["tasks"]) == (1, 2)
    store = open_store(snapshot=out)
    try:
        found = store.search("riddles")
        assert [c["id"] for c in found["items"]] == ["sphinx"]
        assert found["items"][0]["kind"] == "toy"
        assert store.search(kind="toy")["total"] == 1
        tasks = store.search_tasks("keys locks")
        assert [(t["env"], t["id"]) for t in tasks["items"]] == [("sphinx", "riddle-2")]
        page = store.task("sphinx", "riddle-2")
        assert page is not None
        assert [s["id"] for s in page["sections"]] == ["instruction", "grading"]
        assert "What has keys but opens no locks" in page["sections"][0]["body"]
        assert page["grading"] == "exact-match" and page["facets"]["difficulty"] == "hard"
        assert store.file("sphinx", "riddle-2", "riddle.txt") == b"What has keys but opens no locks"
        with pytest.raises(Withheld):
            store.file("sphinx", "riddle-2", "solution/answer.txt")
        assert ANSWER_MARK not in json.dumps(page)
        assert store.search(ANSWER_MARK)["total"] == 0
        assert store.search_tasks(ANSWER_MARK)["total"] == 0
        env = store.env("sphinx")
        assert env is not None and env["run_options"] == [
            {"label": "Think", "command": "think hard"}
        ]
    finally:
        close = getattr(store, "close", None)
        if close:
            close()


def test_toy_adapter_pages_in_the_web_app(toy: Path) -> None:
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from repogym.explorer.web import create_app
    from tests.explorer.web_fixtures import serve

    store = open_store([str(toy)])
    try:
        with serve(create_app(store)) as base:
            home = httpx.get(f"{base}/?q=riddles", timeout=30)
            assert home.status_code == 200 and "Toy riddles (sphinx)" in home.text
            page = httpx.get(f"{base}/t/sphinx/riddle-1", timeout=30)
            assert page.status_code == 200
            assert "What walks on four legs in the morning" in page.text
            api = httpx.get(f"{base}/api/tasks/sphinx/riddle-1", timeout=30).json()
            assert api["sections"][0]["id"] == "instruction"
            raw = httpx.get(f"{base}/api/files/sphinx/riddle-1/solution/answer.txt", timeout=30)
            assert raw.status_code != 200
            for r in (home, page, raw):
                assert ANSWER_MARK not in r.text
            assert ANSWER_MARK not in json.dumps(api)
    finally:
        close = getattr(store, "close", None)
        if close:
            close()


def test_broken_toy_file_is_a_one_line_error(toy: Path) -> None:
    toy.write_text("no separator here\n")
    with pytest.raises(AdapterError) as err:
        pick(str(toy))
    assert "every line must read" in str(err.value) and "\n" not in str(err.value)
