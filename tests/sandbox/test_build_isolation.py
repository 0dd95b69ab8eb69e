"""Building a stranger's Dockerfile with the local backend: the build stays inside its context
and inside the task's limits, and leaves nothing dangerous in the host's layer cache."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from repogym.sandbox import BuildError, BuiltEnvironment, EnvironmentSpec, _layerfs
from repogym.sandbox.local import LocalSandbox
from tests.sandbox.conftest import make_context, processes_with, settled

SECRET = "s3cr3t-host-data-7f3a"


def _spec(ctx: Path, **kw: object) -> EnvironmentSpec:
    return EnvironmentSpec(context_dir=ctx, network_mode="no-network", **kw)  # type: ignore[arg-type]


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """Host files outside any build context, holding a secret."""
    d = tmp_path / "host"
    (d / "dir").mkdir(parents=True)
    (d / "secret.txt").write_text(SECRET + "\n")
    (d / "dir" / "inner").write_text(SECRET + "\n")
    return d


def _build_fails(sandbox: LocalSandbox, ctx: Path, log: Path, **kw: object) -> tuple[str, str]:
    with pytest.raises(BuildError) as err:
        sandbox.build(_spec(ctx, **kw), log=log)
    msg = str(err.value)
    return msg, log.read_text() if log.exists() else ""


def _layer_files(
    sandbox: LocalSandbox, built: BuiltEnvironment
) -> list[tuple[Path, os.stat_result]]:
    out = []
    for key, _parts in built.details["layers"]:  # type: ignore[union-attr]
        for root, dirs, files in os.walk(sandbox.store.path(key) / "fs"):
            for name in dirs + files:
                p = Path(root, name)
                out.append((p, os.lstat(p)))
    return out


def _layers_of_instruction(sandbox: LocalSandbox, fragment: str) -> list[str]:
    found = []
    for meta in sandbox.store.root.glob("*/meta.json"):
        if fragment in meta.read_text():
            found.append(meta.parent.name)
    return found


# ------------------------------------------------------------------------- 1. symlinks


@pytest.mark.parametrize(
    ("dockerfile", "links"),
    [
        ("COPY note* /x", {"note": "secret.txt"}),
        ("ADD lea* /x", {"leak": "secret.txt"}),
        ("COPY r*/inner /x", {"r": "dir"}),
        ("COPY r* /x/", {"r": "dir"}),
        ('COPY ["n?te", "/x"]', {"note": "secret.txt"}),
        ("COPY note /x", {"note": "secret.txt"}),
        ("COPY sub/* /x/", {"sub/link": "secret.txt"}),
        ("COPY up* /x", {"up": "../host/secret.txt"}),
    ],
)
def test_wildcard_copy_never_follows_symlinks_out_of_the_context(
    sandbox: LocalSandbox, tmp_path: Path, host: Path, dockerfile: str, links: dict[str, str]
) -> None:
    ctx = make_context(
        tmp_path / "ctx", f"FROM debian:bookworm-slim\n{dockerfile}\n", {"sub/ok.txt": "ok"}
    )
    for name, target in links.items():
        t = target if target.startswith("..") else str(host / target)
        (ctx / name).symlink_to(t)
    msg, log = _build_fails(sandbox, ctx, tmp_path / "build.log")
    assert "outside the build context" in msg and "line 2:" in msg
    assert "\n" not in msg
    assert SECRET not in msg and SECRET not in log


def test_multi_stage_wildcard_symlink_is_refused(
    sandbox: LocalSandbox, tmp_path: Path, host: Path
) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm-slim AS first
        RUN true
        FROM first
        COPY note* /x
        """,
    )
    (ctx / "note").symlink_to(host / "secret.txt")
    msg, log = _build_fails(sandbox, ctx, tmp_path / "build.log")
    assert "line 4:" in msg and "outside the build context" in msg
    assert SECRET not in msg + log


