"""Every host-side file operation of a local session, against links planted inside the sandbox
that a host lookup would follow out of it: magic links through every descriptor number 0–64
(``/proc/self/fd/N``, ``/proc/thread-self/fd/N``), ``cwd`` and ``root`` links, and a link swapped
by a background process between a check and a use. Each must leave the host canary unread,
create no host file and change no host mode; the honest paths keep working."""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.sandbox.local import LocalSession
from tests.containment.conftest import Canary, climb, magic_starts

Attack = Callable[[str], object]


def plant(session: LocalSession, links: dict[str, str]) -> None:
    """Create the symlinks ``{path: target}`` inside the sandbox (one command)."""
    script = "\n".join(
        f"mkdir -p -- {shlex.quote(os.path.dirname(p))} && ln -sfn -- {shlex.quote(t)} "
        f"{shlex.quote(p)}"
        for p, t in links.items()
    )
    res = session.exec(script, user="root", timeout_s=120)
    assert res.exit_code == 0, res.stderr


def attempt(op: Attack, arg: str, seen: list[object]) -> None:
    """Run one attack; what it returned (or the error it raised) goes to ``seen``."""
    try:
        seen.append(op(arg))
    except Exception as exc:  # noqa: BLE001 - refusals come in many kinds; the canary decides
        seen.append(repr(exc))


def file_attacks(session: LocalSession, canary: Canary, out: Path) -> dict[str, Attack]:
    """The file operations of a session, each aimed through a link prefix ``L``."""
    upload_src = out / "upload.txt"
    upload_src.write_text("uploaded\n")
    n = iter(range(1_000_000))

    def download(link: str) -> object:
        dest = out / f"dl-{next(n)}"
        session.download(f"{link}{canary.secret}", dest)
        return dest.read_bytes() if dest.is_file() else sorted(os.listdir(dest))

    return {
        "read": lambda L: session.read(f"{L}{canary.secret}"),
        "read as a user": lambda L: session.read(f"{L}{canary.secret}", user="agent"),
        "read beneath": lambda L: session.read(f"{L}{canary.secret}", beneath="/tmp"),
        "write": lambda L: session.write(f"{L}{canary.empty}/w.txt", "x"),
        "write in place": lambda L: session.write(f"{L}{canary.empty}/w.txt", "x", user="root"),
        "write a new folder": lambda L: session.write(f"{L}{canary.empty}/d/w.txt", "x"),
        "list": lambda L: [e.name for e in session.listdir(f"{L}{canary.victim}")],
        "exists": lambda L: session.exists(f"{L}{canary.secret}"),
        "download": download,
        "upload": lambda L: session.upload(upload_src, f"{L}{canary.empty}/up.txt"),
        "merge": lambda L: session.merge(out, f"{L}{canary.empty}", ["upload.txt"]),
        "remove": lambda L: session.remove(f"{L}{canary.victim}/file.txt"),
        "working directory": lambda L: (
            session.exec(
                "cat secret.txt victim/file.txt 2>&1; pwd; ls",
                cwd=f"{L}{canary.root}",
                timeout_s=30,
            ).stdout
        ),
    }


def test_magic_links_through_every_descriptor_reach_nothing(
    session: LocalSession, canary: Canary, tmp_path: Path
) -> None:
    before = canary.state()
    links = {f"/tmp/a/L{i}": climb(start, "/") for i, start in enumerate(magic_starts())}
    plant(session, links)
    attacks = file_attacks(session, canary, tmp_path)
    seen: list[object] = []
    for op in attacks.values():
        for link in links:
            attempt(op, link, seen)
    canary.check(before, *seen)
    assert not (canary.empty / "w.txt").exists()
    # Honest operations on the same session still work.
    session.write("/work/ok.txt", "fine\n")
    assert session.read("/work/ok.txt") == b"fine\n"
    assert session.exec("cat /work/ok.txt").stdout == "fine\n"


