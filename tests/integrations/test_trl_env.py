"""``repogym.integrations.trl`` under TRL 1.16's own ``trl.experimental.harbor``.

TRL pulls torch; ``trl.experimental.harbor`` does not need it. The slow tests make (once, cached
under ``~/.cache/repogym-tests/``) a Python 3.12 venv holding ``trl==TRL_VERSION`` without its
dependencies, plus what the Harbor spec really imports (``packaging``, ``datasets``) and
``transformers`` (whose schema builder renders the env's tools for the chat template), and
this checkout installed editable. ``trl_scripted.py`` then drives TRL's ``HarborSpec`` with a
scripted policy (no model) over two example tasks, a generated one, an attack on it and a
task repogym refuses.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, ROOT
from tests.integrations.test_harbor_plugin import _small_repo_task
from tests.venvs import cached_venv

TRL_VERSION = "1.16.0"
HERE = Path(__file__).resolve().parent


def test_import_repogym_does_not_import_trl() -> None:
    code = "import sys, repogym, repogym.integrations; print('trl' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture(scope="module")
def trl_python() -> Path:
    """Python of a cached venv with TRL (no torch) and this checkout (editable)."""
    steps = [
        ["--no-deps", f"trl=={TRL_VERSION}"],
        ["packaging", "datasets", "transformers>=5.2", "-e", str(ROOT)],
    ]
    probe = "import trl.experimental.harbor, datasets"
    return cached_venv(f"trl-{TRL_VERSION}", steps, probe=probe, checkout=True) / "python"


@pytest.fixture(scope="module")
def scripted(trl_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("trl")
    tasks = root / "dataset" / "tasks"
    tasks.mkdir(parents=True)
    for name in ("hello-file", "textstats-word-count"):
        shutil.copytree(EXAMPLES / name, tasks / name)
    generated = _small_repo_task(root)
    shutil.copytree(generated, tasks / "shapes")
    shutil.copytree(generated, tasks / "shapes-attack")
    shutil.copytree(EXAMPLES / "hello-file", tasks / "broken")
    (tasks / "broken" / "environment" / "Dockerfile").write_text("FROM debian\nFROBNICATE x\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["TRL_EXPERIMENTAL_SILENCE"] = "1"
    proc = subprocess.run(
        [str(trl_python), str(HERE / "trl_scripted.py"), str(root / "dataset")],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=root,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["root"] = root
    return result


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_scripted_policy_earns_one_and_doing_nothing_zero(scripted: dict[str, Any]) -> None:
    assert scripted["class"] == "repogym.integrations.trl:RepogymTRLEnv"
    assert sorted(scripted["rows"]) == sorted(
        ["hello-file", "textstats-word-count", "shapes", "shapes-attack", "broken"]
    )
    for name in ("hello-file", "textstats-word-count", "shapes"):
        task = scripted["tasks"][name]
        assert (task["oracle"], task["nop"]) == (1.0, 0.0), (name, task)
    # Verified in a clean room: only the agent's edit reached the verifier.
    shapes = scripted["tasks"]["shapes"]["verification"]
    assert shapes["mode"] == "clean_room" and shapes["applied"] == ["src/shapes/area.py"]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_prompt_is_the_instruction_and_never_the_answer(scripted: dict[str, Any]) -> None:
    root: Path = scripted["root"]
    for name in ("hello-file", "textstats-word-count", "shapes"):
        task_dir = root / "dataset" / "tasks" / name
        prompt = scripted["tasks"][name]["prompt"]
        assert prompt.startswith((task_dir / "instruction.md").read_text().strip())
        assert "write_file(path, content)" in prompt and "/solution" not in prompt
        solution = task_dir / "solution" / "patch.diff"
        if solution.is_file():
            added = [
                line[1:].strip()
                for line in solution.read_text().splitlines()
                if line.startswith("+") and not line.startswith("+++") and len(line.strip()) > 8
            ]
            assert added and not any(line in prompt for line in added), name
    assert "`/workspace`" in scripted["tasks"]["shapes"]["prompt"]
    read, write = scripted["tasks"]["hello-file"]["escape"]
    assert read.startswith("cannot read ../etc/passwd: ") and "outside" in read
    assert write.startswith("cannot write /tmp/outside.txt: ") and "outside" in write
    assert "`/app`" in scripted["tasks"]["hello-file"]["prompt"]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_tools_render_for_the_chat_template(scripted: dict[str, Any]) -> None:
    tools = scripted["tools"]
    assert sorted(tools) == ["bash", "read_file", "write_file"]
    params = {n: t["function"]["parameters"]["required"] for n, t in tools.items()}
    assert params == {"bash": ["command"], "read_file": ["path"], "write_file": ["path", "content"]}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_planted_hook_earns_nothing(scripted: dict[str, Any]) -> None:
    attack = scripted["tasks"]["shapes-attack"]
    assert "1 passed" in attack["replies"][-1]  # the hook works inside the agent's sandbox
    assert (attack["oracle"], attack["nop"]) == (0.0, 0.0)
    dropped = {d["path"]: d["reason"] for d in attack["verification"]["dropped"]}
    assert dropped["conftest.py"].startswith("protected")


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_refusals_are_one_line(scripted: dict[str, Any]) -> None:
    error = scripted["tasks"]["broken"]["error"]
    assert error.startswith("RepogymTRLError: repogym cannot run broken: ")
    assert "FROBNICATE" in error and "\n" not in error
    assert scripted["e2b"].startswith("RepogymTRLError: ")
    assert "'e2b'" in scripted["e2b"] and 'environment_type="local"' in scripted["e2b"]


# The GRPO example's keyword arguments, checked against the installed TRL's own source
# (GRPOConfig's fields, TrainingArguments' fields, GRPOTrainer's and HarborSpec's parameters):
# GRPOConfig and GRPOTrainer need torch to import, so their source is read, not run.
SIGNATURES = """
import ast, dataclasses, inspect, json, sys
from importlib.util import find_spec
from pathlib import Path
from transformers import TrainingArguments
from trl.experimental.harbor import HarborSpec

