"""Building environments with the local backend: replay, refusals, the layer cache."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from repogym.sandbox import BuildError, BuiltEnvironment, EnvironmentSpec, _toolchains
from repogym.sandbox.local import LocalSandbox
from tests.sandbox.conftest import make_context


def _spec(ctx: Path) -> EnvironmentSpec:
    return EnvironmentSpec(context_dir=ctx, network_mode="no-network")


def test_build_and_exec(
    sandbox: LocalSandbox, py_env: tuple[BuiltEnvironment, EnvironmentSpec]
) -> None:
    built, spec = py_env
    assert built.backend == "local"
    assert built.workdir == "/app"
    assert built.env["APP_HOME"] == "/app"
    assert built.base_mapping["from"] == "python:3.11-slim"
    assert built.base_mapping["python"].startswith("3.11.")
    assert built.base_mapping["host"].endswith(built.base_mapping["python"])
    with sandbox.start(built, spec) as s:
        res = s.exec(
            "pwd; python --version; command -v python python3 pip pip3; cat marker; "
            "python -c 'import tinypkg, sys; print(tinypkg.hello(), sys.prefix)'"
        )
        assert res.exit_code == 0, res.stderr
        lines = res.stdout.splitlines()
        assert lines[0] == "/app"
        assert lines[1].startswith("Python 3.11.")
        assert lines[2:6] == [f"/usr/local/bin/{n}" for n in ("python", "python3", "pip", "pip3")]
        assert lines[6] == "ready"
        assert lines[7] == "hi from tinypkg /usr/local"
        # Only the official image's packages, never the host's site-packages.
        res = s.exec(["python", "-c", "import pytest"])
        assert res.exit_code == 1 and "No module named" in res.stderr


def test_pip_install_local_package_during_build(
    sandbox: LocalSandbox, py_env: tuple[BuiltEnvironment, EnvironmentSpec]
) -> None:
    built, spec = py_env
    with sandbox.start(built, spec) as s:
        res = s.exec("pip show tinypkg && pip --version")
        assert res.exit_code == 0, res.stderr
        assert "Name: tinypkg" in res.stdout
        assert "/usr/local/lib/python3.11/site-packages" in res.stdout


def test_layers_are_shared_between_dockerfiles(sandbox: LocalSandbox, tmp_path: Path) -> None:
    prefix = """\
        FROM debian:bookworm
        RUN mkdir -p /data && seq 1 2000 | xargs -I{} touch /data/f{}
        ENV STAGE=one
        COPY a.txt /data/a.txt
        """
    one = make_context(tmp_path / "one", prefix + "RUN echo one > /data/which\n", {"a.txt": "A"})
    two = make_context(tmp_path / "two", prefix + "RUN echo two > /data/which\n", {"a.txt": "A"})
    b1 = sandbox.build(_spec(one))
    assert b1.details["cache_misses"] == 3 and b1.details["cache_hits"] == 0
    b2 = sandbox.build(_spec(two))
    # RUN seq + COPY are reused; only the last RUN is new.
    assert b2.details["cache_hits"] == 2 and b2.details["cache_misses"] == 1
    assert b1.details["layers"][:2] == b2.details["layers"][:2]
    assert b1.key != b2.key
    # A rebuild is all cache hits and yields the same key.
    again = sandbox.build(_spec(one))
    assert again.details["cache_hits"] == 3 and again.details["cache_misses"] == 0
    assert again.key == b1.key
    # Changing copied content invalidates from the COPY on.
    (one / "a.txt").write_text("B")
    b3 = sandbox.build(_spec(one))
    assert b3.details["cache_hits"] == 1 and b3.details["cache_misses"] == 2
    for b, which in ((b1, "one"), (b2, "two")):
        with sandbox.start(b, _spec(one)) as s:
            res = s.exec("cat /data/which; cat /data/a.txt; echo; ls /data | wc -l")
            assert res.stdout.split() == [which, "A", "2002"]


def test_instructions_are_replayed(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        ARG BASE=bookworm
        FROM debian:${BASE} AS base
        ARG VERSION=1.2.3
        ARG BASE
        LABEL org.example.version=$VERSION
        ENV GREETING="hello world" \\
            LEGACY_FREE=yes
        ENV OLDSTYLE value with spaces
        SHELL ["/bin/bash", "-c"]
        RUN echo "bash=$BASH_VERSION arg=$VERSION base=$BASE" > /built.txt
        WORKDIR /srv/app
        WORKDIR sub
        COPY --chown=nobody:nogroup --chmod=640 conf/*.ini ./conf/
        COPY tree/ /srv/tree
        ADD bundle.tar /srv/unpacked/
        COPY ["spaced name.txt", "/srv/spaced name.txt"]
        COPY <<EOF /srv/generated.txt
        greeting is $GREETING
        EOF
        RUN <<EOF
        set -e
        echo from-heredoc > /srv/heredoc.txt
        EOF
        EXPOSE 8080/tcp
        VOLUME /data
        STOPSIGNAL SIGTERM
        HEALTHCHECK CMD true
        CMD ["sleep", "1"]
        USER nobody
        """,
        {
            "conf/a.ini": "a",
            "conf/b.ini": "b",
            "conf/c.txt": "not copied",
            "tree/x/y.txt": "y",
            "tree/ignored.log": "ignored",
            "spaced name.txt": "s",
            ".dockerignore": "tree/*.log\n",
        },
    )
    (ctx / "bundle").mkdir()
    (ctx / "bundle" / "inner.txt").write_text("from tar")
    subprocess.run(
        ["tar", "-cf", str(ctx / "bundle.tar"), "-C", str(ctx / "bundle"), "."], check=True
    )
    built = sandbox.build(_spec(ctx))
    assert built.workdir == "/srv/app/sub"
    assert built.user == "nobody"
    assert built.env["GREETING"] == "hello world"
    assert built.env["OLDSTYLE"] == "value with spaces"
    assert "VERSION" not in built.env  # ARGs do not persist
    assert built.details["labels"] == {"org.example.version": "1.2.3"}
    assert built.details["cmd"] == ["sleep", "1"]
    assert built.details["exposed_ports"] == ["8080/tcp"]
    with sandbox.start(built, _spec(ctx)) as s:
        res = s.exec(
            "pwd; id -un; cat /built.txt; "
            "stat -c '%U:%G %a %n' conf/*; ls conf; "
            "cat /srv/tree/x/y.txt; echo; ls /srv/tree; cat /srv/unpacked/inner.txt; echo; "
            "cat '/srv/spaced name.txt'; echo; cat /srv/generated.txt /srv/heredoc.txt"
        )
        assert res.exit_code == 0, res.stderr
        assert res.stdout.splitlines() == [
            "/srv/app/sub",
            "nobody",
            "bash=" + res.stdout.split("bash=")[1].split()[0] + " arg=1.2.3 base=bookworm",
            "nobody:nogroup 640 conf/a.ini",
            "nobody:nogroup 640 conf/b.ini",
            "a.ini",
            "b.ini",
            "y",
            "x",
            "from tar",
            "s",
            "greeting is hello world",
            "from-heredoc",
        ]
        assert s.exec("id -un", user="root").stdout.strip() == "root"


