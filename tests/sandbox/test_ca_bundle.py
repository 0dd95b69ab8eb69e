"""``--ca-bundle``: a private CA (as a TLS-intercepting proxy has) is trusted inside sandboxes —
build steps and sessions — only when given, and never enters a layer or a cache key."""

from __future__ import annotations

import http.server
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.sandbox import EnvironmentSpec, SandboxError
from repogym.sandbox._cabundle import SANDBOX_PATH
from repogym.sandbox.local import LocalSandbox
from tests.hostnet import routed_ipv4

HOST = routed_ipv4()
pytestmark = pytest.mark.skipif(HOST is None, reason="no routed IPv4 address on this host")

FETCH = (
    "import sys, urllib.request; "
    "print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())"
)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on the routed address whose certificate a private CA signed."""
    d = tmp_path_factory.mktemp("tls")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=repogym test CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)  # fmt: skip
    (d / "ext.cnf").write_text(f"subjectAltName=IP:{HOST}\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={HOST}",
             "-keyout", "srv.key", "-out", "srv.csr", cwd=d)  # fmt: skip
    _openssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "srv.pem", cwd=d)  # fmt: skip

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b"through the proxy"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((HOST, 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / "srv.pem", d / "srv.key")
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://{HOST}:{server.server_address[1]}/", d / "ca.pem"
    finally:
        server.shutdown()
        server.server_close()


def _context(tmp_path: Path, url: str) -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(
        "FROM python:3.11-slim\n"
        f'RUN python3 -c "{FETCH}" {url} > /fetched && test "$SSL_CERT_FILE" = {SANDBOX_PATH}\n'
    )
    return ctx


def test_a_private_ca_is_trusted_only_when_given(
    tls_server: tuple[str, Path], tmp_path: Path, cache_dir: Path
) -> None:
    url, ca = tls_server
    spec = EnvironmentSpec(context_dir=_context(tmp_path, url), network_mode="public")
    plain = LocalSandbox()
    with pytest.raises(SandboxError, match="CERTIFICATE_VERIFY_FAILED"):
        plain.build(spec)

    sandbox = LocalSandbox(ca_bundle=ca)
    built = sandbox.build(spec)
    with sandbox.start(built, spec) as session:
        assert session.read("/fetched").decode().strip() == "through the proxy"
        res = session.exec(["python3", "-c", FETCH, url], timeout_s=60)
        assert res.exit_code == 0 and res.stdout.strip() == "through the proxy", res.stderr
        assert session.exec(f"test -r {SANDBOX_PATH} && ! test -w {SANDBOX_PATH}").exit_code == 0
        assert session.exec("echo $REQUESTS_CA_BUNDLE").stdout.strip() == SANDBOX_PATH
    # Not in any layer: the step's files hold no copy of the bundle.
    for key, _paths in built.details["layers"]:  # type: ignore[union-attr]
        layer = sandbox.store.path(key)
        assert not list(layer.rglob("ca-bundle.pem")), key
    # Nor in the cache key: without the bundle the same build is served from the cache.
    again = LocalSandbox().build(spec)
    assert again.key == built.key and again.details["cache_misses"] == 0


def test_a_file_without_certificates_is_refused(tmp_path: Path, cache_dir: Path) -> None:
    bogus = tmp_path / "bundle.pem"
    bogus.write_text("not a certificate\n")
    with pytest.raises(SandboxError, match="no PEM certificate"):
        LocalSandbox(ca_bundle=bogus)
    with pytest.raises(SandboxError, match="bundle"):
        LocalSandbox(ca_bundle=tmp_path / "missing.pem")


def test_a_task_ca_path_that_is_missing_is_replaced_by_the_bundle(
    tls_server: tuple[str, Path], tmp_path: Path, cache_dir: Path
) -> None:
    """A Dockerfile naming the proxy CA its builder was meant to inject (a file that is not
    there) gets the bundle instead; a variable naming a file that exists keeps its value."""
    url, ca = tls_server
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(
        "FROM python:3.11-slim\n"
        "ENV SSL_CERT_FILE=/usr/local/share/ca-certificates/fwdproxy.crt\n"
        "ENV CURL_CA_BUNDLE=/etc/hostname\n"
        f'RUN python3 -c "{FETCH}" {url} > /fetched\n'
    )
    spec = EnvironmentSpec(context_dir=ctx, network_mode="public")
    with pytest.raises(SandboxError, match="CERTIFICATE_VERIFY_FAILED"):
        LocalSandbox().build(spec)  # without the bundle the missing file is just missing
    sandbox = LocalSandbox(ca_bundle=ca)
    built = sandbox.build(spec)
    with sandbox.start(built, spec) as session:
        assert session.read("/fetched").decode().strip() == "through the proxy"
        assert session.exec("echo $SSL_CERT_FILE").stdout.strip() == SANDBOX_PATH
        assert session.exec("echo $CURL_CA_BUNDLE").stdout.strip() == "/etc/hostname"
