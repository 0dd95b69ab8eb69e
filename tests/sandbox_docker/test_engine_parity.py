"""The docker backend behaves like the local one where they used to differ, side by side on both
backends (the engine: :mod:`tests.engine`, offline, stand-in slim images)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.sandbox import BuildError, EnvironmentSpec, SandboxError, Session, get_backend
from tests.engine import Engine, no_engine, stand_in, start_engine, why_no_engine

BACKENDS = ["local", "docker"]
BASE = "FROM debian:bookworm-slim\nWORKDIR /work\n"


def spec(context: Path, **kw: object) -> EnvironmentSpec:
    return EnvironmentSpec(context_dir=context, network_mode="no-network", **kw)  # type: ignore[arg-type]


@pytest.fixture
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Session]:
    name = request.param
    if name == "docker":
        request.getfixturevalue("engine")
    (tmp_path / "Dockerfile").write_text(BASE)
    backend = get_backend(name)
    s = spec(tmp_path)
    with backend.start(backend.build(s), s) as sess:
        yield sess


@pytest.mark.parametrize("session", BACKENDS, indirect=True)
def test_exit_codes_are_the_commands_own(session: Session) -> None:
    """Difference 1: 124 from the command, a process that kills itself with SIGKILL: their own
    status, no timeout; a command past its limit: a timeout."""
    own = session.exec("exit 124", timeout_s=30)
    assert (own.exit_code, own.timed_out) == (124, False)
    killed = session.exec("kill -9 $$", timeout_s=30)
    assert (killed.exit_code, killed.timed_out) == (137, False)
    slow = session.exec("sleep 20", timeout_s=1)
    assert slow.timed_out and slow.exit_code is None


@pytest.mark.parametrize("session", BACKENDS, indirect=True)
def test_read_follows_a_link_inside_the_sandbox(session: Session) -> None:
    """Difference 3: ``read`` of a link gives its target's content."""
    session.exec("mkdir -p /work/d && printf hello > /work/d/real && ln -s d/real /work/link")
    assert session.read("/work/link") == b"hello"


