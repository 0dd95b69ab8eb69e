"""The declared public API (``repogym.__all__``): pinned, resolvable, cheap to import, usable."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import repogym

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tasks"

PINNED = [
    "EnvironmentSpec",
    "GenerateError",
    "GenerateReport",
    "GenerateResult",
    "GenerationInput",
    "JobListing",
    "JobSummary",
    "LLM",
    "RepogymError",
    "Sandbox",
    "Task",
    "TaskError",
    "TaskReport",
    "TrialOutcome",
    "TrialRunner",
    "ValidationSummary",
    "Verdict",
    "__version__",
    "backend_names",
    "build_app",
    "build_snapshot",
    "discover",
    "gate_task",
    "generate",
    "get_backend",
    "get_pipeline",
    "iter_task_dirs",
    "list_pipelines",
    "load_task",
    "make_agent",
    "open_registry",
    "register_pipeline",
    "run_job",
    "score_diff",
    "summarize_validation",
    "validate_task",
    "verify_tasks",
    "write_dataset_index",
]


def test_public_names_are_pinned() -> None:
    # Adding or removing a public name is a decision: update docs/api.md and this list together.
    assert sorted(repogym.__all__) == sorted(PINNED)
    documented = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    missing = [name for name in PINNED if f"`{name}" not in documented]
    assert missing == []


def test_every_public_name_resolves_to_repogym_code() -> None:
    for name in repogym.__all__:
        value = getattr(repogym, name)
        if name == "__version__":
            assert isinstance(value, str)
            continue
        assert value.__module__.startswith("repogym."), name
    assert "load_task" in dir(repogym)


def test_unknown_names_raise_attribute_error() -> None:
    try:
        repogym.not_a_name  # noqa: B018
    except AttributeError as exc:
        assert "not_a_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_import_repogym_loads_nothing_else() -> None:
    code = "import repogym, sys; print(sorted(m for m in sys.modules if m.startswith('repogym')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['repogym']"


def test_a_script_reads_and_validates_a_dataset(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "tasks")
    found = repogym.discover(tmp_path)
    assert found.invalid == []
    assert len(found.tasks) == len(list(EXAMPLES.rglob("task.toml"))) > 0
    for task in found.tasks:
        assert repogym.load_task(task.path).id == task.id
        report = repogym.validate_task(task.path)
        assert report.ok, report
    assert "local" in repogym.backend_names()


def test_no_public_name_shadows_a_subpackage() -> None:
    root = Path(repogym.__file__).parent
    clashes = [n for n in repogym.__all__ if (root / n).is_dir() or (root / f"{n}.py").exists()]
    assert clashes == []


def test_the_example_in_docs_api_runs(tmp_path: Path) -> None:
    # The first Python block of docs/api.md, run as a user would beside a dataset folder.
    doc = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    shutil.copytree(EXAMPLES, tmp_path / "tasks")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = sorted(out.stdout.splitlines())
    ids = sorted(t.name for t in EXAMPLES.iterdir() if (t / "task.toml").exists())
    assert [line.split()[0] for line in lines] == ids
    assert all(line.endswith("valid 1.0") for line in lines), lines
