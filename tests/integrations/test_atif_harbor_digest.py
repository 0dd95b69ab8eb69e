"""repogym's trajectories against the ATIF v1.8 models of PyPI ``atif`` and of Harbor, and
repogym's Harbor task digest against the digest Harbor itself puts in a trial's lock.

Both packages need Python >= 3.12 and are never dependencies of repogym: the tests make (once,
cached under ``~/.cache/repogym-tests/``) a Python 3.12 venv holding ``harbor==HARBOR_VERSION``
and ``atif==ATIF_PYPI_VERSION``, and run a short script there over files written here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from repogym.run.models import TrialResult
from repogym.taskdir.harbor_digest import harbor_digest
from tests.conftest import EXAMPLES
from tests.integrations.test_harbor_plugin import HARBOR_VERSION
from tests.run.test_trajectory_atif import V17, full_trajectory
from tests.venvs import cached_venv

ATIF_PYPI_VERSION = "1.8.0"

# Run in the venv: argv[1] is a JSON file {"trajectories": [paths], "tasks": [paths]}; prints
# {"atif": [...], "harbor": [...], "digests": [...]} (an error text where a model refused).
CHECK = """
import json, sys
from pathlib import Path
from types import SimpleNamespace
import atif
from harbor.models.job.lock import build_trial_lock
from harbor.models.trajectories import Trajectory as HarborTrajectory
from harbor.models.trial.config import TaskConfig, TrialConfig
from harbor.publisher.packager import Packager

job = json.load(open(sys.argv[1]))
out = {"atif": [], "harbor": [], "digests": [], "packager": []}
for path in job["trajectories"]:
    data = json.load(open(path))
    for key, model in (("atif", atif.Trajectory), ("harbor", HarborTrajectory)):
        try:
            t = model.model_validate(data)
            out[key].append([t.schema_version, len(t.steps)])
        except Exception as exc:
            out[key].append(str(exc))
for path in job["tasks"]:
    task = Path(path)
    got = SimpleNamespace(path=task, content_hash=None, resolved_git_commit_id=None)
    lock = build_trial_lock(trial_config=TrialConfig(task=TaskConfig(path=task)),
                            task_download_result=got)
    out["digests"].append(lock.task.digest)
    out["packager"].append("sha256:" + Packager.compute_content_hash(task)[0])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def check_python() -> Path:
    """Python of a cached 3.12 venv with Harbor and PyPI ``atif``."""
    steps = [[f"harbor=={HARBOR_VERSION}", f"atif=={ATIF_PYPI_VERSION}"]]
    probe = "import atif, harbor.models.trajectories"
    name = f"harbor-{HARBOR_VERSION}-atif-{ATIF_PYPI_VERSION}"
    return cached_venv(name, steps, probe=probe) / "python"