@pytest.mark.parametrize("session", ["docker"], indirect=True)
def test_killed_processes_are_reaped(session: Session) -> None:
    """Difference 11: an init runs first in the container, so an orphan that is killed does
    not stay a zombie."""
    pid = session.exec("sleep 300 >/dev/null 2>&1 & echo $!").stdout.strip()
    session.exec(f"kill -9 {pid}")
    state = session.exec(f"sleep 0.5; cat /proc/{pid}/stat 2>/dev/null | cut -d' ' -f3")
    assert state.stdout.strip() in ("", "R", "S"), f"process {pid} is {state.stdout.strip()}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_requested_stage_is_built(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """Difference 4: ``target`` builds that stage, not the last one."""
    if backend == "docker":
        request.getfixturevalue("engine")
    (tmp_path / "Dockerfile").write_text(
        "FROM debian:bookworm-slim AS first\nRUN echo first > /stage\n"
        "FROM debian:bookworm-slim AS second\nRUN echo second > /stage\n"
    )
    sandbox = get_backend(backend)
    s = spec(tmp_path, target="first")
    with sandbox.start(sandbox.build(s), s) as sess:
        assert sess.read("/stage") == b"first\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dangling_link_in_the_context_builds(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """Difference 8: a link in ``environment/`` that points nowhere is no crash."""
    if backend == "docker":
        request.getfixturevalue("engine")
    (tmp_path / "Dockerfile").write_text(BASE + "RUN echo ok > /built\n")
    (tmp_path / "gone").symlink_to("does-not-exist")
    sandbox = get_backend(backend)
    s = spec(tmp_path)
    with sandbox.start(sandbox.build(s), s) as sess:
        assert sess.read("/built") == b"ok\n"


def test_a_failed_build_leaves_its_log_and_no_container(engine: Engine, tmp_path: Path) -> None:
    """Differences 5 and 6: the build log is written on failure too, and the intermediate
    container of the failed step is removed."""
    (tmp_path / "Dockerfile").write_text(BASE + "RUN echo about-to-fail && exit 3\n")
    before = engine.docker("ps", "-aq").stdout.split()
    log = tmp_path / "build.log"
    with pytest.raises(BuildError, match="docker build failed"):
        get_backend("docker").build(spec(tmp_path), log=log)
    assert "about-to-fail" in log.read_text()
    assert engine.docker("ps", "-aq").stdout.split() == before


def test_a_build_past_its_time_limit_says_so(engine: Engine, tmp_path: Path) -> None:
    """Difference 7: the build timeout is reported as one, not as an HTTP read timeout."""
    (tmp_path / "Dockerfile").write_text(BASE + "RUN sleep 60\n")
    with pytest.raises(BuildError, match=r"timed out after 3 s \(build_timeout_sec\)"):
        get_backend("docker").build(spec(tmp_path, build_timeout_sec=3))


def test_the_trial_records_the_from_image_and_an_offline_image_is_not_pulled(
    engine: Engine, tmp_path: Path
) -> None:
    """Differences 12 and 13: the built environment names the ``FROM`` image with the id the
    engine has for it; a ``docker_image`` already present is used without a pull (this engine
    reaches no registry); one that is not present fails in one line that says how to supply
    it."""
    (tmp_path / "Dockerfile").write_text(BASE)
    built = get_backend("docker").build(spec(tmp_path))
    image_id = engine.docker("image", "inspect", "-f", "{{.Id}}", "debian:bookworm-slim")
    assert built.base_mapping["from:debian:bookworm-slim"] == image_id.stdout.strip()
    present = get_backend("docker").build(
        EnvironmentSpec(context_dir=None, docker_image="python:3.11-slim")
    )
    assert present.base_mapping["image"] == "python:3.11-slim"
    with pytest.raises(BuildError, match=r"cannot pull nowhere/absent:1 .*docker load"):
        get_backend("docker").build(
            EnvironmentSpec(context_dir=None, docker_image="nowhere/absent:1")
        )


def test_a_missing_network_is_one_line_that_names_the_setting(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Difference 13: this engine has no bridge network object; a phase that switches the
    network fails in one line that names the setting. With the setting at ``host`` the
    container has the host's network for its whole life, and switching says so."""
    (tmp_path / "Dockerfile").write_text(BASE)
    sandbox = get_backend("docker")
    public = EnvironmentSpec(context_dir=tmp_path, network_mode="public")
    built = sandbox.build(public)
    missing = "no 'bridge' network.*REPOGYM_DOCKER_NETWORK=host"
    with sandbox.start(built, public) as sess, pytest.raises(SandboxError, match=missing):
        sess.exec("true", network=False)
    monkeypatch.setenv("REPOGYM_DOCKER_NETWORK", "host")
    with sandbox.start(built, public) as sess:
        assert sess.exec("echo up").stdout == "up\n"
        with pytest.raises(SandboxError, match="per phase needs the engine's bridge"):
            sess.exec("true", network=False)
    monkeypatch.setenv("REPOGYM_DOCKER_NETWORK", "bogus")
    with pytest.raises(SandboxError, match="REPOGYM_DOCKER_NETWORK='bogus'"):
        sandbox.start(built, public)


