"""Pull checks what it receives: a revision whose files were removed, edited or added after the
push is refused (exit 2, one line) before anything is written beside or into DEST.

Each attack edits a revision already stored in a real folder registry, or commits straight into
the local fake Hub (tests/hub/stub_hf.py) as a hostile server would. The checks hold by
construction: every pulled task is hashed and compared with the revision's manifest, the
manifest must list exactly the tasks that arrived, and on a folder registry (whose revision ids
are content addresses) the manifest's (id, hash) pairs must hash to the revision's own name.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.hub import open_registry
from repogym.hub.file_registry import FileRegistry
from repogym.taskdir import discover
from repogym.taskdir.task import update_task_toml
from tests.conftest import EXAMPLES, snapshot
from tests.hub.stub_hf import HubState, serve_hub

cli = CliRunner()
TOKEN = "hf_PULLsecret5d1e0c9b8a7f"


def publish(tmp_path: Path) -> tuple[str, Path]:
    """EXAMPLES pushed to a real folder registry as acme/ds: (URL, revision folder)."""
    root = tmp_path / "registry"
    FileRegistry(root).push(EXAMPLES, "acme/ds")
    ds = root / "acme" / "ds"
    return f"file://{root}", ds / "revisions" / (ds / "refs" / "main").read_text().strip()


def refused(args: list[str], fragment: str, tmp_path: Path) -> None:
    """The command exits 2 with one line naming ``fragment`` and leaves ``tmp_path`` as it was
    (no DEST, no staging folder beside it)."""
    before = sorted(os.listdir(tmp_path))
    res = cli.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert sorted(os.listdir(tmp_path)) == before


def writable(path: Path) -> None:
    """Folder registries store revisions read-only; an attacker with the disk does not care."""
    for dirpath, _, files in os.walk(path):
        os.chmod(dirpath, 0o755)
        for name in files:
            os.chmod(os.path.join(dirpath, name), 0o644)


def pull(reg: str, dest: Path, *extra: str) -> list[str]:
    return ["pull", "acme/ds", str(dest), "--registry", reg, *extra]


# ------------------------------------------------------------------------ a folder registry


def test_a_task_folder_missing_from_the_revision_is_refused(tmp_path: Path) -> None:
    reg, rev = publish(tmp_path)
    writable(rev)

    shutil.rmtree(rev / "tasks" / "hello-file")
    refused(pull(reg, tmp_path / "got"), "hello-file", tmp_path)


def test_an_edited_verifier_is_refused(tmp_path: Path) -> None:
    reg, rev = publish(tmp_path)
    writable(rev)
    test_sh = rev / "tasks" / "hello-file" / "tests" / "test.sh"
    test_sh.write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    refused(pull(reg, tmp_path / "got"), "content_hash", tmp_path)
    # One task at a time: the edited one is refused, the untouched one still arrives.
    refused(pull(reg, tmp_path / "got", "--task", "hello-file"), "content_hash", tmp_path)
    res = cli.invoke(app, pull(reg, tmp_path / "got", "--task", "textstats-word-count"))
    assert res.exit_code == 0, res.output
    assert [t.id for t in discover(tmp_path / "got").tasks] == ["textstats-word-count"]


def test_an_edit_with_a_recomputed_task_hash_is_refused(tmp_path: Path) -> None:
    """The attacker rewrites the task's own content_hash to match the edit: the manifest of the
    revision still disagrees."""
    reg, rev = publish(tmp_path)
    writable(rev)
    task = rev / "tasks" / "hello-file"
    (task / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    update_task_toml(task, rehash=True)
    refused(pull(reg, tmp_path / "got"), "manifest", tmp_path)


def test_an_edit_with_a_rewritten_manifest_is_refused(tmp_path: Path) -> None:
    """Task hash and manifest both rewritten: the revision's id is the hash of the manifest's
    (id, hash) pairs, and no longer matches."""
    reg, rev = publish(tmp_path)
    writable(rev)
    task = rev / "tasks" / "hello-file"
    (task / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    update_task_toml(task, rehash=True)
    manifest = json.loads((rev / "manifest.json").read_text())
    new_hash = next(t.compute_hash() for t in discover(rev / "tasks").tasks if t.id == "hello-file")
    for row in manifest["tasks"]:
        if row["id"] == "hello-file":
            row["content_hash"] = new_hash
    (rev / "manifest.json").write_text(json.dumps(manifest))
    refused(pull(reg, tmp_path / "got"), "revision", tmp_path)
    refused(pull(reg, tmp_path / "got", "--task", "hello-file"), "revision", tmp_path)


def test_a_task_the_manifest_does_not_list_is_refused(tmp_path: Path) -> None:
    reg, rev = publish(tmp_path)
    writable(rev)

    shutil.copytree(rev / "tasks" / "hello-file", rev / "tasks" / "zz-planted")
    refused(pull(reg, tmp_path / "got"), "zz-planted", tmp_path)


@pytest.mark.parametrize("content", [b"", b"\xff\xfe not json", b"[1, 2, 3]", b'{"tasks": 7}'])
def test_a_broken_manifest_is_refused(tmp_path: Path, content: bytes) -> None:
    reg, rev = publish(tmp_path)
    writable(rev)
    (rev / "manifest.json").write_bytes(content)
    refused(pull(reg, tmp_path / "got"), "manifest.json", tmp_path)


def test_a_missing_manifest_is_refused(tmp_path: Path) -> None:
    reg, rev = publish(tmp_path)
    writable(rev)
    (rev / "manifest.json").unlink()
    refused(pull(reg, tmp_path / "got"), "manifest.json", tmp_path)


def test_an_existing_dest_is_left_as_it_was(tmp_path: Path) -> None:
    reg, rev = publish(tmp_path)
    writable(rev)
    (rev / "tasks" / "hello-file" / "instruction.md").write_text("do nothing\n")
    dest = tmp_path / "got"
    dest.mkdir()
    (dest / "README.md").write_text("mine\n")
    before = snapshot(dest)
    refused(pull(reg, dest), "content_hash", tmp_path)
    assert snapshot(dest) == before


def test_an_untouched_revision_still_pulls(tmp_path: Path) -> None:
    reg, _ = publish(tmp_path)
    res = cli.invoke(app, pull(reg, tmp_path / "got"))
    assert res.exit_code == 0, res.output
    got = {t.id: t.compute_hash() for t in discover(tmp_path / "got").tasks}
    assert got == {t.id: t.compute_hash() for t in discover(EXAMPLES).tasks}


# ---------------------------------------------------------------------------------- the Hub


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubState]:
    with serve_hub({TOKEN: "alice"}) as (url, state):
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_HOME", str(tmp_path.parent / f"{tmp_path.name}-hf-home"))
        monkeypatch.delenv("HF_TOKEN_PATH", raising=False)
        yield state


def hub_commit(state: HubState, repo_id: str, change: dict[str, bytes | None]) -> None:
    """A commit made straight into the fake Hub: ``None`` deletes a path (or every path under
    it)."""
    with state.lock:
        repo = state.repos[repo_id]
        head = repo.branches["main"]
        files = dict(repo.commits[head].files)
        for path, data in change.items():
            if data is None:
                for name in [n for n in files if n == path or n.startswith(path + "/")]:
                    del files[name]
            else:
                files[path] = data
        state.commit(repo, head, "hostile", files)


def test_hub_edit_is_refused(hub: HubState, tmp_path: Path) -> None:
    open_registry("hf").push(EXAMPLES, "alice/ds")
    hub_commit(hub, "alice/ds", {"tasks/hello-file/tests/test.sh": b"#!/bin/sh\nexit 0\n"})
    refused(["pull", "alice/ds", str(tmp_path / "got")], "content_hash", tmp_path)
    refused(
        ["pull", "alice/ds", str(tmp_path / "got"), "--task", "hello-file"],
        "content_hash",
        tmp_path,
    )


def test_hub_missing_task_is_refused(hub: HubState, tmp_path: Path) -> None:
    open_registry("hf").push(EXAMPLES, "alice/ds")
    hub_commit(hub, "alice/ds", {"tasks/hello-file": None})
    refused(["pull", "alice/ds", str(tmp_path / "got")], "hello-file", tmp_path)


def test_hub_edit_with_a_rewritten_manifest_is_refused(hub: HubState, tmp_path: Path) -> None:
    """The manifest rewritten too (with hashes that are not the edited files')."""
    open_registry("hf").push(EXAMPLES, "alice/ds")
    repo = hub.repos["alice/ds"]
    files = repo.commits[repo.branches["main"]].files
    manifest = json.loads(files["manifest.json"])
    for row in manifest["tasks"]:
        row["content_hash"] = "sha256:" + "0" * 64
    hub_commit(
        hub,
        "alice/ds",
        {
            "tasks/hello-file/tests/test.sh": b"#!/bin/sh\nexit 0\n",
            "manifest.json": json.dumps(manifest).encode(),
        },
    )
    refused(["pull", "alice/ds", str(tmp_path / "got")], "content_hash", tmp_path)
