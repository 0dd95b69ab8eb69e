"""The host-file attacks of this folder on the docker backend (a real engine: :mod:`tests.engine`):
every host-side write of the backend (downloads, a separate verifier's artifacts, change sets)
goes through the confined unpacker, so a name or link chosen inside a container never creates,
overwrites, removes or reads a host file outside the destination."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.sandbox import EnvironmentSpec, get_backend
from tests.containment.conftest import Canary, climb
from tests.containment.test_cli_attacks import files_text, result_of, separate_task
from tests.engine import Engine

pytestmark = pytest.mark.slow


@pytest.fixture
def debian(engine: Engine) -> Engine:
    """``debian:bookworm`` on the engine (the slim stand-in under that name too)."""
    engine.docker("tag", "debian:bookworm-slim", "debian:bookworm")
    return engine


def test_separate_verifier_artifacts_through_links_reach_nothing_on_docker(
    debian: Engine, canary: Canary, tmp_path: Path
) -> None:
    """The agent turns the artifact ``/app`` into a link to the host's canary folder (by a
    climbing path and directly) and an excluded sub-folder into a link to the victim: the
    artifacts copied out to the trial folder hold links at most, the host is untouched."""
    before = canary.state()
    task = separate_task(tmp_path / "ds")
    for n, target in enumerate([climb("/proc/self/fd/3", canary.root), str(canary.root)]):
        command = (
            f"cd / && rm -rf /app /data && ln -s {target} /app"
            f" && mkdir -p /data && ln -s {canary.victim} /data/cache"
        )
        job = tmp_path / f"job{n}"
        res = CliRunner().invoke(
            app,
            ["run", str(task), "--agent", f"command:{command}", "--sandbox", "docker",
             "--out", str(job)],
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        assert result_of(job)["verifier_result"]["rewards"] == {"reward": 0.0}
        canary.check(before, files_text(job), res.output)


def test_downloads_and_change_sets_of_hostile_trees_stay_in_their_folder(
    debian: Engine, canary: Canary, tmp_path: Path
) -> None:
    """Inside the container: files named after host files beside the destination, links to
    the host's canary (absolute, climbing, through /proc), a link where the destination's
    parent would be; out on the host: the destination alone, links kept as links."""
    before = canary.state()
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /work\n")
    sandbox = get_backend("docker")
    spec = EnvironmentSpec(context_dir=tmp_path / "ctx", workdir="/work", network_mode="no-network")
    beside = tmp_path / "out"
    beside.mkdir()
    (beside / "victim").write_text("host file beside the destination\n")
    with sandbox.start(sandbox.build(spec), spec) as s:
        s.exec(
            f"mkdir -p /work/t/victim && echo planted > /work/t/victim/x"
            f" && ln -s {canary.root} /work/t/abs && ln -s {climb('/proc/self/fd/3', canary.secret)}"
            f" /work/t/climb && ln -s /proc/self/root{canary.secret} /work/t/proc"
            f" && ln -s {beside} /work/t/out && echo planted > /work/victim"
        )
        s.download("/work/victim", beside / "got")
        s.download("/work/t", beside / "tree")
        s.kill_all()
        changes = s.export_changes("/work", tmp_path / "staged")
    assert (beside / "victim").read_text() == "host file beside the destination\n"
    assert (beside / "got").read_text() == "planted\n"
    assert sorted(p.name for p in beside.iterdir()) == ["got", "tree", "victim"]
    for name in ("abs", "climb", "proc", "out"):
        assert (beside / "tree" / name).is_symlink()
        assert (tmp_path / "staged" / "t" / name).is_symlink()
    kinds = {c.path: c.kind for c in changes.changes}
    assert kinds["t/abs"] == "symlink" and kinds["victim"] == "file"
    staged = {str(p.relative_to(tmp_path / "staged")) for p in (tmp_path / "staged").rglob("*")}
    assert all(not Path(tmp_path / "staged", p).resolve().is_relative_to(canary.root) or
               Path(tmp_path / "staged", p).is_symlink() for p in staged)  # fmt: skip
    canary.check(before, json.dumps([c.path for c in changes.changes]))
    assert not any(os.path.exists(p) for p in canary.empty.iterdir())