trl = Path(find_spec("trl").origin).parent
def fields(path, cls):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return [s.target.id for s in node.body if isinstance(s, ast.AnnAssign)]
def params(path, cls):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            init = next(n for n in node.body if getattr(n, "name", "") == "__init__")
            a = init.args
            return [x.arg for x in a.args + a.kwonlyargs][1:]
config = fields(trl / "trainer" / "grpo_config.py", "GRPOConfig")
config += [f.name for f in dataclasses.fields(TrainingArguments)]
print(json.dumps({
    "GRPOConfig": config,
    "GRPOTrainer": params(trl / "trainer" / "grpo_trainer.py", "GRPOTrainer"),
    "HarborSpec": list(inspect.signature(HarborSpec).parameters),
}))
"""


def _calls(path: Path) -> dict[str, tuple[int, list[str]]]:
    """{callee name: (positional count, keyword names)} of the calls in a script."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            found[node.func.id] = (len(node.args), [k.arg for k in node.keywords if k.arg])
    return found


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_grpo_example_uses_real_parameters(trl_python: Path) -> None:
    proc = subprocess.run(
        [str(trl_python), "-c", SIGNATURES],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    known = json.loads(proc.stdout.strip().splitlines()[-1])
    calls = _calls(ROOT / "examples" / "integrations" / "trl_grpo.py")
    assert set(calls) >= {"GRPOConfig", "GRPOTrainer", "HarborSpec"}
    for name in ("GRPOConfig", "GRPOTrainer", "HarborSpec"):
        _, keywords = calls[name]
        assert keywords and set(keywords) <= set(known[name]), (name, keywords)
    assert "max_tool_calling_iterations" in calls["GRPOConfig"][1]
    assert "environment_factory" in calls["GRPOTrainer"][1]
    assert "environment_factory" in known["GRPOTrainer"]
