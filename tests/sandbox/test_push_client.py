"""The push client (:mod:`repogym.sandbox._push`) and the pull path's refusals, against an
in-process registry that can misbehave on purpose (``tests/sandbox/fake_registry.py``)."""

from __future__ import annotations

import base64
import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from repogym.sandbox._images import parse
from repogym.sandbox._pull import ImageStore
from repogym.sandbox._push import TRIES, Pusher, PushError, PushStats, endpoint_of
from repogym.sandbox._registry import RegistryClient, RegistryError
from repogym.sandbox._registry_auth import PASSWORD_VAR, USER_VAR, Credentials, credentials_for
from tests.sandbox import _oci
from tests.sandbox.fake_registry import FakeRegistry

SECRET = "s3cr3t-Pa55"
BIG = os.urandom(5000)  # five 1 KiB chunks (the last one short)


@pytest.fixture
def reg() -> Iterator[FakeRegistry]:
    with FakeRegistry() as r:
        yield r


def _blob(tmp_path: Path, data: bytes) -> tuple[str, Path]:
    digest = _oci.sha(data)
    path = tmp_path / digest.split(":")[1]
    path.write_bytes(data)
    return digest, path


def _pusher(
    reg: FakeRegistry, sleeps: list[float] | None = None, credentials: Credentials | None = None
) -> Pusher:
    """A client with 1 KiB chunks whose pauses between tries are recorded, not slept."""
    naps = sleeps if sleeps is not None else []
    return Pusher(reg.url, credentials=credentials, chunk=1024, sleep=naps.append)


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    msg = str(exc.value)
    assert msg and "\n" not in msg, msg
    return msg


def _push_image(
    pusher: Pusher, repo: str, tag: str, tmp_path: Path, layers: list[bytes]
) -> tuple[str, bytes, list[str]]:
    """Push config + layers + an OCI manifest; ``(manifest digest, manifest, layer digests)``."""
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [_oci.sha(gzip.decompress(x)) for x in layers]},
    }
    cfg = json.dumps(config).encode()
    stats = PushStats()
    cfg_digest, cfg_path = _blob(tmp_path, cfg)
    pusher.push_blob(repo, cfg_digest, cfg_path, stats)
    descs = []
    for data in layers:
        digest, path = _blob(tmp_path, data)
        pusher.push_blob(repo, digest, path, stats)
        media = "application/vnd.oci.image.layer.v1.tar+gzip"
        descs.append({"mediaType": media, "digest": digest, "size": len(data)})
    manifest = {
        "schemaVersion": 2,
        "mediaType": _oci.OCI_MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": cfg_digest,
            "size": len(cfg),
        },
        "layers": descs,
    }
    body = json.dumps(manifest).encode()
    pusher.put_manifest(repo, tag, body, _oci.OCI_MANIFEST, _oci.sha(body))
    return _oci.sha(body), body, [str(d["digest"]) for d in descs]


# ------------------------------------------------------------------------------ blobs


