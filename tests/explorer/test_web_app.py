"""HTTP semantics of the explorer app over an in-memory store: ETag/304, caching, timing,
gzip, security headers, versioned static files, query parsing and routes with ``org/name``."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from repogym.explorer.web import create_app  # noqa: E402
from tests.explorer.web_fake import sample_store  # noqa: E402


@pytest.fixture()
def store():  # type: ignore[no-untyped-def]
    return sample_store()


@pytest.fixture()
def client(store):  # type: ignore[no-untyped-def]
    return TestClient(create_app(store))


ROUTES = [
    "/",
    "/?q=local&sort=name",
    "/d/local-set",
    "/d/org/hub-set",
    "/t/local-set/fix-bug",
    "/t/org/hub-set/q-1",
    "/api/search?q=local",
    "/api/search/tasks?env=local-set",
    "/api/envs/org/hub-set",
    "/api/tasks/org/hub-set/q-1",
    "/api/files/local-set/fix-bug/src/app.py",
]


@pytest.mark.parametrize("path", ROUTES)
def test_weak_etag_and_304(client, store, path: str) -> None:  # type: ignore[no-untyped-def]
    r = client.get(path)
    assert r.status_code == 200, r.text
    etag = r.headers["etag"]
    assert re.fullmatch(r'W/"v1-[0-9a-f]{16}"', etag)
    assert r.headers["cache-control"].startswith("public, max-age=")
    assert re.fullmatch(r"db;dur=[\d.]+, render;dur=[\d.]+", r.headers["server-timing"])
    assert r.headers["x-content-type-options"] == "nosniff"
    calls = store.calls
    again = client.get(path, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag
    assert store.calls == calls  # a 304 costs no query
    # another query, another tag; a new snapshot version, another tag
    assert client.get(path + ("&" if "?" in path else "?") + "page=1").headers["etag"] != etag
    store.set_version("v2")
    r2 = client.get(path, headers={"If-None-Match": etag})
    assert r2.status_code == 200 and r2.headers["etag"].startswith('W/"v2-')


def test_search_cache_is_short_and_static_is_long_and_versioned(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/api/search").headers["cache-control"] == "public, max-age=30"
    home = client.get("/").text
    css = re.search(r'href="(/static/app\.[0-9a-f]{12}\.css)"', home).group(1)
    js = re.search(r'src="(/static/app\.[0-9a-f]{12}\.js)"', home).group(1)
    for url, ctype in ((css, "text/css"), (js, "text/javascript")):
        r = client.get(url)
        assert r.status_code == 200 and r.headers["content-type"].startswith(ctype)
        assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert client.get(url, headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    assert client.get("/static/app.css").status_code == 404
    assert client.get("/static/app.000000000000.css").status_code == 404


def test_pages_have_strict_csp_and_no_inline_script(client) -> None:  # type: ignore[no-untyped-def]
    for path in ("/", "/d/local-set", "/t/local-set/fix-bug?file=src/app.py"):
        r = client.get(path)
        csp = r.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert not re.search(r"<script(?![^>]*\bsrc=)", r.text)
        assert " style=" not in r.text and "<style" not in r.text
        assert "http://" not in r.text.split("<main")[0]  # no CDN, no external font


def test_gzip_for_html_and_json(client) -> None:  # type: ignore[no-untyped-def]
    r = client.get("/", headers={"Accept-Encoding": "gzip"})
    assert r.headers["content-encoding"] == "gzip"
    r = client.get("/api/tasks/local-set/fix-bug", headers={"Accept-Encoding": "gzip"})
    assert r.headers.get("content-encoding") == "gzip"
    r = client.get("/api/search", headers={"Accept-Encoding": "gzip"})
    assert r.headers.get("content-encoding") in (None, "gzip")  # tiny bodies stay plain


def test_search_api_shape_and_facets(client) -> None:  # type: ignore[no-untyped-def]
    body = client.get("/api/search").json()
    assert body["total"] == 2 and {c["id"] for c in body["items"]} == {"local-set", "org/hub-set"}
    assert set(body["facets"]["kind"]) == {"harbor", "rows"}
    body = client.get("/api/search?f=category:math").json()
    assert [c["id"] for c in body["items"]] == ["org/hub-set"]
    body = client.get("/api/search?kind=harbor&size=1&page=1").json()
    assert body["total"] == 1 and body["size"] == 1
    tasks = client.get("/api/search/tasks?env=local-set&q=flag").json()
    assert [t["id"] for t in tasks["items"]] == ["add-feature"]


@pytest.mark.parametrize(
    "query",
    [
        "page=0",
        "page=abc",
        "size=1000",
        "sort=random",
        "f=nocolon",
        "f=category:",
        "f=secret_column:x",
        "q=" + "x" * 600,
    ],
)
def test_bad_query_is_400_with_reason(client, query: str) -> None:  # type: ignore[no-untyped-def]
    r = client.get("/api/search?" + query)
    assert r.status_code == 400
    assert r.json()["error"]
    page = client.get("/?" + query)
    assert page.status_code == 400 and "Bad request" in page.text


def test_routes_404(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/d/nope").status_code == 404
    assert client.get("/t/local-set/nope").status_code == 404
    assert client.get("/t/nope").status_code == 404
    assert client.get("/api/envs/nope").status_code == 404
    assert client.get("/api/tasks/local-set").status_code == 404
    assert client.get("/api/files/local-set/fix-bug/missing.py").status_code == 404
    assert client.get("/t/local-set/fix-bug?file=missing.py").status_code == 404


def test_home_state_lives_in_the_url(client) -> None:  # type: ignore[no-untyped-def]
    html = client.get("/?q=set&kind=harbor&f=category:bugfix&sort=name").text
    assert 'value="set"' in html
    # the active kind chip and facet are marked, and links keep the other parts of the state
    assert (
        'class="chip on" href="/?q=set&amp;kind=harbor&amp;f=category%3Abugfix&amp;sort=name"'
        in html
    )
    assert 'name="f" value="category:bugfix"' in html
    assert 'class="on" href="/?q=set&amp;kind=harbor&amp;sort=name"' in html  # untoggle


def test_task_page_sections_files_and_viewer(client) -> None:  # type: ignore[no-untyped-def]
    html = client.get("/t/local-set/fix-bug").text
    assert "Fix the &lt;script&gt;alert(1)&lt;/script&gt; bug" in html
    assert "<script>alert" not in html
    assert "What was withheld" in html and "solution/ (the answer): 1 file" in html
    assert "withheld: solution (the answer)" in html
    assert "/t/local-set/fix-bug?file=solution" not in html  # no link to a withheld file
    assert "&lt;em&gt;now&lt;/em&gt;" in html  # raw HTML in Markdown is text
    view = client.get("/t/local-set/fix-bug?file=src/app.py")
    assert 'id="L6"' in view.text and 'href="#L6"' in view.text
    assert '<span class="tok-kw">def</span>' in view.text
    withheld = client.get("/t/local-set/fix-bug?file=solution/solve.sh")
    assert withheld.status_code == 403 and "Withheld: solution (the answer)" in withheld.text


def test_raw_files(client) -> None:  # type: ignore[no-untyped-def]
    r = client.get("/api/files/local-set/fix-bug/src/app.py")
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.headers["content-security-policy"].startswith("default-src 'none'; sandbox")
    assert r.content.startswith(b"import sys")
    b = client.get("/api/files/local-set/fix-bug/blob.bin")
    assert b.headers["content-type"] == "application/octet-stream"
    assert b.headers["content-disposition"].startswith("attachment")
    w = client.get("/api/files/local-set/fix-bug/solution/solve.sh")
    assert w.status_code == 403 and w.text == "withheld: solution (the answer)\n"


def test_task_json_has_no_file_bytes(client) -> None:  # type: ignore[no-untyped-def]
    doc = client.get("/api/tasks/local-set/fix-bug").json()
    assert doc["env"] == "local-set" and doc["id"] == "fix-bug"
    assert {f["path"] for f in doc["files"]} >= {"src/app.py", "solution/solve.sh"}
    assert "data" not in json.dumps(doc["files"])


def test_search_results_are_cached_per_snapshot_version(store) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(create_app(store))
    first = client.get("/api/search?q=local")
    calls = store.calls
    again = client.get("/api/search?q=local&page=1")  # same query, other URL: from the cache
    assert again.json() == first.json() and store.calls == calls
    assert again.headers["server-timing"].startswith("db;dur=0.00")
    store.set_version("v2")  # a new snapshot: the cached answer is not reused
    client.get("/api/search?q=local")
    assert store.calls == calls + 1
    off = TestClient(create_app(store, result_cache=0))
    off.get("/api/search?q=local")
    off.get("/api/search?q=local")
    assert store.calls == calls + 3


def test_odd_file_names_cannot_inject_headers() -> None:
    from urllib.parse import quote

    from repogym.explorer.model import EnvDoc, FileDoc, TaskDoc
    from tests.explorer.web_fake import FakeStore

    name = 'bad "ü"; filename=evil.exe.bin'
    crlf = "x\r\nX-Evil: 1.bin"
    files = [FileDoc(name, 2, b"\x00\xff"), FileDoc(crlf, 2, b"\x00\xff")]
    task = TaskDoc("t", "T", "", {}, "tests", "x", "unknown", False, [], files)
    client = TestClient(create_app(FakeStore([(EnvDoc("e", "harbor", "E", ""), [task])])))
    r = client.get("/api/files/e/t/" + quote(name))
    assert r.status_code == 200 and r.content == b"\x00\xff"
    assert r.headers["content-disposition"] == "attachment; filename*=UTF-8''" + quote(
        name, safe=""
    )
    bad = client.get("/api/files/e/t/" + quote(crlf))
    assert bad.status_code in (200, 404) and "x-evil" not in bad.headers
    page = client.get("/t/e/t", params={"file": name})
    assert page.status_code == 200 and "Binary file" in page.text


def test_a_listed_task_not_read_yet_says_so_and_is_not_cached() -> None:
    from repogym.explorer.model import EnvDoc, TaskDoc
    from tests.explorer.web_fake import FakeStore

    stub = TaskDoc("t1", "t1", "", {}, "unknown", "", "unknown", False, [], [])
    client = TestClient(create_app(FakeStore([(EnvDoc("e", "harbor", "E", ""), [stub])])))
    page = client.get("/t/e/t1")
    assert page.status_code == 200 and "Still indexing" in page.text
    assert "Nothing in this task looked like an answer" not in page.text
    assert page.headers["cache-control"] == "no-store"
    doc = client.get("/api/tasks/e/t1")
    assert doc.json()["pending"] is True and doc.headers["cache-control"] == "no-store"
