"""task.toml model: every documented key, legacy translation, unknown keys, round trips."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from repogym.taskdir import (
    TaskError,
    dump_task_toml,
    load_task,
    parse_size_mb,
    parse_task_toml,
    write_task_toml,
)
from tests.conftest import EXAMPLES

FULL = """\
schema_version = "1.4"
top_level_future_key = "kept"

[task]
name = "acme/full"
description = "Uses every key."
authors = [{ name = "Ada", email = "ada@example.org" }, "Bob"]
keywords = ["a", "b"]

[metadata]
difficulty = "hard"
category = "bugfix"
custom = { nested = [1, 2, 3] }

[metadata.repo2env]
spec_version = "0.2.0"
pipeline = "commit_runtime"
reward_kinds = ["test_execution"]

[metadata.repo2env.commit_runtime]
fail_to_pass = ["t1"]
pass_to_pass = []

[metadata.repo2env.reproducibility]
mode = "local_only"

[agent]
timeout_sec = 321.0
user = "agent"
future_agent_key = true

[verifier]
timeout_sec = 99.5
env = { PYTHONHASHSEED = "0" }
user = "root"

[environment]
build_timeout_sec = 1200.0
docker_image = "ghcr.io/acme/img:1"
os = "linux"
cpus = 2
memory_mb = 4096
storage_mb = 20480
gpus = 0
network_mode = "allowlist"
allowed_hosts = ["pypi.org"]
env = { FOO = "bar" }
workdir = "/workspace"

[solution]
env = { SOLVE = "1" }

[some_future_table]
x = 1
"""


def test_every_key_keeps_its_meaning(tmp_path: Path) -> None:
    config, _raw, warnings = parse_task_toml(FULL)
    assert warnings == []
    assert config.schema_version == "1.4"
    assert config.task.name == "acme/full"
    assert config.task.keywords == ["a", "b"]
    assert config.task.authors[0].name == "Ada"
    assert config.task.authors[1] == "Bob"
    assert config.metadata["custom"] == {"nested": [1, 2, 3]}
    assert config.repo2env is not None and config.repo2env["pipeline"] == "commit_runtime"
    assert config.agent.timeout_sec == 321.0 and config.agent.user == "agent"
    assert config.verifier.timeout_sec == 99.5 and config.verifier.env == {"PYTHONHASHSEED": "0"}
    env = config.environment
    assert (env.build_timeout_sec, env.docker_image, env.os) == (
        1200.0,
        "ghcr.io/acme/img:1",
        "linux",
    )
    assert (env.cpus, env.memory_mb, env.storage_mb, env.gpus) == (2, 4096, 20480, 0)
    assert env.network_mode == "allowlist" and env.allowed_hosts == ["pypi.org"]
    assert env.env == {"FOO": "bar"} and env.workdir == "/workspace"
    assert config.solution.env == {"SOLVE": "1"}

    # Round trip: write, read again: equal models, and unknown keys survive at every level.
    text = dump_task_toml(config)
    again, raw, _ = parse_task_toml(text)
    assert again == config
    assert raw["top_level_future_key"] == "kept"
    assert raw["some_future_table"] == {"x": 1}
    assert raw["agent"]["future_agent_key"] is True
    assert tomllib.loads(text) == tomllib.loads(FULL)


@pytest.mark.parametrize("task_dir", sorted(p for p in EXAMPLES.iterdir() if p.is_dir()))
def test_round_trip_examples(task_dir: Path, tmp_path: Path) -> None:
    task = load_task(task_dir)
    out = tmp_path / task_dir.name
    out.mkdir()
    write_task_toml(out, task.config)
    assert load_task(out).config == task.config


def test_legacy_keys_translated_with_warning() -> None:
    legacy = """\
version = "1.0"
[environment]
allow_internet = false
memory = "2G"
storage = "10G"
"""
    config, raw, warnings = parse_task_toml(legacy)
    assert config.schema_version == "1.0"
    assert config.environment.network_mode == "no-network"
    assert config.environment.memory_mb == 2048
    assert config.environment.storage_mb == 10240
    assert len(warnings) == 4 and all("legacy key" in w for w in warnings)
    assert raw["version"] == "1.0"  # the raw dict is what was on disk
    written = tomllib.loads(dump_task_toml(config))
    assert "version" not in written and written["schema_version"] == "1.0"
    assert written["environment"] == {
        "network_mode": "no-network",
        "memory_mb": 2048,
        "storage_mb": 10240,
    }


def test_allow_internet_true_is_public() -> None:
    config, _, _ = parse_task_toml("version = '1.0'\n[environment]\nallow_internet = true\n")
    assert config.environment.network_mode == "public"


@pytest.mark.parametrize(
    ("value", "mb"),
    [("2G", 2048), ("512M", 512), ("10Gi", 10240), ("1.5g", 1536), (4096, 4096), ("1T", 1 << 20)],
)
def test_parse_size(value: object, mb: int) -> None:
    assert parse_size_mb(value) == mb


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("schema_version = \n", "invalid TOML"),
        ("\ufeffschema_version = '1.0'\n", "byte-order mark"),
        ("schema_version = '2.0'\n", "unsupported schema_version"),
        ("[environment]\nmemory_mb = -1\n", "environment.memory_mb"),
        ("[environment]\nnetwork_mode = 'intranet'\n", "environment.network_mode"),
        ("[agent]\ntimeout_sec = 'soon'\n", "agent.timeout_sec"),
        ("[environment]\nmemory = 'lots'\n", "not a size"),
    ],
)
def test_schema_errors_are_one_line(text: str, fragment: str) -> None:
    with pytest.raises(TaskError) as info:
        parse_task_toml(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)
    assert info.value.file == "task.toml"


@given(
    st.dictionaries(
        st.text(alphabet="abcdefghij_", min_size=1, max_size=8),
        st.one_of(st.integers(-1000, 1000), st.text(max_size=20), st.booleans()),
        max_size=5,
    )
)
def test_unknown_metadata_survives_round_trip(extra: dict[str, object]) -> None:
    config, _, _ = parse_task_toml("schema_version = '1.4'\n")
    config.metadata.update({"x": extra})
    again, _, _ = parse_task_toml(dump_task_toml(config))
    assert again.metadata["x"] == extra


def test_a_templates_own_version_is_read_as_harbor_reads_it() -> None:
    """``version = "2.0"`` (a task template's own version, in the legacy key): Harbor takes any
    string and reads the task as its schema; an explicit ``schema_version`` stays checked."""
    config, _raw, warnings = parse_task_toml('version = "2.0"\n[verifier]\ntimeout_sec = 450.0\n')
    assert config.schema_version == "1.4" and config.verifier.timeout_sec == 450.0
    assert any("'2.0' is not a Harbor task schema version" in w for w in warnings)
    old, _raw, warnings = parse_task_toml('version = "1.0"\n')
    assert old.schema_version == "1.0" and "read as schema_version = '1.0'" in warnings[0]
    with pytest.raises(TaskError, match="unsupported schema_version"):
        parse_task_toml('schema_version = "2.0"\n')
