"""Row datasets (parquet / JSON Lines / JSON / CSV) read as environments through processors."""

from __future__ import annotations

import base64
import csv
import io
import json
import posixpath
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from repogym.explorer import withhold
from repogym.explorer.adapters import AdapterError, pick
from repogym.explorer.adapters._archive import (
    ArchiveLimits,
    ArchiveRejected,
    read_archive,
    safe_member_path,
)
from repogym.explorer.adapters.processors import (
    GenericProcessor,
    register_processor,
    unregister_processor,
)
from repogym.explorer.adapters.rows import RowsAdapter, RowsReader
from repogym.explorer.model import TaskDoc

SECRET = "SECRET-ANSWER-7f3a9"
GOLD = "GOLD-PATCH-MARKER-11d2"
HIDDEN = "HIDDEN-TEST-MARKER-e81c"


def swe_row(i: int) -> dict[str, Any]:
    return {
        "instance_id": f"acme__widgets-{100 + i}",
        "repo": "acme/widgets",
        "base_commit": "0123456789abcdef0123",
        "problem_statement": f"Widgets break when resized ({i}).\n\nSteps: resize a widget.",
        "patch": f"diff --git a/w.py b/w.py\n+fix = '{GOLD}'\n",
        "test_patch": f"diff --git a/test_w.py b/test_w.py\n+assert '{HIDDEN}'\n",
        "FAIL_TO_PASS": json.dumps(["tests/test_w.py::test_resize"]),
        "PASS_TO_PASS": json.dumps(["tests/test_w.py::test_draw"]),
        "hints_text": f"maybe the fix is {GOLD}",
        "version": "1.2",
        "created_at": "2024-01-02T03:04:05Z",
        "metadata": {"difficulty_notes": "medium", "gold_answer": SECRET},
    }


def qa_row(i: int) -> dict[str, Any]:
    return {
        "id": f"q{i}",
        "question": f"What is {i} + 40?",
        "choices": ["41", "42", "43"],
        "answer": f"{SECRET}-{i}",
        "category": "arithmetic",
        "difficulty": "easy",
    }


def text_of(doc: TaskDoc) -> str:
    """Everything a page or API could show of a task."""
    parts = [doc.id, doc.title, doc.summary, json.dumps(doc.facets), doc.environment]
    parts += [f"{s.title}\n{s.body}" for s in doc.sections]
    parts += [f.path + (f.data or b"").decode("utf-8", "replace") for f in doc.files]
    parts += doc.aliases + doc.withheld
    return "\n".join(parts)


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]], row_group_size: int = 2) -> Path:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


def read_all(location: Path) -> tuple[RowsReader, list[TaskDoc]]:
    reader = RowsAdapter().open(str(location))
    return reader, [reader.task(t) for t in reader.task_ids()]


# -- formats ----------------------------------------------------------------------------


def test_parquet_swe_bench_rows(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "swe-mini.parquet", [swe_row(i) for i in range(5)])
    assert pick(str(path)).name == "rows"
    reader, docs = read_all(path)
    env = reader.env()
    assert (env.id, env.kind, env.task_count) == ("swe-mini", "rows", 5)
    assert env.facets == {"format": "parquet", "processor": "swe-bench"}
    assert [d.id for d in docs] == [f"acme__widgets-{100 + i}" for i in range(5)]
    doc = reader.task("acme__widgets-103")  # random access in the second row group
    assert doc.title == "acme__widgets-103"
    assert doc.summary.startswith("Widgets break when resized (3).")
    assert doc.grading == "tests" and doc.environment == "acme/widgets@0123456789ab"
    assert doc.aliases == ["instance:acme__widgets-103"]
    ids = [s.id for s in doc.sections]
    assert ids[:3] == ["instruction", "environment", "grading"]
    grading = doc.sections[2].body
    assert "tests/test_w.py::test_resize" in grading and "tests/test_w.py::test_draw" in grading
    files = {f.path: f for f in doc.files}
    assert files["solution/patch.diff"].data is None
    assert files["solution/patch.diff"].withheld.startswith("solution")
    assert files["tests/test_patch.diff"].data is None
    assert "hidden tests" in files["tests/test_patch.diff"].withheld
    shown = text_of(withhold.apply(doc))
    assert GOLD not in shown and HIDDEN not in shown and SECRET not in shown
    assert any("'patch'" in n for n in doc.withheld)
    assert any("hints_text" in n for n in doc.withheld)
    assert any("metadata.gold_answer" in n for n in doc.withheld)


