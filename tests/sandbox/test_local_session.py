"""Sessions of the local backend: isolation, limits, process cleanup, file transfer."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, SandboxError
from repogym.sandbox.local import LocalSandbox
from tests.sandbox.conftest import host_mounts_mentioning, processes_with, settled

Env = tuple[BuiltEnvironment, EnvironmentSpec]


def test_fresh_root_per_session(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    with sandbox.start(built, spec) as s1:
        assert s1.exec("echo one > /app/note && echo x > /tmp/t && rm /app/marker").exit_code == 0
        assert s1.read("/app/note") == b"one\n"
    with sandbox.start(built, spec) as s2:
        res = s2.exec("ls /app; ls -A /tmp | wc -l")
        assert res.stdout.split() == ["marker", "0"]


def test_host_home_work_and_cache_are_invisible(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    host_only = [p for p in ("/work", "/farm", "/old_root", "/home") if os.path.isdir(p)]
    with sandbox.start(built, spec) as s:
        res = s.exec(
            "ls -A /root | wc -l; echo HOME=$HOME; "
            f"for p in {' '.join(host_only)} {sandbox.cache_root} /root/.pyenv /mnt/*; do "
            '[ -e "$p" ] && echo "VISIBLE $p"; done; ls /; true'
        )
        assert res.exit_code == 0, res.stderr
        lines = res.stdout.splitlines()
        assert lines[0] == "0"  # HOME is an empty directory ...
        assert lines[1] == "HOME=/root"
        assert not [x for x in lines if x.startswith("VISIBLE") and not x.endswith("/home")]
        assert s.exec("touch /root/.writable && ls -A /root").stdout.strip() == ".writable"
        # /home exists (like in any image) but holds none of the host's users.
        assert s.exec("ls -A /home | wc -l").stdout.strip() == "0"
        assert "work" not in lines[2:] and "farm" not in lines[2:]
        # Fresh /proc: only the sandbox's own processes.
        procs = s.exec("ls /proc | grep -c '^[0-9]'").stdout.strip()
        assert int(procs) < 10


def test_writing_outside_the_sandbox_is_impossible(
    sandbox: LocalSandbox, py_env: Env, tmp_path: Path
) -> None:
    built, spec = py_env
    marker = f"escape-{uuid.uuid4().hex}"
    targets = [tmp_path / marker, Path("/tmp") / marker, sandbox.cache_root / marker]
    with sandbox.start(built, spec) as s:
        for t in targets:
            s.exec(f"mkdir -p {t.parent} && echo pwned > {t}")
        s.exec(f"echo pwned > /usr/{marker}; echo pwned > /etc/{marker}")
        s.write(f"/../../tmp/{marker}", b"pwned")  # stays inside: path is normalised
        # Symlinks planted inside must not redirect host-side file operations.
        s.exec(f"ln -s {tmp_path} /tests && ln -s {tmp_path}/{marker} /planted")
        src = tmp_path / "upload"
        src.mkdir()
        (src / marker).write_text("payload")
        s.upload(src, "/tests")
        s.write("/planted", b"pwned")
        assert s.read(f"/tests/{marker}") == b"payload"
        res = s.exec("mount -t tmpfs none /mnt; echo $?; cat /proc/self/status | grep CapEff")
        assert res.stdout.splitlines()[0] != "0"  # no CAP_SYS_ADMIN inside
    for t in [*targets, Path("/usr") / marker, Path("/etc") / marker]:
        assert not t.exists(), t
    assert sorted(p.name for p in tmp_path.iterdir()) == ["upload"]


def test_no_network_has_only_loopback(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    assert spec.network_mode == "no-network"
    with sandbox.start(built, spec) as s:
        dev = s.read("/proc/net/dev").decode()
        names = [line.split(":")[0].strip() for line in dev.splitlines() if ":" in line]
        assert names == ["lo"]
        res = s.exec(
            "cat /sys/class/net/lo/operstate; python -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), 2)'"
        )
        assert res.exit_code != 0
        # Per-exec override: this one command gets a network of its own (slirp4netns's tap0),
        # never the host's namespace.
        res = s.exec("cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' '", network=True)
        assert res.stdout.split() == ["lo", "tap0"], res.stderr
        assert int(s.exec("grep -c : /proc/net/dev").stdout) == 1  # the session still has none
    public = replace(spec, network_mode="public")
    with sandbox.start(built, public) as s:
        names = s.exec("cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' '").stdout.split()
        assert names == ["lo", "tap0"]  # none of the host's interfaces
        assert int(s.exec("grep -c : /proc/net/dev", network=False).stdout) == 1
    with pytest.raises(SandboxError, match="allowlist network mode is not supported"):
        sandbox.start(built, replace(spec, network_mode="allowlist"))


@pytest.mark.slow
def test_timeout_kills_the_whole_tree(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    tag = str(int(time.time() * 1000) % 100000)
    bg, daemon, fg = f"1000.{tag}1", f"1000.{tag}2", f"1000.{tag}3"
    with sandbox.start(built, spec) as s:
        t0 = time.monotonic()
        res = s.exec(
            f"sleep {bg} & (setsid nohup sleep {daemon} >/dev/null 2>&1 &); echo started; sleep {fg}",
            timeout_s=1.5,
        )
        took = time.monotonic() - t0
        assert res.timed_out and res.exit_code is None
        assert res.stdout.strip() == "started"
        assert 1.4 < took < 5
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and processes_with(f"sleep 1000.{tag}"):
            time.sleep(0.05)
        assert processes_with(f"sleep 1000.{tag}") == []
        # The session itself lives on.
        assert s.exec("echo alive").stdout == "alive\n"
        # Background jobs of a finished exec keep running until close, then die too.
        assert s.exec(f"nohup sleep 1001.{tag} >/dev/null 2>&1 &").exit_code == 0
        deadline = time.monotonic() + 10  # the job's shell may not have exec'd sleep yet
        while time.monotonic() < deadline and not processes_with(f"sleep 1001.{tag}"):
            time.sleep(0.05)
        assert len(processes_with(f"sleep 1001.{tag}")) == 1
    assert processes_with(f"sleep 1001.{tag}") == []


@pytest.mark.slow
@pytest.mark.parametrize(("pids_max", "memory_mb"), [(128, None), (4096, 512)])
def test_fork_bomb_is_contained(
    sandbox: LocalSandbox, py_env: Env, pids_max: int, memory_mb: int | None
) -> None:
    built, spec = py_env
    small = LocalSandbox(pids_max=pids_max)
    tag = uuid.uuid4().hex[:12]
    with small.start(built, replace(spec, memory_mb=memory_mb)) as s:
        s.write(f"/tmp/bomb-{tag}.sh", "b() { b | b & }; b\n", mode=0o755)
        t0 = time.monotonic()
        res = s.exec(f"bash /tmp/bomb-{tag}.sh; sleep 1", timeout_s=4)
        assert time.monotonic() - t0 < 15
        assert res.timed_out or res.exit_code is not None
        # The host still forks fine and quickly while the bomb's cgroup is at its limit.
        t1 = time.monotonic()
        subprocess.run(["true"], check=True)
        assert time.monotonic() - t1 < 2
        # Bombs that outlive their exec die with kill_all; the session stays usable.
        s.kill_all()
        assert processes_with(f"bomb-{tag}") == []
        assert s.exec("echo ok").stdout == "ok\n"
    assert processes_with(f"bomb-{tag}") == []


@pytest.mark.slow
def test_disk_fill_hits_enospc_inside_only(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    small = replace(spec, storage_mb=64, memory_mb=1024)
    before = shutil.disk_usage(sandbox.cache_root).used
    with sandbox.start(built, small) as s:
        res = s.exec("dd if=/dev/zero of=/app/fill bs=1M count=200 status=none; echo rc=$?")
        assert "No space left on device" in res.stderr
        assert "rc=1" in res.stdout
        size = int(s.exec("stat -c %s /app/fill").stdout)
        assert 32 << 20 < size <= 64 << 20
        # Other writes fail too until space is freed.
        assert s.exec("echo x > /tmp/more").exit_code != 0
        s.exec("rm /app/fill")
        assert s.exec("echo x > /tmp/more").exit_code == 0
    after = shutil.disk_usage(sandbox.cache_root).used
    assert after - before < 16 << 20  # the upper layer lived on the session's tmpfs


def test_file_size_limit(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    limited = LocalSandbox(max_file_mb=8)
    with limited.start(built, spec) as s:
        # /dev/shm is not on the storage tmpfs: only RLIMIT_FSIZE stops this one.
        res = s.exec("head -c 12M /dev/zero > /dev/shm/big; echo rc=$?; stat -c %s /dev/shm/big")
        assert "File size limit exceeded" in res.stderr
        assert res.stdout.split() == ["rc=153", str(8 << 20)]
        assert s.exec("head -c 4M /dev/zero > /dev/shm/ok").exit_code == 0


@pytest.mark.slow
def test_memory_limit(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    with sandbox.start(built, replace(spec, memory_mb=128)) as s:
        res = s.exec(["python", "-c", "x = bytearray(512 << 20); print('allocated')"], timeout_s=60)
        assert res.exit_code != 0 and "allocated" not in res.stdout
        assert s.exec("echo still-here").stdout == "still-here\n"


def test_exec_options(sandbox: LocalSandbox, deb_env: Env) -> None:
    built, spec = deb_env
    with sandbox.start(built, replace(spec, env={"FROM_SPEC": "1"})) as s:
        res = s.exec("pwd; id -un; echo $FROM_SPEC $EXTRA; echo $HOME", env={"EXTRA": "2"})
        assert res.stdout.splitlines() == ["/work", "root", "1 2", "/root"]
        res = s.exec(["id", "-u"], user="app", cwd="/tmp")
        assert res.stdout.strip() == "1234"
        assert s.exec(
            "echo $HOME; touch /work/mine && stat -c %U /work/mine", user="app"
        ).stdout.split() == [
            "/home/app",
            "app",
        ]
        res = s.exec("exit 3")
        assert res.exit_code == 3 and not res.timed_out
        res = s.exec(["no-such-binary"])
        assert res.exit_code == 127 and "not found" in res.stderr
        res = s.exec("true", cwd="/does/not/exist")
        assert res.exit_code == 126 and "/does/not/exist" in res.stderr
        res = s.exec("id", user="ghost")
        assert res.exit_code == 126 and "ghost" in res.stderr
        res = s.exec("kill -9 $$")
        assert res.exit_code == 137
        big = s.exec("head -c 3000000 /dev/zero | tr '\\0' a")
        assert len(big.stdout) == 3_000_000


def test_file_transfer(sandbox: LocalSandbox, deb_env: Env, tmp_path: Path) -> None:
    built, spec = deb_env
    src = tmp_path / "tests"
    (src / "sub").mkdir(parents=True)
    (src / "test.sh").write_text("#!/bin/bash\necho verifier\n")
    (src / "test.sh").chmod(0o755)
    (src / "sub" / "data.json").write_text("{}")
    os.symlink("sub/data.json", src / "link.json")
    with sandbox.start(built, spec) as s:
        s.upload(src, "/tests")
        res = s.exec("/tests/test.sh; stat -c '%U %a' /tests/test.sh; readlink /tests/link.json")
        assert res.stdout.splitlines() == ["verifier", "root 755", "sub/data.json"]
        s.exec("echo stale > /tests/old.txt")
        s.upload(src, "/tests")  # replaced, not merged
        assert not s.exists("/tests/old.txt")
        s.write("/logs/verifier/reward.txt", "1\n")
        assert s.read("/logs/verifier/reward.txt") == b"1\n"
        s.exec("mkdir -p /out/deep && echo result > /out/deep/r.txt && ln -s /etc/passwd /out/pw")
        s.download("/out", tmp_path / "out")
        assert (tmp_path / "out" / "deep" / "r.txt").read_text() == "result\n"
        assert os.readlink(tmp_path / "out" / "pw") == "/etc/passwd"  # copied as a link
        s.download("/out/deep/r.txt", tmp_path / "single.txt")
        assert (tmp_path / "single.txt").read_text() == "result\n"
        single = tmp_path / "one-file"
        single.write_text("solo")
        s.upload(single, "/solution/solve.sh")
        assert s.read("/solution/solve.sh") == b"solo"
        s.remove("/tests")
        s.remove("/tests")  # absent: no error
        assert not s.exists("/tests")
        with pytest.raises(FileNotFoundError):
            s.read("/nope")
        with pytest.raises(ValueError):
            s.read("relative/path")


def test_mount_host_folder_into_running_session(
    sandbox: LocalSandbox, deb_env: Env, tmp_path: Path
) -> None:
    built, spec = deb_env
    src = tmp_path / "solution"
    src.mkdir()
    (src / "solve.sh").write_text("echo solved\n")
    with sandbox.start(built, spec) as s:
        assert not s.exists("/solution")
        s.mount(src, "/solution")
        assert s.exec("bash /solution/solve.sh").stdout == "solved\n"
        assert s.exec("touch /solution/x").exit_code != 0  # read-only
        s.remove("/solution")  # unmounts, then removes the mount point
        assert not s.exists("/solution")
    assert sorted(p.name for p in src.iterdir()) == ["solve.sh"]


def test_kill_all_stops_background_jobs_but_keeps_the_session(
    sandbox: LocalSandbox, deb_env: Env
) -> None:
    built, spec = deb_env
    tag = str(uuid.uuid4().int)[:8]
    with sandbox.start(built, spec) as s:
        s.exec(
            "nohup bash -c 'while true; do echo 1 > /work/planted; sleep 0.01; done' "
            f">/dev/null 2>&1 & (setsid sleep 997.{tag} &); true"
        )
        assert processes_with(f"997.{tag}")
        s.kill_all()
        assert processes_with(f"997.{tag}") == []
        s.remove("/work/planted")
        time.sleep(0.1)
        assert not s.exists("/work/planted")  # the planter is gone for good
        assert s.exec("echo alive").stdout == "alive\n"


@pytest.mark.slow
def test_verifier_phase_survives_a_full_disk(
    sandbox: LocalSandbox, deb_env: Env, tmp_path: Path
) -> None:
    built, spec = deb_env
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    with sandbox.start(built, replace(spec, storage_mb=32)) as s:
        s.exec("dd if=/dev/zero of=/work/big bs=1M count=100 status=none")
        assert s.exec("echo x > /work/y").exit_code != 0  # the disk is full
        s.mount(tests, "/tests")
        s.mount(logs, "/logs/verifier", read_only=False)
        res = s.exec("bash /tests/test.sh")
        assert res.exit_code == 0, res.stderr
        s.unmount("/logs/verifier")
    assert (logs / "reward.txt").read_text() == "1\n"


def test_close_leaves_nothing_behind(sandbox: LocalSandbox, py_env: Env) -> None:
    built, spec = py_env
    tag = str(uuid.uuid4().int)[:8]
    s = sandbox.start(built, spec)
    s.exec(f"(setsid sleep 999.{tag} &) ; sleep 998.{tag} &")
    procs = {pid: _start_time(pid) for pid in s.host_pids()}
    assert len(procs) >= 4  # bwrap, its init, the init's command, the two sleeps
    s.close()
    s.close()  # idempotent
    for pid, started in procs.items():  # (pids may be reused: compare start times)
        assert _start_time(pid) != started or _is_zombie(pid), _describe(pid)
    assert processes_with(f".{tag}") == []
    assert host_mounts_mentioning(str(sandbox.cache_root)) == []
    with pytest.raises(SandboxError):
        s.exec("true")


def test_spec_workdir_is_created_and_dropped_sessions_are_cleaned(
    sandbox: LocalSandbox, deb_env: Env
) -> None:
    import gc

    built, spec = deb_env
    tag = str(uuid.uuid4().int)[:8]
    s = sandbox.start(built, replace(spec, workdir="/srv/task"))
    assert s.exec("pwd").stdout == "/srv/task\n"
    s.exec(f"sleep 996.{tag} >/dev/null 2>&1 &")
    assert settled(lambda: bool(processes_with(f"996.{tag}")))
    del s
    gc.collect()
    assert processes_with(f"996.{tag}") == []


def _start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def test_concurrent_sessions_are_independent(sandbox: LocalSandbox, deb_env: Env) -> None:
    import concurrent.futures

    built, spec = deb_env

    def one(i: int) -> tuple[str, str]:
        with sandbox.start(built, spec) as s:
            s.write("/work/id", str(i))
            time.sleep(0.05)
            return s.read("/work/id").decode(), s.exec("ls /work").stdout.strip()

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(8)))
    assert results == [(str(i), "id") for i in range(8)]


def test_concurrent_execs_in_one_session(sandbox: LocalSandbox, deb_env: Env) -> None:
    import concurrent.futures

    built, spec = deb_env
    with sandbox.start(built, spec) as s:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(lambda i: s.exec(f"sleep 0.2; echo {i}").stdout, range(8)))
        assert outs == [f"{i}\n" for i in range(8)]


def test_host_kernel_knobs_and_secrets_are_out_of_reach(
    sandbox: LocalSandbox, deb_env: Env
) -> None:
    built, spec = deb_env
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    with sandbox.start(built, replace(spec, network_mode="public")) as s:
        res = s.exec(
            "echo '|/tmp/x' > /proc/sys/kernel/core_pattern; echo a=$?; "
            "echo h > /proc/sysrq-trigger; echo b=$?; "
            "mount -t proc none /mnt; echo c=$?; "
            "grep '^root:' /etc/shadow | cut -d: -f2; "
            "grep CapEff /proc/self/status"
        )
        out = res.stdout.split()
        assert "a=0" not in out and "b=0" not in out and "c=0" not in out
        assert out[3] in ("*", "")  # the host's password hash is masked
        cap_eff = int(out[-1], 16)
        assert not cap_eff & (1 << 21)  # no CAP_SYS_ADMIN
        assert not cap_eff & (1 << 13)  # no raw sockets on the host network
        assert cap_eff & (1 << 0)  # but CAP_CHOWN like Docker's default set
        # The sandbox's own network namespace may keep CAP_NET_RAW (Docker's default).
        raw = s.exec("grep CapEff /proc/self/status", network=False).stdout.split()[-1]
        assert int(raw, 16) & (1 << 13)
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before


def _describe(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()[:8]
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        cg = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError as exc:
        return f"{pid}: {exc}"
    return f"{pid}: {cmd!r} {status} {cg}"
