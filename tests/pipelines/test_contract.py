"""One contract, checked over every registered pipeline (built-ins and plug-ins alike)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from repogym.example_repo import build_example_repo
from repogym.pipelines import HarnessContext, Pipeline, get_pipeline, pipelines, register
from repogym.pipelines import registry as reg
from repogym.pipelines.base import Harness
from repogym.run.gate import TaskGate
from repogym.sources import LocalGitSource, Source

ALL = sorted(pipelines())
RUN_INPUTS: dict[str, dict[str, str]] = {
    "cve_patches": {"osv": "{tmp}/input", "match_repo": "false"},
}
"""Options a pipeline needs to walk candidates at all (an empty input here)."""


@pytest.fixture
def example(tmp_path: Path) -> Path:
    return build_example_repo(tmp_path / "statkit")


def test_builtins_registered() -> None:
    assert {"commit_runtime", "pr_runtime", "pr_diff"} <= set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_pipeline_contract(name: str, example: Path, tmp_path: Path) -> None:
    pipeline = get_pipeline(name)
    assert isinstance(pipeline, Pipeline)
    assert pipeline.name == name and pipeline.version
    assert issubclass(pipeline.options_model, BaseModel)
    assert pipeline.options_model.model_config.get("extra") == "forbid"
    options = pipeline.options_model()  # every option has a default
    if name in RUN_INPUTS:  # a pipeline whose input is an option (it refuses to run without)
        (tmp_path / "input").mkdir()
        given = {k: v.format(tmp=tmp_path) for k, v in RUN_INPUTS[name].items()}
        options = pipeline.options_model.model_validate(given)
    assert pipeline.sources and set(pipeline.sources) <= {"local", "github", "gitlab"}
    assert isinstance(pipeline.sources_note, str)
    assert isinstance(pipeline.llm_rewrite, bool) and isinstance(pipeline.dedupe_changes, bool)
    source = LocalGitSource(example)
    assert isinstance(source, Source)
    # Candidates are cheap: a few come without any sandbox work, each a Candidate or a drop.
    items = pipeline.candidates(source, options, "local__example", "HEAD")
    for _, item in zip(range(3), items, strict=False):
        if isinstance(item, tuple):
            key, reason = item
            assert isinstance(key, str) and isinstance(reason, str) and reason
        else:
            assert item.task_id.startswith("local__example-") and item.base and item.head
    harness = pipeline.harness(
        HarnessContext(
            source=source,
            backend=_NoSandbox(),  # type: ignore[arg-type]
            options=options,
            pipeline=pipeline.name,
            pipeline_version=pipeline.version,
            repo_label="local/example",
            out_dir=tmp_path,
            gate=TaskGate(_NoSandbox()),  # type: ignore[arg-type]
        )
    )
    assert isinstance(harness, Harness) and harness.rewrites == {}


class _NoSandbox:
    name = "none"


def test_broken_plugin_is_isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    class EntryPoint:
        name = "broken"

        def load(self) -> Any:
            raise ImportError("no module named nowhere")

    class NotAPipeline:
        name = "odd"

        def load(self) -> Any:
            return object()

    import importlib.metadata

    monkeypatch.setattr(reg, "_loaded", False)
    monkeypatch.setattr(reg, "_registered", {})
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda group: [EntryPoint(), NotAPipeline()]
    )
    assert {module.rsplit(".", 1)[1] for module, _ in reg.BUILTINS} == set(pipelines())


def test_register_and_unknown() -> None:
    from repogym.pipelines import unregister
    from repogym.pipelines.pr_diff import PrDiff

    class Other(PrDiff):
        name = "other_diff"

    register(Other)
    try:
        assert get_pipeline("other_diff").name == "other_diff"
    finally:
        unregister("other_diff")
    with pytest.raises(KeyError, match="unknown pipeline 'nope'"):
        get_pipeline("nope")
