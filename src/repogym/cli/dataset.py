"""``repogym dataset``: dataset-level files (registry.json, manifest.json, content hashes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from repogym.cli.app import app, new_group
from repogym.cli.common import (
    JsonOpt,
    LimitOpt,
    bad_input,
    task_dirs_or_exit,
    trusted_or_exit,
)
from repogym.ui import escape, escape_name, fail, out

dataset_app = new_group(help="Dataset-level files: registry.json, manifest.json, content hashes.")
app.add_typer(dataset_app, name="dataset")


@dataset_app.command("index")
def dataset_index(
    path: Annotated[Path, typer.Argument(help="The dataset folder.")],
    name: Annotated[str | None, typer.Option(help="Dataset name (default: folder name).")] = None,
    version: Annotated[str, typer.Option(help="Dataset version for registry.json.")] = "1.0",
    description: Annotated[str, typer.Option(help="Dataset description.")] = "",
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Write registry.json (Harbor's registry format) and manifest.json at the dataset root.

    Task paths in registry.json are absolute (Harbor reads them against the folder it runs
    in): index the dataset again after moving it.

    Exit 1 when some task cannot be read (left out of the index), 2 when two tasks share an id.
    """
    from repogym.taskdir import DuplicateIdError, check_unique_ids, discover
    from repogym.taskdir.dataset import harbor_run_lines, write_dataset_index

    trusted_or_exit(path, limit, quiet=True)
    found = discover(path)
    try:
        check_unique_ids([*found.tasks, *(p for p, _exc in found.invalid)])
    except DuplicateIdError as dup:
        raise bad_input(str(dup)) from None
    for bad_path, exc in found.invalid:
        fail(f"{bad_path.name}: {exc.file}: {exc} (left out of the index)")
    reg, man = write_dataset_index(
        path, found.tasks, name=name, version=version, description=description
    )
    lines = harbor_run_lines(path, reg)
    if json_out:
        payload = {
            "registry": str(reg),
            "manifest": str(man),
            "tasks": len(found.tasks),
            "invalid": len(found.invalid),
            "harbor_run": lines,
        }
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        out.print(f"wrote {reg} and {man} ({len(found.tasks)} tasks)")
        out.print("run it with Harbor (from any folder):")
        for line in lines:
            out.print(f"  {escape(line)}")
    raise typer.Exit(1 if found.invalid else 0)


@dataset_app.command("rehash")
def dataset_rehash(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    add: Annotated[
        bool, typer.Option("--add", help="Also give foreign tasks a [metadata.repo2env] hash.")
    ] = False,
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Recompute and store each task's content_hash (after an intended edit).

    Foreign tasks (no [metadata.repo2env] block) are left untouched unless --add is given.
    """
    from repogym.taskdir import TaskError, load_task, set_content_hash

    trusted_or_exit(path, limit, quiet=True)
    results: dict[str, str | None] = {}
    bad = 0
    for task_dir in task_dirs_or_exit(path):
        try:
            if load_task(task_dir).provenance is None and not add:
                results[task_dir.name] = None
                continue
            results[task_dir.name] = set_content_hash(task_dir)
        except TaskError as exc:
            bad += 1
            fail(f"{task_dir.name}: {exc.file}: {exc}")
    if json_out:
        sys.stdout.write(json.dumps(results, indent=2) + "\n")
    else:
        for task_id, digest in results.items():
            shown = digest or "skipped (foreign task: no [metadata.repo2env]; use --add)"
            out.print(f"{escape_name(task_id)}  {escape(shown)}")
    raise typer.Exit(1 if bad else 0)