@pytest.mark.parametrize("absolute", [False, True], ids=["relative-location", "absolute-location"])
def test_big_blob_goes_in_patch_chunks_then_is_present_then_mounted(
    reg: FakeRegistry, tmp_path: Path, absolute: bool
) -> None:
    reg.absolute_locations = absolute
    digest, path = _blob(tmp_path, BIG)
    with _pusher(reg) as p:
        assert not p.has_blob("team/app", digest, len(BIG))
        stats = PushStats()
        assert p.push_blob("team/app", digest, path, stats) == "uploaded"
        ranges = [r.headers["content-range"] for r in reg.requests("PATCH")]
        assert ranges == ["0-1023", "1024-2047", "2048-3071", "3072-4095", "4096-4999"]
        (put,) = reg.requests("PUT", "/blobs/uploads/")
        assert f"digest={digest}" in put.path and "_state=" in put.path, put.path
        assert reg.blobs["team/app"][digest] == BIG
        assert p.has_blob("team/app", digest, len(BIG))
        assert (stats.uploaded, stats.present, stats.mounted) == (5000, 0, 0)

        sent = len(reg.log)
        assert p.push_blob("team/app", digest, path, stats) == "present"
        assert [r.method for r in reg.log[sent:]] == ["HEAD"]
        assert stats.present == 5000 and stats.uploaded == 5000

        sent = len(reg.log)
        fresh = PushStats()
        assert p.push_blob("team/other", digest, path, fresh, mount_from="team/app") == "mounted"
        (mount,) = reg.requests("POST", "/v2/team/other/blobs/uploads/")
        assert "mount=sha256" in mount.path and "from=team" in mount.path and mount.status == 201
        assert [r.method for r in reg.log[sent:]] == ["HEAD", "POST"]  # no PATCH, no PUT
        assert (fresh.uploaded, fresh.mounted) == (0, 5000)
        assert reg.blobs["team/other"][digest] == BIG
        # Without mount_from, the stats remember where the blob is.
        assert p.push_blob("team/third", digest, path, fresh) == "mounted"
        assert fresh.mounted == 10000 and not reg.requests("PATCH", "team/third")


def test_mount_from_a_repository_without_the_blob_uploads_it(
    reg: FakeRegistry, tmp_path: Path
) -> None:
    digest, path = _blob(tmp_path, BIG)
    with _pusher(reg) as p:
        stats = PushStats()
        assert p.push_blob("team/app", digest, path, stats, mount_from="elsewhere/x") == "uploaded"
    (mount,) = reg.requests("POST")
    assert "mount=" in mount.path and mount.status == 202
    assert len(reg.requests("PATCH")) == 5 and stats.uploaded == 5000 and stats.mounted == 0


def test_small_blob_goes_in_one_put(reg: FakeRegistry, tmp_path: Path) -> None:
    digest, path = _blob(tmp_path, b"x" * 1024)  # exactly one chunk
    with _pusher(reg) as p:
        assert p.push_blob("small", digest, path, PushStats()) == "uploaded"
    assert not reg.requests("PATCH")
    (put,) = reg.requests("PUT")
    assert put.headers["content-length"] == "1024"
    assert reg.blobs["small"][digest] == b"x" * 1024


def test_wrong_digest_is_refused_by_the_registry_in_one_line(
    reg: FakeRegistry, tmp_path: Path
) -> None:
    _, path = _blob(tmp_path, BIG)
    wrong = _oci.sha(b"something else")
    with _pusher(reg) as p, pytest.raises(PushError) as exc:
        p.push_blob("team/app", wrong, path, PushStats())
    msg = _one_line(exc)
    assert "400" in msg and "DIGEST_INVALID" in msg and wrong[:19] in msg
    assert "team/app" not in reg.blobs


def test_registry_holding_a_blob_of_another_size_is_refused(
    reg: FakeRegistry, tmp_path: Path
) -> None:
    digest, path = _blob(tmp_path, BIG)
    reg.blobs["team/app"] = {digest: BIG[:10]}
    with _pusher(reg) as p, pytest.raises(PushError) as exc:
        p.push_blob("team/app", digest, path, PushStats())
    assert "10 bytes, not 5000" in _one_line(exc)


# ------------------------------------------------------------------------------ manifests


def test_manifest_put_then_get_by_digest_returns_the_same_bytes(
    reg: FakeRegistry, tmp_path: Path
) -> None:
    layer = _oci.layer([("etc/motd", "file", "hello")])
    with _pusher(reg) as p:
        digest, body, _ = _push_image(p, "team/app", "v1", tmp_path, [layer])
    (put,) = reg.requests("PUT", "/manifests/v1")
    assert put.status == 201 and put.headers["content-type"] == _oci.OCI_MANIFEST
    got = httpx.get(f"{reg.url}/v2/team/app/manifests/{digest}")
    assert got.status_code == 200 and got.content == body
    assert got.headers["docker-content-digest"] == digest
    with RegistryClient(reg.url) as client:
        assert client.resolve("team/app", "v1").digest == digest


