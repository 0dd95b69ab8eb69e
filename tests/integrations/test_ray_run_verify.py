"""``repogym run`` and ``repogym verify`` with ``--executor ray`` on a local multi-node cluster
(the session's ``ray_cluster``: a head with no CPUs, two 1-CPU worker nodes): the same rewards
and verdicts as locally, a job folder ``jobs show`` reads, lost workers that lose nothing,
secrets that never travel in a unit's arguments, and one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.executors import RAY_HINT, Done, RayExecutor, Work
from repogym.run.gate import ERROR, verify_tasks
from repogym.run.job import run_job
from repogym.run.remote import AGENT_ENDPOINT_VAR, AGENT_KEY_VAR, agent_for_workers, worker_env
from repogym.taskdir import load_task

from ..conftest import EXAMPLES, ROOT, write_task

pytestmark = pytest.mark.timeout(120)


def cli(*args: str) -> tuple[int, Any, str]:
    """``repogym args… --json`` in this process: (exit code, parsed stdout, stderr)."""
    res = CliRunner().invoke(app, [*args, "--json"])
    try:
        data = json.loads(res.stdout)
    except json.JSONDecodeError:
        data = None
    return res.exit_code, data, res.stderr


def rewards(payload: dict[str, Any]) -> dict[str, float | None]:
    return {t["trial_name"]: t["reward"] for t in payload["trials"]}


# --- work functions a wrapping executor runs around the real ones (module level: Ray runs
# them by reference) --------------------------------------------------------------------


def die_once_then(marker: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Kill this worker process the first time any unit gets here (mid-unit), then run."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return fn(*args)
    os.close(fd)
    os._exit(1)


def always_die(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    os._exit(1)


class Wrapping:
    """An executor that runs every unit through ``wrap(work) -> work`` on an inner one."""

    def __init__(self, inner: Any, wrap: Callable[[Work], Work]) -> None:
        self.inner, self.wrap, self.name = inner, wrap, inner.name

    def map(self, work: Iterable[Work], *, parallel: int | None = None) -> Iterator[Done]:
        return self.inner.map([self.wrap(w) for w in work], parallel=parallel)

    def put(self, value: Any) -> Any:
        return self.inner.put(value)

    def close(self) -> None:
        self.inner.close()


# --- run -----------------------------------------------------------------------------------


def test_run_on_ray_gives_local_rewards_and_a_job_folder(ray_cluster: Any, tmp_path: Path) -> None:
    ray = ["--executor", "ray", "--ray-address", ray_cluster.address]
    for agent, expected in (("oracle", 1.0), ("nop", 0.0)):
        code_l, local, _ = cli("run", str(EXAMPLES), "-a", agent, "--out", str(tmp_path / agent))
        code_r, remote, err = cli(
            "run", str(EXAMPLES), "-a", agent, *ray, "--out", str(tmp_path / f"ray-{agent}")
        )
        assert code_l == code_r == 0, err
        assert (
            rewards(remote)
            == rewards(local)
            == {
                "hello-file__1": expected,
                "textstats-word-count__1": expected,
            }
        )
        assert remote["summary"] == local["summary"]
    job = tmp_path / "ray-oracle"
    trial = job / "hello-file__1"
    assert {p.name for p in trial.iterdir()} >= {"result.json", "verifier-stdout.txt"}
    result = json.loads((trial / "result.json").read_text())
    assert result["task_path"] == str(EXAMPLES / "hello-file")  # the driver's folder
    assert result["executor"]["name"] == "ray" and result["executor"]["node"]
    assert json.loads((job / "job.json").read_text())["executor"] == "ray"
    code_s, shown, _ = cli("jobs", "show", str(job))
    code_t, shown_local, _ = cli("jobs", "show", str(tmp_path / "oracle"))
    assert code_s == code_t == 0 and shown["status"] == "done" and not shown["problems"]
    timeless = [
        [{k: v for k, v in r.items() if k != "duration_s"} for r in s["task_results"]]
        for s in (shown, shown_local)
    ]
    assert timeless[0] == timeless[1]


def test_a_worker_killed_mid_trial_loses_nothing(
    ray_cluster: Any, tmp_path: Path, examples_copy: Path
) -> None:
    tasks = [load_task(p) for p in sorted(examples_copy.iterdir()) if (p / "task.toml").is_file()]
    marker = str(tmp_path / "died")
    once = Wrapping(
        RayExecutor(ray_cluster.address),
        lambda w: Work(w.key, die_once_then, (marker, w.fn, w.args), w.cpus, w.memory_mb),
    )
    outcomes, summary, _ = run_job(tasks, "oracle", out_dir=tmp_path / "once", executor=once)
    assert Path(marker).exists()  # a worker did die mid-unit
    assert [o.reward for o in outcomes] == [1.0, 1.0] and summary.errors == 0

    # Past the retries (none here): the trial is still there, with the reason.
    lost = Wrapping(
        RayExecutor(ray_cluster.address, retries=0),
        lambda w: Work(w.key, always_die, (w.fn, w.args), w.cpus, w.memory_mb),
    )
    outcomes, summary, job_path = run_job(
        tasks[:1], "oracle", out_dir=tmp_path / "lost", executor=lost
    )
    [o] = outcomes
    assert o.reward is None and o.error and o.error.startswith("WorkerLost: worker lost")
    assert summary.errors == 1 and json.loads(job_path.read_text())["trials"][0]["error"]
    code, shown, _ = cli("jobs", "show", str(tmp_path / "lost"))
    assert code == 0 and shown["errors"] == 1

    # verify: the task is an error row, and nothing is written into it.
    before = (tasks[0].path / "task.toml").read_bytes()
    [verdict] = verify_tasks(tasks[:1], None, reruns=0, executor=lost, write=True)
    assert verdict.status == ERROR and "worker lost" in verdict.reasons[0]
    assert (tasks[0].path / "task.toml").read_bytes() == before


# --- verify --------------------------------------------------------------------------------


def test_verify_on_ray_gives_local_verdicts(ray_cluster: Any, tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    for copy in (here, there):
        shutil.copytree(EXAMPLES, copy, symlinks=True)
        (copy / "hello-file" / "tests" / "test.sh").write_text(
            "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"  # pays nop: broken
        )
    code_l, local, _ = cli("verify", str(here), "--reruns", "1")
    ray = ["--executor", "ray", "--ray-address", ray_cluster.address]
    code_r, remote, err = cli("verify", str(there), "--reruns", "1", *ray)
    assert code_l == code_r == 1, err
    assert remote == local
    assert {t["task_id"]: t["status"] for t in remote["tasks"]} == {
        "hello-file": "broken",
        "textstats-word-count": "verified",
    }
    for name in ("hello-file", "textstats-word-count"):  # the driver wrote the same evaluation
        a, b = ((load_task(d / name).repo2env or {})["evaluation"] for d in (here, there))
        assert a.pop("verified_at") and b.pop("verified_at") and a == b


# --- secrets -------------------------------------------------------------------------------

API_KEY = "sk-test-NEVER-IN-ARGS-41f3"
TOKEN = "pass-env-NEVER-IN-ARGS-9c2e"


class _FakeModel(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        _FakeModel.seen.append(self.headers.get("Authorization", ""))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"error": {"message": "test model: no completions here"}}'
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


def test_secrets_reach_workers_through_the_environment_only(
    ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ray import cloudpickle

    # The split itself: no secret in what units carry, every secret in the workers' env.
    opts = {"api_key": API_KEY, "endpoint": f"http://u:{TOKEN}@127.0.0.1:9/v1", "max_steps": "1"}
    shipped = agent_for_workers("llm:openai/m", opts)
    assert API_KEY not in repr(shipped) and TOKEN not in repr(shipped)
    env = worker_env("llm:openai/m", opts, {"MY_TOKEN": TOKEN})
    assert env[AGENT_KEY_VAR] == API_KEY and TOKEN in env[AGENT_ENDPOINT_VAR]
    assert env["MY_TOKEN"] == TOKEN

    # End to end: a key the fake model endpoint receives, a --pass-env value the verifier
    # receives, and neither in any unit's pickled arguments nor in the job folder.
    data = tmp_path / "data"
    write_task(
        data,
        "env-check",
        toml='schema_version = "1.4"\n[task]\nname = "acme/env-check"\n'
        '[environment]\nnetwork_mode = "no-network"\ncpus = 1\nmemory_mb = 512\n'
        '[verifier.env]\nTOKEN = "${MY_TOKEN}"\n',
        test_sh='#!/bin/bash\nif [ "$TOKEN" = "' + TOKEN + '" ]; then echo 1; else echo 0; fi'
        " > /logs/verifier/reward.txt\n",
    )
    monkeypatch.setenv("MY_TOKEN", TOKEN)
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    seen: list[Work] = []
    real_map = RayExecutor.map

    def spy(self: RayExecutor, work: Iterable[Work], *, parallel: int | None = None) -> Any:
        units = list(work)
        seen.extend(units)
        return real_map(self, units, parallel=parallel)

    monkeypatch.setattr(RayExecutor, "map", spy)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _FakeModel.seen.clear()
    try:
        code, payload, err = cli(
            "run", str(data), "-a", "llm:openai/test-model",
            "--agent-opt", f"api_key={API_KEY}",
            "--agent-opt", f"endpoint=http://127.0.0.1:{server.server_address[1]}/v1",
            "--agent-opt", "max_steps=1", "--agent-opt", "retries=0",
            "--pass-env", "MY_TOKEN",
            "--executor", "ray", "--ray-address", ray_cluster.address,
            "--out", str(tmp_path / "job"),
        )  # fmt: skip
    finally:
        server.shutdown()
    assert payload is not None, err
    assert f"Bearer {API_KEY}" in _FakeModel.seen  # the worker had the key
    assert rewards(payload) == {"env-check__1": 1.0}  # the verifier had the --pass-env value
    assert len(seen) == 1
    for unit in seen:
        blob = cloudpickle.dumps((unit.fn, unit.args))
        assert API_KEY.encode() not in blob and TOKEN.encode() not in blob
    for path in (tmp_path / "job").rglob("*"):
        if path.is_file():
            body = path.read_bytes()
            assert API_KEY.encode() not in body and TOKEN.encode() not in body, path


# --- one-line errors -------------------------------------------------------------------------


def run_cli(*args: str, pythonpath: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [sys.executable, "-m", "repogym.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def test_executor_errors_are_one_line(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "ray.py").write_text("raise ImportError(\"No module named 'ray' (test shim)\")\n")
    for command in ("run", "verify"):
        proc = run_cli(command, str(EXAMPLES), "--executor", "ray", pythonpath=str(shim))
        assert proc.returncode == 2, proc.stderr
        assert RAY_HINT in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr

    started = time.monotonic()
    out = tmp_path / "never"
    proc = run_cli(
        "run", str(EXAMPLES), "--executor", "ray", "--ray-address", "127.0.0.1:1", "--out", str(out)
    )
    assert proc.returncode == 2 and "127.0.0.1:1" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert time.monotonic() - started < 30 and not out.exists()

    for command in ("run", "verify"):
        res = CliRunner().invoke(
            app,
            [command, str(EXAMPLES), "--ray-address", "127.0.0.1:6379", "--out", str(out)]
            if command == "run"
            else [command, str(EXAMPLES), "--ray-address", "127.0.0.1:6379"],
        )
        assert res.exit_code == 2 and "--ray-address is for --executor ray" in res.stderr
    res = CliRunner().invoke(app, ["run", str(EXAMPLES), "--executor", "spark", "--out", str(out)])
    assert res.exit_code == 2 and "unknown executor 'spark'" in res.stderr and not out.exists()


def test_shipping_unpacks_once_and_refuses_escaping_paths(tmp_path: Path) -> None:
    from repogym.executors.shipping import folder_files, pack_folder, unpacked, write_files
    from repogym.taskdir.hashing import content_hash

    source = EXAMPLES / "hello-file"
    archive = pack_folder(source)
    copy = unpacked(archive, "k", "hello-file", root=tmp_path)
    assert copy == tmp_path / "k" / "hello-file" and content_hash(copy) == content_hash(source)
    never = lambda: pytest.fail("a cached copy is not unpacked again")  # noqa: E731
    assert unpacked(never, "k", "hello-file", root=tmp_path) == copy
    files = folder_files(copy)
    write_files(tmp_path / "out", files)
    assert folder_files(tmp_path / "out") == files
    for bad in ("../escape", "/abs/path", "a/../../b", ""):
        with pytest.raises(ValueError, match="refused path"):
            write_files(tmp_path / "out2", {"fine.txt": b"x", bad: b"x"})
    assert not (tmp_path / "out2").exists() and not (tmp_path / "escape").exists()
