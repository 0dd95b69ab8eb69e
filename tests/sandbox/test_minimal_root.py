"""The minimal root: sandboxes see the host's /usr, but a synthesised /etc, /var and /opt.

What the host's administrator added (``/etc/pip.conf``, ``/opt/wheels``, a database under
``/var``, human users) must not be visible; what programs need (CA certificates, the package
database, system accounts, apt's configuration) must be.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, _rootfs, _toolchains
from repogym.sandbox.local import LocalSandbox
from tests.sandbox.conftest import make_context

Env = tuple[BuiltEnvironment, EnvironmentSpec]


@pytest.fixture
def canaries() -> Iterator[dict[str, Path]]:
    """Host files a sandbox must never see, planted before its root is made."""
    tag = uuid.uuid4().hex[:10]
    var = Path(tempfile.mkdtemp(prefix=f"repogym-canary-{tag}-", dir="/var/tmp"))
    (var / "secret.txt").write_text("host data\n")
    opt = Path(f"/opt/repogym-canary-{tag}")
    opt.mkdir(parents=True)
    (opt / "secret.txt").write_text("host data\n")
    try:
        yield {"var": var, "opt": opt}
    finally:
        shutil.rmtree(var, ignore_errors=True)
        shutil.rmtree(opt, ignore_errors=True)


def _deb_env(sb: LocalSandbox, root: Path, extra: str = "") -> Env:
    ctx = make_context(root, f"FROM debian:bookworm\n{extra}")
    spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network")
    return sb.build(spec), spec


def test_host_additions_are_absent(canaries: dict[str, Path], tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("plants files under /var/tmp and /opt")
    sb = LocalSandbox(cache_dir=tmp_path / "cache")  # its root is made after the canaries
    built, spec = _deb_env(sb, tmp_path / "ctx")
    paths = [
        "/etc/pip.conf",
        "/etc/xdg/pip/pip.conf",
        "/etc/gitconfig",
        "/etc/npmrc",
        "/etc/machine-id",
        "/opt/wheels",
        "/opt/pypi",
        "/var/lib/postgresql",
        "/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_InRelease",
        str(canaries["var"]),
        str(canaries["opt"]),
    ]
    with sb.start(built, spec) as s:
        res = s.exec(
            "for p in " + " ".join(paths) + '; do [ -e "$p" ] && echo "VISIBLE $p"; done; '
            "ls -A /opt /home /srv /mnt /var/tmp | grep -v : | grep . ; true"
        )
        assert res.exit_code == 0, res.stderr
        assert res.stdout.strip() == "", res.stdout
        # The package database is there (it describes /usr), the apt lists are not.
        assert s.exec("ls -A /var/lib/apt/lists").stdout.split() == ["partial"]
        assert s.exec("test -s /var/lib/dpkg/status").exit_code == 0


def test_accounts_are_system_accounts_without_passwords(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    humans = [
        line.split(":")[0]
        for line in Path("/etc/passwd").read_text().splitlines()
        if line.count(":") >= 6 and 1000 <= int(line.split(":")[2]) < 65534
    ]
    with sandbox.start(built, spec) as s:
        passwd = s.read("/etc/passwd").decode().splitlines()
        users = {r.split(":")[0]: int(r.split(":")[2]) for r in passwd}
        assert users["root"] == 0 and users["nobody"] == 65534
        assert all(uid < 1000 or uid == 65534 for uid in users.values()), users
        assert not set(humans) & set(users)
        for name in ("shadow", "gshadow"):
            rows = s.exec(["cat", f"/etc/{name}"]).stdout.splitlines()
            assert rows and all(r.split(":")[1] in ("*", "!", "!*") for r in rows), rows
        groups = s.read("/etc/group").decode()
        assert not any(h in groups for h in humans)


def test_what_programs_need_is_there(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    host_ca = Path("/etc/ssl/certs/ca-certificates.crt")
    with sandbox.start(built, spec) as s:
        if host_ca.is_file():  # the whole bundle, with any TLS-interception CA in it
            assert s.read(str(host_ca)) == host_ca.read_bytes()
        assert s.read("/etc/hostname") == b"sandbox\n"
        assert s.read("/etc/resolv.conf") == b"nameserver 10.0.2.3\n"
        res = s.exec(
            "hostname; getent hosts localhost | head -1; apt-get --version | head -1; "
            "python --version; pip --version; dpkg -s bash | grep '^Status'; "
            "test -e /etc/ssl/private/ssl-cert-snakeoil.key || echo no-private-key; "
            "ls /etc/ssh/ssh_host_* 2>/dev/null | wc -l; cat /etc/os-release | head -1"
        )
        assert res.exit_code == 0, res.stderr
        lines = res.stdout.splitlines()
        assert lines[0] == "sandbox"
        assert "localhost" in lines[1]
        assert lines[2].startswith("apt ")
        assert lines[3].startswith("Python 3.11")
        assert lines[4].startswith("pip ")
        assert lines[5] == "Status: install ok installed"
        assert lines[6] == "no-private-key"
        assert lines[7] == "0"
        assert lines[8].startswith("PRETTY_NAME=")


def test_useradd_and_dpkg_work(sandbox: LocalSandbox, deb_env: Env) -> None:
    built, spec = deb_env  # its Dockerfile ran `useradd -m -u 1234 app`
    with sandbox.start(built, spec) as s:
        res = s.exec("id app; ls -d /home/app; dpkg -l | grep -c '^ii'; apt-get check")
        assert res.exit_code == 0, res.stderr
        lines = res.stdout.splitlines()
        assert lines[0].startswith("uid=1234(app)")
        assert lines[1] == "/home/app"
        host_pkgs = sum(
            1
            for block in Path("/var/lib/dpkg/status").read_text().split("\n\n")
            if "Status: install ok installed" in block
        )
        assert int(lines[2]) == host_pkgs


def test_node_image_still_works(sandbox: LocalSandbox, tmp_path: Path) -> None:
    if not shutil.which("node"):
        pytest.skip("no node on this host")
    ctx = make_context(tmp_path, "FROM node:20\nRUN node -e 'console.log(6*7)' > /answer\n")
    spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network")
    built = sandbox.build(spec)
    with sandbox.start(built, spec) as s:
        assert s.read("/answer") == b"42\n"
        res = s.exec("npm --version")
        assert res.exit_code == 0, res.stderr


@pytest.mark.slow
def test_apt_get_install_in_a_dockerfile(sandbox: LocalSandbox, tmp_path: Path) -> None:
    try:
        socket.create_connection(("deb.debian.org", 80), timeout=5).close()
    except OSError:
        pytest.skip("the Debian mirror is not reachable")
    ctx = make_context(
        tmp_path,
        """\
        FROM debian:bookworm
        RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends hello \\
            && rm -rf /var/lib/apt/lists/*
        """,
    )
    spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network", build_timeout_sec=600)
    built = sandbox.build(spec)
    with sandbox.start(built, spec) as s:
        res = s.exec("hello && dpkg -s hello | grep '^Status'")
        assert res.exit_code == 0, res.stderr
        assert res.stdout.splitlines() == ["Hello, world!", "Status: install ok installed"]


def test_opt_toolchains_are_bound_read_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("creates a toolchain under /opt")
    name = f"repogym-tool-{uuid.uuid4().hex[:8]}"
    tool = Path("/opt") / name
    (tool / "bin").mkdir(parents=True)
    try:
        (tool / "bin" / "tool").write_text("#!/bin/sh\necho tool works\n")
        (tool / "bin" / "tool").chmod(0o755)
        monkeypatch.setattr(_toolchains, "opt_toolchain_dirs", lambda: [name])
        sb = LocalSandbox(cache_dir=tmp_path / "cache")
        assert sb.opt_binds == [str(tool)]
        built, spec = _deb_env(
            sb, tmp_path / "ctx", "RUN /opt/NAME/bin/tool > /out\n".replace("NAME", name)
        )
        with sb.start(built, spec) as s:
            assert s.read("/out") == b"tool works\n"
            assert s.exec("ls /opt").stdout.split() == [name]
            res = s.exec(f"touch /opt/{name}/bin/x")
            assert res.exit_code != 0 and "Read-only" in res.stderr
        assert not (tool / "bin" / "x").exists()
        # Nothing of the bind landed in the layers.
        layers = sb.cache_root / "layers"
        assert not [p for p in layers.rglob(name) if p.is_dir() and any(p.iterdir())]
    finally:
        shutil.rmtree(tool, ignore_errors=True)


def test_root_version_is_in_every_base_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _toolchains.resolve("debian:bookworm").fingerprint
    monkeypatch.setattr(_toolchains, "ROOT_VERSION", _rootfs.ROOT_VERSION + "-next")
    assert _toolchains.resolve("debian:bookworm").fingerprint != before


def test_the_root_is_made_once_per_host_state(tmp_path: Path) -> None:
    first = _rootfs.ensure_root(tmp_path)
    again = _rootfs.ensure_root(tmp_path)
    assert first == again
    assert [p.name for p in (tmp_path / "root").iterdir()] == [first["etc"].parent.name]
    etc = first["etc"]
    assert stat.S_IMODE((first["var"] / "tmp").stat().st_mode) == 0o1777
    assert not (etc / "pip.conf").exists()
    assert (etc / "passwd").is_file() and (etc / "nsswitch.conf").is_file()
    with_opt = _rootfs.ensure_root(tmp_path, ("sometool",))
    assert with_opt["opt"] != first["opt"] and (with_opt["opt"] / "sometool").is_dir()