def test_manifest_before_its_blobs_is_refused(reg: FakeRegistry) -> None:
    body = json.dumps({"schemaVersion": 2, "config": {"digest": _oci.sha(b"c")}}).encode()
    with _pusher(reg) as p, pytest.raises(PushError) as exc:
        p.put_manifest("team/app", "v1", body, _oci.OCI_MANIFEST, _oci.sha(body))
    msg = _one_line(exc)
    assert "MANIFEST_BLOB_UNKNOWN" in msg and "team/app:v1" in msg


# ------------------------------------------------------------------------------ retries


def test_503_on_the_first_two_requests_is_retried(reg: FakeRegistry, tmp_path: Path) -> None:
    reg.fail_status, reg.fail_count = 503, 2
    digest, path = _blob(tmp_path, BIG)
    sleeps: list[float] = []
    with _pusher(reg, sleeps) as p:
        assert p.push_blob("team/app", digest, path, PushStats()) == "uploaded"
    assert [r.status for r in reg.log[:3]] == [503, 503, 404]
    assert sleeps == [0.5, 1.0]
    assert reg.blobs["team/app"][digest] == BIG


def test_a_failed_chunk_starts_the_upload_again(reg: FakeRegistry, tmp_path: Path) -> None:
    reg.fail_status, reg.fail_count, reg.fail_method = 502, 1, "PATCH"
    digest, path = _blob(tmp_path, BIG)
    sleeps: list[float] = []
    with _pusher(reg, sleeps) as p:
        assert p.push_blob("team/app", digest, path, PushStats()) == "uploaded"
    assert len(reg.requests("POST")) == 2 and sleeps == [0.5]
    assert [r.status for r in reg.requests("PATCH")] == [502] + [202] * 5
    assert reg.blobs["team/app"][digest] == BIG


def test_permanent_500_fails_after_the_tries(reg: FakeRegistry, tmp_path: Path) -> None:
    reg.fail_status = 500
    digest, path = _blob(tmp_path, BIG)
    sleeps: list[float] = []
    with _pusher(reg, sleeps) as p, pytest.raises(PushError) as exc:
        p.push_blob("team/app", digest, path, PushStats())
    msg = _one_line(exc)
    assert f"after {TRIES} tries" in msg and "500" in msg and digest[:19] in msg
    assert len(reg.log) == TRIES and len(sleeps) == TRIES - 1


def test_manifest_put_is_retried_too(reg: FakeRegistry, tmp_path: Path) -> None:
    with _pusher(reg) as p:
        reg.fail_status, reg.fail_count, reg.fail_method = 429, 3, "PUT"
        _push_image(p, "team/app", "v1", tmp_path, [_oci.layer([("a", "file", "a")])])
    assert "v1" in reg.manifests["team/app"]


# ------------------------------------------------------------------------------ lies


def test_registry_lying_about_a_blob_digest_fails_the_push(
    reg: FakeRegistry, tmp_path: Path
) -> None:
    reg.lie_blob_digest = True
    digest, path = _blob(tmp_path, BIG)
    with _pusher(reg) as p, pytest.raises(PushError) as exc:
        p.push_blob("team/app", digest, path, PushStats())
    msg = _one_line(exc)
    assert digest[:19] in msg and "stored blob" in msg


def test_registry_lying_about_a_mount_fails_the_push(reg: FakeRegistry, tmp_path: Path) -> None:
    digest, path = _blob(tmp_path, BIG)
    with _pusher(reg) as p:
        p.push_blob("team/app", digest, path, PushStats())
        reg.lie_blob_digest = True
        with pytest.raises(PushError) as exc:
            p.push_blob("team/b", digest, path, PushStats(), mount_from="team/app")
    assert digest[:19] in _one_line(exc)


def test_registry_lying_about_a_manifest_digest_fails_the_push(
    reg: FakeRegistry, tmp_path: Path
) -> None:
    reg.lie_manifest_digest = True
    with _pusher(reg) as p, pytest.raises(PushError) as exc:
        _push_image(p, "team/app", "v1", tmp_path, [_oci.layer([("a", "file", "a")])])
    msg = _one_line(exc)
    body = reg.manifests["team/app"]["v1"][0]
    assert _oci.sha(body) in msg and "team/app:v1" in msg