@pytest.mark.parametrize("session", BACKENDS, indirect=True)
def test_kill_all_kills_everything_and_the_session_goes_on(session: Session) -> None:
    """``kill_all`` ends every process the commands left (orphans included) and the session
    still runs commands after it (the container's init and keeper survive)."""
    session.exec("(sleep 300 &) ; nohup sleep 301 >/dev/null 2>&1 &")
    session.kill_all()
    left = session.exec("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
    assert "sleep 300" not in left.stdout and "sleep 301" not in left.stdout, left.stdout
    assert session.exec("echo alive").stdout == "alive\n"


@pytest.fixture(scope="module")
def quota_engine() -> Iterator[Engine]:
    """A second engine whose storage driver has a size quota (btrfs in a sparse file)."""
    no_engine(why_no_engine("btrfs"))
    running = start_engine("btrfs")
    try:
        stand_in(running, "debian:bookworm-slim")
        yield running
    finally:
        running.stop()


def test_storage_is_a_quota_where_the_engine_has_one(
    quota_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Difference 9 on an engine with quotas: the limit holds for all the session's writes
    together (two files of 40 MB under 64 MB), not only per file; the image's own data does
    not count against it."""
    monkeypatch.setenv("DOCKER_HOST", quota_engine.host)
    (tmp_path / "Dockerfile").write_text(BASE)
    sandbox = get_backend("docker")
    limited = spec(tmp_path, storage_mb=64)
    with sandbox.start(sandbox.build(limited), limited) as s:
        first = s.exec("dd if=/dev/zero of=/work/a bs=1M count=40 status=none; echo rc=$?")
        assert first.stdout.strip() == "rc=0", first.stderr
        second = s.exec("dd if=/dev/zero of=/work/b bs=1M count=40 status=none; echo rc=$?")
        assert second.stdout.strip() == "rc=1"
        assert "quota" in second.stderr.lower() or "space" in second.stderr.lower()
        s.exec("rm -f /work/a /work/b")
        assert s.exec("echo ok > /work/ok && cat /work/ok").stdout == "ok\n"


def test_storage_without_a_quota_is_said_once(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """On overlay2 without project quotas the engine refuses a size: the session starts with
    the per-file limit and a warning says the total is not held."""
    (tmp_path / "Dockerfile").write_text(BASE)
    sandbox = get_backend("docker")
    limited = spec(tmp_path, storage_mb=64)
    built = sandbox.build(limited)
    with caplog.at_level("WARNING", logger="repogym.sandbox.docker"):
        for _ in range(2):
            with sandbox.start(built, limited) as s:
                assert s.exec("echo up").stdout == "up\n"
    warnings = [r for r in caplog.records if "cannot limit a container's storage" in r.message]
    assert len(warnings) == 1


def test_never_pull_says_which_image_and_how_to_supply_it(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Difference 13: with ``REPOGYM_DOCKER_PULL=never`` an absent ``FROM`` image is refused
    before the engine tries a registry; without it, the engine's failed pull becomes one line
    that names the image. Present images build either way."""
    (tmp_path / "Dockerfile").write_text(
        "FROM debian:bookworm-slim AS first\nRUN true\nFROM nowhere/absent:2\n"
    )
    sandbox = get_backend("docker")
    with pytest.raises(BuildError, match=r"^cannot pull FROM nowhere/absent:2 .*docker load"):
        sandbox.build(spec(tmp_path))
    monkeypatch.setenv("REPOGYM_DOCKER_PULL", "never")
    with pytest.raises(BuildError, match=r"^FROM nowhere/absent:2 is not on the engine and"):
        sandbox.build(spec(tmp_path))
    with pytest.raises(BuildError, match="nowhere/absent:3 is not on the engine"):
        sandbox.build(EnvironmentSpec(context_dir=None, docker_image="nowhere/absent:3"))
    (tmp_path / "Dockerfile").write_text(BASE)
    assert sandbox.build(spec(tmp_path)).base_mapping["from:debian:bookworm-slim"]
    monkeypatch.setenv("REPOGYM_DOCKER_PULL", "sometimes")
    with pytest.raises(SandboxError, match="REPOGYM_DOCKER_PULL='sometimes'"):
        sandbox.build(spec(tmp_path))


@pytest.mark.parametrize("session", ["docker"], indirect=True)
def test_tests_uploaded_file_by_file_are_read_only_inside(session: Session, tmp_path: Path) -> None:
    """Harbor uploads the tests with ``mkdir -p`` and a merge (``docker cp src/. /tests``) or
    file by file: they land in the read-only volume, and the task's root cannot change them."""
    (tmp_path / "t" / "sub").mkdir(parents=True)
    (tmp_path / "t" / "test.sh").write_text("echo hidden\n")
    (tmp_path / "t" / "sub" / "data.txt").write_text("data\n")
    assert session.exec("mkdir -p /tests").exit_code == 0
    session.merge(tmp_path / "t", "/tests", ["sub", "sub/data.txt", "test.sh"])
    session.upload(tmp_path / "t" / "test.sh", "/tests/more/again.sh")
    got = session.exec("cd /tests && find . -type f | sort && cat more/again.sh")
    assert got.stdout.split() == [
        "./more/again.sh", "./sub/data.txt", "./test.sh", "echo", "hidden"
    ]  # fmt: skip
    assert session.exec("echo x > /tests/test.sh").exit_code != 0
    session.remove("/tests")
    assert session.exec("ls -A /tests | wc -l").stdout.strip() == "0"
