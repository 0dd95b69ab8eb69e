"""``GET /api/search`` answered by the plain-ASGI fast path is the routed answer, byte for byte:
status, body, ETag/304, Cache-Control, gzip and Vary, security headers; bad parameters are
still 400 with the reason. Runs over a real snapshot built from in-memory environments."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from repogym.explorer.build import build_snapshot  # noqa: E402
from repogym.explorer.index import MemoryReader  # noqa: E402
from repogym.explorer.model import EnvDoc, Section, TaskDoc  # noqa: E402
from repogym.explorer.store import open_store  # noqa: E402
from repogym.explorer.web import create_app  # noqa: E402

QUERIES = [
    "",
    "q=parser",
    "q=par",
    "q=parser%20cache&sort=name",
    "q=p",
    "kind=rows",
    "f=language:python&f=category:bugfix",
    "f=language:go&sort=tasks&page=2&size=3",
    "q=%22NEAR%28a%29%22*",
    "q=%C3%BCber",
    "q=caf%E9",  # not UTF-8
    "size=100",
    "page=9999",
    "q=parser&page=1",
    # bad parameters: 400 with the reason, from the routed handler
    "page=0",
    "size=1000",
    "sort=random",
    "f=nocolon",
    "f=secret:x",
    "q=" + "x" * 600,
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    readers = []
    langs = ("python", "go", "rust")
    for i in range(40):
        env = EnvDoc(
            f"env-{i}",
            ("harbor", "rows")[i % 2],
            f"Parser cache {i}" if i % 3 else f"Über router {i}",
            f"Tasks about parsers and caches, number {i}.",
            facets={"language": langs[i % 3]},
        )
        tasks = [
            TaskDoc(
                f"t{j}",
                f"Fix parser {j}",
                "Parse the input.",
                {"language": langs[i % 3], "category": ("bugfix", "feature")[j % 2]},
                "tests",
                "python:3.12",
                "no-network",
                True,
                [Section("instruction", "Instruction", "Parse the input.\n")],
                [],
            )
            for j in range(1 + i % 4)
        ]
        readers.append(MemoryReader(env, tasks))
    out = tmp_path_factory.mktemp("snap")
    build_snapshot(readers, out)
    s = open_store(snapshot=out)
    yield s
    s.close()


def _same(fast, slow) -> None:  # type: ignore[no-untyped-def]
    assert fast.status_code == slow.status_code
    assert fast.content == slow.content
    drop = {"server-timing", "content-length"}
    fh = {k: v for k, v in fast.headers.items() if k not in drop}
    sh = {k: v for k, v in slow.headers.items() if k not in drop}
    assert fh == sh
    if "server-timing" in slow.headers:
        assert re.fullmatch(r"db;dur=[\d.]+, render;dur=[\d.]+", fast.headers["server-timing"])


@pytest.mark.parametrize("encoding", ["gzip", "identity"])
def test_fast_path_answers_like_the_routes(store, encoding: str) -> None:  # type: ignore[no-untyped-def]
    fast = TestClient(create_app(store))
    slow = TestClient(create_app(store, fast_search=False))
    headers = {"Accept-Encoding": encoding}
    seen_gzip = False
    for query in QUERIES:
        url = "/api/search" + ("?" + query if query else "")
        for _ in range(2):  # computed, then from the cache
            a = fast.get(url, headers=headers)
            b = slow.get(url, headers=headers)
            _same(a, b)
        if a.status_code == 200:
            assert a.headers["etag"].startswith('W/"')
            seen_gzip |= a.headers.get("content-encoding") == "gzip"
            c = fast.get(url, headers={**headers, "If-None-Match": a.headers["etag"]})
            d = slow.get(url, headers={**headers, "If-None-Match": a.headers["etag"]})
            assert c.status_code == 304
            _same(c, d)
        else:
            assert a.status_code == 400 and a.json()["error"]
    assert seen_gzip == (encoding == "gzip")


def test_fast_path_gzip_body_is_the_json(store) -> None:  # type: ignore[no-untyped-def]
    app = create_app(store)
    client = TestClient(app)
    r = client.get("/api/search?size=100", headers={"Accept-Encoding": "gzip"})
    assert r.headers["content-encoding"] == "gzip" and r.headers["vary"] == "Accept-Encoding"
    raw = client.get("/api/search?size=100", headers={"Accept-Encoding": "identity"})
    assert r.json() == raw.json() and raw.json()["total"] == 40


def test_other_methods_and_paths_go_to_the_routes(store) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(create_app(store))
    assert client.post("/api/search").status_code == 405
    assert client.head("/api/search").status_code == 405
    assert client.get("/api/search/tasks?q=parser").json()["total"] > 0
