"""``COPY --from=ghcr.io/astral-sh/uv:<version>`` without a registry (the uv wheel from a package
index's JSON API: the build log says so), against package indexes
shaped like the ones that broke it: wheel URLs relative to the JSON page, and macOS or Windows
wheels listed before the Linux one (whose binary is the only one this host can run)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repogym.sandbox import BuildError, EnvironmentSpec
from repogym.sandbox.local import LocalSandbox
from tests.sandbox.conftest import make_context

ARCH = {"amd64": "x86_64", "arm64": "aarch64"}.get(os.uname().machine, os.uname().machine)
OTHER_ARCH = "aarch64" if ARCH == "x86_64" else "x86_64"


def _wheel(version: str, says: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name in ("uv", "uvx"):
            script = f"#!/bin/sh\necho {name} {version} {says}\n"
            zf.writestr(f"uv-{version}.data/scripts/{name}", script)
        zf.writestr(f"uv-{version}.dist-info/METADATA", f"Name: uv\nVersion: {version}\n")
    return buf.getvalue()


def _platforms(version: str) -> dict[str, str]:
    """Wheel file name → the platform its script names, in PyPI's (alphabetical) order."""
    tail = f"uv-{version}-py3-none-"
    return {
        f"{tail}macosx_10_12_{ARCH}.whl": "macos",
        f"{tail}macosx_11_0_arm64.whl": "macos-arm",
        f"{tail}manylinux_2_17_{OTHER_ARCH}.manylinux2014_{OTHER_ARCH}.whl": "other-arch",
        f"{tail}manylinux_2_17_{ARCH}.manylinux2014_{ARCH}.whl": "manylinux",
        f"{tail}musllinux_1_1_{ARCH}.whl": "musllinux",
        f"{tail}win_amd64.whl": "windows",
    }


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, list[str]], None]]:
    """A package index's JSON API on 127.0.0.1 whose file URLs are relative to the page
    (``../../../files/<name>`` from ``/pypi/uv/<version>/json``); ``serve(version, names)``
    publishes the wheels ``names`` of that version. Version 0.9.2 lists its sha256 under
    PEP 691's key (``hashes``)."""
    published: dict[str, dict[str, bytes]] = {}
    pep691_names = {"0.9.2"}
    # Versions whose release page answers 404, as a proxy that serves only project pages does.
    project_page_only = {"0.9.4"}

    def listing(version: str, up: str) -> list[dict[str, object]]:
        # PEP 691 calls them "hashes"; PyPI's JSON API "digests".
        hashes_key = "hashes" if version in pep691_names else "digests"
        return [
            {
                "filename": name,
                "url": f"{up}files/{name}",
                hashes_key: {"sha256": hashlib.sha256(data).hexdigest()},
            }
            for name, data in published[version].items()
        ]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            parts = self.path.strip("/").split("/")
            body: bytes | None = None
            if len(parts) == 4 and parts[:2] == ["pypi", "uv"] and parts[3] == "json":
                if parts[2] in published and parts[2] not in project_page_only:
                    urls = listing(parts[2], "../../../")
                    body = json.dumps({"info": {"version": parts[2]}, "urls": urls}).encode()
            elif parts == ["pypi", "uv", "json"] and published:
                releases = {v: listing(v, "../../") for v in published}
                newest = sorted(published)[-1]
                page = {"info": {"version": newest}, "urls": releases[newest], "releases": releases}
                body = json.dumps(page).encode()
            elif len(parts) == 2 and parts[0] == "files":
                body = next((f[parts[1]] for f in published.values() if parts[1] in f), None)
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    def serve(version: str, names: list[str]) -> None:
        says = _platforms(version)
        published[version] = {n: _wheel(version, says[n]) for n in names}

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("REPOGYM_PYPI_JSON", f"http://127.0.0.1:{server.server_address[1]}/pypi")
    yield serve
    server.shutdown()


def _spec(ctx: Path) -> EnvironmentSpec:
    return EnvironmentSpec(context_dir=ctx, network_mode="no-network")


def _uv_context(root: Path, version: str) -> Path:
    line = f"COPY --from=ghcr.io/astral-sh/uv:{version} /uv /uvx /bin/"
    return make_context(root, f"FROM debian:bookworm\n{line}\n")


@pytest.fixture
def uv_sandbox(sandbox: LocalSandbox) -> LocalSandbox:
    if sandbox.registries:
        pytest.skip("a registry is configured: the pull path would be used")
    return sandbox


def test_the_linux_wheel_for_this_machine_is_chosen_from_relative_urls(
    uv_sandbox: LocalSandbox, index: Callable[[str, list[str]], None], tmp_path: Path
) -> None:
    index("0.9.1", list(_platforms("0.9.1")))
    ctx = _uv_context(tmp_path / "ctx", "0.9.1")
    built = uv_sandbox.build(_spec(ctx), log=tmp_path / "log")
    assert "uv 0.9.1 from PyPI" in (tmp_path / "log").read_text()
    with uv_sandbox.start(built, _spec(ctx)) as s:
        assert s.exec("uv; uvx").stdout == "uv 0.9.1 manylinux\nuvx 0.9.1 manylinux\n"


def test_musllinux_is_taken_when_there_is_no_manylinux_wheel(
    uv_sandbox: LocalSandbox, index: Callable[[str, list[str]], None], tmp_path: Path
) -> None:
    names = [n for n, says in _platforms("0.9.2").items() if says != "manylinux"]
    index("0.9.2", names)
    ctx = _uv_context(tmp_path / "ctx", "0.9.2")
    built = uv_sandbox.build(_spec(ctx))
    with uv_sandbox.start(built, _spec(ctx)) as s:
        assert s.exec("uv").stdout == "uv 0.9.2 musllinux\n"


def test_no_wheel_this_machine_can_run_fails_the_build_in_one_line(
    uv_sandbox: LocalSandbox, index: Callable[[str, list[str]], None], tmp_path: Path
) -> None:
    names = [n for n, says in _platforms("0.9.3").items() if "linux" not in says]
    names.append(next(n for n, says in _platforms("0.9.3").items() if says == "other-arch"))
    index("0.9.3", names)
    with pytest.raises(BuildError, match="line 2:") as err:
        uv_sandbox.build(_spec(_uv_context(tmp_path / "ctx", "0.9.3")))
    msg = str(err.value)
    assert "\n" not in msg and f"no uv 0.9.3 wheel for Linux {ARCH}" in msg, msg


def test_a_release_missing_from_its_own_page_is_found_on_the_project_page(
    uv_sandbox: LocalSandbox, index: Callable[[str, list[str]], None], tmp_path: Path
) -> None:
    """Some proxies answer 404 for ``/pypi/<name>/<version>/json`` and serve the project
    page, whose ``releases`` list every version's files."""
    index("0.9.4", list(_platforms("0.9.4")))
    ctx = _uv_context(tmp_path / "ctx", "0.9.4")
    built = uv_sandbox.build(_spec(ctx))
    with uv_sandbox.start(built, _spec(ctx)) as s:
        assert s.exec("uv").stdout == "uv 0.9.4 manylinux\n"
    with pytest.raises(BuildError, match="PyPI has no uv 0.9.9"):
        uv_sandbox.build(_spec(_uv_context(tmp_path / "ctx2", "0.9.9")))
