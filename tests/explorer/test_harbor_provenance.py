"""The Harbor adapter reads ``[metadata.repo2env]`` through the task model's one reader
(:class:`repogym.taskdir.provenance.Provenance`): every well-formed value shows as before, and
a value the model leaves out as malformed is left out of the page too (``validate`` names it)."""

from __future__ import annotations

from pathlib import Path

from repogym.explorer.adapters.harbor import HarborReader
from repogym.taskdir import load_task
from repogym.taskdir.validate import validate_task
from tests.conftest import write_task

DIGEST = "sha256:" + "ab" * 32

FULL = f"""\
schema_version = "1.4"

[task]
name = "acme/full"
description = "Fix the parser."

[metadata]
category = "bugfix"

[metadata.repo2env]
spec_version = "1.0"
pipeline = "commit_runtime"
pipeline_version = "3"
repo = "acme/widgets"
ref = "abc123"
reference = "https://example.com/acme/widgets/commit/abc123"
source_access = "public"
built_at = "2026-01-01T00:00:00+00:00"
synthesis_llm = "none"
content_hash = "{DIGEST}"
reward_kinds = ["test_execution"]
difficulty = "hard"

[metadata.repo2env.bootstrap]
language = "python"

[metadata.repo2env.reproducibility]
mode = "inline_dockerfile"

[metadata.repo2env.commit_runtime]
fail_to_pass = ["t::a", "t::b"]
pass_to_pass = 5

[metadata.repo2env.evaluation]
status = "verified"
nop_reward = 0.0
mutant_kill_rate = 0.75
mutants = 4
"""

MALFORMED = """\
schema_version = "1.4"

[task]
name = "acme/odd"
description = "Written by some other tool."

[metadata.repo2env]
pipeline = "commit_runtime"
repo = ["acme/widgets"]
reward_kinds = "all"
content_hash = "abcdef"
evaluation = "verified"
"""


def _sections(reader: HarborReader, task_id: str) -> dict[str, str]:
    return {s.id: s.body for s in reader.task(task_id).sections}


def test_well_formed_provenance_shows_every_value(tmp_path: Path) -> None:
    path = write_task(tmp_path, "full", toml=FULL)
    reader = HarborReader(path)
    doc = reader.task("full")
    assert doc.aliases == [DIGEST]
    assert doc.facets == {
        "language": "python",
        "pipeline": "commit_runtime",
        "difficulty": "hard",
        "category": "bugfix",
        "source": "acme/widgets",
    }
    assert doc.grading == "tests"
    secs = _sections(reader, "full")
    assert secs["provenance"].splitlines() == [
        "- Repository: acme/widgets",
        "- Ref: abc123",
        "- Reference: https://example.com/acme/widgets/commit/abc123",
        "- Pipeline: commit_runtime",
        "- Pipeline version: 3",
        "- Source access: public",
        "- Built at: 2026-01-01T00:00:00+00:00",
        "- Synthesis LLM: none",
        f"- Content hash: {DIGEST}",
        "- Reproducibility: inline_dockerfile",
    ]
    grading = secs["grading"].splitlines()
    assert "- Reward kinds: test_execution" in grading
    assert "- Fail-to-pass tests (must go from failing to passing): 2" in grading
    assert "- Pass-to-pass tests (must keep passing): 5" in grading
    assert "- Verified by repogym: **verified**" in grading
    assert "- Reward of doing nothing (nop): 0" in grading
    assert "- Mutant kill rate: 0.75 of 4 near misses" in grading


def test_malformed_values_are_left_out_as_the_model_leaves_them(tmp_path: Path) -> None:
    path = write_task(tmp_path, "odd", toml=MALFORMED)
    prov = load_task(path).provenance
    assert prov is not None
    assert {"repo", "reward_kinds", "content_hash", "evaluation"} <= set(prov.problems)
    reader = HarborReader(path)
    doc = reader.task("odd")
    assert doc.aliases == []  # no content hash the model accepts
    assert "source" not in doc.facets and doc.facets["pipeline"] == "commit_runtime"
    secs = _sections(reader, "odd")
    assert secs["provenance"] == "- Pipeline: commit_runtime"
    assert "Reward kinds" not in secs["grading"] and "Verified by" not in secs["grading"]
    # validate names each value the page leaves out
    messages = " ".join(p.message for p in validate_task(path).problems)
    assert "reward_kinds" in messages and "content_hash" in messages and "repo" in messages