def test_a_link_to_a_magic_link_and_chains_reach_nothing(
    session: LocalSession, canary: Canary, tmp_path: Path
) -> None:
    """Relative links, chains of links and absolute links to a magic link."""
    before = canary.state()
    links: dict[str, str] = {}
    for n in range(0, 65, 4):
        links[f"/tmp/c/m{n}"] = f"/proc/self/fd/{n}"
        links[f"/tmp/c/chain{n}"] = f"m{n}/" + "../" * 32  # relative, through the magic link
        links[f"/tmp/c/abs{n}"] = f"/tmp/c/chain{n}"
    links["/tmp/c/self"] = "/proc/self"
    links["/tmp/c/viaself"] = "self/root/../../../../../../.."
    plant(session, links)
    attacks = file_attacks(session, canary, tmp_path)
    seen: list[object] = []
    for name in links:
        for op in attacks.values():
            attempt(op, name, seen)
    canary.check(before, *seen)


def test_an_exe_link_and_map_files_are_not_read(session: LocalSession) -> None:
    """``/proc/<pid>/exe`` and ``map_files`` are magic links to host programs and libraries
    (the file worker's own interpreter among them)."""
    plant(session, {"/tmp/e/exe": "/proc/self/exe", "/tmp/e/thread": "/proc/thread-self/exe"})
    for path in ("/tmp/e/exe", "/tmp/e/thread", "/proc/self/exe"):
        with pytest.raises(OSError):
            session.read(path)


def test_a_link_swapped_between_check_and_use_reaches_nothing(
    session: LocalSession, canary: Canary, tmp_path: Path
) -> None:
    """A background process flips ``/tmp/race`` between a real folder (holding a decoy at the
    canary's path) and a magic link to the host, as fast as it can, while the host reads,
    writes, lists and copies through it."""
    before = canary.state()
    decoy = f"/tmp/decoy{canary.root}"
    session.write(f"{decoy}/secret.txt", "decoy\n")
    session.write(f"{decoy}/victim/file.txt", "decoy\n")
    plant(session, {"/tmp/race": "/tmp/decoy"})  # a link before the first attack, never a folder
    flips = "; ".join(
        f"ln -sfn {shlex.quote(climb(f'/proc/self/fd/{n}', '/'))} /tmp/L{n}" for n in range(3, 9)
    )
    script = (
        f"{flips}; while :; do for n in 3 4 5 6 7 8; do "
        "ln -sfn /tmp/decoy /tmp/new && mv -T /tmp/new /tmp/race; "
        "ln -sfn /tmp/L$n /tmp/new && mv -T /tmp/new /tmp/race; done; done"
    )
    session.exec(f"nohup sh -c {shlex.quote(script)} >/dev/null 2>&1 &", timeout_s=30)
    attacks = file_attacks(session, canary, tmp_path)
    seen: list[object] = []
    decoys = 0
    deadline = time.monotonic() + 6
    rounds = 0
    while time.monotonic() < deadline or rounds < 3:
        rounds += 1
        for op in attacks.values():
            attempt(op, "/tmp/race", seen)
    session.kill_all()
    decoys = sum(1 for s in seen if isinstance(s, bytes) and s == b"decoy\n")
    canary.check(before, *seen)
    # The race really ran: some reads went through the folder and found the decoy.
    assert decoys > 0
    assert not any(p.name.startswith("dl-") and p.is_symlink() for p in tmp_path.iterdir())


def test_the_users_passwd_file_linked_to_the_host_is_not_read(
    session: LocalSession, canary: Canary
) -> None:
    """A command's user is looked up in the sandbox's ``/etc/passwd``; linked through a magic
    link to a host file, the session server (which holds host descriptors) must not read it."""
    fake = canary.root / "passwd"
    fake.write_text(f"ghost:x:4321:4321::/{canary.token}:/bin/sh\n")
    before = canary.state()
    outputs: list[object] = []
    for n in range(0, 65):
        plant(session, {"/etc/passwd": climb(f"/proc/self/fd/{n}", fake)})
        res = session.exec("echo $HOME; id", user="ghost", timeout_s=30)
        outputs += [res.stdout, res.stderr]
        assert res.exit_code != 0 or "4321" not in res.stdout
    canary.check(before, *outputs)