def test_jsonl_qa_rows_and_answers_withheld(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "arith.jsonl", [qa_row(i) for i in range(3)])
    reader, docs = read_all(path)
    assert reader.processor.name == "qa"
    assert [d.id for d in docs] == ["q0", "q1", "q2"]
    doc = docs[2]
    assert doc.title == "What is 2 + 40?"
    assert doc.grading == "exact-match" and doc.environment == "text only"
    assert doc.facets["category"] == "arithmetic" and doc.facets["difficulty"] == "easy"
    assert "**B** 42" in doc.sections[0].body
    for d in docs:
        assert SECRET not in text_of(d)
        assert SECRET not in text_of(withhold.apply(d))
        assert any("'answer'" in n for n in d.withheld)


def test_json_list_and_data_wrapper(tmp_path: Path) -> None:
    rows = [{"task_id": "HumanEval/0", "prompt": "def add(a, b):\n", "canonical_solution":
             f"    return a + b  # {SECRET}\n", "test": f"assert add(1, 2) == 3  # {HIDDEN}",
             "entry_point": "add"}]  # fmt: skip
    (tmp_path / "a.json").write_text(json.dumps(rows))
    (tmp_path / "b.json").write_text(json.dumps({"data": rows}))
    for name in ("a.json", "b.json"):
        reader, docs = read_all(tmp_path / name)
        assert reader.env().id == name[0]
        (doc,) = docs
        assert doc.id == "HumanEval_0"  # URL-safe
        assert doc.grading == "tests"
        assert "Entry point: `add`" in doc.sections[1].body
        assert any(f.path == "tests/test" and f.data is None for f in doc.files)
        shown = text_of(withhold.apply(doc))
        assert SECRET not in shown and HIDDEN not in shown


def test_csv_rows_without_id_column(tmp_path: Path) -> None:
    path = tmp_path / "prompts.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, ["instruction", "input", "output"])
        w.writeheader()
        w.writerow({"instruction": "Translate to French", "input": "cat", "output": SECRET})
        w.writerow({"instruction": "Translate to German", "input": "dog", "output": SECRET})
    reader, docs = read_all(path)
    assert [d.id for d in docs] == ["row-0", "row-1"]
    assert "row numbers" in reader.env().description
    assert docs[1].sections[0].body == "Translate to German"
    assert any(s.id == "context-input" and s.body == "dog" for s in docs[1].sections)
    assert all(SECRET not in text_of(d) for d in docs)


