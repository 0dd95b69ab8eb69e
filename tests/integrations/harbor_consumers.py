"""Run in a venv holding Harbor and this checkout: the Harbor calls SkyRL's and NeMo Gym's
Harbor agents make, fed with the configurations repogym ships, with Harbor's ``oracle`` and
``nop`` agents in place of a model. Prints one JSON object {task: {agent: reward}}.

    python harbor_consumers.py skyrl CONFIG.yaml TASKS OUT
    python harbor_consumers.py nemo-gym CONFIG.yaml TASKS OUT APP.py UTILS.py

SkyRL (``examples/train_integrations/harbor``, not part of its PyPI package): per task folder
holding ``instruction.md``, the trial template with ``task.path``, ``agent.model_name``,
``agent.kwargs.api_base`` and ``session_id`` filled in, ``TrialConfig.model_validate``,
``Trial.create(...).run()``, reward ``verifier_result.rewards["reward"]``.

NeMo Gym 0.7.0 (its package needs Python >= 3.13.14; its Harbor agent is written against the
Harbor of a pinned git commit, whose ``LocalDatasetConfig`` and ``Job(config)`` Harbor 0.26 no
longer has): the configuration's keys checked against ``HarborAgentConfig``'s fields, the
dataset entry validated by its own ``HarborDatasetSourceConfig``, the ``EnvironmentConfig``
built from it as ``HarborAgent._build_job_config`` builds it, run as a one-task Harbor job, the
reward read by its own ``HarborAgentUtils.extract_reward`` (both taken from the wheel's source).
"""

from __future__ import annotations

import ast
import asyncio
import json
import sys
import uuid
from copy import deepcopy
from pathlib import Path
from typing import Any

import yaml

AGENTS = ("oracle", "nop")


def skyrl(config: Path, tasks: Path, out: Path) -> dict[str, Any]:
    from harbor.models.trial.config import TrialConfig
    from harbor.trial.trial import Trial

    template = yaml.safe_load(config.read_text())
    template["trials_dir"] = str(out / "trials")
    template["agent"]["model_name"] = "hosted_vllm/policy"
    template["agent"]["kwargs"]["api_base"] = "http://127.0.0.1:9/v1"
    results: dict[str, Any] = {}
    for task in sorted(d for d in tasks.iterdir() if (d / "instruction.md").is_file()):
        for agent in AGENTS:
            cfg = deepcopy(template)
            cfg["agent"]["name"] = agent
            cfg["agent"]["kwargs"]["session_id"] = uuid.uuid4().hex
            cfg["task"] = {"path": str(task)}
            trial = asyncio.run(Trial.create(TrialConfig.model_validate(cfg)))
            result = asyncio.run(trial.run())
            error = result.exception_info
            if error is not None or result.verifier_result is None:
                results.setdefault(task.name, {})[agent] = f"error: {error}"
                continue
            reward = float(result.verifier_result.rewards["reward"])
            results.setdefault(task.name, {})[agent] = reward
    return results


def _extract(path: Path, names: set[str]) -> str:
    """The source of the top-level functions/classes ``names`` (and methods of that name)."""
    text = path.read_text()
    tree = ast.parse(text)
    found = []
    for node in ast.walk(tree):
        kinds = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
        if isinstance(node, kinds) and node.name in names:
            found.append(ast.get_source_segment(text, node) or "")
    return "\n\n".join(_dedent(s) for s in found)


def _dedent(source: str) -> str:
    lines = source.splitlines()
    pad = len(lines[0]) - len(lines[0].lstrip()) if len(lines) > 1 else 0
    first = lines[0].lstrip()
    return "\n".join([first] + [ln[pad:] if ln[:pad].isspace() else ln for ln in lines[1:]])


def _fields(path: Path, cls: str) -> list[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return [
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            ]
    raise LookupError(cls)


def nemo_gym(config: Path, tasks: Path, out: Path, app: Path, utils: Path) -> dict[str, Any]:
    from typing import Optional

    from harbor.job import Job
    from harbor.models.job.config import DatasetConfig, JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig
    from pydantic import BaseModel

    code = (
        _extract(app, {"HarborDatasetSourceConfig"}) + "\n\n" + _extract(utils, {"extract_reward"})
    )
    space: dict[str, Any] = {"BaseModel": BaseModel, "Optional": Optional}
    exec(compile("from typing import Any, Dict, Optional\n" + code, str(app), "exec"), space)

    whole = yaml.safe_load(config.read_text())
    cfg = whole["harbor_agent"]["responses_api_agents"]["harbor_agent"]
    # Known keys: HarborAgentConfig's fields, and those of NeMo Gym's own harbor_agent.yaml.
    own = yaml.safe_load((app.parent / "configs" / "harbor_agent.yaml").read_text())
    declared = set(_fields(app, "HarborAgentConfig"))
    declared |= set(own["harbor_agent"]["responses_api_agents"]["harbor_agent"])
    (source,) = [
        space["HarborDatasetSourceConfig"](**(src | {"local_dataset_path": str(tasks)}))
        for src in cfg["harbor_datasets"].values()
    ]
    # The environment exactly as HarborAgent._build_job_config makes it.
    env_kwargs = dict(cfg["harbor_environment_kwargs"] or {})
    if source.workdir is not None:
        env_kwargs["workdir"] = source.workdir
    environment = EnvironmentConfig(
        type=cfg["harbor_environment_type"] if not cfg["harbor_environment_import_path"] else None,
        import_path=cfg["harbor_environment_import_path"],
        delete=not cfg.get("harbor_no_delete", True),
        kwargs=env_kwargs,
    )
    results: dict[str, Any] = {"_unknown_keys": sorted(k for k in cfg if k not in declared)}
    for task in sorted(d for d in tasks.iterdir() if (d / "task.toml").is_file()):
        for agent in AGENTS:
            job_config = JobConfig(
                job_name=f"{task.name}-{agent}",
                jobs_dir=out / "jobs",
                n_concurrent_trials=1,
                quiet=True,
                environment=environment,
                agents=[AgentConfig(name=agent, model_name="hosted_vllm/policy")],
                datasets=[
                    DatasetConfig(path=Path(source.local_dataset_path), task_names=[task.name])
                ],
            )
            asyncio.run(_run_job(Job, job_config))
            (result,) = (out / "jobs" / job_config.job_name).glob("*/result.json")
            verifier_result = json.loads(result.read_text())["verifier_result"]
            results.setdefault(task.name, {})[agent] = space["extract_reward"](verifier_result)
    return results


async def _run_job(job_cls: Any, config: Any) -> None:
    job = await job_cls.create(config)
    await job.run()


def main() -> None:
    mode, config, tasks, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    if mode == "skyrl":
        results = skyrl(config, tasks, out)
    else:
        results = nemo_gym(config, tasks, out, Path(sys.argv[5]), Path(sys.argv[6]))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
