"""Image references, the derived-image table, platforms, layer unpacking and heredoc rules."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
import pytest

from repogym import dockerfile
from repogym.sandbox import EnvironmentSpec, _images, _registry, _toolchains, _unpack
from repogym.sandbox.local import LocalSandbox
from tests.sandbox._oci import layer, sha

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "text",
    [
        "debian:bookworm-slim",
        "library/debian:bookworm-slim",
        "docker.io/debian:bookworm-slim",
        "docker.io/library/debian:bookworm-slim",
        "index.docker.io/library/debian:bookworm-slim",
        "registry-1.docker.io/library/debian:bookworm-slim",
        "public.ecr.aws/docker/library/debian:bookworm-slim",
        "mirror.gcr.io/debian:bookworm-slim",
        f"public.ecr.aws/docker/library/debian:bookworm-slim@{DIGEST}",
    ],
)
def test_hub_names_and_mirrors_normalise_to_one_reference(text: str) -> None:
    ref = _images.parse(text)
    assert (ref.registry, ref.repository, ref.tag) == (
        "docker.io",
        "library/debian",
        "bookworm-slim",
    )
    assert ref.short == "debian"
    assert ref.familiar == "debian:bookworm-slim"
    assert _toolchains.resolve(text).kind == "host"


def test_other_registries_tags_and_digests() -> None:
    ref = _images.parse(f"ghcr.io/Owner/Tool@{DIGEST}")
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (
        "ghcr.io",
        "owner/tool",
        None,
        DIGEST,
    )
    assert ref.reference == DIGEST and ref.tag_or_latest == "latest"
    ref = _images.parse("localhost:5000/a/b:1.2")
    assert (ref.registry, ref.repository, ref.tag) == ("localhost:5000", "a/b", "1.2")
    assert _images.parse("quay.io/pypa/manylinux2014_x86_64").short == (
        "quay.io/pypa/manylinux2014_x86_64"
    )
    assert _images.parse("owner/name").canonical == "docker.io/owner/name:latest"
    for bad in ("", "a b", "debian@sha256:xyz", "debian:-bad", "x/../y"):
        with pytest.raises(_images.ImageRefError):
            _images.parse(bad)


def test_terminal_bench_bases_map_like_the_official_images() -> None:
    ubuntu = _toolchains.resolve("ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624")
    assert ubuntu.kind == "host"
    assert ubuntu.mapping["stands_for"] == "ubuntu:24.04"
    assert "tmux and asciinema" in ubuntu.mapping["note"]
    python = _toolchains.resolve("ghcr.io/laude-institute/t-bench/python-3-13:20250620")
    assert python.kind == "python" and python.mapping["python"].startswith("3.13")
    assert python.mapping["stands_for"] == "python:3.13"


def test_a_release_whose_pip_installs_into_the_system_python_keeps_doing_so(
    monkeypatch: pytest.MonkeyPatch, sandbox: LocalSandbox, tmp_path: Path
) -> None:
    """Ubuntu 22.04's system Python takes ``pip install``; a host base whose Python refuses it
    (PEP 668) stands in for it with pip told so, in builds and sessions alike. Ubuntu 24.04
    refuses too: nothing is added there."""
    monkeypatch.setattr(_toolchains, "_host_externally_managed", lambda: True)
    jammy = _toolchains.resolve("ubuntu:22.04")
    assert jammy.env.get("PIP_BREAK_SYSTEM_PACKAGES") == "1"
    assert "PIP_BREAK_SYSTEM_PACKAGES" in jammy.mapping["note"]
    assert "PIP_BREAK_SYSTEM_PACKAGES" not in _toolchains.resolve("ubuntu:24.04").env
    assert jammy.fingerprint != _toolchains.resolve("ubuntu:24.04").fingerprint
    monkeypatch.setattr(_toolchains, "_host_externally_managed", lambda: False)
    assert "PIP_BREAK_SYSTEM_PACKAGES" not in _toolchains.resolve("ubuntu:22.04").env
    monkeypatch.setattr(_toolchains, "_host_externally_managed", lambda: True)
    if sandbox.registries:
        return  # the build would pull ubuntu:22.04 itself
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(
        'FROM ubuntu:22.04\nRUN test "$PIP_BREAK_SYSTEM_PACKAGES" = 1 && echo build-sees-it\n'
    )
    spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network")
    built = sandbox.build(spec, log=tmp_path / "log")
    assert "build-sees-it" in (tmp_path / "log").read_text()
    with sandbox.start(built, spec) as s:
        assert s.exec("echo $PIP_BREAK_SYSTEM_PACKAGES").stdout == "1\n"


def test_a_distro_release_that_differs_from_the_host_is_noted() -> None:
    host = _toolchains._os_release()
    note = _toolchains.distro_note("ubuntu", "24.04", host)
    assert note is not None and "Ubuntu 24.04 (python3 3.12)" in note and host in note
    if "Debian GNU/Linux 12" in host:
        assert _toolchains.distro_note("debian", "bookworm-slim", host) is None
        assert "python3 3.11" in note


def test_gcc_images_map_onto_the_host_base_with_its_gcc() -> None:
    base = _toolchains.resolve("public.ecr.aws/docker/library/gcc:14")
    assert base.kind == "host" and "with GCC" in base.mapping["host"]
    have = base.mapping["host"].rsplit(" ", 1)[-1]
    if not have.startswith("14."):
        assert f"stands for GCC 14; the host base has GCC {have}" in base.mapping["note"]


def test_jdk_images_use_the_hosts_jdk_of_that_major(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jdk17 = tmp_path / "java-17-openjdk-amd64"
    monkeypatch.setattr(_toolchains, "host_jdks", lambda: {"17": jdk17})
    base = _toolchains.resolve("eclipse-temurin:17-jdk-jammy")
    assert base.env["JAVA_HOME"] == str(jdk17)
    assert base.env["PATH"].startswith(f"{jdk17}/bin:")
    assert "Ubuntu 22.04" in base.mapping["note"]  # jammy is not the host's release
    assert _toolchains.resolve("openjdk:17.0.2").env["JAVA_HOME"] == str(jdk17)
    with pytest.raises(_toolchains.UnsupportedBase, match="needs JDK 21; this host has JDK 17"):
        _toolchains.resolve("eclipse-temurin:21")


def _fake_maven(home: Path, version: str) -> Path:
    """A Maven home as a distribution lays it out: ``bin/mvn`` and a ``maven-core`` jar."""
    import zipfile

    (home / "bin").mkdir(parents=True)
    (home / "bin" / "mvn").write_text("#!/bin/sh\n")
    (home / "lib").mkdir()
    with zipfile.ZipFile(home / "lib" / "maven-core-3.x.jar", "w") as z:
        z.writestr(
            "META-INF/maven/org.apache.maven/maven-core/pom.properties",
            f"groupId=org.apache.maven\nartifactId=maven-core\nversion={version}\n",
        )
    return home


def test_maven_images_use_a_host_jdk_and_a_host_maven(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repogym.sandbox import _maven_image

    jdks = {"17": tmp_path / "java-17", "25": tmp_path / "temurin-25"}
    mavens = {
        "3.8.7": _fake_maven(tmp_path / "maven", "3.8.7"),
        "3.9.6": _fake_maven(tmp_path / "apache-maven-3.9.6", "3.9.6"),
    }
    monkeypatch.setattr(_toolchains, "host_jdks", lambda: jdks)
    monkeypatch.setattr(_maven_image, "host_mavens", lambda: mavens)
    base = _toolchains.resolve("maven:3.9.6-eclipse-temurin-17")
    assert base.env["JAVA_HOME"] == str(jdks["17"])
    assert base.env["MAVEN_HOME"] == str(mavens["3.9.6"])
    assert base.env["PATH"].startswith(f"{mavens['3.9.6']}/bin:{jdks['17']}/bin:")
    assert base.mapping["maven"] == "3.9.6" and "stands for" not in base.mapping["note"]
    # The image's Maven is not on the host: the closest one, and the note says so.
    base = _toolchains.resolve("library/maven:3.8.5-openjdk-25-slim")
    assert base.env["JAVA_HOME"] == str(jdks["25"]) and base.mapping["maven"] == "3.8.7"
    assert "stands for Maven 3.8.5; mvn on PATH is the host's Maven 3.8.7" in base.mapping["note"]
    base = _toolchains.resolve("maven:3-eclipse-temurin-17-focal")
    assert base.mapping["maven"] == "3.9.6" and "Ubuntu 20.04" in base.mapping["note"]
    assert _toolchains.resolve("maven:latest").env["JAVA_HOME"] == str(jdks["25"])
    assert _toolchains.resolve("maven:3.9.6").env["JAVA_HOME"] == str(jdks["25"])
    with pytest.raises(_toolchains.UnsupportedBase, match="needs JDK 11; this host has JDK 17"):
        _toolchains.resolve("maven:3.9.6-eclipse-temurin-11")
    monkeypatch.setattr(_maven_image, "host_mavens", lambda: {})
    with pytest.raises(_toolchains.UnsupportedBase, match="needs Maven; this host has none"):
        _toolchains.resolve("maven:3.9.6-eclipse-temurin-17")


def test_host_mavens_reads_the_version_from_maven_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repogym.sandbox import _maven_image

    home = _fake_maven(tmp_path / "usr" / "share" / "maven", "3.8.7")
    _fake_maven(tmp_path / "usr" / "local" / "apache-maven-3.9.11", "3.9.11")
    (tmp_path / "usr" / "local" / "maven-broken").mkdir()  # no bin/mvn: not a Maven
    monkeypatch.setattr(
        _maven_image, "MAVEN_HOMES", (f"{tmp_path}/usr/share/maven", f"{tmp_path}/usr/local/*")
    )
    _maven_image.host_mavens.cache_clear()
    try:
        found = _maven_image.host_mavens()
    finally:
        _maven_image.host_mavens.cache_clear()
    assert found == {"3.8.7": home, "3.9.11": tmp_path / "usr/local/apache-maven-3.9.11"}
    assert _maven_image.pick_maven("3.9", found) == ("3.9.11", found["3.9.11"])
    assert _maven_image.pick_maven("3.6.3", found) == ("3.9.11", found["3.9.11"])
    assert _maven_image.pick_maven("", {}) is None


def test_platforms() -> None:
    assert _images.platform_ok(_images.host_platform())
    assert not _images.platform_ok("linux/s390x")
    assert not _images.platform_ok("windows/amd64")


# --------------------------------------------------------------------------- unpacking


def _apply(root: Path, *layers: bytes) -> _unpack.Budget:
    budget = _unpack.Budget(max_bytes=1 << 30)
    for i, data in enumerate(layers):
        blob = root.parent / f"layer{i}"
        blob.write_bytes(data)
        _unpack.apply_layer(blob, root, budget)
    return budget


def test_whiteouts_and_opaque_folders(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _apply(
        root,
        layer([("a", "dir", None), ("a/old", "file", "1"), ("b", "file", "b"), ("c", "dir", None)]),
        layer(
            [
                ("a", "opaque", None),
                ("a/new", "file", "2"),
                ("b", "whiteout", None),
                ("c/d", "file", "d"),
                ("h", "hard", "c/d"),
            ],
            compress=False,
        ),
    )
    assert sorted(p.name for p in (root / "a").iterdir()) == ["new"]
    assert not (root / "b").exists()
    assert (root / "h").read_text() == "d" and (root / "h").stat().st_nlink == 2


def test_layers_never_write_outside_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    # An absolute symlink is resolved inside the root, like a chroot would.
    _apply(root, layer([("etc", "link", str(outside))]), layer([("etc/x", "file", "x")]))
    assert not (outside / "x").exists()
    assert (root / outside.relative_to("/") / "x").read_text() == "x"
    with pytest.raises(_unpack.UnpackError, match=r"'\.\.'"):
        _apply(root, layer([("../escape", "file", "x")]))
    with pytest.raises(_unpack.UnpackError, match="not a file"):
        _apply(root, layer([("hl", "hard", "/etc/passwd-not-there")]))
    setuid = layer([("su", "file", ("x", 0o4755))])
    _apply(root, setuid)
    assert (root / "su").stat().st_mode & 0o7777 == 0o755
    with pytest.raises(_unpack.UnpackError, match="larger than the limit"):
        blob = tmp_path / "big"
        blob.write_bytes(layer([("big", "file", "x" * 2048)]))
        _unpack.apply_layer(blob, root, _unpack.Budget(max_bytes=1024))


# ------------------------------------------------------------------- registry protocol


def test_bearer_token_auth_and_digest_checks() -> None:
    """Anonymous request → 401 Bearer challenge → token from the realm → retried."""
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": _registry.OCI_MANIFEST,
            "config": {"digest": sha(b"{}"), "size": 2},
            "layers": [],
        }
    ).encode()
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.url.path} {request.headers.get('authorization', '-')}")
        if request.url.path == "/token":
            assert request.url.params["scope"] == "repository:o/img:pull"
            assert request.url.params["service"] == "reg"
            return httpx.Response(200, json={"token": "T0K"})
        if request.headers.get("authorization") != "Bearer T0K":
            return httpx.Response(
                401,
                headers={
                    "WWW-Authenticate": 'Bearer realm="https://reg.test/token",service="reg",'
                    'scope="repository:o/img:pull"'
                },
            )
        if request.url.path.endswith("/manifests/good"):
            return httpx.Response(
                200, content=manifest, headers={"Docker-Content-Digest": sha(manifest)}
            )
        if request.url.path.endswith("/manifests/bad"):
            return httpx.Response(200, content=manifest, headers={"Docker-Content-Digest": DIGEST})
        if request.url.path.endswith(f"/blobs/{sha(b'{}')}"):
            return httpx.Response(200, content=gzip.decompress(gzip.compress(b"{}")))
        return httpx.Response(404)

    client = _registry.RegistryClient("https://reg.test", transport=httpx.MockTransport(handler))
    resolved = client.resolve("o/img", "good")
    assert resolved.digest == sha(manifest)
    assert client.config("o/img", resolved) == {}
    assert seen[:3] == [
        "/v2/o/img/manifests/good -",
        "/token -",
        "/v2/o/img/manifests/good Bearer T0K",
    ]
    with pytest.raises(_registry.RegistryError, match="does not match its digest"):
        client.resolve("o/img", "bad")
    with pytest.raises(_registry.NotFound):
        client.resolve("o/img", "missing")

    def basic(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, headers={"WWW-Authenticate": 'Basic realm="x"'})

    client = _registry.RegistryClient("https://reg.test", transport=httpx.MockTransport(basic))
    with pytest.raises(_registry.RegistryError, match="credentials"):
        client.resolve("o/img", "x")


# ------------------------------------------------------------------------------ heredocs


def test_buildkit_heredoc_forms() -> None:
    text = (
        "FROM x\n"
        "RUN cat > /f << 'EOF'\na $HOME\nEOF\n"
        "RUN <<-EOT\n\techo tab\n\tEOT\n"
        'COPY <<A <<"B" /dir/\none\nA\ntwo\nB\n'
        "COPY << X /p\nx\nX\n"
        'RUN ["echo", "<<EOF"]\n'
        'RUN echo "<<NOHEREDOC"\n'
        "RUN python3 <<PY | cat\nprint(1)\nPY\n"
        "RUN <<EMPTY\nEMPTY\n"
        "RUN 3<<E1 cat <&3\nfd\nE1\n"
    )
    ins = dockerfile.parse(text).instructions[1:]
    assert [(h.name, h.body, h.expand) for h in ins[0].heredocs] == [("EOF", "a $HOME\n", False)]
    assert ins[0].args_without_heredocs == "cat > /f"
    assert [(h.name, h.body) for h in ins[1].heredocs] == [("EOT", "echo tab\n")]
    assert [(h.name, h.body, h.expand) for h in ins[2].heredocs] == [
        ("A", "one\n", True),
        ("B", "two\n", False),
    ]
    assert ins[2].args_without_heredocs == "/dir/"
    assert [h.name for h in ins[3].heredocs] == ["X"] and ins[3].args_without_heredocs == "/p"
    assert ins[4].heredocs == [] and ins[5].heredocs == []
    assert ins[6].heredocs[0].body == "print(1)\n"
    assert ins[7].heredocs[0].body == ""
    assert ins[8].heredocs[0].name == "E1"
    assert [i.keyword for i in ins] == [
        "RUN",
        "RUN",
        "COPY",
        "COPY",
        "RUN",
        "RUN",
        "RUN",
        "RUN",
        "RUN",
    ]
