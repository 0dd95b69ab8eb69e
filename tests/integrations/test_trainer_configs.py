"""The SkyRL and NeMo Gym configurations repogym ships (``examples/integrations/``), run
through the Harbor code path each consumer takes, with Harbor's ``oracle`` and ``nop`` agents
in place of a model, over two example tasks and a generated one (``harbor_consumers.py``
says exactly what of each consumer runs). Harbor's venv is the one of
``test_harbor_plugin.py``; NeMo Gym's agent source comes from its PyPI wheel (cached).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLES, ROOT
from tests.integrations.test_harbor_plugin import (  # noqa: F401 - the fixture
    IMPORT_PATH,
    _small_repo_task,
    harbor_bin,
)
from tests.venvs import CACHE

HERE = Path(__file__).resolve().parent
CONFIGS = ROOT / "examples" / "integrations"
NEMO_GYM_VERSION = "0.7.0"
AGENT_DIR = "responses_api_agents/harbor_agent"


def test_shipped_configs_name_the_plugin() -> None:
    skyrl = yaml.safe_load((CONFIGS / "skyrl" / "harbor_trial_config.yaml").read_text())
    assert skyrl["environment"] == {
        "import_path": IMPORT_PATH,
        "kwargs": {"backend": "local", "agent_network": "task"},
    }
    nemo = yaml.safe_load((CONFIGS / "nemo_gym" / "harbor_agent_repogym.yaml").read_text())
    agent = nemo["harbor_agent"]["responses_api_agents"]["harbor_agent"]
    assert agent["harbor_environment_import_path"] == IMPORT_PATH
    assert agent["harbor_environment_type"] is None
    assert all("workdir" not in src for src in agent["harbor_datasets"].values())
    script = (CONFIGS / "skyrl" / "run_repogym.sh").read_text()
    assert "harbor_trial_config/default.yaml" in script and "data.train_data=" in script


def _pip_python() -> str | None:
    """An interpreter with pip (the ordinary client for a wheel download)."""
    for cand in sorted(glob.glob("/root/.pyenv/versions/3.1*/bin/python")) + ["python3"]:
        if subprocess.run([cand, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            return cand
    return None


@pytest.fixture(scope="module")
def nemo_gym_agent() -> Path:
    """NeMo Gym's ``harbor_agent`` folder (app.py, utils.py, configs/) from its wheel."""
    dest = CACHE / f"nemo-gym-{NEMO_GYM_VERSION}"
    if not (dest / AGENT_DIR / "app.py").exists():
        python = _pip_python()
        if python is None:
            pytest.skip("no interpreter with pip to download the nemo-gym wheel")
        wheels = CACHE / "wheels-nemo-gym"
        proc = subprocess.run(
            [python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
            + ["--python-version", "3.13.14", f"nemo-gym=={NEMO_GYM_VERSION}", "-d", str(wheels)],
            capture_output=True,
            text=True,
        )
        found = sorted(wheels.glob(f"nemo_gym-{NEMO_GYM_VERSION}-*.whl"))
        if not found:
            reason = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"cannot download nemo-gym=={NEMO_GYM_VERSION} (no network?): {reason}")
        with zipfile.ZipFile(found[0]) as whl:
            for name in whl.namelist():
                if name.startswith(AGENT_DIR + "/"):
                    whl.extract(name, dest)
    return dest / AGENT_DIR


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("consumers")
    out = root / "dataset" / "tasks"
    out.mkdir(parents=True)
    for name in ("hello-file", "textstats-word-count"):
        shutil.copytree(EXAMPLES / name, out / name)
    shutil.copytree(_small_repo_task(root), out / "shapes")
    return out


def _run(harbor: Path, *args: str | Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HARBOR_TELEMETRY="0", LITELLM_LOCAL_MODEL_COST_MAP="True")
    out = Path(str(args[2])).parent / f"out-{args[0]}"
    proc = subprocess.run(
        [str(harbor.parent / "python"), str(HERE / "harbor_consumers.py")]
        + [str(a) for a in args[:3]]
        + [str(out)]
        + [str(a) for a in args[3:]],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=out.parent,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_skyrl_trial_template_pays_oracle_not_nop(harbor_bin: Path, tasks: Path) -> None:  # noqa: F811
    config = CONFIGS / "skyrl" / "harbor_trial_config.yaml"
    result = _run(harbor_bin, "skyrl", config, tasks)
    assert result == {
        name: {"oracle": 1.0, "nop": 0.0}
        for name in ("hello-file", "shapes", "textstats-word-count")
    }


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_nemo_gym_agent_config_pays_oracle_not_nop(
    harbor_bin: Path,  # noqa: F811
    tasks: Path,
    nemo_gym_agent: Path,
) -> None:
    config = CONFIGS / "nemo_gym" / "harbor_agent_repogym.yaml"
    result = _run(
        harbor_bin,
        "nemo-gym",
        config,
        tasks,
        nemo_gym_agent / "app.py",
        nemo_gym_agent / "utils.py",
    )
    assert result.pop("_unknown_keys") == []
    assert result == {
        name: {"oracle": 1.0, "nop": 0.0}
        for name in ("hello-file", "shapes", "textstats-word-count")
    }
