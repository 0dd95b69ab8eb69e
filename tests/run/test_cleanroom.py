"""Clean-room verification: protected patterns, the carry-over plan, and the real thing on the
local sandbox (an agent's change read from the copy-on-write layer, applied onto a fresh root)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repogym.run.agents import CommandAgent
from repogym.run.cleanroom import plan_carry_over
from repogym.run.trial import TrialRunner
from repogym.sandbox import Change, get_backend
from repogym.sources.patches import is_test_path
from repogym.taskdir import load_task
from repogym.taskdir.provenance import read_verification
from repogym.taskdir.verification import (
    RUNTIME_PROTECTED,
    Matcher,
    compile_glob,
)
from tests.conftest import write_task

# ------------------------------------------------------------------------------ patterns


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("**/conftest.py", "conftest.py", True),
        ("**/conftest.py", "a/b/conftest.py", True),
        ("**/conftest.py", "a/conftest.pyc", False),
        ("tests", "tests/test_a.py", True),
        ("tests", "src/tests/x.py", False),
        ("**/tests", "src/tests/x.py", True),
        ("*.py", "a.py", True),
        ("*.py", "pkg/a.py", False),
        ("**/*.py[co]", "pkg/__pycache__/a.cpython-311.pyc", True),
        ("src/{pytest,pluggy}.py", "src/pluggy.py", True),
        ("src/{pytest,pluggy}.py", "src/other.py", False),
        ("**/{jest,vitest}.config.*", "web/vitest.config.ts", True),
        ("**/.git", ".git/hooks/pre-commit", True),
        ("d?", "d1/x", True),
        ("[!a]*", "abc", False),
    ],
)
def test_glob_patterns(pattern: str, path: str, hit: bool) -> None:
    assert bool(compile_glob(pattern).match(path)) is hit


def test_runtime_patterns_cover_every_test_path() -> None:
    matcher = Matcher(RUNTIME_PROTECTED)
    for path in [
        "tests/test_a.py",
        "pkg/tests/data/x.json",
        "Tests/Foo.cs",
        "a/__tests__/b.js",
        "src/foo.spec.ts",
        "lib/foo_test.go",
        "spec/models/user_spec.rb",
        "pkg/testing/helpers.py",
        "MyLib.Tests/x.cs",
        "test_top.py",
        "conftest.py",
    ]:
        assert is_test_path(path) and matcher.match(path), path
    for path in ["src/pkg/mod.py", "lib/index.js", "README.md", "setup.py", "contest.py"]:
        assert matcher.match(path) is None, path


def test_read_verification_defaults_and_errors() -> None:
    assert read_verification(None).mode == "in_place"
    assert read_verification({"verification": {"mode": "clean_room"}}).protected == ()
    for bad in (
        {"verification": {"mode": "sideways"}},
        {"verification": "clean_room"},
        {"verification": {"mode": "clean_room", "protected": ["/abs"]}},
        {"verification": {"mode": "clean_room", "protected": [3]}},
        {"verification": {"mode": "clean_room", "protected": ["tests/[x"]}},
    ):
        with pytest.raises(ValueError):
            read_verification(bad)


# ------------------------------------------------------------------------------ the plan

BASE_FILES = {
    "pkg/__init__.py",
    "pkg/mod.py",
    "pkg/conftest.py",
    "tests/test_mod.py",
    "tests/helpers.py",
    "README.md",
    "setup.cfg",
}
BASE_DIRS = {"pkg", "tests"}


def plan(changes: list[Change]):  # type: ignore[no-untyped-def]
    return plan_carry_over(changes, Matcher(RUNTIME_PROTECTED), BASE_FILES, BASE_DIRS)


def test_plan_keeps_source_edits_and_drops_protected_ones() -> None:
    report, remove, merge = plan(
        [
            Change("pkg", "dir"),
            Change("pkg/mod.py", "file"),
            Change("pkg/new.py", "file"),
            Change("pkg/conftest.py", "file"),
            Change("tests", "dir"),
            Change("tests/test_mod.py", "file"),
            Change("setup.cfg", "file"),
            Change("pkg/__pycache__", "dir"),
            Change("pkg/__pycache__/mod.cpython-311.pyc", "file"),
        ]
    )
    assert report.applied == ["pkg/mod.py", "pkg/new.py"]
    assert merge == ["pkg", "pkg/mod.py", "pkg/new.py"]
    assert remove == []
    assert [d["path"] for d in report.dropped] == [
        "pkg/conftest.py",
        "tests",
        "setup.cfg",
        "pkg/__pycache__",
    ]


def test_plan_refuses_escaping_symlinks_specials_and_stdlib_shadows() -> None:
    report, _remove, merge = plan(
        [
            Change("pkg/link.py", "symlink", target="../../etc/passwd"),
            Change("pkg/abs.py", "symlink", target="/etc/passwd"),
            Change("pkg/ok.py", "symlink", target="mod.py"),
            Change("pkg/fifo", "special"),
            Change("json.py", "file"),
            Change("src", "dir"),
            Change("src/inspect", "dir"),
        ]
    )
    reasons = {d["path"]: d["reason"] for d in report.dropped}
    assert reasons["pkg/link.py"].startswith("symlink leaves the working tree")
    assert reasons["pkg/abs.py"].startswith("symlink leaves the working tree")
    assert reasons["pkg/fifo"] == "device, fifo or socket"
    assert "standard library" in reasons["json.py"] and "standard library" in reasons["src/inspect"]
    assert merge == ["pkg/ok.py", "src"]


def test_plan_deletions_spare_protected_files() -> None:
    report, remove, _ = plan(
        [Change("pkg", "deleted"), Change("tests", "deleted"), Change("README.md", "deleted")]
    )
    # pkg holds a protected conftest.py: its other files go one by one, the conftest stays.
    assert sorted(remove) == ["README.md", "pkg/__init__.py", "pkg/mod.py"]
    reasons = {d["path"]: d["reason"] for d in report.dropped}
    assert reasons["tests"].startswith("deletes protected path")
    assert reasons["pkg"] == "deletion spares 1 protected path(s) below it"
    # The whole tree replaced: everything unprotected goes.
    _report, remove, _ = plan([Change(".", "deleted")])
    assert sorted(remove) == ["README.md", "pkg/__init__.py", "pkg/mod.py"]


def test_plan_will_not_replace_a_folder_holding_protected_files() -> None:
    report, remove, merge = plan([Change("pkg", "symlink", target="elsewhere")])
    assert merge == [] and remove == []
    assert report.dropped[0]["reason"].startswith("would replace a folder holding protected path")


# ------------------------------------------------------------------------------ for real

TOML = """\
schema_version = "1.4"
[agent]
timeout_sec = 60.0
[verifier]
timeout_sec = 60.0
[environment]
network_mode = "no-network"
workdir = "/work"
[metadata.repo2env.verification]
mode = "clean_room"
protected = ["**/conftest.py", "tests"]
"""
# The verifier reports what it sees: the workdir's files and whether outside edits survived.
REPORT = """\
#!/bin/bash
cd /work
{ find . -type f -o -type l | sort; test -e /etc/planted && echo planted; \
  test -e /tmp/planted && echo tmp-planted; } > /logs/verifier/seen.txt
