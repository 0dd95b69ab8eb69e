"""The shared environment cache: a second machine (another local cache root) builds from the
layers the first uploaded, runs no step and gets the same environment; a corrupt shared layer
is rebuilt with a warning (and replaced); unsafe archives are refused; unset, nothing of it
runs; bootstrap recipes travel the same way."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from repogym.bootstrap import Recipe, RecipeCache
from repogym.sandbox import EnvironmentSpec, _layertar, _shared_cache
from repogym.sandbox._shared_cache import ENV_VAR, read_stats

DOCKERFILE = """\
FROM debian:bookworm
WORKDIR /app
COPY hello.txt /app/hello.txt
RUN mkdir -p /app/d && echo 1 > /app/d/one && ln -s /usr/bin/env /app/envlink \\
    && ln /app/hello.txt /app/hard && chmod 4755 /app/hard
RUN rm /app/hello.txt && rm -rf /app/d && mkdir /app/d && echo 2 > /app/d/two && rm /etc/issue
ENV READY=1
"""
CHECK = (
    "cat /app/hard /app/d/two; readlink /app/envlink; stat -c %a /app/hard; "
    "ls /app/hello.txt /app/d/one /etc/issue 2>&1 | wc -l; echo $READY"
)
EXPECTED = "hi\n2\n/usr/bin/env\n755\n3\n1\n"


@pytest.fixture
def context(tmp_path: Path) -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(DOCKERFILE)
    (ctx / "hello.txt").write_text("hi\n")
    return ctx


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from repogym.sandbox.local import LocalSandbox

    ok, why = LocalSandbox.available()
    if not ok:
        pytest.skip(why)
    folder = tmp_path / "shared"
    monkeypatch.setenv(ENV_VAR, folder.as_uri())
    return folder


def _machine(tmp_path: Path, name: str):  # type: ignore[no-untyped-def]
    from repogym.sandbox.local import LocalSandbox

    return LocalSandbox(tmp_path / name)


def _spec(ctx: Path) -> EnvironmentSpec:
    return EnvironmentSpec(context_dir=ctx, network_mode="no-network")


def test_second_machine_runs_no_step(tmp_path: Path, context: Path, shared: Path) -> None:
    a = _machine(tmp_path, "a")
    first = a.build(_spec(context))
    assert first.details["cache_misses"] == 4 and first.details["cache_hits"] == 0
    assert len(list((shared / "layers").glob("*.tar"))) == 4
    assert not list((shared / "layers").glob(".tmp-*"))
    assert read_stats(a.cache_root)["layers"] == {"hits": 0, "misses": 4, "uploads": 4, "errors": 0}

    b = _machine(tmp_path, "b")
    second = b.build(_spec(context))
    assert second.key == first.key
    assert second.details["cache_misses"] == 0 and second.details["cache_hits"] == 4
    assert all(s.get("shared") for s in second.details["steps"] if "cached" in s)
    assert read_stats(b.cache_root)["layers"] == {"hits": 4, "misses": 0, "uploads": 0, "errors": 0}
    # Whiteouts, an opaque folder, a hard link, an absolute symlink: the same environment,
    # and the setuid bit stripped on the first machine stays stripped.
    with b.start(second, _spec(context)) as session:
        res = session.exec(CHECK)
    assert res.exit_code == 0, res.stderr
    assert res.stdout == EXPECTED


def test_corrupt_shared_layer_is_rebuilt_with_a_warning(
    tmp_path: Path, context: Path, shared: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = _machine(tmp_path, "a").build(_spec(context))
    run_key = [s["key"] for s in first.details["steps"] if "cached" in s][3]
    tar = shared / "layers" / f"{run_key}.tar"
    data = tar.read_bytes()
    tar.write_bytes(data[: len(data) // 2])  # truncated mid-member
    b = _machine(tmp_path, "b")
    with caplog.at_level(logging.WARNING, logger="repogym.shared_cache"):
        second = b.build(_spec(context))
    assert second.key == first.key
    assert second.details["cache_misses"] == 1 and second.details["cache_hits"] == 3
    [warning] = [r.getMessage() for r in caplog.records]
    assert f"layer {run_key[:12]} is unusable" in warning and "rebuilding" in warning
    stats = read_stats(b.cache_root)
    assert stats["layers"]["errors"] == 1 and stats["layers"]["uploads"] == 1
    with b.start(second, _spec(context)) as session:
        assert session.exec(CHECK).stdout == EXPECTED
    # The rebuilt layer replaced the broken file: a third machine runs no step.
    assert tar.stat().st_size == len(data)
    third = _machine(tmp_path, "c").build(_spec(context))
    assert third.details["cache_misses"] == 0


def test_unset_means_no_shared_cache_calls(
    tmp_path: Path, context: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repogym.sandbox.local import LocalSandbox

    ok, why = LocalSandbox.available()
    if not ok:
        pytest.skip(why)
    monkeypatch.delenv(ENV_VAR, raising=False)

    def forbidden(*_a: object, **_k: object) -> None:
        raise AssertionError("the shared cache was called")

    for name in ("__init__", "fetch_layer", "put_layer", "fetch_file", "put_file", "list_files"):
        monkeypatch.setattr(_shared_cache.SharedCache, name, forbidden)
    monkeypatch.setattr(_shared_cache, "_bump", forbidden)
    sb = LocalSandbox(tmp_path / "a")
    assert sb.shared is None
    assert sb.build(_spec(context)).details["cache_misses"] == 4
    cache = RecipeCache(tmp_path / "recipes")
    assert cache.shared is None
    cache.put("r", "ref", _recipe())
    assert cache.find("r", "ref") is not None
    assert not (tmp_path / "a" / _shared_cache.STATS_FILE).exists()
    # Nothing is even imported for it.
    code = (
        "import sys; from repogym.sandbox import local; from repogym.bootstrap import cache; "
        "cache.RecipeCache(); print('fsspec' in sys.modules)"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "False", out.stderr


def _recipe() -> Recipe:
    return Recipe("python", "pytest", "python:3.12-slim", "FROM python:3.12-slim\n", "t", "c", "s")


def test_recipes_are_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(ENV_VAR, f"memory://repogym-test-{tmp_path.name}")
    a = RecipeCache(tmp_path / "a" / "recipes")
    b = RecipeCache(tmp_path / "b" / "recipes")
    recipe = _recipe()
    a.put("gh/x", "abc", recipe, None, {"language": "python"})
    assert read_stats(tmp_path / "a")["recipes"]["uploads"] == 1
    hit = b.find("gh/x", "abc")
    assert hit is not None and hit.recipe == recipe and hit.detection == {"language": "python"}
    assert b.path_for("gh/x", "abc", recipe.hash).is_file()  # now local too
    c = RecipeCache(tmp_path / "c" / "recipes")
    assert c.get("gh/x", "abc", recipe.hash) is not None
    assert c.get("gh/x", "other", recipe.hash) is None
    assert read_stats(tmp_path / "c")["recipes"] == {
        "hits": 1,
        "misses": 1,
        "uploads": 0,
        "errors": 0,
    }
    # A corrupt shared recipe is a warning and a miss, never an error.
    assert a.shared is not None
    a.shared.put_file(b._shared_rel(b.path_for("gh/y", "abc", recipe.hash)), b"{not", "recipes")
    with caplog.at_level(logging.WARNING, logger="repogym.shared_cache"):
        assert RecipeCache(tmp_path / "d" / "recipes").get("gh/y", "abc", recipe.hash) is None
    assert "is unusable" in caplog.text


def test_bad_url_is_a_warning_and_the_cli_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from typer.testing import CliRunner

    from repogym.cli import app

    monkeypatch.setenv(ENV_VAR, "nosuchprotocol://x")
    with caplog.at_level(logging.WARNING, logger="repogym.shared_cache"):
        assert RecipeCache(tmp_path / "recipes").shared is None
    assert "Protocol not known" in caplog.text
    res = CliRunner().invoke(app, ["--shared-cache", "nosuchprotocol://x", "validate", "."])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        "error: shared cache nosuchprotocol://x: Protocol not known: nosuchprotocol"
    ]


def shared_cache_setting() -> str | None:
    return os.environ.get(ENV_VAR)


def test_ray_units_get_the_drivers_shared_cache(
    ray_cluster, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from repogym.executors import Work, get_executor

    monkeypatch.setenv(ENV_VAR, "file:///shared/repogym-cache")
    executor = get_executor("ray", address=ray_cluster.address)
    [done] = list(executor.map([Work("env", shared_cache_setting)]))
    assert done.ok and done.value == "file:///shared/repogym-cache"


# ------------------------------------------------------------------------------ the format


def _layer(root: Path, key: str) -> Path:
    layer = root / key
    (layer / "fs" / "@root" / "app").mkdir(parents=True)
    (layer / "fs" / "@root" / "app" / "f").write_text("content")
    (layer / "fs" / "@root" / "app" / "link").symlink_to("/etc/passwd")
    (layer / "meta.json").write_text(json.dumps({"key": key, "parts": ["@root"]}))
    return layer


def _unpack(data: bytes, dest: Path, key: str = "k") -> dict[str, object]:
    dest.mkdir()
    (dest / "fs").mkdir()
    return _layertar.unpack_layer(io.BytesIO(data), dest, key)


def test_layer_roundtrip_and_every_truncation_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    _layertar.pack_layer(_layer(tmp_path, "k"), "k", buf)
    data = buf.getvalue()
    assert _unpack(data, tmp_path / "ok")["key"] == "k"
    assert (tmp_path / "ok" / "fs" / "@root" / "app" / "f").read_text() == "content"
    assert Path(tmp_path / "ok" / "fs" / "@root" / "app" / "link").readlink() == Path("/etc/passwd")
    with pytest.raises(_layertar.LayerTarError, match="another"):
        _unpack(data, tmp_path / "other-key", "k2")
    end = data.rindex(b"}") + 1  # the trailer's last byte (only zero padding follows)
    for i, cut in enumerate([*range(0, end, 512), *range(100, end, 777), end - 1]):
        with pytest.raises(_layertar.LayerTarError):
            _unpack(data[:cut], tmp_path / f"cut{i}")
    flipped = bytearray(data)
    flipped[data.index(b"content")] ^= 1
    with pytest.raises(_layertar.LayerTarError, match="digest"):
        _unpack(bytes(flipped), tmp_path / "flipped")


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for ti, data in members:
            ti.size = len(data) if ti.isreg() else 0
            tf.addfile(ti, io.BytesIO(data) if ti.isreg() else None)
    return buf.getvalue()


def _ti(name: str, kind: bytes = tarfile.REGTYPE, **kw: object) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti


@pytest.mark.parametrize(
    ("members", "why"),
    [
        ([(_ti("/etc/evil"), b"x")], "plain relative"),
        ([(_ti("fs/../../evil"), b"x")], "plain relative"),
        ([(_ti("elsewhere"), b"x")], "outside meta.json and fs/"),
        ([(_ti("fs/dev", tarfile.CHRTYPE, devmajor=1, devminor=3), b"")], "devices"),
        ([(_ti("fs/fifo", tarfile.FIFOTYPE), b"")], "devices"),
        (
            [(_ti("fs/up", tarfile.SYMTYPE, linkname="/tmp"), b""), (_ti("fs/up/x"), b"x")],
            "parent is not a folder",
        ),
        ([(_ti("fs/h", tarfile.LNKTYPE, linkname="/etc/passwd"), b"")], "plain relative"),
        ([(_ti("fs/a/b"), b"x")], "folder comes later"),
    ],
)
def test_unsafe_members_are_refused(
    tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes]], why: str
) -> None:
    with pytest.raises(_layertar.LayerTarError, match=why):
        _unpack(_tar(*members), tmp_path / "dest")
    assert not (tmp_path / "evil").exists()


def test_a_setuid_bit_never_lands(tmp_path: Path) -> None:
    layer = _layer(tmp_path, "k")
    (layer / "fs" / "@root" / "app" / "f").chmod(0o4755)
    buf = io.BytesIO()
    _layertar.pack_layer(layer, "k", buf)
    _unpack(buf.getvalue(), tmp_path / "dest")
    assert (tmp_path / "dest" / "fs" / "@root" / "app" / "f").stat().st_mode & 0o7777 == 0o755
