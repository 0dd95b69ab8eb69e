"""The sandbox contract, one suite run on every backend: ``local`` (bubblewrap) and ``docker``
(a real engine, offline, with stand-in slim images: :mod:`tests.engine`), and the checks it can
honestly meet on ``fake`` (no isolation: :mod:`repogym.sandbox.fake`).

Each test states what the protocol promises (``repogym.sandbox.base``) and checks it the same way
on both backends; where they may differ by design (the error a full disk gives), the test says so.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, Sandbox, Session, get_backend

BACKENDS = ["local", "docker", "fake"]
DOCKERFILE = """\
FROM python:3.11-slim
RUN useradd -m -u 1000 agent && mkdir -p /work/pkg && echo base > /work/base.txt \\
 && echo old > /work/pkg/mod.py && echo gone > /work/gone.txt && ln -s base.txt /work/link.txt \\
 && chown -R agent /work
WORKDIR /work
"""
FAKE_DOCKERFILE = """\
FROM python:3.11-slim
COPY work/ /work/
WORKDIR /work
"""
"""The fake runs no RUN step: the same tree comes from the build context."""
NOT_FOR_FAKE = {
    "test_a_timeout_kills_the_whole_tree_and_the_session_lives_on": (
        "its /proc is the host's: other processes of the machine show there"
    ),
    "test_exec_options": "no users; paths are the host's",
    "test_kill_all_ends_background_jobs_and_the_session_goes_on": (
        "its /proc is the host's: other processes of the machine show there"
    ),
    "test_read_write_and_links": "no users, so no permission checks",
    "test_tests_arrive_read_only_and_go_again": "no read-only mounts",
    "test_no_network_has_only_loopback": "no network namespace",
    "test_memory_limit_kills_the_hog_not_the_session": "no limits",
    "test_storage_limit_stops_a_big_write": "no limits",
}
"""Isolation checks the fake backend cannot meet, and why: not applicable there."""

Env = tuple[Sandbox, BuiltEnvironment, EnvironmentSpec]


@pytest.fixture(scope="module", params=BACKENDS)
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Env:
    """One built environment per backend for the whole module."""
    if request.param == "docker":
        request.getfixturevalue("engine")
    context = tmp_path_factory.mktemp(f"contract-{request.param}")
    (context / "Dockerfile").write_text(DOCKERFILE)
    if request.param == "fake":
        _fake_context(context)
    sandbox = get_backend(request.param, **({"host": True} if request.param == "fake" else {}))
    spec = EnvironmentSpec(context_dir=context, network_mode="no-network", memory_mb=1024)
    return sandbox, sandbox.build(spec), spec


def _fake_context(context: Path) -> None:
    (context / "Dockerfile").write_text(FAKE_DOCKERFILE)
    (context / "work" / "pkg").mkdir(parents=True)
    (context / "work" / "base.txt").write_text("base\n")
    (context / "work" / "pkg" / "mod.py").write_text("old\n")
    (context / "work" / "gone.txt").write_text("gone\n")
    (context / "work" / "link.txt").symlink_to("base.txt")


@pytest.fixture(autouse=True)
def _applicable(request: pytest.FixtureRequest) -> None:
    """Skip the isolation checks on the fake backend (not applicable, see NOT_FOR_FAKE)."""
    callspec = getattr(request.node, "callspec", None)
    reason = NOT_FOR_FAKE.get(request.node.originalname)
    if callspec is not None and callspec.params.get("env") == "fake" and reason:
        pytest.skip(f"not applicable to the fake sandbox: {reason}")


@pytest.fixture
def session(env: Env) -> Iterator[Session]:
    sandbox, built, spec = env
    with sandbox.start(built, spec) as sess:
        yield sess


def alive(session: Session, tag: str) -> list[str]:
    """Command lines of the session's processes that mention ``tag``."""
    res = session.exec("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done")
    return [line for line in res.stdout.splitlines() if tag in line and "/proc/" not in line]


# -- exec ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "code"),
    [("true", 0), ("exit 3", 3), ("exit 124", 124), ("kill -9 $$", 137), ("kill -TERM $$", 143)],
)
def test_exit_codes_and_signals_are_the_commands_own(
    session: Session, command: str, code: int
) -> None:
    res = session.exec(command, timeout_s=30)
    assert (res.exit_code, res.timed_out) == (code, False)