def test_symlinks_inside_directories_are_copied_as_links(
    sandbox: LocalSandbox, tmp_path: Path, host: Path
) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm-slim
        COPY data /data
        COPY top* /top/
        COPY ld* /ld/
        """,
        {"data/real.txt": "real"},
    )
    (ctx / "data" / "in").symlink_to("real.txt")
    (ctx / "data" / "out").symlink_to(host / "secret.txt")
    (ctx / "data" / "outdir").symlink_to(host / "dir")
    (ctx / "top").symlink_to("data/real.txt")  # a top-level link inside the context: followed
    (ctx / "ldir").symlink_to("data")
    built = sandbox.build(_spec(ctx))
    with sandbox.start(built, _spec(ctx)) as s:
        res = s.exec(
            "readlink /data/in; cat /data/in; echo; readlink /data/out /data/outdir; "
            "test -L /top/top || cat /top/top; echo; readlink /ld/out; cat /ld/real.txt; echo; "
            "cat /data/out /data/outdir/inner 2>/dev/null; true"
        )
        assert res.exit_code == 0, res.stderr
        assert res.stdout.splitlines() == [
            "real.txt",
            "real",
            str(host / "secret.txt"),
            str(host / "dir"),
            "real",
            str(host / "secret.txt"),
            "real",
        ]
    for path, st in _layer_files(sandbox, built):
        if stat.S_ISREG(st.st_mode):
            assert SECRET.encode() not in path.read_bytes(), path


def test_special_file_sources_are_refused(sandbox: LocalSandbox, tmp_path: Path) -> None:
    # A FIFO source used to block the build forever (its open() waits for a writer).
    ctx = make_context(tmp_path / "ctx", "FROM debian:bookworm-slim\nCOPY pi* /x\n")
    os.mkfifo(ctx / "pipe")
    msg, _ = _build_fails(sandbox, ctx, tmp_path / "b.log")
    assert "line 2:" in msg and "not a regular file or folder" in msg


# ------------------------------------------------------------------------- 2. limits


def test_build_step_over_the_storage_limit_fails_and_caches_nothing(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm-slim
        RUN head -c 100000000 /dev/zero > /big-storage-probe || true
        """,
    )
    msg, _log = _build_fails(sandbox, ctx, tmp_path / "b.log", storage_mb=32, memory_mb=1024)
    assert "line 2:" in msg and "storage limit (32 MB)" in msg and "\n" not in msg
    assert not _layers_of_instruction(sandbox, "big-storage-probe")
    assert not list(sandbox.store.root.glob(".tmp-*"))