# ------------------------------------------------------------------------------ auth


def _docker_config(tmp_path: Path, host: str, user: str, password: str) -> Path:
    folder = tmp_path / "docker"
    folder.mkdir()
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    (folder / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return folder


def test_basic_auth_without_credentials_says_how_to_log_in(
    reg: FakeRegistry, tmp_path: Path
) -> None:
    reg.auth = ("basic", "user", SECRET)
    digest, path = _blob(tmp_path, BIG)
    with _pusher(reg) as p, pytest.raises(PushError) as exc:
        p.push_blob("team/app", digest, path, PushStats())
    msg = _one_line(exc)
    assert "docker login" in msg and USER_VAR in msg and PASSWORD_VAR in msg


def test_basic_auth_with_docker_config_credentials(
    reg: FakeRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg.auth = ("basic", "user", SECRET)
    monkeypatch.setenv("DOCKER_CONFIG", str(_docker_config(tmp_path, reg.host, "user", SECRET)))
    creds = credentials_for(reg.host, environ={})
    assert creds is not None and creds.username == "user" and creds.password == SECRET
    assert SECRET not in repr(creds) and "config.json" in creds.source
    with _pusher(reg, credentials=creds) as p:
        digest, _, _ = _push_image(
            p, "team/app", "v1", tmp_path, [_oci.layer([("a", "file", "a")])]
        )
    assert reg.manifests["team/app"][digest]
    assert [r.status for r in reg.log].count(401) == 1  # answered once, then sent each time
    assert all(r.headers["authorization"].startswith("Basic ") for r in reg.log[1:])


def test_basic_auth_with_a_wrong_password_never_shows_it(reg: FakeRegistry, tmp_path: Path) -> None:
    reg.auth = ("basic", "user", "right-one")
    creds = credentials_for(reg.host, environ={USER_VAR: "user", PASSWORD_VAR: SECRET})
    digest, path = _blob(tmp_path, BIG)
    with _pusher(reg, credentials=creds) as p, pytest.raises(PushError) as exc:
        p.push_blob("team/app", digest, path, PushStats())
    msg = _one_line(exc)
    assert "refused the credentials as user" in msg
    assert SECRET not in msg and SECRET not in repr(exc.value)


def test_credentials_never_go_to_an_upload_location_on_another_host(
    reg: FakeRegistry, tmp_path: Path
) -> None:
    """A registry (or whoever answers for it) that sends the upload elsewhere gets the bytes
    there, never the Authorization header."""
    reg.auth = ("basic", "user", SECRET)
    reg.location_host = f"localhost:{reg.host.rsplit(':', 1)[1]}"  # same server, other name
    creds = credentials_for(reg.host, environ={USER_VAR: "user", PASSWORD_VAR: SECRET})
    digest, path = _blob(tmp_path, BIG)
    with _pusher(reg, credentials=creds) as p, pytest.raises(PushError, match="asks for"):
        p.push_blob("team/app", digest, path, PushStats())
    elsewhere = [e for e in reg.log if "_state=" in e.path or e.method in ("PATCH", "PUT")]
    assert elsewhere and all("authorization" not in e.headers for e in elsewhere)
    assert any("authorization" in e.headers for e in reg.log if e.method == "POST")


def test_bearer_auth_with_credentials_uses_the_token_endpoint(
    reg: FakeRegistry, tmp_path: Path
) -> None:
    reg.auth = ("bearer", "user", SECRET)
    creds = credentials_for(reg.host, environ={USER_VAR: "user", PASSWORD_VAR: SECRET})
    assert creds is not None and creds.source == "environment" and SECRET not in repr(creds)
    digest, path = _blob(tmp_path, BIG)
    with _pusher(reg, credentials=creds) as p:
        p.push_blob("team/app", digest, path, PushStats())
        p.push_blob("team/b", digest, path, PushStats(), mount_from="team/app")
    tokens = reg.requests("GET", "/token")
    assert tokens and all(t.status == 200 for t in tokens)
    assert all(t.headers["authorization"].startswith("Basic ") for t in tokens)
    scopes = [parse_qs(urlsplit(t.path).query)["scope"] for t in tokens]
    assert ["repository:team/app:pull"] in scopes  # HEAD
    assert ["repository:team/app:pull,push"] in scopes  # upload
    assert ["repository:team/b:pull,push", "repository:team/app:pull"] in scopes  # mount
    authed = [r for r in reg.log if "/v2/" in r.path and r.status != 401]
    assert authed and all(r.headers["authorization"].startswith("Bearer ") for r in authed)
    assert reg.blobs["team/b"][digest] == BIG


@pytest.mark.parametrize("password", [None, "wrong"], ids=["anonymous", "wrong-password"])
def test_bearer_auth_refused_by_the_token_endpoint(
    reg: FakeRegistry, tmp_path: Path, password: str | None
) -> None:
    reg.auth = ("bearer", "user", SECRET)
    env = {USER_VAR: "user", PASSWORD_VAR: password} if password else {}
    creds = credentials_for(reg.host, environ=env)
    digest, path = _blob(tmp_path, BIG)
    with _pusher(reg, credentials=creds) as p, pytest.raises(PushError) as exc:
        p.push_blob("team/app", digest, path, PushStats())
    msg = _one_line(exc)
    assert "token service" in msg and "refused" in msg and "401" in msg
    assert SECRET not in msg and (password is None or password not in msg)


# ------------------------------------------------------------------------------ pull side


def _leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".tmp-*"))


