"""Our tasks under the real ``harbor run`` on a real Docker engine (the tests' engine: offline, no
bridge network, stand-in base images; see :mod:`tests.engine`).

Two environments:

- ``repogym.integrations.harbor_docker:RepogymDockerEnvironment``, Harbor's own Docker
  environment (Compose v2) without its egress sidecar, over the two example tasks, two tasks
  generated here from small git repositories (a Python one on ``python:3.12-slim``, a
  JavaScript one on ``node:20-slim``) and a probe task whose verifier reports the container it
  ran in (only loopback, an init as PID 1);
- ``repogym.integrations.harbor:RepogymEnvironment --ek backend=docker``, the plugin on
  repogym's docker backend, over the two example tasks (the plugin itself, on every kind of
  task, is ``test_harbor_plugin.py``'s).

Oracle 1.0 and nop 0.0, read from Harbor's own trial and job result files. Builds use the host's
network (``REPOGYM_DOCKER_NETWORK=host``): the only way to the package registries here.

Harbor drives the engine through the Compose v2 CLI plugin, which Debian does not package:
``scripts/compose.sh`` builds it from its Go module once (a few minutes on 2 cores; cached under
``~/.cache/repogym-tests/compose``) and the tests point ``DOCKER_CONFIG`` at a folder whose
``cli-plugins/`` holds it. The Harbor venv is the one of ``test_harbor_plugin.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from repogym.integrations._harbor_support import (
    COMPOSE_HINT,
    main_service_overlay,
)
from tests.conftest import EXAMPLES, ROOT
from tests.engine import CACHE, Engine, stand_in
from tests.integrations.test_harbor_plugin import harbor_bin  # noqa: F401 - a fixture

DOCKER_ENV = "repogym.integrations.harbor_docker:RepogymDockerEnvironment"
PLUGIN_ENV = "repogym.integrations.harbor:RepogymEnvironment"
EXAMPLE_TASKS = ("hello-file", "textstats-word-count")
TASKS = (*EXAMPLE_TASKS, "shapes", "words")
"""Oracle 1.0, nop 0.0 under Harbor's environment (the examples: under the plugin too)."""
STAND_INS = ("python:3.11-slim", "python:3.12-slim", "node:20-slim", "debian:bookworm-slim")

PROBE_TEST = """\
#!/bin/bash
# Reward 1 when the container has no network interface but loopback and an init is PID 1.
nets=$(ls /sys/class/net | tr '\\n' ' ')
init=$(cat /proc/1/comm)
echo "interfaces: $nets"
echo "pid 1: $init"
if [ "$nets" = "lo " ] && [ "$init" = "docker-init" ]; then echo 1; else echo 0; fi \\
  > /logs/verifier/reward.txt
"""


# ------------------------------------------------------------------ without Harbor


def test_main_service_overlay() -> None:
    """The compose override of Harbor's main service: always an init; the network setting for
    builds and for tasks with network; a no-network task keeps Harbor's ``network_mode: none``."""
    unset = main_service_overlay(no_network=False, setting=None, prebuilt=False)
    assert unset == {"services": {"main": {"init": True}}}
    host = main_service_overlay(no_network=False, setting="host", prebuilt=False)
    assert host["services"]["main"] == {
        "init": True,
        "network_mode": "host",
        "build": {"network": "host"},
    }
    offline = main_service_overlay(no_network=True, setting="host", prebuilt=False)
    assert offline["services"]["main"] == {"init": True, "build": {"network": "host"}}
    prebuilt = main_service_overlay(no_network=True, setting="none", prebuilt=True)
    assert prebuilt["services"]["main"] == {"init": True}


# ------------------------------------------------------------------ with Harbor and an engine


