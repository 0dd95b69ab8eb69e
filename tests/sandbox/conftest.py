"""Fixtures for the local sandbox tests: a private layer cache and small Dockerfiles."""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repogym.sandbox import BuiltEnvironment, EnvironmentSpec
from repogym.sandbox.local import LocalSandbox

TINY_BACKEND = """\
import base64, hashlib, os, zipfile

NAME, VERSION = "tinypkg", "0.1"


def _add(zf, name, data):
    zf.writestr(name, data)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    fname = f"{NAME}-{VERSION}-py3-none-any.whl"
    info = f"{NAME}-{VERSION}.dist-info"
    with zipfile.ZipFile(os.path.join(wheel_directory, fname), "w") as zf:
        with open(f"{NAME}/__init__.py", "rb") as fh:
            rec = [_add(zf, f"{NAME}/__init__.py", fh.read())]
        meta = f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n".encode()
        rec.append(_add(zf, f"{info}/METADATA", meta))
        wheel = b"Wheel-Version: 1.0\\nGenerator: tiny\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
        rec.append(_add(zf, f"{info}/WHEEL", wheel))
        zf.writestr(f"{info}/RECORD", "\\n".join([*rec, f"{info}/RECORD,,"]) + "\\n")
    return fname
"""


def write_tiny_package(root: Path) -> Path:
    """A pip-installable source folder that needs no index (in-tree PEP 517 backend)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [build-system]
            requires = []
            build-backend = "tinybackend"
            backend-path = ["."]

            [project]
            name = "tinypkg"
            version = "0.1"
            """
        )
    )
    (root / "tinybackend.py").write_text(TINY_BACKEND)
    (root / "tinypkg").mkdir(exist_ok=True)
    (root / "tinypkg" / "__init__.py").write_text('def hello():\n    return "hi from tinypkg"\n')
    return root


def make_context(root: Path, dockerfile: str, files: dict[str, str] | None = None) -> Path:
    """A build context folder with a Dockerfile and extra files."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "Dockerfile").write_text(textwrap.dedent(dockerfile))
    for rel, content in (files or {}).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    return root


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private ``REPOGYM_CACHE`` for the whole test session."""
    path = tmp_path_factory.mktemp("repogym-cache")
    old = os.environ.get("REPOGYM_CACHE")
    os.environ["REPOGYM_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("REPOGYM_CACHE", None)
    else:
        os.environ["REPOGYM_CACHE"] = old


@pytest.fixture(scope="session")
def sandbox(cache_dir: Path) -> LocalSandbox:
    ok, why = LocalSandbox.available()
    if not ok:
        pytest.skip(why)
    sb = LocalSandbox()
    assert sb.cache_root == cache_dir
    return sb


@pytest.fixture(scope="session")
def py_env(
    sandbox: LocalSandbox, tmp_path_factory: pytest.TempPathFactory
) -> tuple[BuiltEnvironment, EnvironmentSpec]:
    """``FROM python:3.11-slim`` with a pip-installed local package and a workdir."""
    ctx = tmp_path_factory.mktemp("py-ctx")
    write_tiny_package(ctx / "pkg")
    make_context(
        ctx,
        """\
        FROM python:3.11-slim
        ENV APP_HOME=/app
        WORKDIR $APP_HOME
        COPY pkg /src/pkg
        RUN pip install --no-index --no-build-isolation /src/pkg
        RUN echo ready > /app/marker
        """,
    )
    spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network")
    return sandbox.build(spec), spec


@pytest.fixture(scope="session")
def deb_env(
    sandbox: LocalSandbox, tmp_path_factory: pytest.TempPathFactory
) -> tuple[BuiltEnvironment, EnvironmentSpec]:
    """``FROM debian:bookworm`` with a non-root user."""
    ctx = make_context(
        tmp_path_factory.mktemp("deb-ctx"),
        """\
        FROM debian:bookworm
        RUN useradd -m -u 1234 app && mkdir -p /work && chown app /work
        WORKDIR /work
        """,
    )
    spec = EnvironmentSpec(context_dir=ctx, network_mode="no-network")
    return sandbox.build(spec), spec


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker``."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found.append(int(entry))
    return found


def settled(check: Callable[[], bool], within_s: float = 10.0) -> bool:
    """Whether ``check()`` holds within ``within_s``: a SIGKILLed process leaves the process
    table a moment later, a backgrounded command appears a moment after ``exec`` returns
    (longer on a loaded machine). Not a speed assertion: it only bounds the wait."""
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def host_mounts_mentioning(text: str) -> list[str]:
    with open("/proc/self/mountinfo") as fh:
        return [line for line in fh if text in line]