def _check(python: Path, tmp: Path, trajectories: list[Path], tasks: list[Path]) -> Any:
    job = tmp / "check.json"
    job.write_text(json.dumps({"trajectories": [str(p) for p in trajectories],
                               "tasks": [str(p) for p in tasks]}))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HARBOR_TELEMETRY"] = "0"
    proc = subprocess.run(
        [str(python), "-c", CHECK, str(job)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_trajectories_validate_under_atif_18_and_harbor(check_python: Path, tmp_path: Path) -> None:
    """A real run of the built-in agent (token ids, logprobs, a malformed call, a nudge), a
    recorder document using every field, and a v1.7 file written before."""
    from repogym.run.job import run_job
    from repogym.taskdir import load_task
    from tests.llm.stub_servers import openai_stub, openai_tools
    from tests.run.test_llm_agent import _solve_script

    def make(calls: Any, text: str = "") -> Any:
        return openai_tools(calls, text, token_ids=True, logprobs=True)

    script = [openai_tools([("bash", "{broken")]), openai_tools([], "thinking")]
    script += _solve_script(make)
    script[2] = make([("bash", {"command": "cat textstats/counts.py"})])
    task = tmp_path / "textstats-word-count"
    shutil.copytree(EXAMPLES / "textstats-word-count", task)
    with openai_stub(*script) as stub:
        outcomes, _, _ = run_job(
            [load_task(task)],
            "llm:vllm/stub",
            agent_options={"endpoint": stub.base_url + "/v1"},
            out_dir=tmp_path / "job",
        )
    assert outcomes[0].reward == 1.0, outcomes[0].result
    trial = tmp_path / "job" / "textstats-word-count__1"
    run = trial / "agent" / "trajectory.json"
    full, old = tmp_path / "full.json", tmp_path / "v17.json"
    full.write_text(json.dumps(full_trajectory()))
    old.write_text(json.dumps(V17))

    out = _check(check_python, tmp_path, [run, full, old], [task])
    assert out["atif"] == [["ATIF-v1.8", 9], ["ATIF-v1.8", 4], ["ATIF-v1.7", 3]], out["atif"]
    assert out["harbor"] == out["atif"], out["harbor"]
    # The trial's result.json names the task as Harbor's own lock would.
    record = TrialResult.read(trial / "result.json")
    assert record.task_digest == out["digests"][0] == out["packager"][0]


@pytest.mark.slow
def test_digest_equals_harbors_on_the_examples_and_edge_cases(
    check_python: Path, tmp_path: Path
) -> None:
    tasks = [EXAMPLES / "hello-file", EXAMPLES / "textstats-word-count"]
    # One copy with every case the selection rules decide: extra root files (left out),
    # README.md and trajectory.json (in), caches and editor files (out), a symlinked file (in,
    # by its target's bytes), a symlinked folder (out), .harborignore files without rules
    # (out), an environment .harborignore with rules (not read there), a steps/ tree (in).
    edge = tmp_path / "edge"
    shutil.copytree(EXAMPLES / "textstats-word-count", edge, symlinks=True)
    (edge / "README.md").write_text("# readme\n")
    (edge / "trajectory.json").write_text(json.dumps(V17))
    (edge / "notes.txt").write_text("not Harbor's\n")
    (edge / "environment" / "__pycache__").mkdir()
    (edge / "environment" / "__pycache__" / "x.cpython-312.pyc").write_bytes(b"\0\1")
    (edge / "environment" / "__pycache__" / "notes.txt").write_text("out: in a cache folder\n")
    (edge / "tests" / "__pycache__").write_text("in: a file, not a folder\n")
    (edge / "environment" / "keep.pyc.d").mkdir()
    (edge / "environment" / "keep.pyc.d" / "a.txt").write_text("in\n")
    (edge / "environment" / "cache.pyc").mkdir()
    (edge / "environment" / "cache.pyc" / "b.txt").write_text("out\n")
    (edge / "tests" / "x.swp").write_text("out\n")
    (edge / "tests" / "y~").write_text("out\n")
    (edge / "solution" / ".DS_Store").write_text("out\n")
    (edge / "tests" / ".harborignore").write_text("# comment only\n\n")
    (edge / "environment" / ".harborignore").write_text("*.txt\n")
    (edge / "environment" / "link.txt").symlink_to("keep.pyc.d/a.txt")
    (edge / "environment" / "linkdir").symlink_to("keep.pyc.d")
    (edge / "environment" / "dangling").symlink_to("nowhere")
    (edge / "environment" / "rules").symlink_to("../tests/.harborignore")
    (edge / "steps" / "one" / "tests").mkdir(parents=True)
    (edge / "steps" / "one" / "tests" / "test.sh").write_text("#!/bin/bash\n")
    (edge / "steps" / "one" / "instruction.md").write_text("step one\n")
    (edge / "environment" / "Zeta.txt").write_text("sorted by code point\n")
    (edge / "environment" / "ünï.txt").write_text("non-ASCII name\n")
    tasks.append(edge)

    out = _check(check_python, tmp_path, [], tasks)
    ours = [harbor_digest(t) for t in tasks]
    assert ours == out["digests"] == out["packager"]
    assert len(set(ours)) == 3
