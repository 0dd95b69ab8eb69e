"""``repogym export --format swebench``: tasks as SWE-bench instances (JSON Lines)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from repogym.cli.common import bad_input
from repogym.ui import err, escape, out


def export_swebench_cli(
    path: Path, out_file: Path, source: Path | None, limit: list[str] | None, json_out: bool
) -> None:
    """Write the instances; one line per skipped task; exit 1 when none was exported."""
    from repogym.hub.swebench import export_swebench
    from repogym.taskdir import iter_task_dirs

    if limit:
        raise bad_input("--max does not apply to --format swebench (nothing is run)")
    if out_file.is_dir():
        raise bad_input(f"--out {out_file}: is a folder; --format swebench writes one .jsonl file")
    if source is not None and not source.is_dir():
        raise bad_input(f"--repo {source}: not a folder")
    if not path.exists() or next(iter_task_dirs(path), None) is None:
        raise bad_input(f"{path}: no task found")
    try:
        result = export_swebench(path, out_file, source=source)
    except OSError as exc:
        raise bad_input(str(exc)) from None
    if json_out:
        report = {
            "out": str(out_file) if result.instances else None,
            "exported": [i["instance_id"] for i in result.instances],
            "skipped": [{"task": t, "reason": r} for t, r in result.skipped],
        }
        sys.stdout.write(json.dumps(report) + "\n")
    for task_id, reason in result.skipped:
        err.print(f"[yellow]skipped[/] {escape(task_id)}: {escape(reason)}")
    if not result.instances:
        err.print("[bold red]error:[/] no task could be exported; nothing was written")
        raise typer.Exit(1)
    if not json_out:
        out.print(f"exported {len(result.instances)} instance(s) to {escape(str(out_file))}")