def test_multi_stage_builds_only_what_the_target_needs(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm AS unused
        RUN exit 3
        FROM debian:bookworm AS base
        RUN echo base > /stage
        FROM base
        RUN echo final >> /stage
        """,
    )
    built = sandbox.build(_spec(ctx))
    with sandbox.start(built, _spec(ctx)) as s:
        assert s.exec("cat /stage").stdout.split() == ["base", "final"]


@pytest.mark.parametrize(
    ("dockerfile", "line", "fragment"),
    [
        ("FROM alpine:3.19\nRUN true\n", 1, "cannot map base image 'alpine:3.19'"),
        ("FROM debian:bookworm\nRUN true\nFROBNICATE now\n", 3, "unknown instruction FROBNICATE"),
        (
            "FROM debian:bookworm AS b\nFROM debian:bookworm\nCOPY --from=b /x /x\n",
            3,
            "--from",
        ),
        ("FROM debian:bookworm\nADD https://example.com/x.tgz /x\n", 2, "remote URL"),
        ("FROM debian:bookworm\nRUN --mount=type=secret,id=a true\n", 2, "not supported"),
        ("FROM python:3.99\n", 1, "not installed on this host"),
        ("FROM debian:bookworm\nCOPY missing.txt /x\n", 2, "not found in the build context"),
        ("FROM debian:bookworm\nCOPY a b /dest\n", 2, "must be a directory and end with a /"),
    ],
)
def test_refusals_name_the_line(
    sandbox: LocalSandbox, tmp_path: Path, dockerfile: str, line: int, fragment: str
) -> None:
    ctx = make_context(tmp_path / "ctx", dockerfile, {"a": "a", "b": "b"})
    with pytest.raises(BuildError) as err:
        sandbox.build(_spec(ctx))
    msg = str(err.value)
    assert f"line {line}:" in msg
    assert fragment in msg
    assert dockerfile.splitlines()[line - 1].split()[0] in msg  # the offending text is quoted


def test_prebuilt_image_only(sandbox: LocalSandbox) -> None:
    # No Dockerfile, only docker_image: built as FROM <image> (pulled, or mapped).
    spec = EnvironmentSpec(context_dir=None, docker_image="ghcr.io/acme/env:1")
    assert any("ghcr.io/acme/env:1" in r for r in sandbox.preflight(spec))
    with pytest.raises(BuildError, match="cannot map base image 'ghcr.io/acme/env:1'"):
        sandbox.build(spec)
    mapped = EnvironmentSpec(context_dir=None, docker_image="debian:bookworm-slim")
    assert sandbox.preflight(mapped) == []
    built = sandbox.build(mapped)
    with sandbox.start(built, mapped) as session:
        assert session.exec("echo ok", timeout_s=30).stdout.strip() == "ok"


def test_preflight_names_what_build_would_refuse_without_building(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    layers_before = set(sandbox.store.root.glob("*/meta.json"))  # earlier tests' layers
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM python:3.11-slim AS tools
        RUN touch /never-built
        FROM acme.example/private/base:7
        COPY --from=tools /never-built /x
        RUN --security=insecure true
        """,
        {},
    )
    reasons = sandbox.preflight(_spec(ctx))
    assert len(reasons) == 1 and "RUN --security=insecure" in reasons[0], reasons
    ctx2 = make_context(
        tmp_path / "ctx2",
        "FROM python:3.11-slim AS tools\nFROM acme.example/private/base:7\nCOPY --from=tools / /t\n",
        {},
    )
    reasons = sandbox.preflight(_spec(ctx2))
    assert len(reasons) == 1 and "acme.example/private/base:7" in reasons[0], reasons
    assert "line 2" in reasons[0]
    ctx3 = make_context(tmp_path / "ctx3", "FROM debian:bookworm\nRUN true\n", {})
    assert sandbox.preflight(_spec(ctx3)) == []
    # Nothing was built: the step cache holds no new layer.
    assert set(sandbox.store.root.glob("*/meta.json")) == layers_before


