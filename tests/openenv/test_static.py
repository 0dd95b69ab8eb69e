"""Fast checks: lazy import, path rules, action schema, task lookup, reproducibility modes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from repogym.openenv.episode import ActionRefused, lexical_agent_path
from repogym.openenv.tasks import TaskNotServable, TaskSet, serving_spec
from repogym.taskdir import load_task
from tests.conftest import EXAMPLES


def test_import_does_not_load_openenv() -> None:
    code = (
        "import sys, repogym, repogym.openenv, repogym.openenv.export, repogym.cli\n"
        "assert 'openenv' not in sys.modules, sorted(m for m in sys.modules if 'openenv' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_openenv_gives_install_hint() -> None:
    code = (
        "import sys\n"
        "sys.modules['openenv'] = None\n"
        "from repogym.openenv import OpenEnvMissing\n"
        "try:\n"
        "    from repogym.openenv import build_app\n"
        "except OpenEnvMissing as exc:\n"
        "    assert \"pip install 'repogym[openenv]'\" in str(exc), exc\n"
        "else:\n"
        "    raise SystemExit('no error')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("a.py", "/workspace/a.py"),
        ("pkg/../b.py", "/workspace/b.py"),
        ("/workspace/c/d", "/workspace/c/d"),
        (".", "/workspace"),
    ],
)
def test_agent_paths_inside_workdir(path: str, expected: str) -> None:
    assert lexical_agent_path(path, "/workspace") == expected


@pytest.mark.parametrize(
    "path",
    ["/tests/test.sh", "/solution/solve.sh", "../etc/passwd", "a/../../x", "/workspace2/x",
     "//tests", "", "a\x00b", "/logs/verifier/reward.txt"],
)  # fmt: skip
def test_agent_paths_outside_refused(path: str) -> None:
    with pytest.raises(ActionRefused):
        lexical_agent_path(path, "/workspace")


def test_schema_and_tools_omit_orchestration() -> None:
    from repogym.openenv.environment import RepoAction, agent_tools

    schema = RepoAction.model_json_schema()
    assert schema["properties"]["type"]["enum"] == ["exec", "read", "write", "list"]
    assert {t["name"] for t in agent_tools()} == {"exec", "read", "write", "list"}
    # Still parseable (the trainer sends them with its token), unknown kinds are not.
    assert RepoAction(type="evaluate").type == "evaluate"
    with pytest.raises(ValueError):
        RepoAction(type="grade")
    with pytest.raises(ValueError):
        RepoAction(type="write", path="x")  # no content


def test_taskset_lookup() -> None:
    tasks = TaskSet.load(EXAMPLES)
    assert tasks.get(task_id="textstats-word-count").id == "textstats-word-count"
    assert tasks.get(task_id="repogym-examples/hello-file").id == "hello-file"
    assert tasks.get(index=1) is tasks.tasks[1]
    assert tasks.get(seed=3) is tasks.tasks[1]
    with pytest.raises(KeyError):
        tasks.get(task_id="nope")
    with pytest.raises(IndexError):
        tasks.get(index=9)


REGISTRY = """\
schema_version = "1.4"
[task]
name = "acme/reg"
[metadata.repo2env.reproducibility]
mode = "registry"
image_ref = "ghcr.io/acme/reg@sha256:abc"
[environment]
network_mode = "no-network"
"""


def test_reproducibility_modes(make_task) -> None:  # type: ignore[no-untyped-def]
    reg = load_task(make_task("reg", toml=REGISTRY))
    for backend in ("docker", "local"):  # the published image, on either backend
        spec = serving_spec(reg, backend)
        assert spec.docker_image == "ghcr.io/acme/reg@sha256:abc" and spec.image_first
    text_only = load_task(make_task("text", dockerfile=None))
    with pytest.raises(TaskNotServable, match="text-only"):
        serving_spec(text_only, "local")
    inline = load_task(EXAMPLES / "textstats-word-count")
    assert serving_spec(inline, "local").context_dir == inline.environment_dir


def test_export_files_and_hashes(tmp_path: Path, make_task) -> None:  # type: ignore[no-untyped-def]
    import hashlib
    import shutil
    import tomllib

    from typer.testing import CliRunner

    from repogym.cli import app

    src = tmp_path / "src"
    shutil.copytree(EXAMPLES, src)
    make_task("notes", root=src, dockerfile=None)
    out = tmp_path / "pkg"
    res = CliRunner().invoke(app, ["export", "--format", "openenv", str(src), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "1 text-only" in res.output and "exported 3 task(s)" in res.output

    def digest(root: Path) -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }

    assert digest(out / "tasks") == digest(src)
    assert (out / "server" / "app.py").read_text().count("\n") == 2
    assert "build_app()" in (out / "server" / "app.py").read_text()
    readme = (out / "README.md").read_text()
    assert readme.startswith("---\n") and "sdk: docker" in readme and "app_port: 8000" in readme
    assert "Task containers need a Docker engine" in readme and "/health" in readme
    from repogym import __version__

    # This checkout is not installed from an index: a wheel of it is shipped and installed
    # from the copy, with the extras the image needs; pyproject names it by version only.
    wheel = f"repogym-{__version__}-py3-none-any.whl"
    assert (out / "wheels" / wheel).is_file()
    dockerfile = (out / "Dockerfile").read_text()
    assert f"/tmp/wheels/{wheel}[docker,openenv]" in dockerfile
    assert dockerfile.index("COPY wheels/") < dockerfile.index("RUN pip install")
    assert "repogym's own wheel" in (out / "wheels" / "README.md").read_text()
    assert "app: server.app:app" in (out / "openenv.yaml").read_text()
    meta = tomllib.loads((out / "pyproject.toml").read_text())
    assert meta["project"]["dependencies"] == [f"repogym[docker,openenv]=={__version__}"]

    out2 = tmp_path / "pkg2"
    res = CliRunner().invoke(
        app,
        [
            "export",
            str(EXAMPLES / "hello-file"),
            "--out",
            str(out2),
            "--requirement",
            "repogym[hub]==9.9",
        ],
    )
    assert res.exit_code == 0, res.output
    assert (out2 / "tasks" / "hello-file" / "task.toml").is_file()
    assert "'repogym[docker,hub,openenv]==9.9'" in (out2 / "Dockerfile").read_text()
    assert not list((out2 / "wheels").glob("*.whl"))
    assert CliRunner().invoke(app, ["export", str(src), "--out", str(out)]).exit_code == 2
