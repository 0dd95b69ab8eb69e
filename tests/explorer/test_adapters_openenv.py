"""Live OpenEnv servers read as environments: a real ``repogym serve`` and hostile stubs."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from repogym.explorer import withhold
from repogym.explorer.adapters import AdapterError, pick
from repogym.explorer.adapters.openenv import OpenEnvAdapter, OpenEnvReader, parse_server_url
from tests.conftest import EXAMPLES

pytest.importorskip("openenv.core", reason="needs the openenv extra")

from tests.openenv.conftest import Server, free_port, start_server, stop_server  # noqa: E402

SECRET = "SECRET-EXPECTED-4411"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("explore-serve") / "server.log"
    cmd = [
        sys.executable, "-m", "repogym.cli", "serve", str(EXAMPLES), "--host", "127.0.0.1",
        "--port", "{port}", "--orchestrator-token", "t0ken-for-tests",
    ]  # fmt: skip
    srv = start_server(cmd, Path.cwd(), log)
    yield srv
    stop_server(srv)


@pytest.mark.slow
def test_repogym_serve_is_read_through_its_task_api(served: Server) -> None:
    assert pick(served.url).name == "openenv"
    reader = OpenEnvAdapter().open(served.url)
    env = reader.env()
    host = served.url.removeprefix("http://")
    assert (env.id, env.kind, env.task_count) == (host, "openenv", 2)
    assert env.title == f"repogym ({host})"
    assert "repogym coding tasks" in env.summary
    assert "`/{env}/tasks`" in env.description and "Action schema" in env.description
    labels = {o["label"]: o["command"] for o in env.run_options}
    assert f'GenericEnvClient(base_url="{served.url}")' in labels["Connect with GenericEnvClient"]
    assert labels["WebSocket"] == f"ws://{host}/ws"
    assert env.source == served.url

    ids = list(reader.task_ids())
    assert ids == ["hello-file", "textstats-word-count"]
    doc = reader.task("textstats-word-count")
    instruction = (EXAMPLES / "textstats-word-count" / "instruction.md").read_text()
    assert doc.sections[0].id == "instruction" and doc.sections[0].body == instruction
    assert doc.runnable and doc.grading == "reward-script"
    assert doc.facets == {
        "source": "openenv",
        "pipeline": "repogym",
        "reproducibility": "inline_dockerfile",
    }
    assert 'task_id=\\"textstats-word-count\\"' not in doc.sections[1].body
    assert 'task_id="textstats-word-count"' in doc.sections[1].body
    assert doc.summary and doc.title == "repogym-examples/textstats-word-count"


@pytest.mark.slow
def test_repogym_serve_task_api_exposes_no_solution(served: Server) -> None:
    """The server's Task API shows instructions only: no solution or hidden-test content."""
    reader = OpenEnvReader(served.url)
    secrets = []
    for task_dir in EXAMPLES.iterdir():
        for sub in ("solution", "tests"):
            for f in (task_dir / sub).rglob("*"):
                if f.is_file():
                    secrets += [
                        ln.strip() for ln in f.read_text().splitlines() if len(ln.strip()) > 25
                    ]
    assert secrets
    for tid in reader.task_ids():
        doc = withhold.apply(reader.task(tid))
        shown = "\n".join(s.body for s in doc.sections) + doc.summary
        leaked = [s for s in secrets if s in shown]
        assert not leaked, leaked
        assert doc.withheld == []  # nothing answer-like was even offered


def test_unreachable_server_is_one_line_error() -> None:
    port = free_port()
    with pytest.raises(AdapterError) as err:
        OpenEnvAdapter().open(f"http://127.0.0.1:{port}")
    assert f"cannot reach http://127.0.0.1:{port}/health" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://user:pa55word@127.0.0.1:9/", "credentials"),
        ("ftp://127.0.0.1/", "http://HOST:PORT"),
        ("http://127.0.0.1:9/?x=1", "no query"),
        ("http://127.0.0.1:99999/", "not a server URL"),
    ],
)
def test_bad_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(AdapterError) as err:
        parse_server_url(url)
    assert message in str(err.value) and "pa55word" not in str(err.value)