def test_pull_of_a_pushed_image(reg: FakeRegistry, tmp_path: Path) -> None:
    layer = _oci.layer([("etc", "dir", None), ("etc/motd", "file", "hello")])
    with _pusher(reg) as p:
        digest, _, _ = _push_image(p, "team/app", "v1", tmp_path, [layer])
    store = ImageStore(tmp_path / "oci")
    pulled = store.pull(parse(f"{reg.host}/team/app:v1"), reg.url)
    assert pulled.digest == digest and (pulled.rootfs / "etc/motd").read_text() == "hello"
    assert store.blobs.has(_oci.sha(layer)) and not _leftovers(store.root)


@pytest.mark.parametrize("mode", ["truncate_blobs", "corrupt_blobs"])
@pytest.mark.parametrize("which", ["layer", "all"])
def test_pull_refuses_bad_blobs_and_keeps_nothing_of_them(
    reg: FakeRegistry, tmp_path: Path, mode: str, which: str
) -> None:
    good = _oci.layer([("etc", "dir", None), ("etc/a", "file", "a")])
    bad = _oci.layer([("etc/b", "file", os.urandom(2000))])
    with _pusher(reg) as p:
        digest, _, _ = _push_image(p, "team/app", "v1", tmp_path, [good, bad])
    setattr(reg, mode, {_oci.sha(bad)} if which == "layer" else True)
    store = ImageStore(tmp_path / "oci")
    ref = parse(f"{reg.host}/team/app:v1")
    with pytest.raises(RegistryError) as exc:
        store.pull(ref, reg.url)
    msg = _one_line(exc)
    assert "does not match its digest" in msg
    if which == "layer":
        assert _oci.sha(bad) in msg
    assert not (store.root / digest.replace(":", "-")).exists()
    assert not store.blobs.has(_oci.sha(bad)) and not store.blobs.has(digest)
    assert not _leftovers(store.root)
    setattr(reg, mode, False)  # a later pull from a mended registry is whole
    assert (store.pull(ref, reg.url).rootfs / "etc/b").stat().st_size == 2000


