"""``repogym export --format swebench``: instance fields, id forms, fallbacks and refusals.

The parity with swebench's own grader is in tests/external/test_swebench_parity.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.hub.swebench import NotExpressible, export_swebench, owner_name, swebench_id
from tests.conftest import EXAMPLES
from tests.sources.conftest import BASE_EPOCH, GitRepo, pin_git_env

EXAMPLE = EXAMPLES / "textstats-word-count"


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    """The example's source as a git repository whose branch ``example`` is the task's ref."""
    pin_git_env(monkeypatch)
    repo = GitRepo(tmp_path / "textstats")
    for f in sorted((EXAMPLE / "environment" / "repo").rglob("*.py")):
        repo.write(f.relative_to(EXAMPLE / "environment" / "repo").as_posix(), f.read_text())
    repo.commit("textstats")
    repo.git("tag", "v1.2.0")
    repo.git("branch", "-m", "example")
    return repo


def _copy(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    task = tmp_path / "ds" / "textstats-word-count"
    shutil.copytree(EXAMPLE, task)
    text = (task / "task.toml").read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    (task / "task.toml").write_text(text)
    return task


def test_ids_take_the_form_of_swebench_parsers() -> None:
    assert swebench_id("tests/t.py::test_a[1-2]", "pytest") == "tests/t.py::test_a[1-2]"
    uid = "tests.test_counts.CountsTest.test_x"
    assert swebench_id(uid, "unittest", (3, 12)) == f"test_x ({uid})"
    assert swebench_id(uid, "unittest", (3, 10)) == "test_x (tests.test_counts.CountsTest)"
    with pytest.raises(NotExpressible, match="go"):
        swebench_id("TestX", "go")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/acme/tool.git", "acme/tool"),
        ("git@github.com:acme/tool.git", "acme/tool"),
        ("ssh://git@gitlab.example/group/sub/tool", "sub/tool"),
        ("/srv/git/tool", None),
        ("file:///srv/git/tool", None),
    ],
)
def test_owner_name_of_remotes(url: str, expected: str | None) -> None:
    assert owner_name(url) == expected


def test_instance_fields(tmp_path: Path, source: GitRepo) -> None:
    out = tmp_path / "out.jsonl"
    result = export_swebench(EXAMPLE, out, source=source.path)
    (inst,) = result.instances
    assert [json.loads(line) for line in out.read_text().splitlines()] == [inst]
    committed = int(source.git("log", "-1", "--format=%ct"))
    assert BASE_EPOCH <= committed < BASE_EPOCH + 3600  # the pinned date, not today's
    expected_date = datetime.fromtimestamp(committed, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert inst["instance_id"] == "textstats-word-count"
    assert inst["repo"] == "repogym-examples/textstats"  # no remote: provenance's owner/name
    assert inst["base_commit"] == inst["environment_setup_commit"] == "example"
    assert inst["created_at"] == expected_date
    assert inst["version"] == "1.2.0"
    assert inst["patch"] == (EXAMPLE / "solution" / "patch.diff").read_text()
    assert inst["problem_statement"] == (EXAMPLE / "instruction.md").read_text()
    assert inst["image"] is None and inst["eval_type"] == "pass_and_fail"
    assert inst["log_parser"] == "parse_log_django"
    f2p = json.loads(inst["FAIL_TO_PASS"])
    assert f2p[0] == (
        "test_word_count_irregular_whitespace "
        "(tests.test_counts.CountsTest.test_word_count_irregular_whitespace)"
    )
    assert len(json.loads(inst["PASS_TO_PASS"])) == 3
    # the test patch (made from the hidden test files) and the gold patch apply to the source
    for key in ("test_patch", "patch"):
        check = subprocess.run(
            ["git", "apply", "--check", "-"], cwd=source.path, input=inst[key], text=True
        )
        assert check.returncode == 0, key
    script = inst["eval_script"]
    assert script.index(">>>>> Start Test Output") < script.index("python -m unittest -v")
    assert script.index("python -m unittest -v") < script.index(">>>>> End Test Output")
    assert "cd /testbed" in script and "git checkout HEAD -- 'tests/test_counts.py'" in script


def test_repo_from_remote_or_stable_local_fallback(tmp_path: Path, source: GitRepo) -> None:
    task = _copy(
        tmp_path,
        ('repo = "repogym-examples/textstats"', 'repo = "textstats"'),
        ('workdir = "/workspace"', 'workdir = "/workspace"\ndocker_image = "reg.test/ts:1"'),
    )
    (inst,) = export_swebench(task, tmp_path / "a.jsonl", source=source.path).instances
    assert inst["repo"] == "local/textstats" and inst["image"] == "reg.test/ts:1"
    source.git("remote", "add", "origin", "https://github.com/acme/textstats.git")
    (inst,) = export_swebench(task, tmp_path / "b.jsonl", source=source.path).instances
    assert inst["repo"] == "acme/textstats"


def test_pytest_ids_and_summary_flag(tmp_path: Path, source: GitRepo) -> None:
    task = _copy(tmp_path)
    config = json.loads((task / "tests" / "config.json").read_text())
    config.update(runner="pytest", command="python -m pytest -q")
    (task / "tests" / "config.json").write_text(json.dumps(config))
    (task / "tests" / "f2p.json").write_text('["tests/test_counts.py::CountsTest::test_a"]')
    (inst,) = export_swebench(task, tmp_path / "o.jsonl", source=source.path).instances
    assert inst["log_parser"] == "parse_log_pytest"
    assert json.loads(inst["FAIL_TO_PASS"]) == ["tests/test_counts.py::CountsTest::test_a"]
    assert "python -m pytest -q -rA" in inst["eval_script"]


def test_cli_reports_what_cannot_be_expressed(tmp_path: Path, source: GitRepo) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    res = CliRunner().invoke(
        app, ["export", str(EXAMPLES), "--format", "swebench", "--out", str(out), "--json"]
    )
    assert res.exit_code == 1
    report = json.loads(res.stdout)
    assert report["exported"] == [] and report["out"] is None
    reasons = {s["task"]: s["reason"] for s in report["skipped"]}
    assert "not a graded runtime task" in reasons["hello-file"]
    assert "commit date unknown: pass --repo" in reasons["textstats-word-count"]
    assert out.read_text() == "previous\n"  # nothing exported: the file is untouched

    args = ["export", str(EXAMPLES), "--format", "swebench", "--out", str(out)]
    res = CliRunner().invoke(app, [*args, "--repo", str(source.path)])
    assert res.exit_code == 0, res.output
    assert "exported 1 instance(s)" in res.stdout and "skipped hello-file" in res.stderr
    assert [json.loads(line)["instance_id"] for line in out.read_text().splitlines()] == [
        "textstats-word-count"
    ]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left
    res = CliRunner().invoke(app, ["export", str(EXAMPLES), "--format", "x", "--out", str(out)])
    assert res.exit_code == 2 and "swebench" in res.output


def test_the_date_a_generated_task_recorded_needs_no_clone(tmp_path: Path) -> None:
    """Pipelines record when the change was made (``created_at`` in their table): the export
    takes it, in UTC, without ``--repo``."""
    task = _copy(
        tmp_path,
        (
            "[metadata.repo2env.manual]\n",
            '[metadata.repo2env.manual]\ncreated_at = "2024-03-05T10:11:12+01:00"\n',
        ),
    )
    result = export_swebench(task.parent, tmp_path / "out.jsonl")
    (inst,) = result.instances
    assert inst["created_at"] == "2024-03-05T09:11:12Z"