def test_downloads_drop_setuid_bits_and_keep_links_as_links(
    session: LocalSession, tmp_path: Path
) -> None:
    res = session.exec(
        "mkdir -p /work/out && cp /bin/true /work/out/su && chmod 6755 /work/out/su "
        "&& ln -s /etc/shadow /work/out/shadow && ln -s /proc/self/fd/3 /work/out/fd",
        user="root",
    )
    assert res.exit_code == 0, res.stderr
    session.download("/work/out", tmp_path / "out")
    mode = (tmp_path / "out" / "su").stat().st_mode
    assert mode & 0o7777 == 0o755
    assert os.readlink(tmp_path / "out" / "shadow") == "/etc/shadow"
    assert os.readlink(tmp_path / "out" / "fd") == "/proc/self/fd/3"


def test_file_operations_have_the_requested_users_rights_only(session: LocalSession) -> None:
    """No check beforehand: the kernel decides at the moment of the read, as that user."""
    with pytest.raises(PermissionError):
        session.read("/root-only.txt", user="agent")
    with pytest.raises(PermissionError):
        session.write("/etc/evil.txt", "x", user="agent")
    assert not session.exists("/etc/evil.txt")
    session.write("/work/mine.txt", "mine\n", user="agent")
    assert session.exec("stat -c %U /work/mine.txt").stdout.strip() == "agent"
    assert session.read("/work/mine.txt", user="agent") == b"mine\n"
    # A swapped link cannot lend the user root's rights either.
    flip = (
        "while :; do ln -sfn /work/mine.txt /work/new && mv -T /work/new /work/f; "
        "ln -sfn /root-only.txt /work/new && mv -T /work/new /work/f; done"
    )
    session.exec(f"nohup sh -c {shlex.quote(flip)} >/dev/null 2>&1 &", timeout_s=30)
    got: list[object] = []
    for _ in range(200):
        with contextlib.suppress(OSError):
            got.append(session.read("/work/f", user="agent"))
    session.kill_all()
    assert b"root-only\n" not in got
    assert b"mine\n" in got


def test_beneath_refuses_links_that_leave_the_folder(session: LocalSession) -> None:
    plant(session, {"/work/up": "..", "/work/abs": "/etc", "/work/in": "sub"})
    session.write("/work/sub/x.txt", "x\n")
    assert session.read("/work/in/x.txt", beneath="/work") == b"x\n"
    for path in ("/work/up/etc/passwd", "/work/abs/passwd", "/work/../etc/passwd"):
        with pytest.raises(OSError) as info:
            session.read(path, beneath="/work")
        assert info.value.errno in (18, 2), info.value  # EXDEV (or gone, for the lexical ..)


def test_the_file_server_is_out_of_the_sandboxs_reach(session: LocalSession) -> None:
    """The process that serves file operations is not in the sandbox's pid namespace: a
    root process inside cannot find, stop or kill it, and file operations go on. (Only the
    sandbox's own init and its command are spared here: killing those ends the session.)"""
    script = (
        "for p in /proc/[0-9]*; do n=${p#/proc/}; "
        '[ "$n" = 1 ] || [ "$n" = $$ ] || [ "$(tr -d "\\0" < $p/cmdline)" = sleepinfinity ] '
        '|| { echo "$n $(tr "\\0" " " < $p/cmdline)"; kill -STOP "$n"; kill -KILL "$n"; }; '
        "done 2>/dev/null; true"
    )
    res = session.exec(script, user="root", timeout_s=60)
    assert res.exit_code == 0, res.stderr
    assert "_forkserver" not in res.stdout and "python" not in res.stdout, res.stdout
    # Every process the sandbox can signal, stopped: file operations are not among them.
    assert session.exec("kill -STOP -1", user="root", timeout_s=30).exit_code == 0
    session.write("/work/after.txt", "still here\n")
    assert session.read("/work/after.txt") == b"still here\n"
    assert [e.name for e in session.listdir("/work")].count("after.txt") == 1
    assert session.exec("kill -CONT -1; echo alive", user="root").stdout == "alive\n"
