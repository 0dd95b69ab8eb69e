"""The Harbor folder adapter on the examples and on a generated-like dataset."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from repogym.explorer import withhold
from repogym.explorer.adapters import AdapterError, adapters, pick
from repogym.explorer.adapters.base import open_location
from repogym.explorer.adapters.harbor import HarborAdapter, HarborReader
from tests.conftest import write_task
from tests.explorer.conftest import GOLD


def _sections(doc) -> dict[str, object]:
    return {s.id: s for s in doc.sections}


def test_harbor_is_registered_and_picked_for_examples(examples_dataset: Path) -> None:
    assert "harbor" in [a.name for a in adapters()]
    adapter, reader = open_location(str(examples_dataset))
    assert adapter.name == "harbor"
    assert isinstance(reader, HarborReader)
    env = reader.env()
    assert env.id == "examples" and env.kind == "harbor"
    assert env.task_count == 2
    assert any("repogym run" in o["command"] for o in env.run_options)
    assert sorted(reader.task_ids()) == ["hello-file", "textstats-word-count"]


def recorded_hash(task: Path) -> str:
    """The content hash the task's own task.toml records (its alias)."""
    with open(task / "task.toml", "rb") as fh:
        return str(tomllib.load(fh)["metadata"]["repo2env"]["content_hash"])


def test_examples_task_sections_facets_and_aliases(examples_dataset: Path) -> None:
    reader = HarborAdapter().open(str(examples_dataset))
    doc = withhold.apply(reader.task("textstats-word-count"))
    assert doc.title.startswith("Fix word counting")
    assert doc.summary.startswith("textstats.wordcount should count")
    assert len(doc.summary) <= 300
    assert doc.facets["difficulty"] == "easy" and doc.facets["category"] == "bugfix"
    assert doc.facets["pipeline"] == "manual"
    assert doc.grading == "tests"
    assert doc.environment == "python:3.11-slim"
    assert doc.network == "no-network"
    assert doc.runnable is True
    assert doc.aliases == [recorded_hash(examples_dataset / "textstats-word-count")]
    secs = _sections(doc)
    assert list(secs)[:2] == ["instruction", "environment"]
    assert secs["dockerfile"].format == "code" and secs["dockerfile"].language == "dockerfile"
    assert "Fail-to-pass tests (must go from failing to passing): 2" in secs["grading"].body
    assert "Pass-to-pass tests (must keep passing): 3" in secs["grading"].body
    assert secs["config"].language == "toml"
    assert "hand-written example task" in secs["provenance"].body
    files = {f.path: f for f in doc.files}
    assert files["solution/patch.diff"].data is None
    assert files["solution/patch.diff"].withheld == "solution (the answer)"
    assert files["environment/repo/textstats/counts.py"].data
    assert any("solution/" in n for n in doc.withheld)


def test_hello_file_is_graded_by_a_reward_script(examples_dataset: Path) -> None:
    doc = HarborAdapter().open(str(examples_dataset)).task("hello-file")
    assert doc.grading == "reward-script"
    assert doc.facets["tags"] == "example, files"
    assert doc.aliases == [recorded_hash(examples_dataset / "hello-file")]


def test_generated_dataset(generated_dataset: Path) -> None:
    reader = pick(str(generated_dataset)).open(str(generated_dataset))
    env = reader.env()
    assert env.id == "acme-widgets"
    assert env.title == "Acme widgets"  # the dataset card heading
    assert env.summary == "Widget parser fixes mined from acme/widgets"
    assert env.description.startswith("---\nlicense")
    assert "not a real key" not in env.description  # answer-like keys masked in the card too
    assert env.task_count == 3
    ids = list(reader.task_ids())
    assert ids == ["acme__widgets-7", "acme__widgets-9", "acme__widgets-c0ffee"]
    doc = withhold.apply(reader.task("acme__widgets-c0ffee"))
    assert doc.facets["language"] == "python"
    assert doc.facets["pipeline"] == "commit_runtime"
    assert doc.facets["source"] == "acme/widgets"
    assert doc.grading == "tests"
    secs = _sections(doc)
    assert "Fail-to-pass tests (must go from failing to passing): 3" in secs["grading"].body
    assert "test patch is withheld" in secs["grading"].body
    files = {f.path: f for f in doc.files}
    assert files["tests/test.patch"].data is None
    assert files["tests/test.patch"].withheld == "hidden test patch (grader data)"
    assert files["tests/f2p.json"].data  # test ids are not answers
    for f in doc.files:
        assert f.data is None or GOLD.encode() not in f.data, f.path
    # [solution] in task.toml is answer-like: masked in the config section and in the file
    assert 'REPOGYM_WORKDIR = "«withheld»"' in secs["config"].body or (
        'solution = "«withheld»"' in secs["config"].body
    )


