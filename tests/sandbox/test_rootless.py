"""The local backend without root: user namespace + overlayfs (``userxattr``), no cgroups.

Runs a small script as ``nobody`` (needs root to switch users, ``setpriv`` and a system
Python >= 3.11 that ``nobody`` can execute).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox.conftest import processes_with

SRC = Path(__file__).resolve().parents[2] / "src"
SYSTEM_PYTHON = "/usr/bin/python3"

SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from repogym.sandbox import EnvironmentSpec, SandboxError
    from repogym.sandbox.local import LocalSandbox

    ctx = Path(sys.argv[1])
    out = {"available": LocalSandbox.available()}
    sb = LocalSandbox()
    out["rootless"] = sb.rootless
    spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network", memory_mb=512)
    built = sb.build(spec)
    out["misses"] = built.details["cache_misses"]
    out["rebuild_hits"] = sb.build(spec).details["cache_hits"]
    with sb.start(built, spec) as s:
        out["id"] = s.exec("id -u; pwd; cat built hello.txt").stdout.split()
        s.exec("echo dirty > /app/dirty && rm /app/hello.txt")
        s.kill_all()
        staged = Path(sys.argv[1]).parent / "staged"
        changes = s.export_changes("/app", staged).changes
        out["changes"] = sorted([c.path, c.kind] for c in changes)
        out["staged"] = (staged / "dirty").read_text()
        out["net"] = s.read("/proc/net/dev").decode().count(":")
        out["work_visible"] = s.exec("test -e /work").exit_code == 0
        t = time.monotonic()
        res = s.exec("sleep 777.1 & sleep 777.2", timeout_s=1)
        out["timed_out"] = res.timed_out
        out["took"] = time.monotonic() - t
        res = s.exec("bomb() { bomb | bomb & }; bomb; sleep 1", timeout_s=3)
        t = time.monotonic()
        s.kill_all()  # the bomb outlives its exec (background jobs do); kill_all ends it
        out["kill_all_s"] = time.monotonic() - t
        out["after_bomb"] = s.exec("echo alive", timeout_s=60).stdout
        out["other_user"] = s.exec("id", user="nobody").exit_code
        s.exec("(setsid sleep 778.1 &); nohup sleep 778.2 >/dev/null 2>&1 &")
        s.kill_all()
        ps = s.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline"]).stdout.replace(chr(0), " ")
        out["after_kill_all"] = [x for x in ("778.1", "778.2", "infinity") if x in ps]
    with sb.start(built, spec) as s:
        out["fresh"] = s.exec("test -e /app/dirty").exit_code != 0
    public = EnvironmentSpec(context_dir=ctx, network_mode="public", memory_mb=512)
    with sb.start(built, public) as s:
        ifaces = s.exec("cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' '").stdout.split()
        out["public_ifaces"] = ifaces
    print(json.dumps(out))
    """
)


def _usable() -> str | None:
    if os.geteuid() != 0:
        return "needs root to switch to an unprivileged user"
    if not shutil.which("setpriv") or not os.access(SYSTEM_PYTHON, os.X_OK):
        return "needs setpriv and a system python3"
    ver = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info >= (3, 11))"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if ver != "True":
        return "the system python3 is older than 3.11"
    return None


@pytest.fixture
def nobody_home() -> Iterator[Path]:
    """A folder ``nobody`` can reach (pytest's own tmp dirs are private to root)."""
    path = Path(tempfile.mkdtemp(prefix="repogym-rootless-"))
    path.chmod(0o755)
    yield path / "home"
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_rootless_sandbox(nobody_home: Path) -> None:
    why = _usable()
    if why:
        pytest.skip(why)
    home = nobody_home
    ctx = home / "ctx"
    ctx.mkdir(parents=True)
    (ctx / "Dockerfile").write_text(
        "FROM debian:bookworm\nWORKDIR /app\nCOPY hello.txt ./\nRUN echo built > built\n"
    )
    (ctx / "hello.txt").write_text("hi\n")
    (home / "run.py").write_text(SCRIPT)
    subprocess.run(["chown", "-R", "nobody:nogroup", str(home)], check=True)
    env = {
        "HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "REPOGYM_CACHE": str(home / "cache"),
        "PYTHONPATH": str(SRC) + os.pathsep + str(SRC.parent),
    }
    res = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", SYSTEM_PYTHON]
        + [str(home / "run.py"), str(ctx)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=home,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["available"] == [True, ""]
    assert out["rootless"] is True
    assert out["misses"] == 3 and out["rebuild_hits"] == 3
    assert out["id"] == ["0", "/app", "built", "hi"]  # root inside, mapped to nobody outside
    assert out["net"] == 1 and out["work_visible"] is False
    assert out["timed_out"] is True and out["took"] < 5
    assert out["after_bomb"] == "alive\n"  # RLIMIT_NPROC (per user namespace) held the bomb
    assert out["kill_all_s"] < 20
    assert out["other_user"] == 126  # only root is mapped without privileges
    assert out["after_kill_all"] == ["infinity"]  # only the sandbox's own init is left
    assert out["fresh"] is True
    assert out["public_ifaces"] == ["lo", "tap0"]  # slirp4netns works without root too
    # The clean room reads the agent's change from the upper layer without root too.
    assert out["changes"] == [["dirty", "file"], ["hello.txt", "deleted"]]
    assert out["staged"] == "dirty\n"
    assert processes_with("sleep 777.") == []
    assert sys.executable  # the test itself ran as root
