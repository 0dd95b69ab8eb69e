"""Servers that trickle their answers: every network read of the explorer's adapters has a
total deadline, not only a per-read timeout. A real threaded socket server on 127.0.0.1 sends
one byte every 0.1 s forever; each call must give up with a one-line error naming the URL and
the deadline long before the server has sent 30 of those bytes."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from repogym.explorer.adapters import AdapterError
from repogym.explorer.adapters.openenv import OpenEnvReader

TICK = 0.1  # seconds between trickled bytes
MAX_TRICKLED = 30  # the call must be over before the server sent this many
DEADLINE = 0.5
PER_READ = 5.0  # far above TICK: a per-read timeout alone never fires


class Trickler:
    """Accepts connections and answers each one a byte at a time, forever.

    ``mode="body"`` sends a complete status line and headers at once, then trickles a body
    that never ends; ``mode="headers"`` trickles the status line itself."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.trickled = 0  # bytes sent one at a time, over every connection
        self.lock = threading.Lock()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.recv(65536)  # the request (small: one read is enough here)
            if self.mode == "body":
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 100000000\r\n\r\n"
                )
                drip = b" "  # JSON whitespace: a valid, endless prefix
            else:
                drip = b"H"  # "HHHH…": a status line that never ends
            while not self.stop.is_set():
                conn.sendall(drip)
                with self.lock:
                    self.trickled += 1
                time.sleep(TICK)

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()


@pytest.fixture(params=["body", "headers"])
def trickler(request: pytest.FixtureRequest) -> Iterator[Trickler]:
    t = Trickler(request.param)
    try:
        yield t
    finally:
        t.close()


def _one_line_deadline_error(exc: BaseException, url: str) -> None:
    msg = str(exc)
    assert "\n" not in msg
    assert url in msg, msg
    assert f"{DEADLINE:g} s deadline" in msg, msg


@pytest.mark.timeout(60)
def test_openenv_reader_gives_up_at_its_total_deadline(trickler: Trickler) -> None:
    with pytest.raises(AdapterError) as err:
        OpenEnvReader(trickler.url, timeout=PER_READ, deadline=DEADLINE)
    assert trickler.trickled < MAX_TRICKLED
    _one_line_deadline_error(err.value, f"{trickler.url}/health")


@pytest.mark.timeout(120)
def test_explore_index_openenv_does_not_hang(
    trickler: Trickler, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from repogym.cli import app
    from repogym.explorer.adapters import openenv

    monkeypatch.setattr(openenv, "DEADLINE_S", DEADLINE)
    res = CliRunner().invoke(
        app, ["explore", "index", "--openenv", trickler.url, "--out", str(tmp_path / "out")]
    )
    assert trickler.trickled < MAX_TRICKLED
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    assert f"{trickler.url}/health" in lines[0] and f"{DEADLINE:g} s deadline" in lines[0]


@pytest.mark.timeout(60)
def test_hub_probe_gives_up_at_its_deadline(trickler: Trickler) -> None:
    from repogym.explorer.adapters.hub import probe

    why = probe(trickler.url, timeout=DEADLINE)
    assert trickler.trickled < MAX_TRICKLED
    assert why is not None and "deadline" in why and trickler.url in why


@pytest.mark.timeout(60)
def test_hub_reader_gives_up_at_its_total_deadline(
    trickler: Trickler, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("huggingface_hub")
    from repogym.explorer.adapters.hub import HubReader

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(AdapterError) as err:
        HubReader("alice/tasks", endpoint=trickler.url, token="", deadline=DEADLINE)
    assert trickler.trickled < MAX_TRICKLED
    _one_line_deadline_error(err.value, f"{trickler.url}/api/datasets/alice/tasks")
