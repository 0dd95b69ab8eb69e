"""Sitemaps, robots.txt and per-page meta tags, over real snapshots served by uvicorn.

The big snapshot has 20,500 public tasks (three task shards), a private environment and one a
curator hides, placed between public ones; every URL of every shard is checked."""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402

from repogym.explorer import sitemap  # noqa: E402
from repogym.explorer.build import build_snapshot  # noqa: E402
from repogym.explorer.index import MemoryReader  # noqa: E402
from repogym.explorer.model import EnvDoc, Section, TaskDoc  # noqa: E402
from repogym.explorer.store import open_store  # noqa: E402
from repogym.explorer.web import create_app  # noqa: E402
from repogym.explorer.web.seo import normalize_public_url  # noqa: E402
from tests.explorer.web_fixtures import EXAMPLES, MARK, planted_dataset, serve  # noqa: E402

NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
PUBLIC_URL = "https://explore.example.org"
# env id -> task count; "secret-corp" is private, "hidden-set" hidden by the curator
ENVS = {
    "big-a": 12_000,
    "secret-corp": 40,
    "org/small": 50,
    "hidden-set": 30,
    "big-b": 8_449,
    "weird": 1,
}
PUBLIC = ("big-a", "org/small", "big-b", "weird")
WEIRD_TASK = "a b&c<d>"


def _task(tid: str) -> TaskDoc:
    text = f"Do {tid}."
    return TaskDoc(
        tid, tid, text, {}, "tests", "python:3.12", "no-network", False,
        [Section("instruction", "Instruction", text)], [],
    )  # fmt: skip


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    readers = []
    for env_id, n in ENVS.items():
        env = EnvDoc(env_id, "harbor", env_id, f"The {env_id} set", private=env_id == "secret-corp")
        ids = [WEIRD_TASK] if env_id == "weird" else [f"t{i:05d}" for i in range(n)]
        readers.append(MemoryReader(env, [_task(t) for t in ids]))
    out = tmp_path_factory.mktemp("seo-snap")
    build_snapshot(readers, out, include_private=True)
    store = open_store(snapshot=out)
    yield store
    store.close()


class Curator:
    """What a curation reader answers: a set of hidden environment ids, changeable."""

    def __init__(self) -> None:
        self.ids = {"hidden-set"}

    def hidden(self, env_id: str) -> bool:
        return env_id in self.ids


@pytest.fixture(scope="module")
def curator() -> Curator:
    return Curator()


@pytest.fixture(scope="module")
def big_url(big_store: Any, curator: Curator) -> Iterator[str]:
    with serve(create_app(big_store, hidden=curator.hidden, public_url="")) as url:
        yield url


def _xml(r: httpx.Response, root: str) -> ET.Element:
    assert r.status_code == 200, r.text[:200]
    assert r.headers["content-type"].startswith("application/xml")
    assert r.content.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    tree = ET.fromstring(r.content)
    assert tree.tag == NS + root  # the sitemaps namespace
    return tree


def _locs(tree: ET.Element, item: str) -> list[str]:
    locs = []
    for el in tree:
        assert el.tag == NS + item
        loc = el.find(NS + "loc")
        assert loc is not None and loc.text
        locs.append(loc.text)
    return locs


def _all_urls(base: str, client: httpx.Client) -> tuple[list[str], list[list[str]]]:
    index = _xml(client.get("/sitemap.xml"), "sitemapindex")
    shards = _locs(index, "sitemap")
    for el in index:
        lastmod = el.find(NS + "lastmod")
        assert lastmod is not None and re.fullmatch(
            r"\d{4}-\d\d-\d\dT[\d:]+\+00:00", lastmod.text or ""
        )
    out = []
    for loc in shards:
        assert loc.startswith(base + "/sitemap-")
        out.append(_locs(_xml(client.get(loc.removeprefix(base)), "urlset"), "url"))
    return shards, out