def test_non_utf8_csv_is_decoded_and_noted(tmp_path: Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes("id,question,answer\nq1,Qu'est-ce qu'un caf\xe9 ?,secret\n".encode("cp1252"))
    reader, docs = read_all(path)
    assert docs[0].sections[0].body == "Qu'est-ce qu'un café ?"
    assert "not UTF-8" in reader.env().description


def test_folder_of_row_files(tmp_path: Path) -> None:
    ds = tmp_path / "my-dataset"
    (ds / "data").mkdir(parents=True)
    write_jsonl(ds / "data" / "train.jsonl", [qa_row(i) for i in range(2)])
    write_jsonl(ds / "data" / "test.jsonl", [qa_row(i) for i in range(2, 4)])
    (ds / "data" / "dataset_info.json").write_text('{"features": {}}')
    (ds / "README.md").write_text(f"# My dataset\n\nArithmetic questions.\nanswer: {SECRET}\n")
    reader, docs = read_all(ds)
    env = reader.env()
    assert env.id == "my-dataset" and env.task_count == 4
    assert env.description.startswith("# My dataset")
    assert SECRET not in env.description
    assert sorted(d.id for d in docs) == ["q0", "q1", "q2", "q3"]


def test_duplicate_and_missing_ids_stay_unique(tmp_path: Path) -> None:
    rows = [{"id": "same", "question": "a?"}, {"id": "same", "question": "b?"},
            {"question": "c?"}, {"id": "../..", "question": "d?"}]  # fmt: skip
    reader, docs = read_all(write_jsonl(tmp_path / "d.jsonl", rows))
    ids = [d.id for d in docs]
    assert ids == ["same", "same-row-1", "row-2", "row-3"]
    assert [d.sections[0].body for d in docs] == ["a?", "b?", "c?", "d?"]


def test_generic_processor_shows_text_and_withholds_answer_like(tmp_path: Path) -> None:
    long = "A story about widgets. " * 10
    rows = [{"name": "widget story", "body": long, "gold": SECRET, "n": 3}]
    reader, (doc,) = read_all(write_jsonl(tmp_path / "stories.jsonl", rows))
    assert reader.processor.name == "generic"
    assert doc.title == "widget story"
    assert doc.sections[0].id == "instruction" and doc.sections[0].body == long
    assert '"n": 3' in doc.sections[-1].body
    assert SECRET not in text_of(doc)


def test_processor_registry_picks_surest_and_accepts_plugins(tmp_path: Path) -> None:
    class Riddles(GenericProcessor):
        name = "riddles"

        def match(self, row: Any) -> float:
            return 0.95 if "riddle" in row else 0.0

        def to_task(self, row: Any, task_id: str) -> TaskDoc:
            doc = super().to_task(row, task_id)
            doc.title = "Riddle: " + row["riddle"]
            return doc

    path = write_jsonl(tmp_path / "r.jsonl", [{"riddle": "what walks on four legs?",
                                                "question": "x", "answer": SECRET}])  # fmt: skip
    assert RowsAdapter().open(str(path)).processor.name == "qa"
    register_processor(Riddles())
    try:
        reader = RowsAdapter().open(str(path))
        assert reader.processor.name == "riddles"
        doc = reader.task("row-0")
        assert doc.title == "Riddle: what walks on four legs?"
        assert SECRET not in text_of(doc)
    finally:
        unregister_processor("riddles")


# -- malformed input --------------------------------------------------------------------


def test_bad_json_line_is_skipped_with_reason(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps(qa_row(0)) + "\n{not json\n" + "[1, 2]\n\n" + json.dumps(qa_row(1)) + "\n"
    )
    reader, docs = read_all(path)
    assert [d.id for d in docs] == ["q0", "q1"]
    assert len(reader.skipped) == 2
    assert "line 2: invalid JSON" in reader.skipped[0]
    assert "line 3: not a JSON object" in reader.skipped[1]
    assert "2 malformed row(s) skipped" in reader.env().description


def test_skipped_rows_are_in_the_index_errors(tmp_path: Path) -> None:
    from repogym.explorer.build import build_snapshot

    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(qa_row(0)) + "\n{not json\n" + json.dumps(qa_row(1)) + "\n")
    info = build_snapshot([str(path)], tmp_path / "out")
    assert info["tasks"] == 2
    assert len(info["errors"]) == 1
    assert (
        info["errors"][0].startswith("mixed: skipped ")
        and "line 2: invalid JSON" in (info["errors"][0])
    )


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("broken.json", "{oops", "invalid JSON"),
        ("scalar.json", "42", "expected a list of objects"),
        ("garbage.jsonl", "nope\nstill nope\n", "no readable row"),
        ("empty.jsonl", "", "no readable row"),
        ("fake.parquet", "not parquet at all", "not a readable parquet file"),
    ],
)
def test_unreadable_files_are_one_line_adapter_errors(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(AdapterError) as err:
        reader = RowsAdapter().open(str(path))
        list(reader.task_ids())
    assert message in str(err.value) and "\n" not in str(err.value)


def test_detect_scores(tmp_path: Path) -> None:
    a = RowsAdapter()
    write_jsonl(tmp_path / "x.jsonl", [qa_row(0)])
    (tmp_path / "notes.txt").write_text("hi")
    assert a.detect(str(tmp_path / "x.jsonl")) == 0.5
    assert a.detect(str(tmp_path)) == 0.4
    assert a.detect(str(tmp_path / "notes.txt")) == 0.0
    assert a.detect(str(tmp_path / "missing.jsonl")) == 0.0
    assert a.detect("http://127.0.0.1:1/") == 0.0


# -- archives in rows -------------------------------------------------------------------


def zip_bytes(members: dict[str, bytes], symlink: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo("link")
            info.external_attr = 0o120777 << 16
            zf.writestr(info, symlink)
    return buf.getvalue()


def tar_bytes(members: list[tarfile.TarInfo | tuple[str, bytes]], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tf.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size = len(m[1])
                tf.addfile(info, io.BytesIO(m[1]))
    return buf.getvalue()


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def archive_task(tmp_path: Path, value: Any, name: str = "arch.jsonl") -> TaskDoc:
    if isinstance(value, bytes):
        value = base64.b64encode(value).decode()
    path = write_jsonl(tmp_path / name, [{"id": "t1", "question": "Fix the repo.", "repo": value}])
    reader = RowsAdapter().open(str(path))
    return reader.task("t1")


def test_zip_archive_in_a_base64_column_becomes_files(tmp_path: Path) -> None:
    data = zip_bytes({"src/app.py": b"print('hi')\n", "solution/solve.sh": SECRET.encode()})
    doc = withhold.apply(archive_task(tmp_path, data))
    files = {f.path: f for f in doc.files}
    assert files["src/app.py"].data == b"print('hi')\n"
    assert files["solution/solve.sh"].data is None
    assert SECRET not in text_of(doc)


def test_tar_gz_archive_as_parquet_bytes_and_beside_the_rows(tmp_path: Path) -> None:
    data = tar_bytes([("README.md", b"# hello\n"), ("lib/x.py", b"x = 1\n")])
    write_parquet(tmp_path / "bin.parquet", [{"id": "t1", "question": "q", "files": data}])
    doc = RowsAdapter().open(str(tmp_path / "bin.parquet")).task("t1")
    assert {f.path: f.data for f in doc.files} == {
        "README.md": b"# hello\n",
        "lib/x.py": b"x = 1\n",
    }
    (tmp_path / "archives").mkdir()
    (tmp_path / "archives" / "t1.tar.gz").write_bytes(data)
    doc = archive_task(tmp_path, "archives/t1.tar.gz", "beside.jsonl")
    assert {f.path for f in doc.files} == {"README.md", "lib/x.py"}


def assert_rejected(doc: TaskDoc, reason: str) -> None:
    (f,) = doc.files
    assert f.data is None and f.withheld.startswith("archive rejected:")
    assert reason in f.withheld, f.withheld
    assert any(reason in n for n in doc.withheld)


def test_zip_bomb_is_rejected(tmp_path: Path) -> None:
    bomb = zip_bytes({"zeros.bin": b"\0" * (20 * 1024 * 1024)})  # ~20 KB compressed
    assert len(bomb) < 100_000
    assert_rejected(archive_task(tmp_path, bomb), "compression bomb")


def test_zip_bomb_with_lying_sizes_stops_at_the_budget() -> None:
    limits = ArchiveLimits(max_total_bytes=1024 * 1024, ratio_floor=10**12)
    bomb = bytearray(zip_bytes({"a.bin": b"\0" * (4 * 1024 * 1024)}))
    # forge the declared uncompressed size in both headers: 4 MiB -> 10 bytes
    bomb = bytes(bomb).replace((4 * 1024 * 1024).to_bytes(4, "little"), (10).to_bytes(4, "little"))
    with pytest.raises(ArchiveRejected):
        read_archive(bomb, limits)


def test_tar_gz_bomb_is_rejected_while_streaming(tmp_path: Path) -> None:
    bomb = tar_bytes([("zeros.bin", b"\0" * (30 * 1024 * 1024))])
    assert_rejected(archive_task(tmp_path, bomb), "compression bomb")


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        ("../../evil.sh", "escapes the task folder"),
        ("ok/../../evil.sh", "escapes the task folder"),
        ("/etc/cron.d/evil", "absolute path"),
        ("C:/evil.bat", "absolute path"),
        ("..\\evil.bat", "backslashes"),
    ],
)
@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_path_traversal_members_are_rejected(
    tmp_path: Path, member: str, reason: str, kind: str
) -> None:
    members = {"fine.txt": b"ok", member: b"pwned"}
    data = zip_bytes(members) if kind == "zip" else tar_bytes(list(members.items()), "w")
    doc = archive_task(tmp_path, data)
    assert_rejected(doc, reason)
    assert not (tmp_path.parent / "evil.sh").exists()
    assert "pwned" not in text_of(doc)


@pytest.mark.parametrize(
    "member",
    [
        link("passwd", "/etc/passwd"),
        link("up", "../../../etc/shadow"),
        link("hard", "/etc/passwd", tarfile.LNKTYPE),
    ],
)
def test_tar_links_are_rejected(tmp_path: Path, member: tarfile.TarInfo) -> None:
    doc = archive_task(tmp_path, tar_bytes([("a.txt", b"a"), member]))
    assert_rejected(doc, "is a link")
    assert "root:" not in text_of(doc)


def test_zip_symlink_and_device_members_are_rejected(tmp_path: Path) -> None:
    assert_rejected(archive_task(tmp_path, zip_bytes({}, symlink="/etc/passwd")), "symbolic link")
    dev = tarfile.TarInfo("dev/null")
    dev.type = tarfile.CHRTYPE
    assert_rejected(archive_task(tmp_path, tar_bytes([dev]), "dev.jsonl"), "not a regular file")


def test_member_count_cap(tmp_path: Path) -> None:
    many = zip_bytes({f"f{i}.txt": b"x" for i in range(2001)})
    assert_rejected(archive_task(tmp_path, many), "2001 members")


def test_archive_path_column_cannot_leave_the_dataset(tmp_path: Path) -> None:
    outside = tmp_path / "outside.zip"
    outside.write_bytes(zip_bytes({"stolen.txt": b"stolen"}))
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "sneaky.zip").symlink_to(outside)
    for i, ref in enumerate(["../outside.zip", str(outside), "sneaky.zip"]):
        doc = archive_task(ds, ref, f"p{i}.jsonl")
        assert_rejected(doc, "outside the dataset folder")
        assert "stolen" not in text_of(doc)


