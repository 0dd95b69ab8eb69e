"""A catalog that refreshes itself: the shrink guard, scheduled rounds, and schema bumps
published side by side while real explorer processes keep serving."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.explorer import refresh
from repogym.explorer.snapshot import SCHEMA_VERSION, SnapshotReader, read_pointer
from tests.conftest import write_task
from tests.explorer.web_fixtures import free_port

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
CLI = [sys.executable, "-m", "repogym.cli"]
# The same CLI with the snapshot schema one version ahead (a newer repogym).
BUMPED = [
    sys.executable,
    "-c",
    "import sys, repogym.explorer.snapshot as s, repogym.explorer.snapshot_write as w\n"
    "s.SCHEMA_VERSION = w.SCHEMA_VERSION = s.SCHEMA_VERSION + 1\n"
    "from repogym.cli import app\n"
    "sys.argv[0] = 'repogym'\n"
    "app()",
]


def _source(root: Path, name: str, n: int, start: int = 0) -> Path:
    """A folder of ``n`` Harbor tasks (one environment)."""
    folder = root / name
    for i in range(start, start + n):
        write_task(folder, f"{name}-{i}", instruction=f"Task {i} of {name}.\n")
    return folder


def _index(*argv: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["explore", "index", *argv])
    return res.exit_code, res.output


def _tasks(out: Path) -> int:
    return int(SnapshotReader(out).handle.facts["counts"]["tasks"])


def test_schedule_and_compare_rules() -> None:
    assert refresh.parse_schedule("hourly") == 3600
    assert refresh.parse_schedule("daily") == 86400
    assert refresh.parse_schedule("15m") == 900 and refresh.parse_schedule("6h") == 21600
    assert refresh.parse_schedule("0.5s") == 0.5
    for bad in ("", "0m", "weekly", "5", "-1h"):
        with pytest.raises(ValueError):
            refresh.parse_schedule(bad)
    before = {"envs": 2, "tasks": 10, "sources": {"a": {"envs": 1, "tasks": 6}}}
    grown = {"envs": 2, "tasks": 14, "sources": {"a": {"envs": 1, "tasks": 3}}}
    # one source halved while the total grew: caught by the per-source check alone
    assert refresh.compare(before, grown, 0.8) == [
        {"source": "a", "what": "tasks", "before": 6, "after": 3}
    ]
    assert refresh.compare(before, grown, 0.5) == []  # configurable
    gone = refresh.compare(before, {"envs": 2, "tasks": 10, "sources": {}}, 0.8)
    assert {(p["what"], p["after"]) for p in gone} == {("envs", 0), ("tasks", 0)}


def test_shrink_guard_keeps_the_old_snapshot_until_forced(tmp_path: Path) -> None:
    alpha = _source(tmp_path, "alpha", 6)
    beta = _source(tmp_path, "beta", 4)
    out = tmp_path / "out"
    code, output = _index(str(alpha), str(beta), "--out", str(out))
    assert code == 0, output
    pointer = (out / "CURRENT").read_bytes()
    assert (refresh.published_counts(out) or {})["sources"] == {
        str(alpha): {"envs": 1, "tasks": 6},
        str(beta): {"envs": 1, "tasks": 4},
    }
    # alpha loses half its tasks while beta grows: 13 tasks overall (more than before)
    for i in range(3):
        shutil.rmtree(alpha / f"alpha-{i}")
    _source(tmp_path, "beta", 6, start=4)
    code, output = _index(str(alpha), str(beta), "--out", str(out))
    assert code == 3, output
    assert f"source {alpha}: tasks 6 -> 3" in output and "kept the published snapshot" in output
    assert str(beta) not in output  # the source that grew is not blamed
    assert (out / "CURRENT").read_bytes() == pointer
    assert (out / f"CURRENT.v{SCHEMA_VERSION}").read_bytes() == pointer
    assert _tasks(out) == 10  # the old snapshot is still served, whole
    assert not list((out / "snapshots").glob(".*"))  # the refused build left nothing behind

    code, output = _index(str(alpha), str(beta), "--out", str(out), "--json")
    assert code == 3
    line = json.loads(next(t for t in output.splitlines() if t.startswith("{")))
    assert line["published"] is False
    assert line["problems"] == [{"source": str(alpha), "what": "tasks", "before": 6, "after": 3}]

    code, output = _index(str(alpha), str(beta), "--out", str(out), "--force")
    assert code == 0, output
    assert _tasks(out) == 13 and (out / "CURRENT").read_bytes() != pointer
    # the forced listing is the new reference: the next run over the same sources publishes
    code, output = _index(str(alpha), str(beta), "--out", str(out))
    assert code == 0, output
    # a looser guard lets a halved source through
    shutil.rmtree(beta)
    _source(tmp_path, "beta", 5)
    code, output = _index(str(alpha), str(beta), "--out", str(out), "--shrink-guard", "0.4")
    assert code == 0, output
    assert _tasks(out) == 8
    code, output = _index(str(alpha), "--out", str(out), "--shrink-guard", "1.5")
    assert code == 2 and "from 0 to 1" in output


def _lines(proc: subprocess.Popen[str], n: int) -> Iterator[dict]:
    assert proc.stdout is not None
    for _ in range(n):
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        yield json.loads(line)


def test_scheduled_rounds_keep_going_and_stop_on_sigterm(tmp_path: Path) -> None:
    alpha = _source(tmp_path, "alpha", 6)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [*CLI, "explore", "index", str(alpha), "--out", str(out), "--schedule", "0.2s", "--json"],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first, second = _lines(proc, 2)
        assert (first["round"], second["round"]) == (1, 2)
        assert first["published"] and second["published"] and second["tasks"] == 6
        for i in range(3):  # half the source vanishes: the rounds keep the old snapshot
            shutil.rmtree(alpha / f"alpha-{i}")
        kept = next(r for r in _lines(proc, 20) if not r["published"])
        assert f"source {alpha}: tasks 6 -> 3" in kept["reason"] and kept["tasks"] == 3
        after = next(_lines(proc, 1))  # and the schedule goes on
        assert after["round"] == kept["round"] + 1 and not after["published"]
        assert _tasks(out) == 6
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped (SIGTERM)" in err
    assert _tasks(out) == 6  # the pointer names a whole snapshot
    assert not [p for p in (out / "snapshots").iterdir() if p.name.startswith(".")]


@contextmanager
def _explorer(out: Path, cli: list[str] = CLI) -> Iterator[str]:
    """A real ``repogym explore --snapshot`` process on 127.0.0.1; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen(
        [*cli, "explore", "--snapshot", str(out), "--port", str(port), "--no-runs"],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode() if proc.stderr else "")
            try:
                urllib.request.urlopen(url + "/api/search?size=1", timeout=5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _count(url: str, env: str = "alpha") -> int:
    with urllib.request.urlopen(f"{url}/api/envs/{env}", timeout=10) as r:
        return int(json.loads(r.read())["task_count"])


def _until(url: str, want: int) -> None:
    for _ in range(300):  # the server polls its pointer every 2 s
        if _count(url) == want:
            return
        time.sleep(0.1)
    raise AssertionError(f"{url} still serves {_count(url)} tasks, not {want}")


def _whole(url: str, n: int) -> None:
    """Every task page of the ``n`` alpha tasks answers (the snapshot and its pages agree)."""
    assert _count(url) == n
    for i in range(n):
        with urllib.request.urlopen(f"{url}/t/alpha/alpha-{i}", timeout=10) as r:
            assert r.status == 200


@pytest.mark.slow
def test_running_explorer_through_publishes_and_a_schema_bump(tmp_path: Path) -> None:
    alpha = _source(tmp_path, "alpha", 4)
    out = tmp_path / "out"
    assert _index(str(alpha), "--out", str(out))[0] == 0
    with _explorer(out) as url:
        answers: list[int | str] = []
        done = threading.Event()

        def hammer() -> None:
            while not done.is_set():
                try:
                    answers.append(_count(url))
                except (OSError, urllib.error.HTTPError) as exc:
                    answers.append(repr(exc))

        worker = threading.Thread(target=hammer)
        worker.start()
        try:
            for n in (5, 6):  # publishes under load
                _source(tmp_path, "alpha", 1, start=n - 1)
                assert _index(str(alpha), "--out", str(out))[0] == 0
                _until(url, n)
        finally:
            done.set()
            worker.join()
        assert answers and set(answers) <= {4, 5, 6}, [a for a in answers if isinstance(a, str)]
        _whole(url, 6)

        # a newer repogym publishes schema N+1 beside schema N
        old_pointer = (out / f"CURRENT.v{SCHEMA_VERSION}").read_bytes()
        _source(tmp_path, "alpha", 2, start=6)
        res = subprocess.run(
            [*BUMPED, "explore", "index", str(alpha), "--out", str(out)],
            env=ENV,
            capture_output=True,
            text=True,
        )
        assert res.returncode == 0, res.stderr
        assert read_pointer(out)["schema_version"] == SCHEMA_VERSION + 1
        assert read_pointer(out, f"CURRENT.v{SCHEMA_VERSION + 1}")["counts"]["tasks"] == 8
        assert (out / f"CURRENT.v{SCHEMA_VERSION}").read_bytes() == old_pointer
        time.sleep(2.5)  # past the running server's pointer poll
        _whole(url, 6)  # it keeps its own schema's complete snapshot
        # an explorer of either version started now picks the newest snapshot it reads
        with _explorer(out) as same:
            _whole(same, 6)
        with _explorer(out, BUMPED) as newer:
            _whole(newer, 8)
        # the older indexer still refreshes its own schema, leaving CURRENT to the newer one
        _source(tmp_path, "alpha", 1, start=8)
        assert _index(str(alpha), "--out", str(out))[0] == 0
        assert read_pointer(out)["schema_version"] == SCHEMA_VERSION + 1
        _until(url, 9)
        _whole(url, 9)


@pytest.mark.parametrize("when", ["reading", "publishing"])
def test_sigterm_during_a_round(tmp_path: Path, when: str) -> None:
    """A signal while the sources are read abandons the round (the published snapshot stays,
    no temp file is left); one while the pointers are written lets them finish first."""
    from repogym.explorer.build import build_snapshot

    alpha = _source(tmp_path, "alpha", 4)
    out = tmp_path / "out"
    build_snapshot([str(alpha)], out)
    pointer = (out / "CURRENT").read_bytes()
    _source(tmp_path, "alpha", 2, start=4)
    rounds: list[dict] = []

    def term(*_: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    def build(guard: refresh.Guard) -> dict:
        if when == "reading":
            return build_snapshot([str(alpha)], out, guard=guard, progress=term)

        def then_term(where: Path, after: dict) -> None:
            guard(where, after)
            term()

        return build_snapshot([str(alpha)], out, guard=then_term)

    why = refresh.run_schedule(
        build, 0.01, guard=refresh.shrink_guard(), on_round=rounds.append, rounds=5
    )
    assert why in ("SIGTERM", "signal")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored
    if when == "reading":
        assert why == "SIGTERM" and rounds == []
        assert (out / "CURRENT").read_bytes() == pointer
        assert _tasks(out) == 4
    else:
        assert why == "signal" and [r["published"] for r in rounds] == [True]
        assert (
            _tasks(out) == 6
            and read_pointer(out, f"CURRENT.v{SCHEMA_VERSION}")["sha256"] == (rounds[0]["sha256"])
        )
    assert not [p for p in (out / "snapshots").iterdir() if p.name.startswith(".")]
