"""The exported package without an engine: how its image gets repogym (``--requirement``), the
server starting with no engine, and which task containers a starting server removes."""

from __future__ import annotations

import os
import subprocess
import tomllib
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from repogym import __version__
from repogym.openenv import _wheel, orphans
from repogym.openenv.export import export_openenv, resolve_requirement
from tests.conftest import EXAMPLES

WHEEL = f"repogym-{__version__}-py3-none-any.whl"


@pytest.fixture(scope="module")
def own_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _wheel.build_own_wheel(tmp_path_factory.mktemp("wheel"))


def test_own_wheel_is_a_wheel_of_this_build(own_wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(own_wheel) as zf:
        names = set(zf.namelist())
        record = zf.read(f"repogym-{__version__}.dist-info/RECORD").decode()
        metadata = zf.read(f"repogym-{__version__}.dist-info/METADATA").decode()
    assert "repogym/openenv/export.py" in names and "repogym/py.typed" in names
    assert f"repogym-{__version__}.dist-info/entry_points.txt" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert len(record.splitlines()) == len(names)
    assert "Provides-Extra: docker" in metadata and "Provides-Extra: openenv" in metadata
    # Same sources, same bytes (a Docker build reuses its layer).
    again = _wheel.build_own_wheel(tmp_path)
    assert again.read_bytes() == own_wheel.read_bytes()


def test_a_local_wheel_is_shipped_and_named_by_version(own_wheel: Path, tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    result = export_openenv(EXAMPLES, out, requirement=str(own_wheel))
    assert (out / "wheels" / WHEEL).read_bytes() == own_wheel.read_bytes()
    assert f"wheels/{WHEEL}" in result.files
    dockerfile = (out / "Dockerfile").read_text()
    assert f"'/tmp/wheels/{WHEEL}[docker,openenv]'" in dockerfile
    assert str(own_wheel) not in dockerfile
    deps = tomllib.loads((out / "pyproject.toml").read_text())["project"]["dependencies"]
    assert deps == [f"repogym[docker,openenv]=={__version__}"]
    # Extras given with the path, and the file URL form, land the same way.
    shipped = resolve_requirement(f"{own_wheel}[hub]", tmp_path / "s1")
    assert shipped.install == f"/tmp/wheels/{WHEEL}[docker,hub,openenv]"
    assert shipped.wheel == own_wheel
    shipped = resolve_requirement(f"repogym @ {own_wheel.as_uri()}", tmp_path / "s2")
    assert shipped.wheel == own_wheel and shipped.dependency.endswith(f"=={__version__}")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (".", "must be a wheel file"),
        ("./missing/repogym-0.1.0-py3-none-any.whl", "must be a wheel file"),
        ("repogym @ file:///src", "must be a wheel file"),
        ("requests==2.0", "names requests, not repogym"),
        ("repogym>>1", "not a pip requirement"),
        ("https://example.org/repogym-0.1.0-py3-none-any.whl", "'repogym @ URL'"),
    ],
)
def test_requirements_that_cannot_give_the_image_repogym(
    spec: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_requirement(spec, tmp_path)


def test_a_wheel_of_another_project_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "requests-2.0-py3-none-any.whl"
    other.write_bytes(b"")
    with pytest.raises(ValueError, match="a wheel of requests"):
        resolve_requirement(str(other), tmp_path / "s")


def test_default_ships_a_wheel_of_a_checkout(tmp_path: Path) -> None:
    if _wheel.installed_from_index():
        pytest.skip("this repogym was installed from an index")
    result = export_openenv(EXAMPLES / "hello-file", tmp_path / "pkg")
    assert result.requirement is not None and result.requirement.wheel is not None
    assert result.requirement.wheel == tmp_path / "pkg" / "wheels" / WHEEL
    assert result.requirement.wheel.is_file()
    assert "not from a package index: shipping a wheel" in result.notes[0]


def test_default_pins_the_version_when_installed_from_an_index(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_wheel, "installed_from_index", lambda: True)
    shipped = resolve_requirement(None, tmp_path)
    assert shipped.install == shipped.dependency == f"repogym[docker,openenv]=={__version__}"
    assert shipped.wheel is None and not tmp_path.joinpath(WHEEL).exists()


def test_server_without_an_engine_serves_its_task_list() -> None:
    from fastapi.testclient import TestClient

    from repogym.openenv import build_app

    before = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"
    try:
        app = build_app(EXAMPLES, sandbox="docker", orchestrator_token="t")
        with TestClient(app) as client:
            for route in ("/health", "/schema", "/metadata", "/tasks", "/tools"):
                assert client.get(route).status_code == 200, route
            status = client.get("/repogym/status").json()
            assert status["sandbox_ready"] is False
            assert "no Docker engine reachable" in status["sandbox_error"]
            with client.websocket_connect("/ws") as ws:
                ws.send_json({"type": "reset", "data": {}})
                reply = ws.receive_json()
        assert reply["type"] == "error"
        assert "'docker' sandbox backend is not available" in reply["data"]["message"]
        assert "no Docker engine reachable" in reply["data"]["message"]
    finally:
        if before is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = before


# -- which containers a starting server removes ---------------------------------------------

CID = "a" * 64
MOUNTINFO_IN_CONTAINER = (
    "1 0 0:1 / / rw - overlay overlay rw\n"
    f"2 1 8:1 /tmp/rg/data/containers/{CID}/hostname /etc/hostname rw - ext4 /dev/sda1 rw\n"
)
MOUNTINFO_ON_HOST = (  # another container's files are mounted on the host, not at /etc/hostname
    f"5 1 0:9 / /tmp/rg/data/containers/{'b' * 64}/mounts/shm rw - tmpfs shm rw\n"
)


def test_own_container_id() -> None:
    assert orphans.own_container_id(MOUNTINFO_IN_CONTAINER) == CID
    assert orphans.own_container_id(MOUNTINFO_ON_HOST) is None


def test_process_owner_gone_only_when_known() -> None:
    me = orphans.server_owner()
    assert me.startswith("process:") and not orphans.owner_gone(me, None)
    sleeper = subprocess.Popen(["sleep", "30"])
    other = f"process:{orphans._process_key(sleeper.pid)}"
    assert not orphans.owner_gone(other, None)
    sleeper.kill()
    sleeper.wait()
    assert orphans.owner_gone(other, None)
    boot, pidns, pid, start = other.split(":", 1)[1].split("/")
    # Another boot or PID namespace, or a form this version does not know: left alone.
    assert not orphans.owner_gone(f"process:x/{pidns}/{pid}/{start}", None)
    assert not orphans.owner_gone(f"process:{boot}/1/{pid}/{start}", None)
    assert not orphans.owner_gone("", None) and not orphans.owner_gone("pod:x", None)


class _NotFound(Exception):
    pass


_NotFound.__name__ = "NotFound"


class FakeContainers:
    def __init__(self, items: list[SimpleNamespace], running: set[str]) -> None:
        self.items = items
        self.running = running
        self.removed: list[str] = []

    def list(self, all: bool, filters: dict[str, str]) -> list[SimpleNamespace]:  # noqa: A002
        if "volume" in filters:
            return [c for c in self.items if filters["volume"] in c.volumes]
        key, _, value = filters["label"].partition("=")
        return [c for c in self.items if c.labels.get(key) == value]

    def get(self, cid: str) -> SimpleNamespace:
        if cid not in self.running:
            raise _NotFound(cid)
        return SimpleNamespace(status="running")


def test_reap_removes_only_its_identitys_orphans() -> None:
    dead, live = "d" * 64, "e" * 64
    containers = FakeContainers([], running={live})

    def box(name: str, labels: dict[str, str], volumes: tuple[str, ...] = ()) -> SimpleNamespace:
        mounts = [{"Type": "volume", "Name": v} for v in volumes]
        c = SimpleNamespace(short_id=name, labels=labels, volumes=volumes, attrs={"Mounts": mounts})
        c.remove = lambda force: containers.removed.append(name)
        return c

    ident = {orphans.SERVE_LABEL: "tasks-1"}
    containers.items = [
        box("orphan", {**ident, orphans.OWNER_LABEL: f"container:{dead}"}, ("repogym-mount-1",)),
        box("filler", {orphans.MOUNT_LABEL: "/tests"}, ("repogym-mount-1",)),
        box("stranger", {}, ("repogym-mount-1",)),
        box("live-server", {**ident, orphans.OWNER_LABEL: f"container:{live}"}),
        box("mine", {**ident, orphans.OWNER_LABEL: "container:" + "f" * 64}),
        box(
            "other-set", {orphans.SERVE_LABEL: "tasks-2", orphans.OWNER_LABEL: f"container:{dead}"}
        ),
        box("no-owner", dict(ident)),
        box("unlabelled", {}),
    ]
    gone_volumes: list[str] = []
    volumes = SimpleNamespace(
        get=lambda name: SimpleNamespace(remove=lambda force: gone_volumes.append(name))
    )
    client = SimpleNamespace(containers=containers, volumes=volumes)
    backend = SimpleNamespace(name="docker", client=client)
    removed = orphans.reap(backend, "tasks-1", "container:" + "f" * 64)
    assert removed == ["orphan"] and containers.removed == ["orphan", "filler"]
    assert gone_volumes == ["repogym-mount-1"]
    # Not the docker backend: nothing to reap.
    assert orphans.reap(SimpleNamespace(name="local"), "tasks-1", "x") == []


def test_identity_is_the_task_set_or_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(orphans.SERVER_ID_ENV, raising=False)
    one = orphans.serve_identity([("a", b"x"), ("b", b"y")])
    assert one == orphans.serve_identity([("b", b"y"), ("a", b"x")])
    assert one != orphans.serve_identity([("a", b"x"), ("b", b"z")])
    monkeypatch.setenv(orphans.SERVER_ID_ENV, "replica-2")
    assert orphans.serve_identity([("a", b"x")]) == "replica-2"