def test_answer_named_archive_column_is_withheld_unopened(tmp_path: Path) -> None:
    data = base64.b64encode(zip_bytes({"fix.py": SECRET.encode()})).decode()
    path = write_jsonl(tmp_path / "s.jsonl", [{"id": "t", "question": "q", "solution": data}])
    doc = RowsAdapter().open(str(path)).task("t")
    assert SECRET not in text_of(doc) and data not in text_of(doc)
    assert any("'solution'" in n for n in doc.withheld)


# -- streaming ---------------------------------------------------------------------------


def test_large_jsonl_lists_ids_without_keeping_rows(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("w") as fh:
        for i in range(5000):
            fh.write(json.dumps({"id": f"t{i}", "question": f"q{i} " + "x" * 200}) + "\n")
    reader = RowsAdapter().open(str(path))
    ids = list(reader.task_ids())
    assert len(ids) == 5000 and ids[4999] == "t4999"
    assert reader.task("t4321").sections[0].body.startswith("q4321 ")
    assert reader.task("t7").sections[0].body.startswith("q7 ")


def test_parquet_listing_reads_only_the_id_column(tmp_path: Path) -> None:
    rows = [{"id": f"t{i}", "question": f"q{i}", "blob": b"\0" * 10} for i in range(10)]
    path = write_parquet(tmp_path / "p.parquet", rows, row_group_size=3)
    reader = RowsAdapter().open(str(path))
    calls: list[Any] = []
    pf = reader.files[0]._parquet()
    real = pf.read_row_group

    def spy(i: int, columns: Any = None, **kw: Any) -> Any:
        calls.append(columns)
        return real(i, columns=columns, **kw)

    pf.read_row_group = spy  # type: ignore[method-assign]
    assert list(reader.task_ids()) == [f"t{i}" for i in range(10)]
    assert calls == [["id"]] * 4
    assert reader.task("t9").sections[0].body == "q9"


# -- through the store -------------------------------------------------------------------


def test_row_datasets_through_a_snapshot_keep_answers_out(tmp_path: Path) -> None:
    from repogym.explorer.build import build_snapshot
    from repogym.explorer.store import Withheld, open_store

    src = tmp_path / "src"
    src.mkdir()
    write_parquet(src / "swe-mini.parquet", [swe_row(i) for i in range(3)])
    write_jsonl(src / "arith.jsonl", [qa_row(i) for i in range(3)])
    rows = [{"id": "z1", "question": "Unzip me", "files": base64.b64encode(
        zip_bytes({"a.txt": b"alpha", "solution/fix.txt": SECRET.encode()})).decode()}]  # fmt: skip
    write_jsonl(src / "zipped.jsonl", rows)
    out = tmp_path / "snap"
    result = build_snapshot(
        [str(src / "swe-mini.parquet"), str(src / "arith.jsonl"), str(src / "zipped.jsonl")], out
    )
    assert (result["envs"], result["tasks"]) == (3, 7)
    store = open_store(snapshot=out)
    try:
        assert store.search(kind="rows")["total"] == 3
        hits = store.search_tasks("resized", env="swe-mini")
        assert hits["total"] == 3
        page = store.task("swe-mini", "acme__widgets-101")
        assert page is not None and page["grading"] == "tests"
        assert store.task("zipped", "z1") is not None
        assert store.file("zipped", "z1", "a.txt") == b"alpha"
        for env_id, tid, path in [("zipped", "z1", "solution/fix.txt"),
                                  ("swe-mini", "acme__widgets-101", "solution/patch.diff"),
                                  ("swe-mini", "acme__widgets-101", "tests/test_patch.diff")]:  # fmt: skip
            with pytest.raises(Withheld):
                store.file(env_id, tid, path)
        dumped = json.dumps(
            [store.task(e["env"], e["id"]) for e in store.search_tasks(size=50)["items"]]
            + [store.env(i) for i in ("swe-mini", "arith", "zipped")]
        )
        for mark in (SECRET, GOLD, HIDDEN):
            assert mark not in dumped
            assert store.search(mark)["total"] == 0
            assert store.search_tasks(mark)["total"] == 0
    finally:
        close = getattr(store, "close", None)
        if close:
            close()


def test_one_unreadable_file_of_a_folder_is_skipped_not_fatal(tmp_path: Path) -> None:
    ds = tmp_path / "mixed"
    ds.mkdir()
    (ds / "a-meta.json").write_text('{"version": 3}')
    write_jsonl(ds / "b.jsonl", [qa_row(0), qa_row(1)])
    (ds / "c.json").write_text("{oops")
    reader, docs = read_all(ds)
    assert [d.id for d in docs] == ["q0", "q1"]
    assert any("a-meta.json: file skipped" in s for s in reader.skipped)
    assert any("c.json: file skipped" in s and "invalid JSON" in s for s in reader.skipped)


def test_folder_detection_is_shallow_and_defers_to_harbor(tmp_path: Path) -> None:
    harbor = tmp_path / "harbor-set"
    (harbor / "t1").mkdir(parents=True)
    (harbor / "t1" / "task.toml").write_text('schema_version = "1.4"\n')
    (harbor / "t1" / "data.jsonl").write_text(json.dumps(qa_row(0)) + "\n")
    assert RowsAdapter().detect(str(harbor)) == 0.0
    nested = tmp_path / "hf-layout"
    (nested / "data").mkdir(parents=True)
    write_jsonl(nested / "data" / "train.jsonl", [qa_row(0)])
    assert RowsAdapter().detect(str(nested)) == 0.4
    assert RowsAdapter().detect(str(tmp_path / "empty-dir-missing")) == 0.0


def test_chat_prompt_rows_rl_style(tmp_path: Path) -> None:
    rows = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "system", "content": "Think step by step."},
                       {"role": "user", "content": "Tom has 3 apples and buys 4. How many?"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": SECRET},
            "extra_info": {"split": "train", "index": 0, "answer": SECRET},
        }
    ]  # fmt: skip
    reader, (doc,) = read_all(write_parquet(tmp_path / "gsm8k-rl.parquet", rows))
    assert reader.processor.name == "qa"
    assert "**user**\n\nTom has 3 apples" in doc.sections[0].body
    assert "**system**\n\nThink step by step." in doc.sections[0].body
    assert doc.grading == "exact-match"
    assert doc.facets["category"] == "math" and doc.facets["source"] == "openai/gsm8k"
    assert '"split": "train"' in doc.sections[-1].body
    assert SECRET not in text_of(doc) and SECRET not in text_of(withhold.apply(doc))


