"""The ``[metadata.repo2env]`` model: read once, malformed values reported, other keys kept."""

from __future__ import annotations

import pytest

from repogym.taskdir.provenance import Provenance, read_verification

BLOCK = {
    "spec_version": "0.2.0",
    "pipeline": "pr_diff",
    "pipeline_version": 3,
    "repo": "acme/widgets",
    "ref": "abc123",
    "reference": "https://example.invalid/acme/widgets/pull/7",
    "reward_kinds": ["test_execution"],
    "content_hash": "sha256:" + "0" * 64,
    "pr_diff": {"fail_to_pass": ["t::a"], "pass_to_pass": 2},
    "reproducibility": {"mode": "registry", "image_ref": "r/x:1", "digest": "sha256:1"},
    "verification": {"mode": "clean_room", "protected": ["tests"]},
    "evaluation": {"status": "verified"},
    "other_tool": {"note": "kept"},
}


def test_a_well_formed_block_reads_whole() -> None:
    prov = Provenance.read(BLOCK)
    assert prov.problems == {}
    assert prov.pipeline_version == "3"
    assert prov.pipeline_table == {"fail_to_pass": ["t::a"], "pass_to_pass": 2}
    assert prov.extra["other_tool"] == {"note": "kept"}
    assert prov.reproducibility_mode == "registry"
    assert prov.reproducibility.image_ref == "r/x:1"
    assert prov.reproducibility.model_extra == {"digest": "sha256:1"}
    assert prov.read_verification().protected == ("tests",)
    assert prov.evaluation["status"] == "verified"


def test_malformed_values_are_left_out_and_reported() -> None:
    bad = {
        **BLOCK,
        "reward_kinds": "test_execution",
        "content_hash": "md5:1",
        "evaluation": "verified",
        "repo": ["a"],
        "verification": {"mode": "sideways"},
    }
    prov = Provenance.read(bad)
    assert set(prov.problems) == {
        "reward_kinds",
        "content_hash",
        "evaluation",
        "repo",
        "verification",
    }
    assert prov.problems["reward_kinds"] == "reward_kinds must be a list of non-empty strings"
    assert prov.problems["content_hash"] == "content_hash must be 'sha256:<hex>'"
    assert prov.reward_kinds is None and prov.content_hash is None and prov.evaluation == {}
    assert prov.ref == "abc123" and prov.pipeline_table is not None
    with pytest.raises(ValueError, match="sideways"):
        prov.read_verification()  # never silently in_place
    with pytest.raises(ValueError, match="sideways"):
        read_verification(bad)


def test_absent_block_defaults() -> None:
    prov = Provenance.read(None)
    assert prov.problems == {} and prov.pipeline_table is None
    assert prov.read_verification().mode == "in_place"
    assert prov.reproducibility_mode is None
