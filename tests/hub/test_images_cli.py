"""``repogym images``: bad input gets one line and exit 2, nothing written; a build on a base
mapped onto this host is refused per task with the way out, before any registry is asked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from repogym.cli import app
from tests.conftest import EXAMPLES

cli = CliRunner()


def _one_line(res) -> str:  # type: ignore[no-untyped-def]
    lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    return lines[0]


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    res = cli.invoke(app, ["images", "push", str(EXAMPLES), "--registry", "gym"])
    assert res.exit_code == 2 and "registry host first" in _one_line(res)
    res = cli.invoke(app, ["images", "export", str(EXAMPLES), "--out", "/proc/nope/x.tar"])
    assert res.exit_code == 2 and "/proc/nope/x.tar" in _one_line(res)
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not an archive at all")
    res = cli.invoke(app, ["images", "import", str(junk)])
    assert res.exit_code == 2 and "junk.tar" in _one_line(res)
    res = cli.invoke(app, ["images", "import", str(tmp_path / "missing.tar")])
    assert res.exit_code == 2 and "no such file" in _one_line(res)


def test_a_base_mapped_onto_the_host_is_refused_with_the_way_out(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    before = {p: p.read_bytes() for p in data.rglob("task.toml")}
    # Nothing listens on port 9: the refusal comes before any registry is asked.
    res = cli.invoke(
        app, ["images", "push", str(data), "--registry", "127.0.0.1:9/gym", "--json"],
        env={"REPOGYM_REGISTRY_MIRROR": ""},
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    report = json.loads(res.stdout)
    assert {t["status"] for t in report["tasks"]} == {"failed"}
    assert all("mapped onto this host" in t["error"] for t in report["tasks"])
    assert all("REPOGYM_REGISTRY_MIRROR" in t["error"] for t in report["tasks"])
    assert {p: p.read_bytes() for p in data.rglob("task.toml")} == before  # nothing recorded


def test_a_published_task_is_not_refused_for_its_dockerfile(tmp_path: Path) -> None:
    """The preflight judges a task published with its image by the image (pulled when it
    runs), not by a Dockerfile whose base this host could not map."""
    from repogym.sandbox import EnvironmentSpec
    from repogym.sandbox.local import LocalSandbox

    ok, why = LocalSandbox.available()
    if not ok:
        import pytest

        pytest.skip(why)
    ctx = tmp_path / "env"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM busybox:1\nRUN true\n")
    image = "127.0.0.1:9/gym/toy@sha256:" + "a" * 64
    sb = LocalSandbox(tmp_path / "cache", registries={})
    built_here = EnvironmentSpec(context_dir=ctx, docker_image=image)
    assert any("busybox" in r for r in sb.preflight(built_here))
    published = EnvironmentSpec(context_dir=ctx, docker_image=image, image_first=True)
    assert sb.preflight(published) == []