def test_sharegpt_conversation_final_assistant_turn_is_withheld(tmp_path: Path) -> None:
    rows = [{"id": "c1", "conversations": [{"from": "human", "value": "Name a prime."},
                                           {"from": "gpt", "value": SECRET}]}]  # fmt: skip
    _reader, (doc,) = read_all(write_jsonl(tmp_path / "chat.jsonl", rows))
    assert doc.sections[0].body == "Name a prime."
    assert doc.title == "Name a prime."
    assert any("final assistant turn" in n for n in doc.withheld)
    assert SECRET not in text_of(doc)


@given(st.text(alphabet=st.sampled_from(list("ab./\\:C\x00 ")), max_size=24))
def test_safe_member_path_only_returns_paths_inside_the_task(name: str) -> None:
    try:
        path = safe_member_path(name)
    except ArchiveRejected:
        return
    parts = path.split("/")
    assert path and not path.startswith("/") and "\\" not in path and "\x00" not in path
    assert ".." not in parts and "." not in parts and "" not in parts
    assert not re.match(r"^[A-Za-z]:", path)
    assert posixpath.normpath(path) == path


def test_row_task_pages_in_the_web_app(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from repogym.explorer.store import open_store
    from repogym.explorer.web import create_app

    files = zip_bytes({"src/app.py": b"print('hi')\n", "solution/fix.txt": SECRET.encode()})
    rows = [{**swe_row(0), "files": base64.b64encode(files).decode()}]
    path = write_jsonl(tmp_path / "swe-web.jsonl", rows)
    store = open_store([str(path)])
    try:
        client = TestClient(create_app(store))
        page = client.get("/t/swe-web/acme__widgets-100")
        assert page.status_code == 200
        assert "Widgets break when resized (0)." in page.text
        assert "tests/test_w.py::test_resize" in page.text
        assert client.get("/api/files/swe-web/acme__widgets-100/src/app.py").content == (
            b"print('hi')\n"
        )
        for withheld in ("solution/fix.txt", "solution/patch.diff", "tests/test_patch.diff"):
            r = client.get(f"/api/files/swe-web/acme__widgets-100/{withheld}")
            assert r.status_code != 200
        api = client.get("/api/tasks/swe-web/acme__widgets-100").text
        for text in (page.text, api):
            for mark in (SECRET, GOLD, HIDDEN):
                assert mark not in text
    finally:
        close = getattr(store, "close", None)
        if close:
            close()


def test_unchanged_row_dataset_is_not_read_again(tmp_path: Path) -> None:
    from repogym.explorer.build import build_snapshot

    ds = tmp_path / "qa-set"
    ds.mkdir()
    rows = ds / "data.jsonl"
    rows.write_text("".join(json.dumps(qa_row(i)) + "\n" for i in range(3)))
    out = tmp_path / "out"
    first = build_snapshot([str(ds)], out)
    assert first["tasks"] == 3 and first["pages_new"] == 3
    again = build_snapshot([str(ds)], out)
    assert again["pages_reused"] == 3 and again["pages_new"] == 0
    with rows.open("a") as fh:  # any change to the folder: its rows are read again
        fh.write(json.dumps(qa_row(3)) + "\n")
    changed = build_snapshot([str(ds)], out)
    assert changed["tasks"] == 4 and changed["pages_reused"] == 0 and changed["pages_new"] == 4


def test_big_row_folders_are_not_fingerprinted(tmp_path: Path, monkeypatch) -> None:
    from repogym.explorer.adapters import rows as rows_mod

    ds = tmp_path / "many"
    ds.mkdir()
    (ds / "data.jsonl").write_text(json.dumps(qa_row(0)) + "\n")
    for i in range(5):
        (ds / f"extra-{i}.txt").write_text("x")
    monkeypatch.setattr(rows_mod, "FINGERPRINT_MAX_FILES", 3)
    reader = rows_mod.RowsAdapter().open(str(ds))
    assert reader.fingerprint(next(iter(reader.task_ids()))) is None
