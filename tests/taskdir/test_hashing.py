"""content_hash: same bytes ⇒ same hash; metadata that describes the content does not count."""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repogym.taskdir import content_hash, load_task, set_content_hash
from repogym.taskdir.validate import validate_task
from tests.conftest import write_task


def test_independent_of_mtime_and_creation_order(tmp_path: Path) -> None:
    a = write_task(tmp_path / "x", "t", files={"tests/a.txt": "A", "tests/b.txt": "B"})
    b = tmp_path / "y" / "t"
    b.mkdir(parents=True)
    # Same files, created in reverse order, with other mtimes and modes.
    for rel in reversed(sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())):
        (b / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(a / rel, b / rel)
        os.utime(b / rel, (1, 1))
        os.chmod(b / rel, 0o755)
    assert content_hash(a) == content_hash(b)


def test_changes_with_bytes_and_names(tmp_path: Path) -> None:
    t = write_task(tmp_path, "t", files={"tests/a.txt": "A"})
    h0 = content_hash(t)
    (t / "tests" / "a.txt").write_text("B")
    h1 = content_hash(t)
    (t / "tests" / "a.txt").rename(t / "tests" / "c.txt")
    h2 = content_hash(t)
    assert len({h0, h1, h2}) == 3
    assert h0.startswith("sha256:") and len(h0) == len("sha256:") + 64


def test_hash_and_evaluation_are_not_content(tmp_path: Path) -> None:
    t = write_task(tmp_path, "t")
    (t / "task.toml").write_text("schema_version = '1.4'\n[metadata.repo2env]\npipeline = 'x'\n")
    digest = set_content_hash(t)
    text = (t / "task.toml").read_text()
    assert digest in text
    # Recording verification results leaves the hash valid.
    (t / "task.toml").write_text(
        text + "\n[metadata.repo2env.evaluation]\nstatus = 'verified'\noracle_runs = 3\n"
    )
    assert content_hash(t) == digest
    assert load_task(t).compute_hash() == digest
    # Any other edit of task.toml changes it.
    (t / "task.toml").write_text(text.replace('pipeline = "x"', 'pipeline = "y"'))
    assert content_hash(t) != digest


def test_symlink_enters_as_target(tmp_path: Path) -> None:
    t = write_task(tmp_path, "t", files={"tests/data.txt": "D"})
    (t / "tests" / "link").symlink_to("data.txt")
    h1 = content_hash(t)
    (t / "tests" / "link").unlink()
    (t / "tests" / "link").symlink_to("test.sh")
    assert content_hash(t) != h1


def test_set_content_hash_translates_legacy_first(tmp_path: Path) -> None:
    t = write_task(
        tmp_path,
        "t",
        toml="version = '1.0'\n[environment]\nmemory = '1G'\n[metadata.repo2env]\npipeline = 'p'\n",
    )
    digest = set_content_hash(t)
    data = tomllib.loads((t / "task.toml").read_text())
    assert "version" not in data and data["environment"]["memory_mb"] == 1024
    assert content_hash(t) == digest


@settings(max_examples=25, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z]{1,6}(/[a-z]{1,6}){0,2}", fullmatch=True),
        st.binary(max_size=64),
        min_size=1,
        max_size=6,
    )
)
def test_hash_is_a_function_of_content(files: dict[str, bytes]) -> None:
    import tempfile

    # Drop paths that are prefixes of others (a file cannot also be a folder).
    names = sorted(files)
    files = {n: files[n] for n in names if not any(m.startswith(n + "/") for m in names)}
    with tempfile.TemporaryDirectory() as d:
        roots = []
        for i, order in enumerate((sorted(files), sorted(files, reverse=True))):
            root = Path(d) / str(i)
            root.mkdir()
            for rel in order:
                (root / "x" / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / "x" / rel).write_bytes(files[rel])
            roots.append(root)
        assert content_hash(roots[0]) == content_hash(roots[1])


def test_results_only_block_is_not_content(tmp_path: Path) -> None:
    # A foreign task (no provenance) that `verify` gave an evaluation keeps its hash.
    t = write_task(tmp_path, "t")
    before = content_hash(t)
    (t / "task.toml").write_text(
        (t / "task.toml").read_text() + "\n[metadata.repo2env.evaluation]\nstatus = 'verified'\n"
    )
    assert content_hash(t) == before


def test_read_bytes_small_large_and_empty(tmp_path: Path) -> None:
    from repogym.taskdir.hashing import read_bytes

    for size in (0, 10, (1 << 16) - 1, 1 << 16, (1 << 16) + 1, 3_000_000):
        p = tmp_path / f"f{size}"
        data = os.urandom(size)
        p.write_bytes(data)
        assert read_bytes(str(p)) == data


@pytest.mark.parametrize("metadata", ["", "[metadata]\n", "[metadata.repo2env]\n"])
def test_recording_a_hash_into_a_task_without_metadata_matches_its_files(
    tmp_path: Path, metadata: str
) -> None:
    """A task with no (or an empty) ``[metadata]`` gets a ``[metadata.repo2env]`` block when its
    hash is recorded; the recorded hash is still the hash of its files afterwards."""
    task = tmp_path / "t"
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text("Do it.\n")
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (task / "task.toml").write_text(
        f'schema_version = "1.4"\n{metadata}\n[agent]\ntimeout_sec = 5.0\n'
    )
    recorded = set_content_hash(task)
    assert recorded == content_hash(task)
    assert not [p for p in validate_task(task).problems if "hash" in p.message.lower()]