def test_docker_image_only_task_is_not_runnable(tmp_path: Path) -> None:
    toml = (
        'schema_version = "1.4"\n[task]\nname = "x/img"\n'
        '[environment]\ndocker_image = "ghcr.io/acme/env:1"\nnetwork_mode = "public"\n'
    )
    write_task(tmp_path / "ds", "img-task", toml=toml, dockerfile=None)
    doc = HarborAdapter().open(str(tmp_path / "ds")).task("img-task")
    assert doc.runnable is False
    assert doc.environment == "image ghcr.io/acme/env:1"
    assert doc.network == "public"
    assert "pulled where a registry serves it" in _sections(doc)["environment"].body


def test_text_only_task(tmp_path: Path) -> None:
    write_task(tmp_path / "ds", "text-task", dockerfile=None, test_sh=None)
    doc = HarborAdapter().open(str(tmp_path / "ds")).task("text-task")
    assert doc.environment == "text only"
    assert doc.grading == "unknown"
    assert doc.runnable is False


def test_nested_groups_level_by_level_and_duplicate_names(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    write_task(ds, "top")
    write_task(ds / "group-a", "same")
    write_task(ds / "group-b", "same")
    write_task(ds / "group-b" / "deeper", "deep")
    reader = HarborAdapter().open(str(ds))
    ids = list(reader.task_ids())
    assert ids[0] == "top"  # shallower levels first
    assert ids[-1] == "deep"
    assert "same" in ids and "group-b__same" in ids
    assert reader.task("group-b__same").id == "group-b__same"


def test_single_task_folder(tmp_path: Path) -> None:
    task = write_task(tmp_path, "solo")
    reader = HarborAdapter().open(str(task))
    assert list(reader.task_ids()) == ["solo"]
    assert reader.task("solo").title


def test_symlinks_are_listed_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("outside secret")
    task = write_task(tmp_path / "ds", "t")
    os.symlink(outside, task / "environment" / "link.txt")
    os.symlink(tmp_path, task / "environment" / "dirlink")
    doc = HarborAdapter().open(str(tmp_path / "ds")).task("t")
    files = {f.path: f for f in doc.files}
    assert files["environment/link.txt"].data is None
    assert files["environment/link.txt"].withheld == "symlink leaving the task, not followed"
    assert files["environment/dirlink"].data is None
    assert not any(p.startswith("environment/dirlink/") for p in files)


def test_large_files_are_listed_not_packed(tmp_path: Path) -> None:
    task = write_task(tmp_path / "ds", "big")
    (task / "environment" / "blob.bin").write_bytes(b"x" * (2 << 20))
    doc = HarborAdapter().open(str(tmp_path / "ds")).task("big")
    big = next(f for f in doc.files if f.path == "environment/blob.bin")
    assert big.data is None and big.size == 2 << 20 and "too large" in big.withheld


def test_not_a_dataset(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert HarborAdapter().detect(str(tmp_path / "empty")) == 0
    with pytest.raises(AdapterError, match="no explorer adapter"):
        pick(str(tmp_path / "empty"))
    with pytest.raises(AdapterError, match="no such folder"):
        HarborAdapter().open(str(tmp_path / "missing"))


def test_unreadable_task_is_an_adapter_error(tmp_path: Path) -> None:
    write_task(tmp_path / "ds", "bad", toml="this is = = not toml")
    write_task(tmp_path / "ds", "good")
    reader = HarborAdapter().open(str(tmp_path / "ds"))
    with pytest.raises(AdapterError, match="bad"):
        reader.task("bad")
    assert reader.task("good").id == "good"