def _expected_tasks(base: str, hidden: set[str]) -> set[str]:
    want = set()
    for env_id, n in ENVS.items():
        if env_id == "secret-corp" or env_id in hidden:
            continue
        ids = [WEIRD_TASK] if env_id == "weird" else [f"t{i:05d}" for i in range(n)]
        want |= {f"{base}/t/{quote(env_id, safe='/:@')}/{quote(t, safe=':@')}" for t in ids}
    return want


def test_sitemap_index_and_shards_hold_every_public_page_once(big_url: str) -> None:
    with httpx.Client(base_url=big_url) as client:
        shards, urls = _all_urls(big_url, client)
    # one shard for the home and environment pages, three for 20,500 tasks
    assert shards == [f"{big_url}/sitemap-{n}.xml" for n in range(1, 5)]
    assert all(len(u) <= sitemap.SHARD_SIZE for u in urls)
    assert [len(u) for u in urls] == [1 + len(PUBLIC), 10_000, 10_000, 500]
    everything = [u for shard in urls for u in shard]
    assert len(everything) == len(set(everything))
    assert all(u.startswith(big_url + "/") for u in everything)  # absolute
    assert urls[0] == [f"{big_url}/"] + [f"{big_url}/d/{e}" for e in PUBLIC]
    assert set(everything[len(urls[0]) :]) == _expected_tasks(big_url, {"hidden-set"})
    assert f"{big_url}/t/weird/a%20b%26c%3Cd%3E" in everything  # encoded, then XML-escaped
    for gone in ("secret-corp", "hidden-set"):
        assert not [u for u in everything if f"/{gone}" in u]


def test_a_shard_url_answers_its_page(big_url: str) -> None:
    with httpx.Client(base_url=big_url) as client:
        _, urls = _all_urls(big_url, client)
        for u in (urls[0][1], urls[1][0], urls[3][-1]):
            assert client.get(u.removeprefix(big_url)).status_code == 200


def test_hiding_an_environment_changes_the_sitemap_and_its_etag(
    big_url: str, curator: Curator
) -> None:
    with httpx.Client(base_url=big_url) as client:
        first = client.get("/sitemap-4.xml")
        etag = first.headers["etag"]
        assert client.get("/sitemap-4.xml", headers={"If-None-Match": etag}).status_code == 304
        curator.ids.add("org/small")
        try:
            again = client.get("/sitemap-4.xml", headers={"If-None-Match": etag})
            assert again.status_code == 200 and again.headers["etag"] != etag
            _, urls = _all_urls(big_url, client)
        finally:
            curator.ids.discard("org/small")
    everything = [u for shard in urls for u in shard]
    assert not [u for u in everything if "/org/small" in u]
    assert set(everything[len(urls[0]) :]) == _expected_tasks(big_url, {"hidden-set", "org/small"})


def test_no_such_shard_is_404(big_url: str) -> None:
    for path in ("/sitemap-0.xml", "/sitemap-5.xml", "/sitemap-999999.xml", "/sitemap-x.xml"):
        assert httpx.get(big_url + path).status_code == 404


