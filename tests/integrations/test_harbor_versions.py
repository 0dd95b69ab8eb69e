"""The Harbor plugin on every Harbor release repogym supports, through the lines repogym prints.

Each Harbor version gets its own cached Python 3.12 venv (see ``harbor_venv`` in
``test_harbor_plugin.py``, which runs the full attack matrix on the newest version only). Here,
per version, a small oracle/nop set: the ``harbor run`` lines ``repogym generate`` (a task
generated from a small git repository) and ``repogym dataset index`` (the two example tasks)
print, run verbatim by a shell from a folder that is not the dataset's (only ``-a`` and the
job's output options are changed); on the newest version also the line ``repogym push`` prints
for a folder registry and the registry of a copy ``repogym pull`` made from it. Rewards are
read from Harbor's own trial result files.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.taskdir.dataset import harbor_run_lines
from tests.conftest import EXAMPLES
from tests.integrations.test_harbor_plugin import HARBOR_VERSION, harbor_venv, shapes_repo
from tests.sources.conftest import pin_git_env

VERSIONS = ("0.24.0", "0.25.0", HARBOR_VERSION)
"""The newest non-dev release of each supported minor version (``repogym[harbor]``)."""

cli = CliRunner()


def _lines(output: str) -> list[str]:
    return [ln.strip() for ln in output.splitlines() if ln.strip().startswith("harbor run ")]


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The datasets and the ``harbor run`` lines repogym printed for them."""
    root = tmp_path_factory.mktemp("harbor-lines")
    mp = pytest.MonkeyPatch()
    try:
        pin_git_env(mp)
        repo = shapes_repo(root / "shapes")
        gen = cli.invoke(app, ["generate", "--repo", str(repo), "--out", str(root / "gen")])
    finally:
        mp.undo()
    assert gen.exit_code == 0, gen.output
    shutil.copytree(EXAMPLES, root / "examples")
    index = cli.invoke(app, ["dataset", "index", str(root / "examples"), "--name", "acme/ex"])
    assert index.exit_code == 0, index.output
    reg = f"file://{root / 'registry'}"
    push = cli.invoke(app, ["push", str(root / "examples"), "acme/ex", "--registry", reg])
    assert push.exit_code == 0, push.output
    pull = cli.invoke(app, ["pull", "acme/ex", str(root / "pulled"), "--registry", reg])
    assert pull.exit_code == 0, pull.output
    return {
        "root": root,
        "generate": _lines(gen.stdout),
        "generate_out": gen.stdout,
        "index": _lines(index.stdout),
        "push": _lines(push.stdout),
        "pulled": harbor_run_lines(root / "pulled"),
    }


def test_printed_lines_name_the_runnable_folder_and_registry(printed: dict[str, Any]) -> None:
    """``-p`` gets ``<out>/tasks`` (Harbor runs the folders right below it); the registry is
    named without ``/`` (with one, ``-d`` means a package on Harbor's Hub)."""
    root = printed["root"]
    plugin = "-a oracle -e repogym.integrations.harbor:RepogymEnvironment"
    assert "run them with Harbor (pip install 'repogym[harbor]'):" in printed["generate_out"]
    gen_p, gen_reg = printed["generate"]
    assert gen_p == f"harbor run -p {root / 'gen' / 'tasks'} {plugin}"
    assert gen_reg.startswith(f"harbor run --registry-path {root / 'gen' / 'registry.json'} -d ")
    index_p, index_reg = printed["index"]
    assert index_p == f"harbor run -p {root / 'examples'} {plugin}"
    registry = root / "examples" / "registry.json"
    assert index_reg == f"harbor run --registry-path {registry} -d acme__ex@1.0 {plugin}"
    (push_p, push_reg) = printed["push"]
    revision = push_reg.split("-d acme__ex@")[1].split()[0]
    folder = root / "registry" / "acme" / "ex" / "revisions" / revision
    assert push_p == f"harbor run -p {folder / 'tasks'} {plugin}"


def _run(
    harbor: Path, line: str, agent: str, cwd: Path, out: Path, job: str, extra: str = ""
) -> dict[str, float | None]:
    """Run a printed line in a shell (``harbor`` on PATH) with agent ``agent`` (and ``extra``
    options); the reward of each trial by task name."""
    assert line.startswith("harbor run ") and " -a oracle " in line, line
    command = line.replace(" -a oracle ", f" -a {agent} ")
    command += f" -o {shlex.quote(str(out))} --job-name {job} -n 2 -y -q {extra}"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        PATH=f"{harbor.parent}{os.pathsep}{env.get('PATH', '')}",
        HARBOR_TELEMETRY="0",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        XDG_CONFIG_HOME=str(cwd / "config"),
    )
    proc = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rewards: dict[str, float | None] = {}
    for path in (out / job).glob("*/result.json"):
        result = json.loads(path.read_text())
        assert result["exception_info"] is None, result["exception_info"]
        name = Path(result["task_id"]["path"]).name
        rewards[name] = (result["verifier_result"] or {}).get("rewards", {}).get("reward")
    return rewards


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("version", VERSIONS)
def test_printed_lines_run_on_every_supported_harbor(
    version: str, printed: dict[str, Any], tmp_path: Path
) -> None:
    harbor = harbor_venv(version)
    probe = subprocess.run(
        [
            str(harbor.parent / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('harbor'))",
        ],
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == version, probe.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"  # neither the dataset's folder nor its parent
    elsewhere.mkdir()
    gen_p = printed["generate"][0]
    (task,) = (printed["root"] / "gen" / "tasks").iterdir()
    examples = {"hello-file", "textstats-word-count"}
    index_reg = printed["index"][1]
    # The plugin's options: checked by its options model on Harbor 0.26, passed to the
    # class as keyword arguments before.
    options = "--ek backend=local --ek agent_network=task"
    for agent, want in (("oracle", 1.0), ("nop", 0.0)):
        got = _run(harbor, gen_p, agent, elsewhere, tmp_path / "jobs", f"gen-{agent}")
        assert got == {task.name: want}, (agent, got)
        job = f"reg-{agent}"
        got = _run(harbor, index_reg, agent, elsewhere, tmp_path / "jobs", job, options)
        assert got == dict.fromkeys(examples, want), (agent, got)
    if version == HARBOR_VERSION:
        push_reg = printed["push"][1]
        got = _run(harbor, push_reg, "oracle", elsewhere, tmp_path / "jobs", "push")
        assert got == dict.fromkeys(examples, 1.0), got
        # A pulled copy's registry names the copy's tasks, not the registry's.
        registry = printed["root"] / "registry"
        registry.rename(registry.with_name("registry-moved"))
        try:
            pulled_reg = printed["pulled"][1]
            got = _run(harbor, pulled_reg, "oracle", elsewhere, tmp_path / "jobs", "pulled")
        finally:
            registry.with_name("registry-moved").rename(registry)
        assert got == dict.fromkeys(examples, 1.0), got