def test_failing_run_reports_step_exit_code_and_tail(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm
        RUN echo fine
        RUN for i in 1 2 3; do echo "progress $i"; done; echo 'it broke' >&2; exit 7
        """,
    )
    log = tmp_path / "build.log"
    with pytest.raises(BuildError) as err:
        sandbox.build(_spec(ctx), log=log)
    msg = str(err.value)
    assert "line 3:" in msg and "exit code 7" in msg
    assert "it broke" in msg and "progress 3" in msg
    text = log.read_text()
    assert "fine" in text and "it broke" in text
    # Nothing of the failed step is cached: fixing the line reuses only the earlier layers.
    (ctx / "Dockerfile").write_text("FROM debian:bookworm\nRUN echo fine\nRUN true\n")
    built = sandbox.build(_spec(ctx))
    assert built.details["cache_hits"] == 1 and built.details["cache_misses"] == 1


def test_run_steps_have_network_and_apt_base(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm
        RUN grep -c : /proc/net/dev > /ifaces && test -x /usr/bin/apt-get
        """,
    )
    built = sandbox.build(_spec(ctx))
    with sandbox.start(built, _spec(ctx)) as s:
        # Build steps see the host network (more than the 2 header lines + lo).
        assert int(s.read("/ifaces").decode()) >= 2


