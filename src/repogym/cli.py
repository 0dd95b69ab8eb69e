"""The ``repogym`` command line. Thin: parses flags and calls the layers below."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from repogym import __version__
from repogym.ui import fail, out, track

app = typer.Typer(
    name="repogym",
    help="Turn source repositories into verifiable RL environments for coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
dataset_app = typer.Typer(help="Dataset-level files: registry.json, manifest.json, content hashes.")
app.add_typer(dataset_app, name="dataset")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def _version(value: bool) -> None:
    if value:
        out.print(f"repogym {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """repogym: generate, verify, run, serve, publish and explore RL tasks from repositories."""


def _task_dirs_or_exit(path: Path) -> list[Path]:
    from repogym.harbor import iter_task_dirs

    if not path.exists():
        fail(f"{path}: no such file or directory")
        raise typer.Exit(2)
    if path.is_file():
        path = path.parent if path.name == "task.toml" else path
    dirs = list(iter_task_dirs(path))
    if not dirs:
        fail(f"{path}: no task.toml found (a task is a folder holding task.toml)")
        raise typer.Exit(2)
    return dirs


@app.command()
def validate(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    deep: Annotated[
        bool, typer.Option("--deep", help="Also compile verifier scripts, parse patches and JSON.")
    ] = False,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", help="Worker processes (0 = one per core).")
    ] = 0,
    json_out: JsonOpt = False,
) -> None:
    """Static checks of task directories. Exit 1 if any task fails, 2 for unusable input."""
    from repogym.harbor.validate import validate_many

    dirs = _task_dirs_or_exit(path)
    jobs = jobs or (os.cpu_count() or 1)
    reports = list(
        track(
            validate_many(dirs, deep=deep, jobs=jobs), "validating", len(dirs), enabled=not json_out
        )
    )
    failed = [r for r in reports if not r.ok]
    n_warn = sum(len(r.warnings) for r in reports)
    if json_out:
        payload = {
            "path": str(path),
            "summary": {
                "tasks": len(reports),
                "valid": len(reports) - len(failed),
                "invalid": len(failed),
                "warnings": n_warn,
            },
            "tasks": [r.to_json() for r in reports],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        raise typer.Exit(1 if failed else 0)
    by_check: Counter[str] = Counter()
    for report in reports:
        for p in report.problems:
            by_check[f"{p.severity}:{p.check}"] += 1
            colour = "red" if p.severity == "error" else "yellow"
            label = "ERROR" if p.severity == "error" else "warn "
            where = f"{escape(report.task_id)}: {escape(p.file)}"
            out.print(f"[{colour}]{label}[/] {where}: {escape(p.message)}")
    table = Table(title=f"validate {escape(str(path))}", title_justify="left")
    table.add_column("tasks", justify="right")
    table.add_column("valid", justify="right", style="green")
    table.add_column("invalid", justify="right", style="red")
    table.add_column("warnings", justify="right", style="yellow")
    table.add_row(str(len(reports)), str(len(reports) - len(failed)), str(len(failed)), str(n_warn))
    out.print(table)
    if by_check:
        checks = Table(title="problems by check", title_justify="left")
        checks.add_column("severity")
        checks.add_column("check")
        checks.add_column("count", justify="right")
        for key, count in sorted(by_check.items()):
            severity, check = key.split(":", 1)
            checks.add_row(severity, check, str(count))
        out.print(checks)
    raise typer.Exit(1 if failed else 0)


@dataset_app.command("index")
def dataset_index(
    path: Annotated[Path, typer.Argument(help="The dataset folder.")],
    name: Annotated[str | None, typer.Option(help="Dataset name (default: folder name).")] = None,
    version: Annotated[str, typer.Option(help="Dataset version for registry.json.")] = "1.0",
    description: Annotated[str, typer.Option(help="Dataset description.")] = "",
    json_out: JsonOpt = False,
) -> None:
    """Write registry.json (Harbor's registry format) and manifest.json at the dataset root."""
    from repogym.harbor import discover
    from repogym.harbor.dataset import write_dataset_index

    _task_dirs_or_exit(path)
    found = discover(path)
    for bad_path, exc in found.invalid:
        fail(f"{bad_path.name}: {exc.file}: {exc} (left out of the index)")
    reg, man = write_dataset_index(
        path, found.tasks, name=name, version=version, description=description
    )
    if json_out:
        payload = {
            "registry": str(reg),
            "manifest": str(man),
            "tasks": len(found.tasks),
            "invalid": len(found.invalid),
        }
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        out.print(f"wrote {reg} and {man} ({len(found.tasks)} tasks)")
    raise typer.Exit(1 if found.invalid else 0)


@dataset_app.command("rehash")
def dataset_rehash(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    add: Annotated[
        bool, typer.Option("--add", help="Also give foreign tasks a [metadata.repo2env] hash.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Recompute and store each task's content_hash (after an intended edit).

    Foreign tasks (no [metadata.repo2env] block) are left untouched unless --add is given.
    """
    from repogym.harbor import TaskError, load_task, set_content_hash

    results: dict[str, str | None] = {}
    bad = 0
    for task_dir in _task_dirs_or_exit(path):
        try:
            if load_task(task_dir).repo2env is None and not add:
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
            out.print(f"{escape(task_id)}  {escape(shown)}")
    raise typer.Exit(1 if bad else 0)


def run() -> None:  # pragma: no cover - console entry point helper
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
