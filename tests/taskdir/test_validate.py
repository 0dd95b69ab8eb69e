"""`repogym validate`: every check, exit codes, one-line reasons naming the file, no writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.taskdir import set_content_hash
from repogym.taskdir.validate import check_unified_diff, leaked_lines, validate_task
from tests.conftest import EXAMPLES, snapshot

runner = CliRunner()


def run_cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_examples_are_valid() -> None:
    code, output = run_cli("validate", str(EXAMPLES), "--deep")
    assert code == 0, output
    assert "valid" in output and "invalid" in output  # the summary table


def test_console_script_lists_commands() -> None:
    exe = Path(sys.executable).parent / "repogym"
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True).stdout
    for command in ("validate", "dataset"):
        assert command in out


def test_json_output(examples_copy: Path) -> None:
    code, output = run_cli("validate", str(examples_copy), "--json")
    assert code == 0
    payload = json.loads(output)
    # Both examples declare their provenance and clean-room verification: nothing to warn of.
    assert payload["summary"] == {"tasks": 2, "valid": 2, "invalid": 0, "warnings": 0}
    assert all(t["ok"] and not t["problems"] for t in payload["tasks"])


def _graded(make_task, **kwargs):
    toml = """\
schema_version = "1.4"
[metadata.repo2env]
pipeline = "commit_runtime"
reward_kinds = ["test_execution"]
[metadata.repo2env.commit_runtime]
fail_to_pass = ["t::a"]
pass_to_pass = ["t::b", "t::c"]
"""
    files = {"tests/f2p.json": '["t::a"]', "tests/p2p.json": '["t::b", "t::c"]'}
    files.update(kwargs.pop("files", {}))
    task = make_task("graded", toml=toml, files=files, **kwargs)
    set_content_hash(task)
    return task


def test_graded_task_valid(make_task) -> None:
    assert validate_task(_graded(make_task), deep=True).problems == []


def test_a_count_in_place_of_a_huge_id_list_is_valid(make_task) -> None:
    """What generate writes for a suite too big to list in task.toml."""
    task = _graded(make_task)
    toml = (task / "task.toml").read_text().replace('["t::b", "t::c"]', "2")
    (task / "task.toml").write_text(toml)
    set_content_hash(task)
    assert validate_task(task, deep=True).problems == []
    (task / "tests" / "p2p.json").write_text('["t::b"]')
    set_content_hash(task)
    [problem] = validate_task(task, deep=True).problems
    assert "has 1 ids but commit_runtime.pass_to_pass says 2" in problem.message


BAD_CASES = {
    "malformed_toml": ("task.toml", "invalid TOML"),
    "missing_instruction": ("instruction.md", "missing"),
    "non_utf8_instruction": ("instruction.md", "not UTF-8"),
    "empty_instruction": ("instruction.md", "empty"),
    "symlink_escape": ("tests/evil", "absolute path"),
    "f2p_not_list": ("tests/f2p.json", "JSON array"),
    "f2p_count_mismatch": ("tests/p2p.json", "has 1 ids but commit_runtime.pass_to_pass says 2"),
    "stale_hash": ("task.toml", "content_hash is stale"),
    "no_environment": ("environment/", "no environment definition"),
    "no_test_script": ("tests/test.sh", "no test script"),
    "bad_reward_kinds": ("task.toml", "reward_kinds must be a list"),
    "leak": ("instruction.md", "appear verbatim"),
    "copy_escape": ("environment/Dockerfile", "is outside the context"),
}


def _make_bad(case: str, make_task) -> Path:
    if case == "malformed_toml":
        return make_task(toml="schema_version = [\n")
    if case == "missing_instruction":
        return make_task(instruction=None)
    if case == "non_utf8_instruction":
        return make_task(instruction=b"caf\xe9 \xff\n")
    if case == "empty_instruction":
        return make_task(instruction="  \n")
    if case == "symlink_escape":
        t = make_task()
        (t / "tests" / "evil").symlink_to("/etc/passwd")
        return t
    if case == "f2p_not_list":
        t = _graded(make_task)
        (t / "tests" / "f2p.json").write_text('{"t::a": 1}')
        return t
    if case == "f2p_count_mismatch":
        t = _graded(make_task)
        (t / "tests" / "p2p.json").write_text('["t::b"]')
        set_content_hash(t)
        return t
    if case == "stale_hash":
        t = _graded(make_task)
        (t / "tests" / "test.sh").write_text(
            "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n#x\n"
        )
        return t
    if case == "no_environment":
        return make_task(dockerfile=None)
    if case == "no_test_script":
        return make_task(test_sh=None)
    if case == "bad_reward_kinds":
        return make_task(toml="schema_version='1.4'\n[metadata.repo2env]\nreward_kinds='all'\n")
    if case == "leak":
        diff = (
            "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-    return a - b\n"
            "+    return sorted(items, key=lambda item: item.priority)\n"
        )
        return make_task(
            instruction="Fix it. Hint: `return sorted(items, key=lambda item: item.priority)`\n",
            files={"solution/patch.diff": diff, "solution/solve.sh": "#!/bin/bash\n"},
        )
    if case == "copy_escape":
        return make_task(dockerfile="FROM python:3.11-slim\nCOPY ../../secrets /app/\n")
    raise AssertionError(case)


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_one_line_exit_1_nothing_written(case: str, make_task, tmp_path) -> None:
    task = _make_bad(case, make_task)
    before = snapshot(tmp_path)
    code, output = run_cli("validate", str(task.parent))
    assert code == 1, output
    file, fragment = BAD_CASES[case]
    error_lines = [line for line in output.splitlines() if line.startswith("ERROR")]
    assert any(f"{task.name}: {file}:" in line and fragment in line for line in error_lines), output
    assert snapshot(tmp_path) == before


def test_unusable_input_exit_2(tmp_path: Path) -> None:
    assert run_cli("validate", str(tmp_path / "nope"))[0] == 2
    (tmp_path / "empty").mkdir()
    code, output = run_cli("validate", str(tmp_path / "empty"))
    assert code == 2 and "no task.toml" in output


def test_one_bad_task_does_not_hide_the_others(make_task, tmp_path) -> None:
    make_task("good")
    make_task("bad", toml="[[[")
    code, output = run_cli("validate", str(tmp_path / "ds"), "--json")
    payload = json.loads(output)
    assert code == 1
    assert {t["task_id"]: t["ok"] for t in payload["tasks"]} == {"good": True, "bad": False}


def test_leak_ignores_short_generic_lines() -> None:
    diff = "--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-x\n+    return None\n+}\n"
    assert leaked_lines("Make it return None\n}\n", diff) == []


def test_unified_diff_checker() -> None:
    good = "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    assert check_unified_diff(good) is None
    assert "counts" in (check_unified_diff(good.replace("@@ -1,2", "@@ -1,5")) or "")
    assert check_unified_diff("just text") is not None


def test_deep_catches_broken_verifier(make_task) -> None:
    t = make_task(files={"tests/verifier.py": "def broken(:\n"})
    assert validate_task(t).ok
    report = validate_task(t, deep=True)
    assert not report.ok and report.errors[0].file == "tests/verifier.py"


def test_dataset_index(examples_copy: Path) -> None:
    code, output = run_cli("dataset", "index", str(examples_copy), "--name", "examples")
    assert code == 0, output
    registry = json.loads((examples_copy / "registry.json").read_text())
    assert registry[0]["name"] == "examples"
    # Absolute: Harbor reads a local registry's paths against the folder it runs in.
    assert {t["name"]: t["path"] for t in registry[0]["tasks"]} == {
        "hello-file": (examples_copy.resolve() / "hello-file").as_posix(),
        "textstats-word-count": (examples_copy.resolve() / "textstats-word-count").as_posix(),
    }
    assert registry[0]["metrics"] == [{"type": "mean"}]
    manifest = json.loads((examples_copy / "manifest.json").read_text())
    row = next(r for r in manifest["tasks"] if r["id"] == "textstats-word-count")
    assert (row["f2p"], row["p2p"], row["pipeline"]) == (2, 3, "manual")
    assert row["content_hash"].startswith("sha256:")
    # The dataset files are not tasks and do not disturb validation.
    assert run_cli("validate", str(examples_copy))[0] == 0


PUBLISHED = """\
schema_version = "1.4"
[task]
name = "acme/pub"
[metadata.repo2env.reproducibility]
mode = "registry"
image_ref = "127.0.0.1:5000/gym/acme:pub"
image_digest = "sha256:{recorded}"
[environment]
docker_image = "127.0.0.1:5000/gym/acme@sha256:{pinned}"
"""


def test_a_published_image_must_agree_with_its_record(make_task) -> None:  # type: ignore[no-untyped-def]
    ok = make_task("pub", toml=PUBLISHED.format(recorded="a" * 64, pinned="a" * 64))
    assert not [p for p in validate_task(ok).problems if p.check == "environment"]
    other = make_task("other", toml=PUBLISHED.format(recorded="a" * 64, pinned="b" * 64))
    msgs = [p.message for p in validate_task(other).problems if p.check == "environment"]
    assert any("image_digest" in m for m in msgs), msgs
    bad = make_task("bad", toml=PUBLISHED.format(recorded="a" * 64, pinned="xyz"))
    msgs = [p.message for p in validate_task(bad).problems if p.check == "environment"]
    assert any("not a sha256 digest" in m for m in msgs), msgs
