"""Bad values and malformed state are refused before any work, one line, exit 2, nothing
written: a command agent the shell cannot parse, numbers past their ceilings, an unknown
sandbox for ``validate --runnable``, a newline in ``export --requirement``, a malformed task in
a dataset given to ``run``, a corrupted or foreign ``generate --resume`` state. An empty
``task.toml`` is an error of ``validate``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.example_repo import build_example_repo
from tests.conftest import EXAMPLES, snapshot, write_task
from tests.faults.test_one_line import one_line

cli = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def test_a_command_agent_the_shell_cannot_parse(tmp_path: Path) -> None:
    out = tmp_path / "job"
    res = cli.invoke(
        app, ["run", str(EXAMPLES), "--agent", "command:echo 'oops", "--out", str(out)]
    )
    one_line(res, 2, "cannot parse", "echo 'oops")
    assert not out.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["run", str(EXAMPLES), "--attempts", "1000000000000"],
        ["run", str(EXAMPLES), "--jobs", "100000"],
        ["verify", str(EXAMPLES), "--reruns", "5000"],
        ["verify", str(EXAMPLES), "--mutants", "5000"],
        ["serve", str(EXAMPLES), "--max-sessions", "1000000"],
        ["validate", str(EXAMPLES), "--jobs", "100000"],
    ],
    ids=lambda a: a[0] + a[2],
)
def test_numbers_past_their_ceiling(argv: list[str]) -> None:
    one_line(cli.invoke(app, argv), 2, "less than or equal to")


def test_validate_runnable_with_an_unknown_sandbox_is_bad_input() -> None:
    one_line(
        cli.invoke(app, ["validate", str(EXAMPLES), "--runnable", "--sandbox", "bogus"]),
        2,
        "unknown sandbox backend 'bogus'",
    )


def test_an_empty_task_toml_is_an_error(tmp_path: Path) -> None:
    task = tmp_path / "t"
    shutil.copytree(EXAMPLES / "hello-file", task)
    (task / "task.toml").write_text("\n")
    res = cli.invoke(app, ["validate", str(task)])
    assert res.exit_code == 1 and "task.toml is empty" in res.output, res.output


def test_a_requirement_with_a_newline_writes_no_dockerfile_line(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    res = cli.invoke(
        app,
        ["export", str(EXAMPLES), "--out", str(out), "--requirement", "repogym\nRUN rm -rf /"],
    )
    one_line(res, 2, "newline")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_run_over_a_dataset_with_a_malformed_task_runs_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    write_task(data, "broken", toml="[verifier\n")
    out = tmp_path / "job"
    res = cli.invoke(app, ["run", str(data), "--agent", "nop", "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "broken" in res.output and "running" not in res.output
    assert not out.exists()


# ------------------------------------------------------------------------ generate --resume


@pytest.fixture(scope="module")
def example_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_example_repo(tmp_path_factory.mktemp("repo") / "statkit")


@pytest.mark.parametrize("state", [b"\x8a\x00 random bytes \xff", b"[1, 2, 3]", b'{"a": 1}'])
def test_a_corrupted_resume_state_is_refused(
    example_repo: Path, tmp_path: Path, state: bytes
) -> None:
    out = tmp_path / "ds"
    (out / ".repogym").mkdir(parents=True)
    (out / ".repogym" / "commit_runtime-state.json").write_bytes(state)
    before = snapshot(out)
    res = cli.invoke(app, ["generate", "--repo", str(example_repo), "--out", str(out), "--resume"])
    one_line(res, 2, "resume state", "move it aside")
    assert snapshot(out) == before and sorted(p.name for p in out.iterdir()) == [".repogym"]


def test_resume_refuses_a_dataset_of_another_repository(example_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    shutil.copytree(EXAMPLES, out / "tasks")
    before = snapshot(out)
    res = cli.invoke(app, ["generate", "--repo", str(example_repo), "--out", str(out), "--resume"])
    one_line(res, 2, "repogym-examples/textstats", "not statkit")
    assert snapshot(out) == before


def test_a_registry_json_that_is_a_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    (data / "registry.json").mkdir()
    before = snapshot(data)
    one_line(cli.invoke(app, ["dataset", "index", str(data)]), 2, "registry.json")
    assert snapshot(data) == before and (data / "registry.json").is_dir()


def test_push_to_a_folder_registry_that_is_a_file(tmp_path: Path) -> None:
    reg = tmp_path / "reg"
    reg.write_text("not a folder\n")
    res = cli.invoke(app, ["push", str(EXAMPLES), "acme/x", "--registry", f"file://{reg}"])
    one_line(res, 2, str(reg))
    assert reg.read_text() == "not a folder\n"


def test_a_garbage_llm_endpoint_is_refused_before_any_candidate(
    example_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ds"
    argv = ["generate", "--repo", str(example_repo), "--out", str(out)]
    res = cli.invoke(app, [*argv, "--llm", "openai/gpt-4o", "--llm-endpoint", ":::"])
    one_line(res, 2, "--llm-endpoint", "not an http(s) URL")
    assert not out.exists()


def _unprivileged() -> bool:
    probe = subprocess.run(["unshare", "--user", "true"], capture_output=True)
    return shutil.which("unshare") is not None and probe.returncode == 0


@pytest.mark.skipif(not _unprivileged(), reason="needs unshare --user")
@pytest.mark.parametrize("argv", [["validate"], ["dataset", "index"]], ids=" ".join)
def test_a_task_folder_that_cannot_be_read_is_not_left_out(tmp_path: Path, argv: list[str]) -> None:
    """Run as an unmapped user (no capabilities over the files), where mode 000 holds."""
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    os.chmod(data / "hello-file", 0)
    try:
        res = subprocess.run(
            ["unshare", "--user", sys.executable, "-m", "repogym.cli", *argv, str(data)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
    finally:
        os.chmod(data / "hello-file", 0o755)
    assert res.returncode != 0, res.stdout + res.stderr
    assert "hello-file" in res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert not (data / "registry.json").exists()


def test_explore_runs_dir_that_is_a_file_stops_before_the_url(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.write_text("a file\n")
    res = cli.invoke(
        app, ["explore", str(EXAMPLES), "--runs-dir", str(runs), "--port", free_port()]
    )
    one_line(res, 2, "--runs-dir")
    assert "open http" not in res.output


def test_a_damaged_snapshot_is_not_served_as_an_empty_one(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    assert cli.invoke(app, ["explore", "index", str(EXAMPLES), "--out", str(snap)]).exit_code == 0
    pack = snap / "pack.sqlite"
    data = bytearray(pack.read_bytes())
    data[2048:6144] = os.urandom(4096)
    pack.write_bytes(bytes(data))
    res = cli.invoke(app, ["explore", "--snapshot", str(snap), "--port", free_port()])
    one_line(res, 2, "malformed")


def free_port() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def test_a_task_folder_named_with_a_newline_stays_on_one_line(tmp_path: Path) -> None:
    task = tmp_path / "data" / "bad\nname"
    task.mkdir(parents=True)
    (task / "task.toml").write_text("[verifier\n")
    res = cli.invoke(app, ["validate", str(tmp_path / "data")])
    problems = [line for line in res.output.splitlines() if line.startswith(("ERROR", "warn"))]
    assert problems and all("bad\\nname" in line for line in problems), res.output
    res = cli.invoke(app, ["run", str(tmp_path / "data"), "--agent", "nop"])
    assert res.exit_code == 2 and "bad\\nname" in res.output
    assert not any(line.startswith("name") for line in res.output.splitlines())