def test_pull_of_a_blob_cut_off_mid_body_is_a_registry_error(
    reg: FakeRegistry, tmp_path: Path
) -> None:
    layer = _oci.layer([("etc/b", "file", os.urandom(2000))])
    with _pusher(reg) as p:
        _push_image(p, "team/app", "v1", tmp_path, [layer])
    reg.cut_blobs = {_oci.sha(layer)}
    store = ImageStore(tmp_path / "oci")
    try:
        with pytest.raises(RegistryError):
            store.pull(parse(f"{reg.host}/team/app:v1"), reg.url)
    finally:
        assert not _leftovers(store.root) and not store.blobs.has(_oci.sha(layer))


@pytest.mark.parametrize(
    ("host", "endpoint"),
    [
        ("127.0.0.1:5000", "http://127.0.0.1:5000"),
        ("localhost:5000/team/app", "http://localhost:5000"),
        ("ghcr.io", "https://ghcr.io"),
        ("[::1]:5000", "http://[::1]:5000"),
    ],
)
def test_endpoint_of_uses_http_for_loopback_only(host: str, endpoint: str) -> None:
    assert endpoint_of(host) == endpoint


def test_a_second_node_takes_the_blobs_from_the_shared_cache(
    reg: FakeRegistry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``--shared-cache``, a blob is pulled from the registry once per cluster; a shared
    copy that does not match its digest is pulled again (with a warning) and replaced."""
    from repogym.sandbox._shared_cache import SharedCache, read_stats

    layer = _oci.layer([("etc/motd", "file", os.urandom(3000))])
    with _pusher(reg) as p:
        _push_image(p, "team/app", "v1", tmp_path, [layer])
    ref, url = parse(f"{reg.host}/team/app:v1"), f"file://{tmp_path / 'shared'}"

    def node(name: str) -> ImageStore:
        store = ImageStore(tmp_path / name / "oci")
        store.shared = SharedCache(url, tmp_path / name)
        return store

    def layer_gets() -> int:
        return len([e for e in reg.log if e.method == "GET" and _oci.sha(layer) in e.path])

    first = node("a").pull(ref, reg.url)
    assert layer_gets() == 1 and read_stats(tmp_path / "a")["images"]["uploads"] == 1
    second = node("b").pull(ref, reg.url)
    assert layer_gets() == 1  # not pulled again
    assert read_stats(tmp_path / "b")["images"]["hits"] == 1
    assert (second.rootfs / "etc/motd").read_bytes() == (first.rootfs / "etc/motd").read_bytes()
    shared_blob = tmp_path / "shared" / "blobs" / "sha256" / _oci.sha(layer).split(":")[1]
    shared_blob.write_bytes(b"not the layer")
    with caplog.at_level("WARNING"):
        third = node("c").pull(ref, reg.url)
    assert layer_gets() == 2 and "corrupt" in caplog.text
    assert (third.rootfs / "etc/motd").is_file()
    assert shared_blob.read_bytes() == layer  # replaced by the good copy


def test_a_pull_from_a_registry_that_wants_credentials_uses_docker_login(
    reg: FakeRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pulls answer Basic and Bearer challenges with the credentials ``docker login`` wrote;
    without them the refusal says how to give some."""
    layer = _oci.layer([("etc/motd", "file", "private")])
    with _pusher(reg) as p:
        _push_image(p, "team/app", "v1", tmp_path, [layer])
    reg.auth = ("bearer", "user", SECRET)
    ref = parse(f"{reg.host}/team/app:v1")
    monkeypatch.delenv(USER_VAR, raising=False)
    monkeypatch.delenv(PASSWORD_VAR, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "nobody"))
    with pytest.raises(RegistryError) as exc:
        ImageStore(tmp_path / "anon").pull(ref, reg.url)
    assert "refused" in str(exc.value) and SECRET not in str(exc.value)
    config = tmp_path / "docker"
    config.mkdir()
    auth = base64.b64encode(f"user:{SECRET}".encode()).decode()
    (config / "config.json").write_text(json.dumps({"auths": {reg.host: {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    got = ImageStore(tmp_path / "oci").pull(ref, reg.url)
    assert (got.rootfs / "etc/motd").read_text() == "private"
    assert reg.tokens_issued