@pytest.fixture(scope="module")
def docker_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``DOCKER_CONFIG`` folder whose ``cli-plugins/docker-compose`` is Compose v2, built by
    ``scripts/compose.sh`` (cached)."""
    if shutil.which("go") is None and not list((CACHE / "compose").glob("*/docker-compose")):
        pytest.skip("building Compose v2 (scripts/compose.sh) needs Go")
    config = tmp_path_factory.mktemp("docker-config")
    env = {
        **os.environ,
        "DOCKER_CONFIG": str(config),
        "REPOGYM_COMPOSE_CACHE": str(CACHE / "compose"),
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "compose.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return config


def _generate(repo: Any, out: Path) -> Path:
    from repogym.spec import GenerationInput
    from repogym.workflows import generate

    opts = {"mutants": 0, "reruns": 0, "verify_reruns": 0, "adversarial": False}
    generate(GenerationInput(repo=str(repo.path), pipeline="commit_runtime", out=out, options=opts))
    (task,) = (out / "tasks").iterdir()
    return task


def _python_task(root: Path) -> Path:
    """A pytest task on ``python:3.12-slim`` (its build installs from PyPI)."""
    from tests.pipelines.shapes import AREA_V1, PYPROJECT
    from tests.sources.conftest import GitRepo

    repo = GitRepo(root / "shapes")
    repo.write("pyproject.toml", PYPROJECT.replace('">=3.9"', '">=3.12,<3.13"'))
    repo.write("src/shapes/__init__.py", "")
    repo.write("src/shapes/area.py", AREA_V1)
    test = "from shapes.area import rectangle, square\n\n\ndef test_square():\n    assert square(3) == 9\n"
    repo.write("tests/test_area.py", test)
    repo.commit("Initial shapes package")
    repo.write("src/shapes/area.py", AREA_V1.replace("width + height", "width * height"))
    repo.write(
        "tests/test_area.py",
        test + "\n\ndef test_rectangle():\n    assert rectangle(2, 5) == 10\n",
    )
    repo.commit("Fix rectangle area\n\nrectangle(2, 5) returned 7: width times height.")
    return _generate(repo, root / "gen-py")


def _node_task(root: Path) -> Path:
    """A ``node --test`` task on ``node:20-slim`` (its build installs Python from Debian)."""
    from tests.pipelines.test_node_verifier import words_repo
    from tests.sources.conftest import GitRepo

    repo, _ = words_repo(GitRepo(root / "words"))
    return _generate(repo, root / "gen-js")


def _probe_task(dataset: Path) -> None:
    task = dataset / "probe"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "task.toml").write_text(
        'schema_version = "1.4"\n\n[task]\nname = "repogym-tests/probe"\n'
        'description = "Reports the container it ran in."\n\n'
        '[environment]\nnetwork_mode = "no-network"\n'
    )
    (task / "instruction.md").write_text("Nothing to do.\n")
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    (task / "tests" / "test.sh").write_text(PROBE_TEST)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The examples, the two generated tasks and (for Harbor's environment only) the probe."""
    from tests.sources.conftest import pin_git_env

    root = tmp_path_factory.mktemp("harbor-docker")
    data = root / "dataset"
    data.mkdir()
    for name in ("hello-file", "textstats-word-count"):
        shutil.copytree(EXAMPLES / name, data / name)
    mp = pytest.MonkeyPatch()
    try:
        pin_git_env(mp)
        shutil.copytree(_python_task(root), data / "shapes")
        shutil.copytree(_node_task(root), data / "words")
    finally:
        mp.undo()
    _probe_task(data)
    return data


def _harbor_env(docker_config: Path, root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        DOCKER_CONFIG=str(docker_config),
        REPOGYM_DOCKER_NETWORK="host",  # builds reach the package registries; no bridge here
        HARBOR_TELEMETRY="0",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        XDG_CONFIG_HOME=str(root / "config"),
    )
    return env