def test_a_timeout_kills_the_whole_tree_and_the_session_lives_on(session: Session) -> None:
    tag = f"1000.{int(time.time() * 1000) % 100000}"
    t0 = time.monotonic()
    res = session.exec(
        f"sleep {tag}1 & (setsid nohup sleep {tag}2 >/dev/null 2>&1 &); echo started; sleep {tag}3",
        timeout_s=1.5,
    )
    assert res.timed_out and res.exit_code is None
    assert res.stdout.strip() == "started"
    assert time.monotonic() - t0 >= 1.4
    deadline = time.monotonic() + 10
    while alive(session, f"sleep {tag}1") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive(session, f"sleep {tag}1") == [] and alive(session, f"sleep {tag}3") == []
    assert session.exec("echo alive").stdout == "alive\n"


def test_exec_options(session: Session) -> None:
    res = session.exec("echo $FOO; pwd; id -u", env={"FOO": "bar"}, cwd="/work/pkg", user="agent")
    assert res.stdout.split() == ["bar", "/work/pkg", "1000"]
    assert session.exec(["sh", "-c", 'printf "%s|" "$@"', "sh", "a b", "$HOME"]).stdout == (
        "a b|$HOME|"
    )
    assert session.exec("pwd").stdout.strip() == "/work"  # the image's WORKDIR
    err = session.exec("echo out; echo err >&2")
    assert (err.stdout, err.stderr) == ("out\n", "err\n")


def test_kill_all_ends_background_jobs_and_the_session_goes_on(session: Session) -> None:
    session.exec("(sleep 300 &) ; nohup sleep 301 >/dev/null 2>&1 &")
    session.kill_all()
    assert alive(session, "sleep 30") == []
    assert session.exec("echo alive").stdout == "alive\n"


# -- files --------------------------------------------------------------------------------------


def test_read_write_and_links(session: Session) -> None:
    session.write("/work/new/deep/file.txt", b"hello", mode=0o600)
    assert session.read("/work/new/deep/file.txt") == b"hello"
    assert session.exec("stat -c %a /work/new/deep/file.txt").stdout.strip() == "600"
    assert session.read("/work/link.txt") == b"base\n"  # a link is followed inside
    session.exec("ln -s /etc/hostname /work/out && ln -s ../.. /work/up")
    with pytest.raises(OSError) as caught:
        session.read("/work/out", beneath="/work")
    assert caught.value.errno == errno.EXDEV
    with pytest.raises(OSError):
        session.read("/work/up/etc/hostname", beneath="/work")
    # As root a write replaces a link, never writing through it.
    session.write("/work/link.txt", b"replaced")
    assert session.read("/work/base.txt") == b"base\n"
    assert session.exec("test -L /work/link.txt || echo file").stdout == "file\n"
    # As a user the kernel decides.
    with pytest.raises(PermissionError):
        session.write("/etc/agent-was-here", b"x", user="agent")
    with pytest.raises(PermissionError):
        session.read("/etc/shadow", user="agent")
    with pytest.raises(FileNotFoundError):
        session.read("/work/absent")


