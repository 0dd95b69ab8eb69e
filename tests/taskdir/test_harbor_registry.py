"""registry.json as Harbor reads it (absolute local paths, names without ``/``), and the
``harbor run`` lines printed for a dataset (run for real in
``tests/integrations/test_harbor_versions.py``)."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.taskdir import discover
from repogym.taskdir.dataset import (
    HARBOR_PLUGIN,
    build_registry,
    harbor_name,
    harbor_run_lines,
    harbor_tasks_folder,
    rebase_registry,
    write_dataset_index,
)
from tests.conftest import EXAMPLES

cli = CliRunner()
IDS = ["hello-file", "textstats-word-count"]


def _layout(tmp_path: Path) -> Path:
    """repogym's layout: ``<root>/tasks/<id>/``."""
    root = tmp_path / "ds"
    shutil.copytree(EXAMPLES, root / "tasks")
    return root


def test_local_paths_are_absolute_and_names_have_no_slash(tmp_path: Path) -> None:
    root = _layout(tmp_path)
    tasks = discover(root).tasks
    (entry,) = build_registry(tasks, root, name="acme/ex")
    assert entry["name"] == "acme__ex" == harbor_name("acme/ex")
    assert [t["path"] for t in entry["tasks"]] == [
        (root.resolve() / "tasks" / i).as_posix() for i in IDS
    ]
    # Staged, then renamed: the paths name the final place.
    (moved,) = build_registry(tasks, root, name="x", final_root=tmp_path / "final")
    assert moved["tasks"][0]["path"] == (tmp_path / "final" / "tasks" / IDS[0]).as_posix()
    # Git tasks keep their path in the repository.
    (git,) = build_registry(tasks, root, name="x", git_url="https://h/r", git_commit_id="c")
    assert [t["path"] for t in git["tasks"]] == [f"tasks/{i}" for i in IDS]


def test_the_folder_harbor_takes_with_p(tmp_path: Path) -> None:
    root = _layout(tmp_path)
    write_dataset_index(root, discover(root).tasks)
    assert harbor_tasks_folder(root) == root.resolve() / "tasks"
    assert harbor_tasks_folder(root / "tasks") == root.resolve() / "tasks"
    assert harbor_tasks_folder(root / "tasks" / IDS[0]) == root.resolve() / "tasks" / IDS[0]
    (tmp_path / "empty").mkdir()
    assert harbor_tasks_folder(tmp_path / "empty") is None
    assert harbor_run_lines(tmp_path / "empty") == []


def test_run_lines_of_an_index(tmp_path: Path) -> None:
    root = _layout(tmp_path)
    res = cli.invoke(app, ["dataset", "index", str(root), "--name", "acme/ex", "--json"])
    assert res.exit_code == 0, res.output
    lines = json.loads(res.stdout)["harbor_run"]
    tail = f"-a oracle -e {HARBOR_PLUGIN}"
    assert lines == [
        f"harbor run -p {root.resolve() / 'tasks'} {tail}",
        f"harbor run --registry-path {root.resolve() / 'registry.json'} -d acme__ex@1.0 {tail}",
    ]
    res = cli.invoke(app, ["dataset", "index", str(root)])
    assert res.exit_code == 0 and lines[0] in res.stdout, res.output
    # An unreadable registry.json: only the folder line.
    (root / "registry.json").write_text("{")
    assert harbor_run_lines(root) == lines[:1]


def test_pull_points_the_registry_at_the_pulled_tasks(tmp_path: Path) -> None:
    reg = f"file://{tmp_path / 'registry'}"
    res = cli.invoke(app, ["push", str(EXAMPLES), "acme/ex", "--registry", reg, "--json"])
    assert res.exit_code == 0, res.output
    pushed = json.loads(res.stdout)
    revision_dir = Path(pushed["location"])
    (entry,) = json.loads((revision_dir / "registry.json").read_text())
    assert entry["name"] == "acme__ex" and entry["version"] == pushed["revision"]
    assert [t["path"] for t in entry["tasks"]] == [
        (revision_dir.resolve() / "tasks" / i).as_posix() for i in IDS
    ]
    assert pushed["harbor_run"][0].startswith(f"harbor run -p {revision_dir.resolve()}/tasks ")
    res = cli.invoke(app, ["pull", "acme/ex", str(tmp_path / "got"), "--registry", reg])
    assert res.exit_code == 0, res.output
    assert f"harbor run -p {(tmp_path / 'got').resolve() / 'tasks'} " in res.stdout
    (got,) = json.loads((tmp_path / "got" / "registry.json").read_text())
    assert [t["path"] for t in got["tasks"]] == [
        ((tmp_path / "got").resolve() / "tasks" / i).as_posix() for i in IDS
    ]


def test_rebase_leaves_foreign_paths_and_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "registry.json"
    registry = [
        {
            "name": "d",
            "version": "1",
            "tasks": [
                {"name": "a", "path": "/old/tasks/a"},
                {"name": "b", "path": "/elsewhere/b"},
                {"name": "c", "path": "tasks/c", "git_url": "https://h/r"},
            ],
        }
    ]
    path.write_text(json.dumps(registry))
    rebase_registry(path, Path("/old"), Path("/new"))
    paths = [t["path"] for t in json.loads(path.read_text())[0]["tasks"]]
    assert paths == ["/new/tasks/a", "/elsewhere/b", "tasks/c"]
    path.write_text("not json")
    rebase_registry(path, Path("/old"), Path("/new"))
    assert path.read_text() == "not json"


def test_a_hub_push_names_the_pull_and_the_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On a hosted registry Harbor would clone the tasks from their git_url: push prints the
    pull that brings them here and the ``-p`` line for the copy; both are run."""
    from tests.hub.stub_hf import serve_hub
    from tests.hub.test_hf_registry import ALICE

    with serve_hub({ALICE: "alice"}) as (url, _state):
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setenv("HF_TOKEN", ALICE)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.delenv("HF_TOKEN_PATH", raising=False)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        res = cli.invoke(app, ["push", str(EXAMPLES), "alice/ds"])
        assert res.exit_code == 0, res.output
        hint = res.stdout.split("run it with Harbor: ", 1)[1]
        pull_line, run_line = (part.strip() for part in hint.split(", then "))
        assert run_line == f"harbor run -p DIR/tasks -a oracle -e {HARBOR_PLUGIN}"
        dest = tmp_path / "got"
        argv = shlex.split(pull_line.replace(" DIR ", f" {dest} "))
        assert argv[:2] == ["repogym", "pull"], argv
        res = cli.invoke(app, argv[1:])
        assert res.exit_code == 0, res.output
    assert harbor_tasks_folder(dest) == dest.resolve() / "tasks"
    assert sorted(p.name for p in (dest / "tasks").iterdir()) == IDS


def test_the_published_name_stays_the_datasets_title(tmp_path: Path) -> None:
    """registry.json holds Harbor's form of an ``owner/name``; the manifest keeps the name as
    given, and the explorer titles the dataset by it."""
    from repogym.explorer.adapters.harbor import HarborAdapter

    root = _layout(tmp_path)
    write_dataset_index(root, discover(root).tasks, name="acme/widgets")
    assert json.loads((root / "registry.json").read_text())[0]["name"] == "acme__widgets"
    assert json.loads((root / "manifest.json").read_text())["name"] == "acme/widgets"
    assert HarborAdapter().open(str(root)).env().title == "acme/widgets"
