"""Rough edges of the command line: one line and exit 2 instead of a traceback, nothing half
written, checks before work starts, help texts as written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from repogym.cli import app

from .conftest import EXAMPLES, ROOT


def invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output


def one_line_error(code: int, output: str) -> None:
    """Exit 2 with a short error on stderr, never a traceback."""
    assert code == 2, output
    assert "Traceback" not in output, output
    assert "error" in output.lower(), output


@pytest.fixture
def with_malformed(tmp_path: Path) -> Path:
    """A dataset of one good task and one whose task.toml does not parse."""
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES / "hello-file", data / "hello-file", symlinks=True)
    (data / "broken").mkdir()
    (data / "broken" / "task.toml").write_text("this is [not toml\n")
    return data


@pytest.fixture
def listening() -> int:
    """A port something is already listening on."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that reaches uvicorn.run fails the test instead of blocking."""
    import uvicorn

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("the server was started")

    monkeypatch.setattr(uvicorn, "run", refuse)


# 7. one line and exit 2, nothing half written


def test_serve_without_uvicorn_prints_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn -> ImportError
    code, output = invoke("serve", str(EXAMPLES))
    one_line_error(code, output)
    assert "pip install 'repogym[openenv]'" in output


def test_serve_on_a_malformed_task_exits_2(with_malformed: Path, no_server: None) -> None:
    code, output = invoke("serve", str(with_malformed), "--port", "1")
    one_line_error(code, output)
    assert "broken" in output and "invalid TOML" in output


def test_export_on_a_malformed_task_leaves_no_package(with_malformed: Path, tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    code, output = invoke("export", str(with_malformed), "--out", str(pkg))
    one_line_error(code, output)
    assert "broken" in output
    assert not pkg.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_export_failing_midway_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repogym.openenv import export as export_mod

    def broken_readme(*_a: object) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(export_mod, "_readme", broken_readme)
    with pytest.raises(OSError):
        export_mod.export_openenv(EXAMPLES, tmp_path / "pkg")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ["generate", "--repo", "{repo}", "--out", "{file}"],
        ["run", str(EXAMPLES), "--out", "{file}"],
        ["example-repo", "{file}"],
        ["export", str(EXAMPLES), "--out", "{file}"],
    ],
    ids=["generate", "run", "example-repo", "export"],
)
def test_out_naming_an_existing_file(tmp_path: Path, command: list[str]) -> None:
    existing = tmp_path / "existing.txt"
    existing.write_text("keep me\n")
    args = [a.format(repo=tmp_path, file=existing) for a in command]
    code, output = invoke(*args)
    one_line_error(code, output)
    assert "not a folder" in output
    assert existing.read_text() == "keep me\n"


# 8. ports


@pytest.mark.parametrize("command", [["serve", str(EXAMPLES)], ["explore", str(EXAMPLES)]])
@pytest.mark.parametrize("port", ["0", "99999", "-1"])
def test_port_out_of_range_is_refused(command: list[str], port: str, no_server: None) -> None:
    code, output = invoke(*command, "--port", port)
    assert code == 2, output
    assert "--port" in output


@pytest.mark.parametrize("command", [["serve", str(EXAMPLES)], ["explore", str(EXAMPLES)]])
def test_port_in_use_is_reported_at_once(
    command: list[str], listening: int, no_server: None
) -> None:
    t0 = time.monotonic()
    code, output = invoke(*command, "--port", str(listening))
    one_line_error(code, output)
    assert f"port {listening} in use" in output
    assert time.monotonic() - t0 < 5


# 10. leave nothing behind


def test_explore_index_failure_leaves_nothing(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "blob.bin").write_bytes(b"\0\1\2")
    snap = tmp_path / "snap"
    code, output = invoke("explore", "index", str(src), "--out", str(snap))
    one_line_error(code, output)
    assert not snap.exists()


def test_explore_index_failure_keeps_what_was_there(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "blob.bin").write_bytes(b"\0\1\2")
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "notes.txt").write_text("mine\n")
    code, output = invoke("explore", "index", str(src), "--out", str(snap))
    one_line_error(code, output)
    assert [p.name for p in snap.iterdir()] == ["notes.txt"]


