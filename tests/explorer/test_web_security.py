"""Attacks on the explorer web app over the real store (Harbor adapter, withholding, SQLite):
answers never leave on any route, no file outside a task can be read, FTS operators are data,
and markup from task data is escaped."""

from __future__ import annotations

import html
import http.client
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from fastapi.testclient import TestClient  # noqa: E402

from repogym.explorer.store import open_store  # noqa: E402
from repogym.explorer.web import create_app  # noqa: E402
from tests.explorer.web_fixtures import EXAMPLES, MARK, planted_dataset, serve  # noqa: E402

ENV, TASK = "secret-set", "leaky-task"
ANSWER_FILES = [
    "solution/solve.sh",
    "solution/patch.diff",
    "tests/expected_output.txt",
    "tests/rubric.json",
    "tests/hidden.patch",
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planted_dataset(tmp_path_factory.mktemp("web-sec"))


@pytest.fixture(scope="module")
def app(dataset: Path):  # type: ignore[no-untyped-def]
    return create_app(open_store([str(EXAMPLES), str(dataset)]))


@pytest.fixture(scope="module")
def client(app):  # type: ignore[no-untyped-def]
    return TestClient(app)


@pytest.fixture(scope="module")
def base_url(app):  # type: ignore[no-untyped-def]
    with serve(app) as url:
        yield url


def raw_get(base_url: str, path: str) -> tuple[int, bytes]:
    """GET a path exactly as written (no client-side normalisation of ``..`` or escapes)."""
    host = urlsplit(base_url)
    conn = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_accept_encoding=True)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_the_planted_task_is_there_and_says_what_was_withheld(client) -> None:  # type: ignore[no-untyped-def]
    doc = client.get(f"/api/tasks/{ENV}/{TASK}").json()
    paths = {f["path"]: f["withheld"] for f in doc["files"]}
    for p in ANSWER_FILES:
        assert paths[p], f"{p} should be withheld"
    assert paths["environment/link.txt"], "a symlink is listed, never followed"
    assert doc["withheld"], "the task says what was withheld"
    page = client.get(f"/t/{ENV}/{TASK}").text
    assert "What was withheld" in page
    for note in doc["withheld"]:
        assert html.escape(note) in page
    assert "withheld: solution (the answer)" in page


def _routes(client) -> list[str]:  # type: ignore[no-untyped-def]
    doc = client.get(f"/api/tasks/{ENV}/{TASK}").json()
    routes = [
        "/",
        "/?q=leaky",
        "/?q=security",
        f"/d/{ENV}",
        f"/d/{ENV}?q=leaky",
        f"/t/{ENV}/{TASK}",
        "/api/search",
        "/api/search?q=leaky",
        "/api/search?f=category:security",
        f"/api/search/tasks?env={ENV}",
        "/api/search/tasks?q=leaky",
        f"/api/envs/{ENV}",
        f"/api/tasks/{ENV}/{TASK}",
    ]
    for f in doc["files"]:
        p = quote(f["path"])
        routes += [f"/t/{ENV}/{TASK}?file={p}", f"/api/files/{ENV}/{TASK}/{p}"]
    return routes


def test_answers_never_leave_on_any_route(client) -> None:  # type: ignore[no-untyped-def]
    routes = _routes(client)
    assert len(routes) > 20
    served = 0
    for route in routes:
        r = client.get(route)
        assert r.status_code in (200, 403), (route, r.status_code)
        assert MARK.encode() not in r.content, f"answer leaked on {route}"
        served += r.status_code == 200
    assert served > 15
    # the grader script is shown, with its answers masked
    sh = client.get(f"/api/files/{ENV}/{TASK}/tests/test.sh")
    assert sh.status_code == 200 and b"diff -q" in sh.content


@pytest.mark.parametrize("path", ANSWER_FILES)
def test_answer_files_are_403_with_the_reason(client, path: str) -> None:  # type: ignore[no-untyped-def]
    raw = client.get(f"/api/files/{ENV}/{TASK}/{path}")
    assert raw.status_code == 403 and raw.text.startswith("withheld: ")
    assert MARK not in raw.text
    assert raw.headers["content-security-policy"].startswith("default-src 'none'")
    view = client.get(f"/t/{ENV}/{TASK}", params={"file": path})
    assert view.status_code == 403 and "Withheld:" in view.text and MARK not in view.text


def test_search_does_not_index_answers(client) -> None:  # type: ignore[no-untyped-def]
    for word in (MARK, f"{MARK}-toml-gold", f"{MARK}-solution"):
        assert client.get("/api/search/tasks", params={"q": word}).json()["total"] == 0
        assert client.get("/api/search", params={"q": word}).json()["total"] == 0


