"""What a kill -9 leaves is swept by the next run of the same kind: a staging folder whose
process is gone (pull beside DEST, push inside the registry, export beside --out, example-repo
beside DEST, a candidate's work folder, a task in flight under ``generate --out``), never one
whose process still runs, never another kind's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from repogym.atomic import staging_dir, sweep_staging
from repogym.cli import app
from tests.conftest import EXAMPLES

cli = CliRunner()


def left_by_a_killed_process(parent: Path, kind: str, label: str) -> Path:
    """A staging folder made by a process that then died of SIGKILL."""
    code = (
        "import os, sys\n"
        "from repogym.atomic import staging_dir\n"
        f"p = staging_dir({str(parent)!r}, {kind!r}, {label!r})\n"
        "(p / 'half-written').write_text('x')\n"
        "print(p, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == -9, res.stderr
    path = Path(res.stdout.strip())
    assert path.is_dir()
    return path


def test_sweep_keeps_live_and_other_kinds(tmp_path: Path) -> None:
    dead = left_by_a_killed_process(tmp_path, "pull", "dest")
    other = left_by_a_killed_process(tmp_path, "push", "rev")
    unrelated = tmp_path / ".dest.something-else"
    unrelated.mkdir()
    assert sweep_staging(tmp_path, "pull") == [dead]
    assert not dead.exists() and other.exists() and unrelated.exists()
    mine = staging_dir(tmp_path, "pull", "dest")  # this process: alive
    assert sweep_staging(tmp_path, "pull") == [] and mine.exists()


def test_the_next_pull_sweeps_a_killed_pulls_staging(tmp_path: Path) -> None:
    reg = tmp_path / "reg"
    assert (
        cli.invoke(app, ["push", str(EXAMPLES), "acme/ds", "--registry", f"file://{reg}"]).exit_code
        == 0
    )
    dead = left_by_a_killed_process(tmp_path, "pull", "got")
    res = cli.invoke(app, ["pull", "acme/ds", str(tmp_path / "got"), "--registry", f"file://{reg}"])
    assert res.exit_code == 0, res.output
    assert not dead.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["got", "reg"]


def test_the_next_push_sweeps_a_killed_pushs_staging(tmp_path: Path) -> None:
    reg = tmp_path / "reg"
    revisions = reg / "acme" / "ds" / "revisions"
    revisions.mkdir(parents=True)
    dead = left_by_a_killed_process(revisions, "push", "0123456789abcdef")
    res = cli.invoke(app, ["push", str(EXAMPLES), "acme/ds", "--registry", f"file://{reg}"])
    assert res.exit_code == 0, res.output
    assert not dead.exists() and len(os.listdir(revisions)) == 1


def test_the_next_example_repo_sweeps_its_kind(tmp_path: Path) -> None:
    dead = left_by_a_killed_process(tmp_path, "example", "repo")
    assert cli.invoke(app, ["example-repo", str(tmp_path / "repo")]).exit_code == 0
    assert not dead.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]
