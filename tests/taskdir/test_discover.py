"""Discovery finds tasks by where task.toml lies, in any layout, and reports bad ones."""

from __future__ import annotations

from pathlib import Path

from repogym.taskdir import discover, iter_task_dirs
from tests.conftest import write_task


def test_layouts(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_task(root / "tasks", "a")  # tasks/<id>/
    write_task(root, "b")  # <id>/ at the root
    write_task(root / "group1" / "sub", "c")  # nested groups
    write_task(root / "group2", "d")
    (root / ".hidden").mkdir()
    write_task(root / ".hidden", "ignored")
    write_task(root / "node_modules", "ignored2")
    found = [p.name for p in iter_task_dirs(root)]
    assert sorted(found) == ["a", "b", "c", "d"]


def test_task_folder_itself(tmp_path: Path) -> None:
    t = write_task(tmp_path, "only")
    assert list(iter_task_dirs(t)) == [t]


def test_tasks_do_not_nest(tmp_path: Path) -> None:
    t = write_task(tmp_path / "ds", "outer")
    # A task.toml inside a task's files (e.g. fixture data) is not another task.
    write_task(t / "environment", "inner")
    assert [p.name for p in iter_task_dirs(tmp_path / "ds")] == ["outer"]


def test_invalid_reported_not_raised(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_task(root, "good")
    write_task(root, "bad", toml="this is = = not toml")
    result = discover(root)
    assert [t.id for t in result.tasks] == ["good"]
    assert len(result.invalid) == 1
    path, exc = result.invalid[0]
    assert path.name == "bad" and "invalid TOML" in str(exc)


def test_duplicate_ids_one_rule_for_every_command(tmp_path: Path) -> None:
    """Ids are folder names, unique across groups: the rule push, dataset index and validate
    share."""
    import pytest

    from repogym.hub.base import RegistryError, collect_tasks
    from repogym.taskdir import DuplicateIdError, check_unique_ids, duplicate_ids

    for group, name in (("a", "same"), ("b", "same"), ("b", "other")):
        write_task(tmp_path / group, name)
    tasks = discover(tmp_path).tasks
    assert duplicate_ids(tasks) == {"same": [tmp_path / "a/same", tmp_path / "b/same"]}
    assert duplicate_ids([t.path for t in tasks]) == duplicate_ids(tasks)
    with pytest.raises(DuplicateIdError, match="two tasks share the id 'same'"):
        check_unique_ids(tasks)
    with pytest.raises(RegistryError, match="two tasks share the id 'same'"):
        collect_tasks(tmp_path)
    check_unique_ids([t for t in tasks if t.path.parent.name == "b"])