def test_explore_index_is_a_sub_command() -> None:
    code, output = invoke("explore", "--help")
    assert code == 0 and "index" in output and "serve" in output
    code, output = invoke("explore", "index", "--help")
    assert code == 0 and "--out" in output and "--snapshot" not in output.split("Options")[1]


def test_sigterm_cleans_up_like_ctrl_c(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "TMPDIR": str(tmp)}
    cmd = [sys.executable, "-m", "repogym.cli", "explore", str(EXAMPLES), "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "task pages ready" in line:
                break
        assert [p.name for p in tmp.iterdir() if p.name.startswith("repogym-explore-")]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert [p.name for p in tmp.iterdir() if p.name.startswith("repogym-")] == []


def test_generate_into_a_folder_holding_tasks_refuses(tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(EXAMPLES / "hello-file", out / "tasks" / "hello-file", symlinks=True)
    report = out / "generate-report.json"
    report.write_text('{"earlier": true}\n')
    code, output = invoke("generate", "--repo", str(tmp_path), "--out", str(out))
    one_line_error(code, output)
    assert "already holds 1 task(s)" in output and "--resume" in output
    assert report.read_text() == '{"earlier": true}\n'


def test_run_out_over_an_existing_job_refuses(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.json").write_text('{"earlier": true}\n')
    code, output = invoke("run", str(EXAMPLES / "hello-file"), "--out", str(job))
    one_line_error(code, output)
    assert "--overwrite" in output
    assert (job / "job.json").read_text() == '{"earlier": true}\n'
    assert [p.name for p in job.iterdir()] == ["job.json"]


# 11. help texts and flag checks


def test_help_keeps_bracketed_words() -> None:
    code, output = invoke("verify", "--help")
    assert code == 0
    assert "[metadata.repo2env.evaluation]" in output
    code, output = invoke("dataset", "rehash", "--help")
    assert "[metadata.repo2env]" in output


@pytest.mark.parametrize("command", [["generate"], ["verify"], ["explore", "serve"], ["run"]])
def test_help_shows_flags_as_flags(command: list[str]) -> None:
    code, output = invoke(*command, "--help")
    assert code == 0
    assert "<bool>" not in output
    assert "--json" in output or "--hub" in output or "--write / --no-write" in output


def test_validate_jobs_must_not_be_negative() -> None:
    code, output = invoke("validate", str(EXAMPLES), "--jobs", "-1")
    assert code == 2
    assert "--jobs" in output


def test_run_checks_the_sandbox_before_announcing(tmp_path: Path) -> None:
    code, output = invoke("run", str(EXAMPLES), "--sandbox", "bogus", "--out", str(tmp_path / "j"))
    one_line_error(code, output)
    assert "running" not in output
    assert not (tmp_path / "j").exists()


def test_unknown_opt_key_lists_the_valid_ones(tmp_path: Path) -> None:
    code, output = invoke("generate", "--repo", str(tmp_path), "--opt", "max_p2p=3")
    one_line_error(code, output)
    assert "'max_p2p'" in output
    assert "valid keys:" in output and "max_candidates" in output and "reward" in output


# 12. long steps


def test_generate_view_reports_progress_before_the_first_result() -> None:
    from repogym.ui.generate import GenerateView

    view = GenerateView(enabled=True, title="commit_runtime · demo")
    assert "building the environment and running the tests" in view.now_line()
    stats = SimpleNamespace(running=2, seen=2, kept=0, elapsed=3.0, drops=Counter())
    view.outcome(
        SimpleNamespace(
            kept=False, reason="x", seconds=1.0, candidate=SimpleNamespace(task_id="t")
        ),
        stats,
    )
    assert "2 candidate(s)" in view.now_line()


def test_generate_view_shows_the_step_of_each_candidate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from repogym.pipelines import Progress
    from repogym.ui.generate import GenerateView

    view = GenerateView(enabled=True, title="commit_runtime · demo", jobs=2)
    view.progress(Progress("demo-1", "started"))
    view.progress(Progress("demo-1", "build_started"))
    assert view.now_line().startswith("building the environment of demo-1 … ")
    view.progress(Progress("demo-2", "started"))
    view.progress(Progress("demo-1", "tests_before"))
    line = view.now_line()
    assert "preparing demo-2" in line and "running the tests of demo-1 (before the fix)" in line
    view.progress(Progress("demo-2", "finished"))
    view.outcome(
        SimpleNamespace(
            kept=True, reason=None, seconds=1.0, candidate=SimpleNamespace(task_id="demo-1")
        ),
        SimpleNamespace(running=0, seen=2, kept=1, elapsed=3.0, drops=Counter()),
    )
    assert "demo" not in view.now_line()
    # not a terminal: one line per long step, none for the short ones
    printed = capsys.readouterr().err.splitlines()
    assert printed == [
        "  building the environment of demo-1 …",
        "  running the tests of demo-1 (before the fix) …",
        "  demo-1: kept (1.0 s)",
    ]


def test_generate_json_prints_no_progress(tmp_path: Path, monkeypatch) -> None:
    """--json: the report only; the progress hook is not even passed."""
    import repogym.pipelines
    import repogym.workflows

    seen: dict[str, object] = {}

    def fake_generate(inp, **kw):
        seen.update(kw)
        raise repogym.pipelines.GenerateError("stop here")

    monkeypatch.setattr(repogym.workflows, "generate", fake_generate)
    code, output = invoke("generate", "--repo", str(tmp_path), "--json")
    one_line_error(code, output)
    assert seen["on_progress"] is None


def test_overhead_ratio_when_nothing_ran(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from repogym.ui.generate import GenerateView

    stats = SimpleNamespace(seen=0, kept=0, elapsed=1.5, test_seconds=0.0, drops=Counter())
    result = SimpleNamespace(out=tmp_path, report=tmp_path / "generate-report.json")
    GenerateView(enabled=False, title="t").final(stats, result)
    printed = capsys.readouterr().out
    assert "nan" not in printed
    assert "overhead ratio —" in printed


def test_demo_says_what_next_and_ends_on_the_adversarial_floor_table() -> None:
    lines = (ROOT / "scripts" / "demo.sh").read_text().strip().splitlines()
    assert any("what next" in line for line in lines)
    # The last command prints the verify table with each task's adversarial floor.
    assert lines[-1].startswith(".venv/bin/repogym verify ") and "--adversarial" in lines[-1]


# 13. duplicate ids


def test_validate_reports_duplicate_task_ids(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for group in ("a", "b"):
        shutil.copytree(EXAMPLES / "hello-file", data / group / "hello-file", symlinks=True)
    code, output = invoke("validate", str(data), "--json")
    assert code == 1, output
    payload = json.loads(output)
    assert payload["summary"]["invalid"] == 2
    problems = [p for t in payload["tasks"] for p in t["problems"] if p["check"] == "unique_id"]
    assert len(problems) == 2
    assert "share the id 'hello-file'" in problems[0]["message"]


def test_dataset_index_refuses_duplicate_task_ids(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for group in ("a", "b"):
        shutil.copytree(EXAMPLES / "hello-file", data / group / "hello-file", symlinks=True)
    code, output = invoke("dataset", "index", str(data))
    one_line_error(code, output)
    assert "share the id 'hello-file'" in output
    assert len(output.strip().splitlines()) == 1
    assert not (data / "registry.json").exists() and not (data / "manifest.json").exists()
    shutil.rmtree(data / "b")
    code, output = invoke("dataset", "index", str(data))
    assert code == 0, output
    assert (data / "registry.json").is_file()


def test_generate_view_says_what_it_waits_for_only_after_a_silence(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from repogym.ui import generate as view_module

    monkeypatch.setattr(view_module, "HEADER_AFTER_S", 0.05)
    with view_module.GenerateView(enabled=True, title="quick"):
        pass  # a run that fails at once (bad input) prints its one line only
    assert "each candidate builds" not in capsys.readouterr().err
    with view_module.GenerateView(enabled=True, title="slow"):
        time.sleep(0.5)
    assert "slow: each candidate builds its environment" in capsys.readouterr().err