python3 - <<'EOF'
import json
seen = open("/logs/verifier/seen.txt").read().split()
json.dump({"seen": seen}, open("/logs/verifier/reward-details.json", "w"))
open("/logs/verifier/reward.txt", "w").write("1\\n" if "./app.py" in seen else "0\\n")
EOF
"""
DOCKERFILE = """\
FROM debian:bookworm
WORKDIR /work
RUN mkdir -p tests sub && echo 'print(1)' > app.py && echo 't' > tests/t.py && \
    echo 'x' > sub/keep.txt && echo 'c' > sub/conftest.py
"""


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner(get_backend("local"))


@pytest.mark.slow
def test_only_the_working_tree_change_reaches_the_verifier(runner, tmp_path: Path) -> None:
    task = load_task(
        write_task(tmp_path, "clean", toml=TOML, dockerfile=DOCKERFILE, test_sh=REPORT)
    )
    outcome = runner.run(
        task,
        CommandAgent(
            "echo 'print(2)' > app.py && echo new > new.txt && echo hack > tests/t.py && "
            "echo hook > conftest.py && rm sub/keep.txt && rm -rf sub && mkdir sub && "
            "echo planted > /etc/planted && echo planted > /tmp/planted && "
            "ln -s /etc/passwd leak"
        ),
    )
    assert outcome.error is None, outcome.error
    seen = outcome.reading.details["seen"]
    # Source edits and deletions are carried; protected and outside paths are not.
    assert "./new.txt" in seen and "./app.py" in seen and "./sub/keep.txt" not in seen
    assert "./conftest.py" not in seen and "./leak" not in seen
    assert "./sub/conftest.py" in seen  # deleting its folder spared the protected file
    assert "planted" not in seen and "tmp-planted" not in seen
    v = outcome.result["verification"]
    assert v["mode"] == "clean_room"
    assert set(v["applied"]) == {"app.py", "new.txt"}
    dropped = {d["path"]: d["reason"] for d in v["dropped"]}
    assert dropped["tests"].startswith("protected") and dropped["conftest.py"].startswith(
        "protected"
    )
    assert dropped["leak"].startswith("symlink leaves the working tree")
    assert json.dumps(v)  # plain data for result.json


@pytest.mark.slow
def test_in_place_override_keeps_the_agents_sandbox(tmp_path: Path) -> None:
    task = load_task(
        write_task(tmp_path, "inplace", toml=TOML, dockerfile=DOCKERFILE, test_sh=REPORT)
    )
    runner = TrialRunner(get_backend("local"), verification="in_place")
    outcome = runner.run(task, CommandAgent("echo hook > conftest.py && echo p > /etc/planted"))
    seen = outcome.reading.details["seen"]
    assert "./conftest.py" in seen and "planted" in seen
    assert outcome.result["verification"] == {"mode": "in_place"}
