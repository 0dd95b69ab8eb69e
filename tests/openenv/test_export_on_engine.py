"""The exported OpenEnv package, built and run on a real Docker engine (``tests/engine.py``).

As a user would: ``repogym export --format openenv examples/tasks --requirement <wheel built
from this checkout>``, ``docker build`` of the package (dependencies from PyPI over the host's
network; the engine has no bridge), then the server container on the host's network with the
engine's socket mounted, so the task containers it starts are its siblings on the same engine.
Episodes go over OpenEnv's WebSocket API (``/ws``).

To keep CI fast, the first build's dependencies (from PyPI) are kept in a wheelhouse under the
test cache (``pip download`` in a container of the same base image); later builds put them in the
package's ``wheels/`` and build without an index, as the package's Dockerfile says anyone may.
Remove ``~/.cache/repogym-tests/wheelhouse`` for a cold build.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient

from tests.conftest import EXAMPLES, ROOT
from tests.engine import CACHE, Engine, stand_in
from tests.openenv.conftest import FIX, TOKEN, evaluate_action, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

BASE = "python:3.12-slim"
"""The package Dockerfile's ``FROM`` (a stand-in here: the host's Python 3.12 with pip)."""
WHEELHOUSE_DAYS = 7
"""A wheelhouse older than this is filled afresh (pip would fetch newer releases anyway)."""
TIMINGS: dict[str, float] = {}


def _build_wheel(dest: Path) -> Path:
    """A wheel of this checkout, by its own build backend (``uv build``, else ``pip wheel``)."""
    uv = shutil.which("uv")
    if uv:
        cmd = [uv, "build", "--wheel", "--out-dir", str(dest), str(ROOT)]
    else:
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dest), str(ROOT)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    (wheel,) = dest.glob("repogym-*.whl")
    return wheel


def _wheelhouse_dir(wheel: Path) -> Path:
    """Where the dependency wheels of ``wheel[docker,openenv]`` on the base image are kept:
    keyed by the wheel's declared dependencies."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        requires = sorted(
            line
            for line in zf.read(meta).decode().splitlines()
            if line.startswith("Requires-Dist:")
        )
    key = hashlib.sha256(json.dumps([BASE, requires]).encode()).hexdigest()[:16]
    return CACHE / "wheelhouse" / key


def _fresh(house: Path) -> bool:
    done = house / ".complete"
    return done.is_file() and time.time() - done.stat().st_mtime < WHEELHOUSE_DAYS * 86400


def _fill_wheelhouse(engine: Engine, wheel: Path, house: Path) -> None:
    """``pip download`` of the dependencies from PyPI, in a container of the base image on the
    host's network (the engine has no bridge)."""
    shutil.rmtree(house, ignore_errors=True)
    partial = house.with_name(f"{house.name}.part")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    res = engine.docker(
        "run", "--rm", "--network", "host",
        "-v", f"{wheel.parent}:/in:ro", "-v", f"{partial}:/out",
        BASE, "pip", "download", "-q", "--disable-pip-version-check", "-d", "/out",
        f"/in/{wheel.name}[docker,openenv]",
        timeout=1200,
    )  # fmt: skip
    if res.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise RuntimeError(f"pip download failed: {res.stderr[-2000:]}")
    (partial / wheel.name).unlink(missing_ok=True)  # the checkout's own wheel is not kept
    (partial / ".complete").touch()
    partial.rename(house)