@pytest.mark.slow
def test_killed_build_leaves_no_half_layer(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm
        RUN touch /started && sleep 30.0417 && touch /finished
        """,
    )
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from repogym.sandbox import EnvironmentSpec
        from repogym.sandbox.local import LocalSandbox
        LocalSandbox({str(sandbox.cache_root)!r}).build(
            EnvironmentSpec(context_dir=Path({str(ctx)!r}), network_mode="no-network"))
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    layers = sandbox.store.root
    deadline = time.monotonic() + 60
    # The step runs (its files are on the step's tmpfs, not yet in the layer store).
    while not _cmdlines_with("sleep 30.0417"):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # Its helper processes die with it (parent-death signals) ...
    deadline = time.monotonic() + 10
    while any(_cmdlines_with("sleep 30.0417")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _cmdlines_with("sleep 30.0417")
    # ... and the half-built step is not a cached layer: the next build runs it again.
    (ctx / "Dockerfile").write_text("FROM debian:bookworm\nRUN touch /started && touch /finished\n")
    built = sandbox.build(_spec(ctx))
    assert built.details["cache_misses"] == 1
    assert not list(layers.glob(".tmp-*"))


def _cmdlines_with(text: str) -> list[int]:
    from tests.sandbox.conftest import processes_with

    return processes_with(text)


@pytest.mark.slow
def test_concurrent_builds_of_the_same_steps(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm
        RUN sleep 1 && date +%s%N > /stamp
        """,
    )
    results: list[BuiltEnvironment] = []
    errors: list[BaseException] = []

    def build() -> None:
        try:
            results.append(LocalSandbox(sandbox.cache_root).build(_spec(ctx)))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({r.key for r in results}) == 1
    assert sorted(r.details["cache_misses"] for r in results) == [0, 0, 1]
    stamps = set()
    for r in results:
        with sandbox.start(r, _spec(ctx)) as s:
            stamps.add(s.read("/stamp"))
    assert len(stamps) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("image", "probe", "expect"),
    [
        ("node:20-bookworm", "node --version && npm --version", "v"),
        ("golang:1.22", "go version && pwd", "go version go"),
        ("rust:1-slim", "cargo --version && rustc --version && echo $CARGO_HOME", "cargo "),
    ],
)
def test_other_toolchains(
    sandbox: LocalSandbox, tmp_path: Path, image: str, probe: str, expect: str
) -> None:
    ctx = make_context(tmp_path / "ctx", f"FROM {image}\nRUN ({probe}) > /probe\n")
    try:
        built = sandbox.build(_spec(ctx))
    except BuildError as exc:
        if "not installed on this host" in str(exc):
            pytest.skip(str(exc))
        raise
    assert built.base_mapping["from"] == image
    assert built.base_mapping["host"]
    with sandbox.start(built, _spec(ctx)) as s:
        out = s.read("/probe").decode()
    assert out.startswith(expect), out
    if image.startswith("golang"):
        assert out.splitlines()[-1] == "/go" and built.env["GOPATH"] == "/go"
    if image.startswith("rust"):
        assert out.splitlines()[-1] == "/usr/local/cargo"


def test_available_message_names_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from repogym.sandbox import _host, local

    monkeypatch.setattr(_host, "find_bwrap", lambda: None)
    monkeypatch.setattr(local.os, "geteuid", lambda: 1000)  # not root: no apt-get attempt
    ok, why = LocalSandbox.available()
    assert not ok
    assert "bubblewrap" in why and "apt-get install bubblewrap" in why
    assert "\n" not in why