TRAVERSALS = [
    f"/api/files/{ENV}/{TASK}/../../outside-secret.txt",
    f"/api/files/{ENV}/{TASK}/environment/../../../outside-secret.txt",
    f"/api/files/{ENV}/{TASK}/%2e%2e/%2e%2e/outside-secret.txt",
    f"/api/files/{ENV}/{TASK}/%2E%2E%2F%2E%2E%2Foutside-secret.txt",
    f"/api/files/{ENV}/{TASK}/%252e%252e/%252e%252e/outside-secret.txt",
    f"/api/files/{ENV}/{TASK}/..%5c..%5coutside-secret.txt",
    f"/api/files/{ENV}/{TASK}//etc/passwd",
    f"/api/files/{ENV}/{TASK}/%2Fetc%2Fpasswd",
    f"/api/files/{ENV}/{TASK}/environment/link.txt",
    f"/api/files/{ENV}/{TASK}/environment/passwd",
    f"/api/files/{ENV}/{TASK}/environment/./link.txt",
    "/api/files/../../etc/passwd",
    "/api/files/%2e%2e/%2e%2e/etc/passwd",
    "/api/files//etc/passwd",
    f"/api/files/{ENV}/../{ENV}/{TASK}/solution/solve.sh",
    f"/api/files/{ENV}/{TASK}/solution/../solution/solve.sh",
    f"/api/files/{ENV}/{TASK}/environment/main.py%00.txt",
    f"/t/{ENV}/{TASK}?file=../outside-secret.txt",
    f"/t/{ENV}/{TASK}?file=%2e%2e%2foutside-secret.txt",
    f"/t/{ENV}/{TASK}?file=/etc/passwd",
    f"/t/{ENV}/{TASK}?file=environment/link.txt",
    f"/t/{ENV}/{TASK}?file=environment/passwd",
    f"/t/{ENV}/{TASK}?file=environment/../solution/solve.sh",
    f"/t/{ENV}/../../etc/passwd",
    f"/t/{ENV}/{TASK}/../../../outside-secret.txt",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_no_file_outside_the_task(base_url: str, path: str) -> None:
    status, body = raw_get(base_url, path)
    assert status in (400, 403, 404), (path, status, body[:200])
    assert MARK.encode() not in body
    assert b"root:x:0:0" not in body


def test_symlink_target_is_not_served_by_the_viewer(client) -> None:  # type: ignore[no-untyped-def]
    r = client.get(f"/t/{ENV}/{TASK}", params={"file": "environment/link.txt"})
    assert r.status_code in (403, 404)
    assert MARK not in r.text


FTS_ATTACKS = [
    '"',
    "'",
    '"unterminated',
    "*",
    "words*",
    "NEAR(count words)",
    "count NEAR words",
    "count OR zzzz",
    "count AND NOT words",
    "-words",
    "^count",
    "title:count",
    "{title summary}: count",
    ")(",
    "'; DROP TABLE tasks; --",
    "% _ \\",
    "count\u00a0words 🙂",
    "a" * 400,
]


@pytest.mark.parametrize("q", FTS_ATTACKS)
def test_fts_injection_is_plain_search(client, q: str) -> None:  # type: ignore[no-untyped-def]
    for route in ("/api/search", "/api/search/tasks"):
        r = client.get(route, params={"q": q})
        assert r.status_code == 200, (route, q, r.text[:200])
        body = r.json()
        assert isinstance(body["items"], list) and body["total"] >= 0
    assert client.get("/", params={"q": q}).status_code == 200


def test_operators_do_not_widen_a_search(client) -> None:  # type: ignore[no-untyped-def]
    plain = client.get("/api/search/tasks", params={"q": "words"}).json()
    assert any(t["id"] == "plain-task" for t in plain["items"])
    # "OR" is a word to find, not an operator: nothing has both "zzzz" and "OR"
    widened = client.get("/api/search/tasks", params={"q": "words OR zzzz"}).json()
    assert widened["total"] == 0


def test_markup_in_task_data_is_escaped(client) -> None:  # type: ignore[no-untyped-def]
    for route in (f"/t/{ENV}/{TASK}", f"/d/{ENV}", "/?q=leaky"):
        html = client.get(route).text
        assert "<script>alert" not in html and "<img src=x" not in html, route
        assert 'href="javascript:' not in html, route
    page = client.get(f"/t/{ENV}/{TASK}").text
    assert "&lt;script&gt;alert(&quot;xss&quot;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_raw_text_files_cannot_run_script(client) -> None:  # type: ignore[no-untyped-def]
    r = client.get(f"/api/files/{ENV}/{TASK}/instruction.md")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.headers["x-content-type-options"] == "nosniff"
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "sandbox" in csp