@pytest.fixture(scope="module")
def package_image(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The exported package's image, built on the engine: the first time (and when the
    dependencies change, or weekly) with its dependencies from PyPI, which are then kept in a
    wheelhouse; afterwards from the wheelhouse put in the package's ``wheels/``, without an
    index."""
    stand_in(engine, BASE)
    work = tmp_path_factory.mktemp("package")
    wheel = _build_wheel(work / "dist")
    pkg = work / "pkg"
    subprocess.run(
        [sys.executable, "-m", "repogym.cli", "export", "--format", "openenv", str(EXAMPLES),
         "--out", str(pkg), "--requirement", str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assert (pkg / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    house = _wheelhouse_dir(wheel)
    warm = _fresh(house)
    args = []
    if warm:
        for dep in house.glob("*.whl"):
            os.link(dep, pkg / "wheels" / dep.name)
        args += ["--build-arg", "PIP_NO_INDEX=1"]
    tag = "repogym-openenv-test:" + hashlib.sha256(wheel.read_bytes()).hexdigest()[:12]
    started = time.monotonic()
    built = engine.docker("build", "--network", "host", *args, "-t", tag, str(pkg), timeout=1500)
    TIMINGS["build_warm_s" if warm else "build_cold_s"] = time.monotonic() - started
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    if not warm:
        started = time.monotonic()
        _fill_wheelhouse(engine, wheel, house)
        TIMINGS["wheelhouse_fill_s"] = time.monotonic() - started
    print(f"\npackage image: {json.dumps({k: round(v, 1) for k, v in TIMINGS.items()})}")
    yield tag
    engine.docker("rmi", "-f", tag)


@dataclass
class Served:
    name: str
    url: str


class Servers:
    """Starts the package's server containers (host network, the engine's socket mounted) and
    removes them at the end."""

    def __init__(self, engine: Engine, image: str) -> None:
        self.engine = engine
        self.image = image
        self.names: list[str] = []

    def start(self, *, socket: bool = True) -> Served:
        port = free_port()
        name = f"repogym-openenv-{port}"
        sock = self.engine.host.removeprefix("unix://")
        mount = ["-v", f"{sock}:/var/run/docker.sock"] if socket else []
        started = time.monotonic()
        res = self.engine.docker(
            "run", "-d", "--name", name, "--network", "host", *mount,
            "-e", "HOST=127.0.0.1", "-e", f"PORT={port}",
            "-e", f"REPOGYM_ORCHESTRATOR_TOKEN={TOKEN}",
            # No task here needs a network, to build or to run.
            "-e", "REPOGYM_DOCKER_NETWORK=none",
            self.image,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        self.names.append(name)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    print(f"\nserver container answered in {time.monotonic() - started:.1f} s")
                    return Served(name, url)
            except httpx.HTTPError:
                time.sleep(0.5)
        logs = self.engine.docker("logs", name).stderr[-3000:]
        raise AssertionError(f"the server container did not start: {logs}")

    def remove_all(self) -> None:
        for name in self.names:
            self.engine.docker("rm", "-f", name)


@pytest.fixture(scope="module")
def servers(engine: Engine, package_image: str) -> Iterator[Servers]:
    if not engine.host.startswith("unix://"):
        pytest.skip(f"the engine's socket is not a file to mount ({engine.host})")
    running = Servers(engine, package_image)
    yield running
    running.remove_all()


@pytest.fixture(scope="module")
def server(servers: Servers) -> Served:
    """One server for the module (the last test kills it)."""
    return servers.start()


def _fix_textstats(env: Any) -> tuple[str, str]:
    src = env.step({"type": "read", "path": "textstats/counts.py"})
    text = src.observation["content"]
    assert 'text.split(" ")' in text
    return "textstats/counts.py", text.replace('text.split(" ")', FIX)


EDITS: dict[str, Callable[[Any], tuple[str, str]]] = {
    "hello-file": lambda env: ("greeting.txt", "Hello from repogym\n"),
    "textstats-word-count": _fix_textstats,
}


def _episode(url: str, task_id: str, edit: bool) -> Any:
    """reset → (the agent's edit with ``write``) → evaluate, over ``/ws``."""
    with GenericEnvClient(base_url=url, message_timeout_s=600).sync() as env:
        reset = env.reset(task_id=task_id)
        assert reset.observation["task_id"] == task_id
        if edit:
            path, content = EDITS[task_id](env)
            written = env.step({"type": "write", "path": path, "content": content})
            assert written.observation["error"] is None, written.observation
        result = env.step(evaluate_action())
    assert result.observation["error"] is None, result.observation
    return result


def test_package_serves_episodes_from_a_container(engine: Engine, server: Served) -> None:
    status = httpx.get(f"{server.url}/repogym/status").json()
    assert status["sandbox"] == "docker" and status["sandbox_ready"] is True
    tasks = httpx.get(f"{server.url}/tasks").json()
    assert [t["task_id"] for t in tasks["tasks"]] == ["hello-file", "textstats-word-count"]

    hello = _episode(server.url, "hello-file", edit=True)
    assert hello.reward == 1.0 and hello.done
    assert hello.observation["reward_details"] == {"correct": True, "why": "compared"}
    nop = _episode(server.url, "hello-file", edit=False)
    assert nop.reward == 0.0 and nop.done
    assert nop.observation["reward_details"]["correct"] is False

    fixed = _episode(server.url, "textstats-word-count", edit=True)
    details = fixed.observation["reward_details"]
    assert fixed.reward == 1.0
    assert details["resolved"] is True and details["f2p_passed"] == details["f2p_total"] == 2
    assert details["p2p_rate"] == 1.0 and details["canaries"]["status"] == "confirmed"
    assert fixed.observation["verification"]["mode"] == "clean_room"
    nop = _episode(server.url, "textstats-word-count", edit=False)
    assert nop.reward == 0.0
    assert nop.observation["reward_details"]["resolved"] is False

    # Every episode's container was the server's sibling on this engine, and goes with its
    # socket (removed just after the client has gone).
    assert httpx.get(f"{server.url}/repogym/status").json()["open_sandboxes"] == 0
    deadline = time.monotonic() + 60
    while engine.docker("ps", "-aq", "--filter", "label=io.repogym.serve").stdout.split():
        assert time.monotonic() < deadline, "task containers left behind"
        time.sleep(0.5)


def test_package_without_an_engine_serves_its_task_list(servers: Servers) -> None:
    alone = servers.start(socket=False)
    for route in ("/health", "/schema", "/metadata", "/tasks", "/tools"):
        assert httpx.get(f"{alone.url}{route}").status_code == 200, route
    client = GenericEnvClient(base_url=alone.url, message_timeout_s=60).sync()
    with client as env, pytest.raises(Exception, match="no Docker engine reachable"):
        env.reset(index=0)


def test_a_killed_servers_task_container_is_removed_by_the_next(
    engine: Engine, servers: Servers, server: Served
) -> None:
    first = server
    client = GenericEnvClient(base_url=first.url, message_timeout_s=600).sync()
    client.connect()
    try:
        client.reset(task_id="hello-file")
        (orphan,) = engine.docker("ps", "-q", "--filter", "label=io.repogym.serve").stdout.split()
        labels = json.loads(
            engine.docker("inspect", "-f", "{{json .Config.Labels}}", orphan).stdout
        )
        volumes = json.loads(engine.docker("inspect", "-f", "{{json .Mounts}}", orphan).stdout)
        tests_volume = next(m["Name"] for m in volumes if m["Destination"] == "/tests")
        mine = engine.docker("inspect", "-f", "{{.Id}}", first.name).stdout.strip()
        assert labels["io.repogym.serve.owner"] == f"container:{mine}"
        assert engine.docker("kill", first.name).returncode == 0
    finally:
        with contextlib.suppress(Exception):  # the server is gone
            client.close()
    unrelated = []
    for labels in ([], ["--label", "io.repogym.serve=another-set",
                        "--label", f"io.repogym.serve.owner=container:{'0' * 64}"]):  # fmt: skip
        res = engine.docker(
            "run", "-d", "--network", "none", *labels, "python:3.11-slim", "sleep", "infinity"
        )
        assert res.returncode == 0, res.stderr
        unrelated.append(res.stdout.strip()[:12])
    try:
        assert engine.docker("ps", "-q", "--filter", f"id={orphan}").stdout.strip()
        second = servers.start()  # removes what the first left behind before it answers
        running = engine.docker("ps", "-aq").stdout.split()
        assert orphan not in running
        assert tests_volume not in engine.docker("volume", "ls", "-q").stdout.split()
        assert set(unrelated) <= set(running)
        assert httpx.get(f"{second.url}/repogym/status").json()["sandbox_ready"] is True
    finally:
        engine.docker("rm", "-f", *unrelated)