def test_copy_over_the_storage_limit_fails(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ctx = make_context(tmp_path / "ctx", "FROM debian:bookworm-slim\nCOPY big.bin /big.bin\n")
    with open(ctx / "big.bin", "wb") as fh:
        for _ in range(48):
            fh.write(os.urandom(1 << 20))
    msg, _ = _build_fails(sandbox, ctx, tmp_path / "b.log", storage_mb=16, memory_mb=1024)
    assert "line 2:" in msg and "storage limit (16 MB)" in msg


def test_build_step_over_the_memory_limit_fails(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm-slim
        RUN python3 -c "x = bytearray(600 << 20); print('allocated-mem-probe', len(x))"
        """,
    )
    msg, log = _build_fails(sandbox, ctx, tmp_path / "b.log", memory_mb=128, storage_mb=256)
    assert "line 2:" in msg and "memory limit (128 MB, plus 256 MB" in msg
    assert f"allocated-mem-probe {600 << 20}" not in log
    assert not _layers_of_instruction(sandbox, "allocated-mem-probe")


def test_build_step_process_limit(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm-slim
        RUN for i in $(seq 100); do sleep 2.0513 & done; wait
        """,
    )
    small = LocalSandbox(sandbox.cache_root, pids_max=40)
    with pytest.raises(BuildError) as err:
        small.build(_spec(ctx))
    assert "line 2:" in str(err.value) and "process limit (40)" in str(err.value)
    assert settled(lambda: not processes_with("sleep 2.0513")), processes_with("sleep 2.0513")


def test_build_timeout_kills_the_whole_step(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm-slim
        RUN (setsid sleep 1000.4242 &) ; sleep 1000.4243
        """,
    )
    msg, _ = _build_fails(sandbox, ctx, tmp_path / "b.log", build_timeout_sec=3)
    assert "line 2:" in msg and "timed out" in msg
    assert not processes_with("sleep 1000.424")
    assert not _layers_of_instruction(sandbox, "1000.4243")


def test_whiteouts_and_opaque_folders_survive_the_limited_upper(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm-slim
        RUN mkdir -p /d && touch /d/old1 /d/old2 && echo keep > /kept
        RUN rm -rf /d && mkdir /d && touch /d/new && rm /etc/debian_version
        """,
    )
    built = sandbox.build(_spec(ctx, storage_mb=64))
    assert built.details["build_limits"]["storage_mb"] == 64  # type: ignore[index]
    with sandbox.start(built, _spec(ctx)) as s:
        res = s.exec("ls -A /d; cat /kept; test -e /etc/debian_version && echo present; true")
        assert res.stdout.split() == ["new", "keep"]


# ------------------------------------------------------------------------- 3. special files


def test_setuid_bits_and_special_files_are_stripped_from_layers(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm-slim
        COPY tool /usr/local/bin/tool
        RUN cp /bin/sh /suid && chmod 4755 /suid && cp /bin/sh /sgid && chmod 2755 /sgid \\
            && mkfifo /fifo \\
            && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('/sock')" \\
            && (mknod /null2 c 1 3 || echo mknod-refused) \\
            && mkdir /sgdir && chmod 2775 /sgdir
        """,
        {"tool": "#!/bin/sh\necho tool\n"},
    )
    (ctx / "tool").chmod(0o4755)
    log = tmp_path / "build.log"
    built = sandbox.build(_spec(ctx), log=log)
    for path, st in _layer_files(sandbox, built):
        mode = st.st_mode
        assert not (stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID)), path
        assert not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISBLK(mode)), path
        assert not (stat.S_ISCHR(mode) and st.st_rdev != 0), path
    stripped = [
        entry
        for step in built.details["steps"]  # type: ignore[union-attr]
        for entry in step.get("stripped", [])  # type: ignore[union-attr]
    ]
    text = "\n".join(stripped)
    for name in ("/usr/local/bin/tool", "/suid", "/sgid", "/fifo", "/sock"):
        assert name in text, stripped
    metas = [sandbox.store.meta(k) for k, _ in built.details["layers"]]  # type: ignore[union-attr]
    assert any("/suid" in str(m.get("stripped")) for m in metas)
    assert "stripped" in log.read_text()
    with sandbox.start(built, _spec(ctx)) as s:
        res = s.exec(
            "stat -c '%a %n' /suid /sgid /usr/local/bin/tool /sgdir; "
            "ls -A / | grep -E '^(fifo|sock|null2)$'; true"
        )
        assert res.stdout.splitlines() == [
            "755 /suid",
            "755 /sgid",
            "755 /usr/local/bin/tool",
            "2775 /sgdir",
        ]


# ------------------------------------------------------------------------- 4. archives


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w") -> None:
    with tarfile.open(path, mode) as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


class _Zeros(io.RawIOBase):
    def __init__(self, n: int) -> None:
        self.left = n

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


def test_add_archive_bomb_is_bounded_by_the_storage_limit(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    ctx = make_context(tmp_path / "ctx", "FROM debian:bookworm-slim\nADD bomb.tar.gz /srv/\n")
    info = tarfile.TarInfo("zeros.bin")
    info.size = 256 << 20
    with tarfile.open(ctx / "bomb.tar.gz", "w:gz", compresslevel=1) as tf:
        tf.addfile(info, io.BufferedReader(_Zeros(info.size)))
    assert (ctx / "bomb.tar.gz").stat().st_size < 2 << 20
    msg, _ = _build_fails(sandbox, ctx, tmp_path / "b.log", storage_mb=16, memory_mb=1024)
    # Refused from the member's header, before anything was unpacked on the host.
    assert "line 2:" in msg and "bomb.tar.gz" in msg
    assert "expands beyond the storage limit (16 MB)" in msg
    assert "\n" not in msg


def test_add_archive_member_count_is_bounded(
    sandbox: LocalSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_layerfs, "MAX_ARCHIVE_MEMBERS", 50)
    ctx = make_context(tmp_path / "ctx", "FROM debian:bookworm-slim\nADD many.tar /srv/\n")
    _tar(ctx / "many.tar", [_file(f"f{i}") for i in range(80)])
    msg, _ = _build_fails(sandbox, ctx, tmp_path / "b.log")
    assert "line 2:" in msg and "more than 50" in msg


@pytest.mark.parametrize(
    ("members", "fragment"),
    [
        ([_file("../escape.txt")], "points outside the destination"),
        ([_file("a/../../escape.txt")], "points outside the destination"),
        ([_file("/abs.txt")], "points outside the destination"),
        # Absolute targets name a canary folder of the test ({host}), never a real host file:
        # if the defence ever broke, the archive would write into the canary, not into /etc.
        ([_link("l", "{host}"), _file("l/passwd")], "links to an absolute path"),
        ([_link("l", "../../.."), _file("l/escape.txt")], "links outside the destination"),
        ([_link("h", "{host}/passwd", tarfile.LNKTYPE), _file("h")], "links to an absolute path"),
        ([_link("h", "../outside", tarfile.LNKTYPE)], "links outside the destination"),
        ([_link("bad\nname", "{host}/passwd")], "'bad\\nname' links to an absolute path"),
    ],
)
def test_add_archive_members_cannot_escape(
    sandbox: LocalSandbox,
    tmp_path: Path,
    members: list[tuple[tarfile.TarInfo, bytes | None]],
    fragment: str,
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "passwd").write_text("canary\n")
    for info, _data in members:
        info.linkname = info.linkname.replace("{host}", str(host))
    ctx = make_context(tmp_path / "ctx", "FROM debian:bookworm-slim\nADD evil.tar /srv/x/\n")
    _tar(ctx / "evil.tar", members)
    msg, _ = _build_fails(sandbox, ctx, tmp_path / "b.log")
    assert "line 2:" in msg and "evil.tar" in msg and fragment in msg and "\n" not in msg
    for where in (tmp_path, ctx, sandbox.cache_root, sandbox.cache_root / "run"):
        assert not (where / "escape.txt").exists()
    assert sorted(p.name for p in host.iterdir()) == ["passwd"]
    assert (host / "passwd").read_text() == "canary\n"


def test_add_archive_device_member_is_refused(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ctx = make_context(tmp_path / "ctx", "FROM debian:bookworm-slim\nADD dev.tar /srv/\n")
    info = tarfile.TarInfo("null")
    info.type = tarfile.CHRTYPE
    info.devmajor, info.devminor = 1, 3
    _tar(ctx / "dev.tar", [(info, None)])
    msg, _ = _build_fails(sandbox, ctx, tmp_path / "b.log")
    assert "line 2:" in msg and "dev.tar" in msg


def test_add_archive_within_limits_extracts(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ctx = make_context(tmp_path / "ctx", "FROM debian:bookworm-slim\nADD ok.tar.gz /srv/\n")
    _tar(ctx / "ok.tar.gz", [_file("pkg/a.txt", b"A"), _link("pkg/b.txt", "a.txt")], "w:gz")
    built = sandbox.build(_spec(ctx, storage_mb=16))
    with sandbox.start(built, _spec(ctx)) as s:
        assert s.exec("cat /srv/pkg/a.txt /srv/pkg/b.txt").stdout == "AA"


# ------------------------------------------------------------------------- 5. logs


def test_dockerfile_symlinked_to_a_host_file_is_refused_without_its_content(
    sandbox: LocalSandbox, tmp_path: Path, host: Path
) -> None:
    (host / "shadow").write_text(f"root:{SECRET}:19000:0:99999:7:::\n")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").symlink_to(host / "shadow")
    msg, log = _build_fails(sandbox, ctx, tmp_path / "b.log")
    assert "Dockerfile" in msg and "outside the build context" in msg
    assert SECRET not in msg + log


def test_dockerignore_symlinked_out_of_the_context_is_not_read(
    sandbox: LocalSandbox, tmp_path: Path, host: Path
) -> None:
    (host / "ignore").write_text("*.txt\n")
    ctx = make_context(
        tmp_path / "ctx", "FROM debian:bookworm-slim\nCOPY a.txt /a.txt\n", {"a.txt": "a"}
    )
    (ctx / ".dockerignore").symlink_to(host / "ignore")
    msg, _ = _build_fails(sandbox, ctx, tmp_path / "b.log")
    assert ".dockerignore" in msg and "outside the build context" in msg


@pytest.mark.parametrize(
    ("dockerfile", "files"),
    [
        # a heredoc whose expansion fails must not echo its body
        (f"COPY <<EOF /x\n${{UNSET:?{SECRET}}}\nEOF\n", {}),
        (f"COPY <<EOF /x\n${{{SECRET}\nEOF\n", {}),
        # a corrupt archive: the error names it, never its bytes
        ("ADD broken.tar /srv/\n", {}),
        # over the storage limit while copying a file full of secrets
        ("COPY big.txt /big.txt\n", {"big.txt": (SECRET + "\n") * 1_200_000}),
    ],
)
def test_copy_and_add_errors_never_show_file_contents(
    sandbox: LocalSandbox, tmp_path: Path, dockerfile: str, files: dict[str, str]
) -> None:
    ctx = make_context(tmp_path / "ctx", "FROM debian:bookworm-slim\n" + dockerfile, files)
    if "broken.tar" in dockerfile:
        # The header promises 2 MB of secrets; the file ends after the first kilobyte.
        _tar(ctx / "broken.tar", [_file("a.txt", (SECRET + "\n").encode() * 100_000)])
        with open(ctx / "broken.tar", "r+b") as fh:
            fh.truncate(1024)
    msg, log = _build_fails(sandbox, ctx, tmp_path / "b.log", storage_mb=16, memory_mb=1024)
    assert "line 2:" in msg and "\n" not in msg
    assert SECRET not in msg and SECRET not in log
