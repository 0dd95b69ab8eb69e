"""The pull path against a real registry on 127.0.0.1 (Debian's ``docker-registry``), with small
images built here from files (static busybox), pushed by ``tests/sandbox/_oci.py``; and
``COPY --from`` of stages, images and tool images."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.sandbox import BuildError, EnvironmentSpec
from repogym.sandbox.local import LocalSandbox
from tests.sandbox import _oci
from tests.sandbox.conftest import make_context


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_oci.Registry]:
    yield from _oci.registry_or_skip(tmp_path_factory.mktemp("registry"))


@pytest.fixture(scope="module")
def images(registry: _oci.Registry) -> dict[str, _oci.Pushed]:
    url = registry.url
    base = _oci.busybox_layer()
    return {
        # An OCI index with an arm64 entry that must not be chosen.
        "bb": _oci.push_image(
            url,
            "test/bb",
            "1",
            [base, _oci.layer([("etc/motd", "file", "hello"), ("bin/ls", "whiteout", None)])],
            env=["PATH=/bin", "GREETING=hi"],
            workdir="/srv",
            index=True,
            image_config={
                "Entrypoint": ["/bin/sh", "-c"],
                "Cmd": ["echo served"],
                "Healthcheck": {"Test": ["CMD-SHELL", "test -f /etc/motd"], "Interval": 2 * 10**9},
            },
        ),
        # Docker v2 media types, one uncompressed layer.
        "docker": _oci.push_image(
            url,
            "test/docker-types",
            "2",
            [base, _oci.layer([("data/x", "file", "x")], compress=False)],
            docker_types=True,
        ),
    }


def _host(url: str) -> str:
    return url.removeprefix("http://")


@pytest.fixture(scope="module")
def pull_sandbox(registry: _oci.Registry, tmp_path_factory: pytest.TempPathFactory) -> LocalSandbox:
    ok, why = LocalSandbox.available()
    if not ok:
        pytest.skip(why)
    cache = tmp_path_factory.mktemp("pull-cache")
    return LocalSandbox(cache, registries={_host(registry.url): registry.url})


def _spec(ctx: Path, **kw: object) -> EnvironmentSpec:
    return EnvironmentSpec(context_dir=ctx, network_mode="no-network", **kw)  # type: ignore[arg-type]


def test_from_a_pulled_image_runs_on_its_own_root(
    pull_sandbox: LocalSandbox,
    registry: _oci.Registry,
    images: dict[str, _oci.Pushed],
    tmp_path: Path,
) -> None:
    host = _host(registry.url)
    ctx = make_context(
        tmp_path / "ctx",
        f"""\
        FROM --platform=$BUILDPLATFORM {host}/test/bb:1 AS base
        RUN echo "$GREETING" > /built && pwd > /where
        """,
    )
    built = pull_sandbox.build(_spec(ctx), log=tmp_path / "log")
    mapping = built.base_mapping
    assert mapping["digest"] == images["bb"].manifest_digest  # the amd64 entry of the index
    assert int(mapping["size"]) > 1_000_000 and mapping["registry"] == registry.url
    # The image's process and healthcheck carry through (a sidecar started from it runs them).
    assert built.details["entrypoint"] == ["/bin/sh", "-c"]
    assert built.details["cmd"] == ["echo served"]
    assert built.details["healthcheck"] == "HEALTHCHECK --interval=2s CMD test -f /etc/motd"
    with pull_sandbox.start(built, _spec(ctx)) as s:
        res = s.exec("cat /built /where /etc/motd; ls /bin; ls /usr 2>&1; cat /etc/resolv.conf")
        out = res.stdout
        assert out.startswith("hi\n/srv\nhello")
        assert "busybox" in out and "\nls\n" not in out  # the whiteout removed bin/ls
        assert "/usr: No such file" in out  # nothing of the host's /usr
        assert "nameserver 10.0.2.3" in out
    # The root is cached by manifest digest: a second build pulls nothing.
    again = pull_sandbox.build(_spec(ctx), log=tmp_path / "log2")
    assert again.key == built.key
    assert "cached " in (tmp_path / "log2").read_text()
    assert (pull_sandbox.cache_root / "oci" / mapping["digest"].replace(":", "-")).is_dir()


def test_docker_media_types_digest_pins_and_mirrors(
    pull_sandbox: LocalSandbox,
    registry: _oci.Registry,
    images: dict[str, _oci.Pushed],
    tmp_path: Path,
) -> None:
    host = _host(registry.url)
    digest = images["docker"].manifest_digest
    ctx = make_context(tmp_path / "ctx", f"FROM {host}/test/docker-types:2@{digest}\n")
    built = pull_sandbox.build(_spec(ctx))
    assert built.base_mapping["digest"] == digest
    with pull_sandbox.start(built, _spec(ctx)) as s:
        assert s.exec("cat /data/x").stdout == "x"
    # A mirror for Docker Hub: `public.ecr.aws/docker/library/<name>` asks it for library/<name>.
    _oci.push_image(registry.url, "library/tinyos", "3", [_oci.busybox_layer()])
    sb = LocalSandbox(pull_sandbox.cache_root, registries={"docker.io": registry.url})
    ctx2 = make_context(tmp_path / "ctx2", "FROM public.ecr.aws/docker/library/tinyos:3\n")
    assert sb.build(_spec(ctx2)).base_mapping["pulled"] == "docker.io/library/tinyos:3"


def test_unreachable_or_missing_images_fall_back_to_the_host_mapping(
    pull_sandbox: LocalSandbox, registry: _oci.Registry, tmp_path: Path
) -> None:
    sb = LocalSandbox(
        pull_sandbox.cache_root,
        registries={"docker.io": "http://127.0.0.1:9", "*": registry.url},
    )
    ctx = make_context(tmp_path / "a", "FROM debian:bookworm-slim\n")
    mapping = sb.build(_spec(ctx)).base_mapping
    assert mapping["host"].startswith("host base") and "unreachable" in mapping["note"]
    ctx = make_context(tmp_path / "b", "FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:1\n")
    mapping = sb.build(_spec(ctx)).base_mapping  # the registry answers: not there
    assert mapping["stands_for"] == "ubuntu:24.04" and "not pulled" in mapping["note"]


def test_a_corrupt_image_fails_the_build(
    pull_sandbox: LocalSandbox, registry: _oci.Registry, tmp_path: Path
) -> None:
    evil = _oci.layer([("../escape", "file", "x")])
    _oci.push_image(registry.url, "test/evil", "1", [_oci.busybox_layer(), evil])
    ctx = make_context(tmp_path / "ctx", f"FROM {_host(registry.url)}/test/evil:1\n")
    with pytest.raises(BuildError, match=r"line 1: pulling .*'\.\.' component"):
        pull_sandbox.build(_spec(ctx))
    assert not list((pull_sandbox.cache_root / "oci").glob(".tmp-*"))


def test_copy_from_stages_indexes_images_and_target(
    pull_sandbox: LocalSandbox,
    registry: _oci.Registry,
    images: dict[str, _oci.Pushed],
    tmp_path: Path,
) -> None:
    host = _host(registry.url)
    ctx = make_context(
        tmp_path / "ctx",
        f"""\
        FROM debian:bookworm AS build
        RUN mkdir -p /out/sub && echo built > /out/sub/a.txt && echo b > /out/b.txt \\
            && ln -s /out/sub /out/via-link
        FROM {host}/test/bb:1 AS tools
        RUN echo from-tools > /t
        FROM python:3.11-slim AS final
        COPY --from=build /out/sub/a.txt /dest/
        COPY --from=0 /out /all
        COPY --from=build /out/via-link/a.txt /followed.txt
        COPY --from=build /out/*.txt /globbed/
        COPY --from=tools /t /bin/busybox /tools/
        COPY --from={host}/test/bb:1 /etc/motd /motd
        FROM final AS other
        RUN exit 7
        """,
    )
    built = pull_sandbox.build(_spec(ctx, target="final"))
    assert built.details["target"] == "final"
    with pull_sandbox.start(built, _spec(ctx)) as s:
        out = s.exec(
            "cat /dest/a.txt /all/sub/a.txt /followed.txt /globbed/b.txt /tools/t /motd; "
            "readlink /all/via-link; /tools/busybox echo ok"
        ).stdout
    assert out == "built\nbuilt\nbuilt\nb\nfrom-tools\nhello/out/sub\nok\n"
    with pytest.raises(BuildError, match="target stage 'nope' not found"):
        pull_sandbox.build(_spec(ctx, target="nope"))


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("COPY --from=build /missing /x", "/missing not found"),
        ("COPY --from=ghcr.io/o/unknown:1 /x /x", "no registry endpoint is configured for ghcr.io"),
        ("ADD --from=build /x /x", "ADD has no --from"),
    ],
)
def test_copy_from_refusals_name_the_reason(
    sandbox: LocalSandbox, tmp_path: Path, line: str, fragment: str
) -> None:
    ctx = make_context(
        tmp_path / "ctx", f"FROM debian:bookworm AS build\nFROM debian:bookworm\n{line}\n"
    )
    with pytest.raises(BuildError, match="line 3:") as err:
        sandbox.build(_spec(ctx))
    assert fragment in str(err.value)


def test_an_apt_package_the_mapped_base_lacks_fails_in_one_line(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        "FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624\n"
        "RUN --network=none apt-get install -y no-such-package-repogym\n",
    )
    with pytest.raises(BuildError) as err:
        sandbox.build(_spec(ctx), log=tmp_path / "log")
    msg = str(err.value)
    assert "\n" not in msg
    assert "apt-get cannot install package 'no-such-package-repogym'" in msg
    assert "ubuntu-24-04:20250624 is mapped onto the host base" in msg
    assert "stands for Ubuntu 24.04 (python3 3.12)" in (tmp_path / "log").read_text()
