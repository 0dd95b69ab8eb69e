"""push / pull through a file:// registry: revisions, pinning, identical content hashes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.taskdir import discover
from tests.conftest import EXAMPLES, ROOT, snapshot

cli = CliRunner()


def hashes(root: Path) -> dict[str, str]:
    return {t.id: t.compute_hash() for t in discover(root).tasks}


def test_round_trip_keeps_content_hash(tmp_path: Path) -> None:
    reg = f"file://{tmp_path / 'registry'}"
    res = cli.invoke(app, ["push", str(EXAMPLES), "acme/examples", "--registry", reg, "--json"])
    assert res.exit_code == 0, res.output
    pushed = json.loads(res.stdout)
    assert pushed["tasks"] == 2 and not pushed["unchanged"]
    res = cli.invoke(
        app, ["pull", "acme/examples", str(tmp_path / "got"), "--registry", reg, "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["revision"] == pushed["revision"]
    assert hashes(tmp_path / "got") == hashes(EXAMPLES)
    registry = json.loads((tmp_path / "got" / "registry.json").read_text())
    assert registry[0]["version"] == pushed["revision"]  # pinned to the pushed revision
    assert "acme/examples" in (tmp_path / "got" / "README.md").read_text()


def test_revisions_and_pinning(tmp_path: Path) -> None:
    reg = f"file://{tmp_path / 'registry'}"
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    first = json.loads(
        cli.invoke(app, ["push", str(data), "acme/ds", "--registry", reg, "--json"]).stdout
    )
    again = json.loads(
        cli.invoke(app, ["push", str(data), "acme/ds", "--registry", reg, "--json"]).stdout
    )
    assert again["revision"] == first["revision"] and again["unchanged"]
    shutil.rmtree(data / "hello-file")
    second = json.loads(
        cli.invoke(app, ["push", str(data), "acme/ds", "--registry", reg, "--json"]).stdout
    )
    assert second["revision"] != first["revision"]
    # main follows the newest push; an old revision stays pullable by prefix.
    latest = json.loads(
        cli.invoke(
            app, ["pull", "acme/ds", str(tmp_path / "a"), "--registry", reg, "--json"]
        ).stdout
    )
    assert latest["tasks"] == ["textstats-word-count"]
    old = cli.invoke(
        app,
        [
            "pull",
            f"acme/ds@{first['revision'][:8]}",
            str(tmp_path / "b"),
            "--registry",
            reg,
            "--json",
        ],
    )
    assert json.loads(old.stdout)["tasks"] == ["hello-file", "textstats-word-count"]
    one = cli.invoke(
        app,
        [
            "pull",
            f"acme/ds@{first['revision']}",
            str(tmp_path / "c"),
            "--task",
            "hello-file",
            "--registry",
            reg,
        ],
    )
    assert one.exit_code == 0 and [p.name for p in (tmp_path / "c" / "tasks").iterdir()] == [
        "hello-file"
    ]


def test_errors_are_one_line_and_change_nothing(tmp_path: Path) -> None:
    reg = f"file://{tmp_path / 'registry'}"
    cli.invoke(app, ["push", str(EXAMPLES), "acme/ds", "--registry", reg])
    before = snapshot(tmp_path / "registry")
    cases = [
        (["pull", "acme/missing", str(tmp_path / "x"), "--registry", reg], "no dataset"),
        (["pull", "acme/ds@ffff", str(tmp_path / "x"), "--registry", reg], "no single revision"),
        (["pull", "acme/ds", str(tmp_path / "x"), "--task", "nope", "--registry", reg], "no task"),
        (["push", str(EXAMPLES), "not-a-name", "--registry", reg], "owner/name"),
        (["push", str(EXAMPLES), "acme/ds", "--registry", "s3://bucket"], "unsupported registry"),
        (["push", str(EXAMPLES), "acme/ds", "--registry", "hf+ftp://x"], "unsupported registry"),
        (["push", str(tmp_path / "empty"), "acme/e", "--registry", reg], "no task"),
    ]
    (tmp_path / "empty").mkdir()
    for args, fragment in cases:
        res = cli.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert fragment in res.output, (args, res.output)
    assert snapshot(tmp_path / "registry") == before
    # Pulling into a folder that already has the task refuses instead of overwriting it.
    cli.invoke(app, ["pull", "acme/ds", str(tmp_path / "y"), "--registry", reg])
    res = cli.invoke(app, ["pull", "acme/ds", str(tmp_path / "y"), "--registry", reg])
    assert res.exit_code == 2 and "already present" in res.output


@pytest.mark.slow
def test_readme_round_trip_runs_as_written(tmp_path: Path) -> None:
    """The README's file-registry block, run in a copy of the checkout's examples."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    block = next(b for b in blocks if "file:///tmp/repogym-registry" in b)
    registry = tmp_path / "registry"
    script = block.replace("/tmp/repogym-registry", str(registry)).replace(
        ".venv/bin/repogym", str(Path(sys.executable).parent / "repogym")
    )
    work = tmp_path / "work"
    shutil.copytree(EXAMPLES, work / "examples" / "tasks")
    res = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=work, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip().endswith("identical")
    assert hashes(work / "copy") == hashes(EXAMPLES)
    assert (registry / "acme" / "examples" / "refs" / "main").is_file()
