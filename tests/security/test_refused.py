"""Datasets the trust boundary refuses, through every command that reads a dataset.

Each command must exit 2 with one-line reasons, write nothing (no job, package, registry
revision, snapshot or index; the dataset itself untouched) and never show the host's canary.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from tests.security.conftest import listing, tree_bytes
from tests.security.corpus import REFUSED, Host

COMMANDS = {
    "run": ["run", "{ds}", "--agent", "nop"],
    "verify": ["verify", "{ds}"],
    "serve": ["serve", "{ds}", "--port", "1"],
    "export": ["export", "{ds}", "--out", "{out}/package"],
    "push": ["push", "{ds}", "stranger/data", "--registry", "file://{out}/registry"],
    "explore-index": ["explore", "index", "{ds}", "--out", "{out}/snapshot"],
    "explore": ["explore", "{ds}", "--port", "1"],
    "dataset-index": ["dataset", "index", "{ds}"],
    "dataset-rehash": ["dataset", "rehash", "{ds}", "--add"],
}


def _build(tmp_path: Path, attack: str, host: Host) -> Path:
    ds = tmp_path / "dataset"
    ds.mkdir()
    REFUSED[attack](ds, host)
    return ds


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("attack", sorted(REFUSED))
def test_refused_one_line_exit_2_nothing_written(
    attack: str, command: str, host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = _build(tmp_path, attack, host)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    before = listing(ds)
    args = [a.format(ds=ds, out=out) for a in COMMANDS[command]]
    res = CliRunner().invoke(app, args)
    text = res.output
    assert res.exit_code == 2, (res.exit_code, text, res.exception)
    assert "refused" in text, text
    assert "Traceback" not in text
    assert host.token not in text and host.env_token not in text
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert errors and all(len(line) < 600 for line in errors), text
    assert listing(ds) == before  # the dataset is untouched
    assert sorted(p.name for p in out.iterdir()) == []  # no job, package, registry, snapshot


@pytest.mark.parametrize("attack", sorted(REFUSED))
def test_validate_reports_without_reading_through(attack: str, host: Host, tmp_path: Path) -> None:
    ds = _build(tmp_path, attack, host)
    res = CliRunner().invoke(app, ["validate", str(ds)])
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    assert host.token not in res.output


def test_control_a_clean_copy_passes_the_boundary(host: Host, tmp_path: Path) -> None:
    """The refusals come from the attack, not from the shape of the corpus's tasks."""
    from tests.security.corpus import _task

    ds = tmp_path / "dataset"
    _task(ds, "plain", files={"README.md": "a readme\n", "environment/data/x.txt": "x\n"})
    (ds / "plain" / "environment" / "link").symlink_to("data/x.txt")  # stays inside: fine
    res = CliRunner().invoke(app, ["dataset", "index", str(ds)])
    assert res.exit_code == 0, res.output
    assert host.token.encode() not in tree_bytes(ds)