@pytest.fixture(scope="module")
def runs(
    engine: Engine,
    harbor_bin: Path,  # noqa: F811 - the imported fixture
    docker_config: Path,
    dataset: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """``harbor run`` with each agent under each environment: {"trials": {(env, task, agent):
    result}, "jobs": {(env, agent): job result}}."""
    for tag in STAND_INS:
        stand_in(engine, tag)
    root = tmp_path_factory.mktemp("harbor-docker-jobs")
    plugin_data = root / "plugin-dataset"
    plugin_data.mkdir()
    for name in EXAMPLE_TASKS:
        (plugin_data / name).symlink_to(dataset / name)
    env = _harbor_env(docker_config, root)
    out = root / "jobs"
    setups = {
        "docker": (dataset, ["-e", DOCKER_ENV]),
        "plugin": (plugin_data, ["-e", PLUGIN_ENV, "--ek", "backend=docker"]),
    }
    for label, (data, args) in setups.items():
        for agent in ("oracle", "nop"):
            cmd = [str(harbor_bin), "run", "-p", str(data), "-a", agent, *args, "-n", "2"]
            cmd += ["-o", str(out), "--job-name", f"{label}-{agent}", "-y", "-q"]
            proc = subprocess.run(
                cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900
            )
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trials = {}
    for path in out.glob("*/*/result.json"):
        result = json.loads(path.read_text())
        label = path.parent.parent.name.split("-")[0]
        task = Path(result["task_id"]["path"]).name
        trials[(label, task, result["agent_info"]["name"])] = result | {"_dir": path.parent}
    jobs = {
        (label, agent): json.loads((out / f"{label}-{agent}" / "result.json").read_text())
        for label in setups
        for agent in ("oracle", "nop")
    }
    return {"trials": trials, "jobs": jobs}


def _reward(result: dict[str, Any]) -> float | None:
    assert result["exception_info"] is None, result["exception_info"]
    return (result["verifier_result"] or {}).get("rewards", {}).get("reward")


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_harbors_docker_environment_runs_our_tasks_offline(
    runs: dict[str, Any], engine: Engine
) -> None:
    trials = runs["trials"]
    for task in TASKS:
        assert _reward(trials[("docker", task, "oracle")]) == 1.0, task
        assert _reward(trials[("docker", task, "nop")]) == 0.0, task
    for agent in ("oracle", "nop"):
        stats = runs["jobs"][("docker", agent)]["stats"]
        assert stats["n_completed_trials"] == len(TASKS) + 1 and stats["n_errored_trials"] == 0
        # The container had loopback only (Harbor's no-network file, no sidecar) and an init.
        probe = trials[("docker", "probe", agent)]
        out = (probe["_dir"] / "verifier" / "test-stdout.txt").read_text()
        assert "interfaces: lo \n" in out and "pid 1: docker-init" in out, out
        assert _reward(probe) == 1.0
    # Nothing was left behind, and no network was made (the engine has no bridge).
    networks = engine.docker("network", "ls", "--format", "{{.Name}}").stdout.split()
    assert sorted(networks) == ["host", "none"]
    assert engine.docker("ps", "-aq").stdout.strip() == ""


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_plugin_runs_our_tasks_on_the_docker_backend(runs: dict[str, Any]) -> None:
    trials = runs["trials"]
    for task in EXAMPLE_TASKS:
        assert _reward(trials[("plugin", task, "oracle")]) == 1.0, task
        assert _reward(trials[("plugin", task, "nop")]) == 0.0, task
    for agent in ("oracle", "nop"):
        stats = runs["jobs"][("plugin", agent)]["stats"]
        assert stats["n_completed_trials"] == len(EXAMPLE_TASKS)
        assert stats["n_errored_trials"] == 0
    # Verified in a clean room on the docker backend too: only the agent's file was carried.
    trial = trials[("plugin", "hello-file", "oracle")]["_dir"]
    report = json.loads((trial / "repogym-verification.json").read_text())
    assert report["mode"] == "clean_room" and report["applied"] == ["greeting.txt"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_missing_compose_is_one_line(
    engine: Engine,
    harbor_bin: Path,  # noqa: F811 - the imported fixture
    tmp_path: Path,
) -> None:
    empty = tmp_path / "docker-config"
    empty.mkdir()
    env = _harbor_env(empty, tmp_path)
    if (
        subprocess.run(["docker", "compose", "version"], env=env, capture_output=True).returncode
        == 0
    ):
        pytest.skip("docker compose is installed system-wide here")
    cmd = [str(harbor_bin), "run", "-p", str(EXAMPLES / "hello-file"), "-a", "oracle"]
    cmd += ["-e", DOCKER_ENV, "-o", str(tmp_path / "jobs"), "-y", "-q"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert COMPOSE_HINT in (proc.stdout + proc.stderr).splitlines(), proc.stdout + proc.stderr