@pytest.mark.skipif(not _toolchains.host_jdks(), reason="no JDK under /usr/lib/jvm")
def test_a_jdk_image_compiles_java(sandbox: LocalSandbox, tmp_path: Path) -> None:
    major = sorted(_toolchains.host_jdks(), key=int)[0]
    ctx = make_context(
        tmp_path / "ctx",
        f"""\
        FROM eclipse-temurin:{major}-jdk
        WORKDIR /src
        COPY Hi.java .
        RUN javac Hi.java && test -n "$JAVA_HOME"
        """,
        {
            "Hi.java": 'class Hi { public static void main(String[] a) { System.out.println("hi"); } }'
        },
    )
    built = sandbox.build(_spec(ctx))
    assert built.base_mapping["host"].endswith(f"with JDK {major}")
    with sandbox.start(built, _spec(ctx)) as session:
        assert session.exec("java -cp /src Hi", timeout_s=60).stdout.strip() == "hi"


@pytest.mark.skipif(not _toolchains.host_jdks(), reason="no JDK under /usr/lib/jvm")
def test_a_maven_image_has_mvn_and_the_jdk_of_its_tag(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    from repogym.sandbox import _maven_image

    if not _maven_image.host_mavens():
        pytest.skip("no Maven under /usr on this host")
    major = sorted(_toolchains.host_jdks(), key=int)[0]
    ctx = make_context(
        tmp_path / "ctx",
        f"""\
        FROM maven:3.9.6-eclipse-temurin-{major}
        RUN mvn -v > /mvn-version.txt
        """,
        {},
    )
    built = sandbox.build(_spec(ctx))
    assert built.base_mapping["host"].endswith(f"with JDK {major}")
    assert built.base_mapping["maven"] in built.base_mapping["note"]
    with sandbox.start(built, _spec(ctx)) as session:
        out = session.exec("cat /mvn-version.txt", timeout_s=60).stdout
    assert f"Apache Maven {built.base_mapping['maven']}" in out
    assert f"Java version: {major}" in out


def test_include_parts_cover_exactly_the_entries_with_their_folders() -> None:
    from repogym.sandbox._layerfs import include_parts

    include = {f"d{i % 7}/sub/file-{i:05d}.xml" for i in range(3000)}
    include |= {f"d{i}/" for i in range(7)} | {f"d{i}/sub/" for i in range(7)} | {"empty/"}
    assert include_parts({"a/", "a/b"}) == [{"a/", "a/b"}]  # small: one request, as it was
    parts = include_parts(include, limit=4096)
    assert len(parts) > 10
    assert set().union(*parts) == include  # nothing more, nothing less
    for part in parts:
        assert part is not None
        for entry in part:  # every entry's folders travel with it
            bits = entry.rstrip("/").split("/")[:-1]
            assert all("/".join(bits[: i + 1]) + "/" in part for i in range(len(bits)))
    assert include_parts(None) == [None]


def test_copy_of_a_folder_with_thousands_of_files(sandbox: LocalSandbox, tmp_path: Path) -> None:
    """The list of a big folder's entries no longer fits one request to the file worker
    (woodstox's test suites: 'Message too long'); ignored files stay out."""
    files = {
        f"repo/src/test/resources/suite-{i // 500:02d}/case-with-a-long-name-{i:05d}.xml": "<x/>"
        for i in range(6000)
    }
    files["repo/skip.log"] = "no"
    files[".dockerignore"] = "repo/*.log\n"
    ctx = make_context(
        tmp_path / "ctx",
        """\
        FROM debian:bookworm
        COPY repo/ /workspace/
        RUN find /workspace -type f | wc -l > /count.txt
        """,
        files,
    )
    built = sandbox.build(_spec(ctx))
    with sandbox.start(built, _spec(ctx)) as session:
        assert session.exec("cat /count.txt", timeout_s=60).stdout.strip() == "6000"
        assert session.exec("test -e /workspace/skip.log", timeout_s=60).exit_code != 0