def test_upload_download_and_listing(session: Session, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.txt").write_text("a")
    (src / "b.txt").write_text("b")
    session.exec("mkdir -p /work/up && echo stale > /work/up/stale")
    session.upload(src, "/work/up")
    assert session.exec("cd /work/up && find . | sort").stdout.split() == [
        ".",
        "./b.txt",
        "./sub",
        "./sub/a.txt",
    ]
    names = [(e.name, e.kind) for e in session.listdir("/work")]
    assert ("link.txt", "symlink") in names and ("pkg", "dir") in names
    session.exec("ln -s /etc/passwd /work/up/sub/passwd")
    out = tmp_path / "out"
    session.download("/work/up", out)
    assert (out / "sub" / "a.txt").read_text() == "a"
    assert os.readlink(out / "sub" / "passwd") == "/etc/passwd"  # kept as a link


def test_download_never_touches_a_host_file_beside_the_destination(
    session: Session, tmp_path: Path
) -> None:
    """Difference 2, as an attack: the container names its file after a host file that sits
    beside the destination; the host file keeps its content and the destination gets the
    container's file."""
    dest_dir = tmp_path / "artifacts"
    dest_dir.mkdir()
    canary = dest_dir / "canary.txt"
    canary.write_text("host canary")
    session.exec("mkdir -p /work/art && echo planted > /work/art/canary.txt")
    session.exec("ln -sf /work/art/canary.txt /work/art/evil")
    session.download("/work/art/canary.txt", dest_dir / "result.txt")
    session.download("/work/art", dest_dir / "tree")
    assert canary.read_text() == "host canary"
    assert (dest_dir / "result.txt").read_text() == "planted\n"
    assert sorted(p.name for p in dest_dir.iterdir()) == ["canary.txt", "result.txt", "tree"]
    assert (dest_dir / "tree" / "evil").is_symlink()


# -- phases and mounts --------------------------------------------------------------------------


def test_tests_arrive_read_only_and_go_again(session: Session, tmp_path: Path) -> None:
    """Difference 10: ``/tests`` is empty before the verifier phase, arrives read-only (root
    cannot write it either) and is gone after it."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text("echo hidden\n")
    assert session.exec("ls -A /tests 2>/dev/null | wc -l").stdout.strip() == "0"
    session.mount(tests, "/tests", read_only=True)
    assert session.read("/tests/test.sh") == b"echo hidden\n"
    for user in ("root", "agent"):
        res = session.exec("echo x > /tests/test.sh || rm -f /tests/test.sh", user=user)
        assert res.exit_code != 0, user
    assert session.exec("echo x > /tests/new").exit_code != 0
    assert session.read("/tests/test.sh") == b"echo hidden\n"
    session.unmount("/tests")
    assert session.exec("ls -A /tests 2>/dev/null | wc -l").stdout.strip() == "0"
    (tests / "test.sh").write_text("echo second\n")
    session.mount(tests, "/tests")
    assert session.read("/tests/test.sh") == b"echo second\n"


def test_changes_are_exported_from_outside(session: Session, tmp_path: Path) -> None:
    session.exec(
        "echo new > /work/pkg/mod.py && rm /work/gone.txt && mkdir /work/fresh"
        " && echo a > /work/fresh/a.py && ln -s /etc/passwd /work/fresh/link"
        " && echo outside > /tmp/outside"
    )
    session.kill_all()
    changes = session.export_changes("/work", tmp_path / "staged")
    got = {(c.path, c.kind) for c in changes.changes}
    assert {
        ("pkg/mod.py", "file"),
        ("gone.txt", "deleted"),
        ("fresh", "dir"),
        ("fresh/a.py", "file"),
        ("fresh/link", "symlink"),
    } <= got
    assert not any(path.startswith("..") or "outside" in path for path, _ in got)
    assert (tmp_path / "staged" / "pkg" / "mod.py").read_text() == "new\n"
    assert os.readlink(tmp_path / "staged" / "fresh" / "link") == "/etc/passwd"


def test_sessions_start_fresh(env: Env) -> None:
    sandbox, built, spec = env
    with sandbox.start(built, spec) as first:
        first.exec("echo dirty > /work/base.txt && touch /tmp/left")
    with sandbox.start(built, spec) as second:
        assert second.read("/work/base.txt") == b"base\n"
        assert second.exec("test -e /tmp/left || echo clean").stdout == "clean\n"


# -- limits and network -------------------------------------------------------------------------


def test_no_network_has_only_loopback(session: Session) -> None:
    dev = session.read("/proc/net/dev").decode()
    assert [line.split(":")[0].strip() for line in dev.splitlines() if ":" in line] == ["lo"]
    res = session.exec(
        "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), 2)'",
        timeout_s=30,
    )
    assert res.exit_code not in (0, None)


def test_memory_limit_kills_the_hog_not_the_session(env: Env) -> None:
    sandbox, built, spec = env
    with sandbox.start(built, replace(spec, memory_mb=128)) as s:
        res = s.exec(
            ["python3", "-c", "x = bytearray(512 << 20); print('allocated')"], timeout_s=60
        )
        assert res.exit_code not in (0, None) and "allocated" not in res.stdout
        assert not res.timed_out
        assert s.exec("echo still-here").stdout == "still-here\n"


def test_storage_limit_stops_a_big_write(env: Env) -> None:
    """Difference 9: 200 MB written under a 64 MB limit fails and leaves at most the limit (the
    local backend's tmpfs says "No space left", an engine without a size quota stops the file
    at the limit plus 16 MB); the session goes on."""
    sandbox, built, spec = env
    with sandbox.start(built, replace(spec, storage_mb=64)) as s:
        res = s.exec("dd if=/dev/zero of=/work/fill bs=1M count=200 status=none; echo rc=$?")
        assert "rc=0" not in res.stdout, res.stdout
        assert int(s.exec("stat -c %s /work/fill").stdout) <= 80 << 20
        s.exec("rm -f /work/fill")
        assert s.exec("echo ok > /work/ok && cat /work/ok").stdout == "ok\n"