class _Counting:
    """A reader whose connection counts the task rows each query returns."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.task_rows = 0

    def acquire(self) -> tuple[Any, Any]:
        h, db = self.reader.acquire()
        outer = self

        class Db:
            def execute(self, sql: str, args: Any = ()) -> Iterator[Any]:
                for row in db.execute(sql, args):
                    if "FROM tasks" in sql:
                        outer.task_rows += 1
                    yield row

        return h, Db()


def test_a_shard_reads_only_its_own_rows(big_store: Any) -> None:
    counting = _Counting(big_store.reader)
    store = type("S", (), {"reader": counting})()
    plan = sitemap.plan(store, lambda e: e == "hidden-set")
    assert counting.task_rows == 0  # the plan reads environments only
    assert plan.shards == 4 and plan.tasks == 20_500
    for n in (2, 3, 4):
        counting.task_rows = 0
        rows = sitemap.task_shard(store, plan, n)
        assert rows is not None and counting.task_rows == len(rows) <= sitemap.SHARD_SIZE


def test_configured_public_url_wins_and_unknown_hosts_get_no_sitemap(big_store: Any) -> None:
    with serve(create_app(big_store, public_url=PUBLIC_URL + "/")) as url:
        index = _xml(httpx.get(url + "/sitemap.xml"), "sitemapindex")
        assert _locs(index, "sitemap")[0] == PUBLIC_URL + "/sitemap-1.xml"
        shard = _locs(_xml(httpx.get(url + "/sitemap-1.xml"), "urlset"), "url")
        assert shard[0] == PUBLIC_URL + "/"
        robots = httpx.get(url + "/robots.txt").text
        assert f"Sitemap: {PUBLIC_URL}/sitemap.xml" in robots
        evil = httpx.get(url + "/sitemap.xml", headers={"Host": "evil.example"})
        assert PUBLIC_URL in evil.text and "evil" not in evil.text
    with serve(create_app(big_store, public_url="")) as url:
        bad = {"Host": "evil.example"}
        assert httpx.get(url + "/sitemap.xml", headers=bad).status_code == 404
        assert "Sitemap:" not in httpx.get(url + "/robots.txt", headers=bad).text
        page = httpx.get(url + "/d/big-a", headers=bad).text
        assert 'rel="canonical"' not in page and "og:url" not in page and "evil" not in page


@pytest.mark.parametrize(
    "value", ["ftp://x.org", "https://u:p@x.org", "https://x.org/?q=1", "x.org", "https://"]
)
def test_bad_public_urls_are_refused(value: str) -> None:
    with pytest.raises(ValueError):
        normalize_public_url(value)


def test_robots_txt(big_url: str) -> None:
    r = httpx.get(big_url + "/robots.txt")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    lines = r.text.splitlines()
    assert lines[:2] == ["User-agent: *", "Allow: /"]
    for path in ("/api/", "/play/", "/r/", "/runs", "/compare", "/mcp/"):
        assert f"Disallow: {path}" in lines
    assert f"Sitemap: {big_url}/sitemap.xml" in lines
    assert not [x for x in lines if x.startswith("Disallow: /t/") or x == "Disallow: /d/"]


# ---------------------------------------------------------------------------- meta tags


class _Head(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.meta: dict[str, str] = {}
        self.canonical: str | None = None
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "meta" and ("name" in a or "property" in a):
            self.meta[a.get("name") or a["property"]] = a.get("content", "")
        elif tag == "link" and a.get("rel") == "canonical":
            self.canonical = a.get("href")
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


def _head_text(page: str) -> str:
    return page[: page.index("</head>")]


@pytest.fixture(scope="module")
def planted_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ds = planted_dataset(tmp_path_factory.mktemp("seo-planted"))
    store = open_store([str(EXAMPLES), str(ds)])
    try:
        with serve(create_app(store)) as url:
            yield url
    finally:
        store.close()


PAGES = [
    ("/", 200, "/", "website"),
    ("/?q=leaky", 200, "/?q=leaky", "website"),
    ("/d/secret-set", 200, "/d/secret-set", "website"),
    ("/d/secret-set?page=1&q=words", 200, "/d/secret-set", "website"),
    ("/t/secret-set/leaky-task", 200, "/t/secret-set/leaky-task", "article"),
    (
        "/t/secret-set/leaky-task?file=environment/main.py",
        200,
        "/t/secret-set/leaky-task",
        "article",
    ),
    ("/t/secret-set/leaky-task?file=solution/solve.sh", 403, "/t/secret-set/leaky-task", "article"),
    ("/t/secret-set/leaky-task?file=tests/test.sh", 200, "/t/secret-set/leaky-task", "article"),
    ("/t/secret-set/plain-task", 200, "/t/secret-set/plain-task", "article"),
    ("/d/no-such-env", 404, "/d/no-such-env", "website"),
]


@pytest.mark.parametrize(("path", "status", "canonical", "kind"), PAGES)
def test_every_page_kind_has_meta_tags_and_no_answer_in_them(
    planted_url: str, path: str, status: int, canonical: str, kind: str
) -> None:
    r = httpx.get(planted_url + path)
    assert r.status_code == status
    head = _head_text(r.text)
    assert MARK not in head  # no gold patch, test, solution or expected output
    assert "<script>alert" not in head  # task data stays escaped in attributes
    p = _Head()
    p.feed(head)
    assert p.title.endswith(" · repogym explorer")
    for name in ("description", "og:title", "og:description", "og:url", "og:type", "og:site_name"):
        assert p.meta.get(name), name
        assert MARK not in p.meta[name]
    assert p.meta["twitter:card"] == "summary"
    assert p.meta["og:site_name"] == "repogym explorer"
    assert p.meta["og:type"] == kind
    assert p.canonical == p.meta["og:url"] == planted_url + canonical
    assert p.meta["og:description"] == p.meta["description"]
    assert len(p.meta["description"]) <= 200
    assert (p.meta.get("robots") == "noindex") == (status == 404)


def test_descriptions_come_from_what_the_page_shows(planted_url: str) -> None:
    def meta(path: str) -> dict[str, str]:
        p = _Head()
        p.feed(_head_text(httpx.get(planted_url + path).text))
        return p.meta

    task = meta("/t/secret-set/plain-task")["description"]
    assert task.startswith("Count the words") and "graded by" in task
    leaky = meta("/t/secret-set/leaky-task")["description"]
    assert (
        leaky.startswith("Write the right output.") and '<script>alert("xss")</script>' in leaky
    )  # as text
    assert meta("/d/secret-set")["description"].endswith("harbor environment, 2 tasks")
    assert "Explore RL environments" in meta("/")["description"]
    assert meta("/?q=leaky")["description"].endswith("matching leaky")


def test_runs_and_other_pages_get_the_tags_from_the_layout(planted_url: str) -> None:
    from repogym.explorer.web.pages import Assets, layout

    page = layout("Run abc", "<p>x</p>", Assets("/a.css", "/a.js", "/i.svg"))
    p = _Head()
    p.feed(_head_text(page))
    assert p.title == "Run abc · repogym explorer"
    assert p.meta["og:title"] == "Run abc" and p.meta["description"]
    assert p.canonical is None  # no request, no public base URL: no absolute URL


def test_gzip_and_cache_headers_on_a_shard(big_url: str) -> None:
    r = httpx.get(big_url + "/sitemap-2.xml", headers={"Accept-Encoding": "gzip"})
    assert r.headers["content-encoding"] == "gzip"
    assert r.headers["cache-control"].startswith("public, max-age=")
    assert r.headers["etag"].startswith('W/"')
    assert len(r.content) > 100_000  # decoded: 10,000 URLs


def test_shard_plan_arithmetic_with_a_small_shard_size(big_store: Any) -> None:
    plan = sitemap.plan(big_store, lambda e: e == "hidden-set", size=3)
    assert plan.env_shards == 2  # home + 4 environments in shards of 3
    assert sitemap.env_shard(plan, 1) == ["big-a", "org/small"]
    assert sitemap.env_shard(plan, 2) == ["big-b", "weird"]
    first = sitemap.task_shard(big_store, plan, 3)
    assert first == [("big-a", "t00000"), ("big-a", "t00001"), ("big-a", "t00002")]
    # the shard across the end of big-a jumps over the private and hidden environments
    k = 12_000 // 3 + 2 + 1  # env shards + full shards of big-a + 1
    assert sitemap.task_shard(big_store, plan, k) == [
        ("org/small", "t00000"), ("org/small", "t00001"), ("org/small", "t00002"),
    ]  # fmt: skip
    last = sitemap.task_shard(big_store, plan, plan.shards)
    assert last == [("weird", WEIRD_TASK)]
    assert sitemap.task_shard(big_store, plan, plan.shards + 1) is None


def test_the_cli_option_sets_the_public_url(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn
    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    from repogym.cli import app

    monkeypatch.setenv("REPOGYM_PUBLIC_URL", "")  # the option sets it: removed after the test
    seen: dict = {}
    monkeypatch.setattr(uvicorn, "run", lambda asgi, **kw: seen.update(app=asgi))
    out = tmp_path_factory.mktemp("seo-cli") / "snap"
    assert (
        CliRunner().invoke(app, ["explore", "index", str(EXAMPLES), "--out", str(out)]).exit_code
        == 0
    )
    argv = ["explore", "--snapshot", str(out), "--no-runs", "--public-url", PUBLIC_URL]
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 0, res.output
    client = TestClient(seen["app"])  # Host "testserver": not an allowed name
    shard = _locs(_xml(client.get("/sitemap-1.xml"), "urlset"), "url")
    assert shard == [PUBLIC_URL + "/", PUBLIC_URL + "/d/tasks"]
    assert _locs(_xml(client.get("/sitemap-2.xml"), "urlset"), "url") == [
        PUBLIC_URL + "/t/tasks/hello-file",
        PUBLIC_URL + "/t/tasks/textstats-word-count",
    ]
    bad = CliRunner().invoke(app, ["explore", "--snapshot", str(out), "--public-url", "ftp://x"])
    assert bad.exit_code == 2 and "--public-url" in bad.output


def test_the_curation_settings_hide_environments_from_the_sitemap(
    big_store: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import json

    from repogym.explorer.curation import SETTINGS_FILE, CurationReader

    data = tmp_path_factory.mktemp("seo-curation")
    (data / SETTINGS_FILE).write_text(json.dumps({"hidden": ["org/small"]}))
    reader = CurationReader(data, interval=0)
    with serve(create_app(big_store, curation=reader)) as url, httpx.Client(base_url=url) as c:
        _, urls = _all_urls(url, c)
        everything = [u for shard in urls for u in shard]
        assert not [u for u in everything if "/org/small" in u]
        assert set(everything[len(urls[0]) :]) == _expected_tasks(url, {"org/small"})
        etag = c.get("/sitemap-1.xml").headers["etag"]
        (data / SETTINGS_FILE).write_text(json.dumps({"hidden": []}))
        os.utime(data / SETTINGS_FILE, ns=(1, 1))  # another mtime, whatever the clock
        again = c.get("/sitemap-1.xml", headers={"If-None-Match": etag})
        assert again.status_code == 200 and f"{url}/d/org/small" in again.text


def test_runs_and_community_pages_have_the_tags(tmp_path_factory: pytest.TempPathFactory) -> None:
    from repogym.explorer.runs import RunLimits, RunService
    from repogym.explorer.runs.locate import TaskLocator

    root = tmp_path_factory.mktemp("seo-runs")
    ds = planted_dataset(root)
    paths = [str(ds)]
    store = open_store(paths)
    service = RunService(store, TaskLocator(store, paths), root / "runs", RunLimits())
    try:
        with serve(create_app(store, runs=service, mcp=False)) as url:
            for path in ("/runs?env=secret-set&task=leaky-task", "/community"):
                r = httpx.get(url + path)
                assert r.status_code == 200, path
                head = _head_text(r.text)
                assert MARK not in head
                p = _Head()
                p.feed(head)
                assert p.title.endswith(" · repogym explorer") and p.meta["description"]
                assert p.canonical == p.meta["og:url"] == url + path
                assert p.meta["twitter:card"] == "summary" and p.meta["og:title"]
    finally:
        service.close()
        store.close()