def test_url_forms() -> None:
    assert parse_server_url("http://localhost") == ("http://localhost:80", "localhost:80")
    assert parse_server_url("https://h.example:8443/base/") == (
        "https://h.example:8443/base",
        "h.example:8443",
    )
    assert OpenEnvAdapter().detect("/some/folder") == 0.0


class Stub:
    """A small OpenEnv-like server whose answers the test sets."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, Any, dict[str, str]]] = {}
        self.seen: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                stub.seen.append(self.path)
                code, body, headers = stub.routes.get(self.path, (404, {"detail": "nope"}, {}))
                data = json.dumps(body).encode()
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def set(self, path: str, body: Any, code: int = 200, **headers: str) -> None:
        self.routes[path] = (code, body, headers)


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    s.set("/health", {"status": "healthy"})
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def test_answer_like_task_fields_are_withheld(stub: Stub) -> None:
    stub.set("/metadata", {"name": "quiz", "description": "A quiz server."})
    stub.set("/tasks", {"tasks": [
        {"task_id": "q/1", "prompt": "Name a prime.", "expected_output": SECRET,
         "extra": {"nested": {"gold_answer": SECRET, "level": "easy"}}},
        {"id": "q2", "question": "2+2?", "answer": SECRET},
    ]})  # fmt: skip
    reader = OpenEnvAdapter().open(stub.url)
    assert reader.env().id == stub.url.removeprefix("http://")
    assert reader.env().task_count == 2
    assert list(reader.task_ids()) == ["q_1", "q2"]
    for tid in ("q_1", "q2"):
        doc = reader.task(tid)
        shown = json.dumps([doc.title, doc.summary, [s.body for s in doc.sections]])
        assert SECRET not in shown
        assert doc.withheld
    doc = reader.task("q_1")
    assert doc.sections[0].body == "Name a prime."
    assert '"level": "easy"' in doc.sections[-1].body
    assert "task field 'expected_output' withheld (answer-like)" in doc.withheld
    assert "task field 'extra.nested.gold_answer' withheld (answer-like)" in doc.withheld


def test_several_server_environments_and_names_stay_on_the_host(stub: Stub) -> None:
    stub.set("/openapi.json", {"paths": {"/list_environments": {}, "/{env}/tasks": {},
                                         "/{env}/tasks/{index}": {}}})  # fmt: skip
    stub.set("/list_environments", {"environments": [{"name": "a"}, {"name": "../x?y"}]})
    stub.set("/a/tasks", {"tasks": [{"task_id": "t1", "index": 0}]})
    stub.set("/..%2Fx%3Fy/tasks", {"tasks": [{"task_id": "t1", "index": 0}]})
    stub.set("/a/tasks/0", {"task_id": "t1", "instruction": "Do A."})
    reader = OpenEnvReader(stub.url)
    assert list(reader.task_ids()) == ["a.t1", "x_y.t1"]
    assert reader.task("a.t1").sections[0].body == "Do A."
    reader.task("x_y.t1")
    assert "/..%2Fx%3Fy/tasks/0" in stub.seen


def test_redirects_to_another_host_are_not_followed(stub: Stub) -> None:
    stub.set("/health", {}, 302, Location="http://203.0.113.9/health")
    with pytest.raises(AdapterError) as err:
        OpenEnvReader(stub.url)
    assert "redirect refused (to 203.0.113.9)" in str(err.value)


def test_server_without_task_api(stub: Stub) -> None:
    stub.set("/openapi.json", {"paths": {"/health": {}, "/reset": {}}})
    reader = OpenEnvReader(stub.url)
    assert reader.env().task_count is None
    with pytest.raises(AdapterError, match="no Task API"):
        list(reader.task_ids())


@pytest.mark.slow
def test_openenv_server_through_the_store(served: Server) -> None:
    from repogym.explorer.store import open_store

    host = served.url.removeprefix("http://")
    store = open_store(openenv=[served.url])
    try:
        found = store.search(kind="openenv")
        assert [c["id"] for c in found["items"]] == [host]
        page = store.task(host, "hello-file")
        assert page is not None and page["sections"][0]["id"] == "instruction"
        assert store.search_tasks("greeting", env=host)["total"] >= 1
    finally:
        close = getattr(store, "close", None)
        if close:
            close()
