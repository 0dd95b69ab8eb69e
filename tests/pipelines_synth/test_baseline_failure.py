"""A synthesized pipeline whose one shared build fails: every candidate is dropped with that
build's reason, once — not an ``internal error`` per candidate from building again over the
half-made folder."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from repogym.example_repo import build_example_repo
from repogym.spec import GenerationInput
from repogym.workflows import generate
from tests.sources.conftest import pin_git_env

pytestmark = pytest.mark.slow

BROKEN_BUILD = """\
[build-system]
requires = []
build-backend = "no_such_backend_anywhere"

[project]
name = "statkit"
version = "0.1.0"
requires-python = ">=3.8"
"""


def test_a_failed_shared_build_drops_every_candidate_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_git_env(monkeypatch)
    repo = build_example_repo(tmp_path / "statkit")
    (repo / "pyproject.toml").write_text(BROKEN_BUILD)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "commit", "-qm", "package it with a backend that is nowhere"],
        check=True,
    )
    out = tmp_path / "out"
    result = generate(
        GenerationInput(
            repo=str(repo),
            pipeline="bug_synth",
            out=out,
            jobs=2,
            options={"max_candidates": "6"},
        )
    )
    report = json.loads((out / "generate-report.json").read_text())
    reasons = {o["reason"] for o in report["outcomes"]}
    assert result.stats.kept == 0 and len(report["outcomes"]) >= 2
    assert reasons == {"sandbox error"}, reasons
    assert len({o["detail"] for o in report["outcomes"]}) == 1  # the one build's failure
