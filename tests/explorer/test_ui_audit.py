"""The UI audit: Playwright drives Debian's /usr/bin/chromium (never a downloaded browser)
through every page kind of the public explorer at four widths (phone, tablet, laptop, wide) in
the light and dark themes, and fails on horizontal overflow (naming the widest offending
element), console or page errors, HTTP ≥ 400 on the page's own requests and a first paint or
page weight over budget. Full-page screenshots and ``report.json`` (first paint and bytes per
page kind, width and theme) go to ``$REPOGYM_TEST_ARTIFACTS`` (default ``.artifacts/ui-audit/``).

Page kinds are the rows of :data:`KINDS`; add a row to audit a new page."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.explorer.browser_support import NEEDS_CHROMIUM, launch_chromium

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("uvicorn")

from repogym.explorer.runs import RunLimits, RunService  # noqa: E402
from repogym.explorer.runs.locate import TaskLocator  # noqa: E402
from repogym.explorer.store import open_store  # noqa: E402
from repogym.explorer.web import create_app  # noqa: E402
from tests.explorer.web_fixtures import EXAMPLES, REPO, serve  # noqa: E402
from tests.explorer_runs.fixtures import TEXTSTATS, Visitor  # noqa: E402

FILE = "environment%2Frepo%2Ftextstats%2Fcounts.py"  # a highlighted file of the example task
RUN_LIST = ".runlistbox .tablewrap, .runlistbox .empty"  # the task page's runs, filled by runs.js
WIDTHS = {
    "phone": (375, 812),
    "tablet": (768, 1024),
    "laptop": (1366, 768),
    "wide": (1920, 1080),
}
THEMES = ("light", "dark")
THEME_KEY = "repogym-theme"  # where static/app.js keeps the toggle's choice (localStorage)
DARK_BG = "rgb(17, 20, 24)"  # the dark theme's page background (app.css)
FIRST_PAINT_BUDGET_MS = 2500.0  # generous: 2 shared cores, software rendering
PAGE_BYTES_BUDGET = 1_500_000  # encoded bytes of a page and everything it loads
ARTIFACTS = Path(os.environ.get("REPOGYM_TEST_ARTIFACTS") or REPO / ".artifacts" / "ui-audit")

# The widest element sticking out of the viewport (not inside a box that scrolls or clips it).
OVERFLOW_JS = """() => {
  const vw = window.innerWidth;
  const over = document.scrollingElement.scrollWidth - vw;
  if (over <= 1) return null;
  const clipped = el => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== 'visible') return true;
    }
    return false;
  };
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    [...el.classList].map(c => '.' + c).join('');
  let worst = null, right = vw + 1;
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.right > right && !clipped(el)) { worst = el; right = r.right; }
  }
  let path = worst ? name(worst) : 'unknown';
  if (worst && worst.parentElement) path = name(worst.parentElement) + ' > ' + path;
  return {over: over, element: path, right: Math.round(right)};
}"""

# Tables that need sideways scrolling in their box: columns a reader cannot see at a glance.
SCROLLING_TABLES_JS = """allowed => [...document.querySelectorAll('.tablewrap')]
  .filter(w => w.scrollWidth > w.clientWidth + 1)
  .map(w => w.querySelector('table'))
  .filter(t => t && !allowed.some(sel => t.matches(sel)))
  .map(t => 'table.' + [...t.classList].join('.'))"""
WIDE_TABLES = ["table.board"]  # a leaderboard's six numeric columns may scroll on a phone

# First contentful paint and the bytes of the document and everything it loaded.
METRICS_JS = """() => {
  const fcp = performance.getEntriesByType('paint')
    .find(e => e.name === 'first-contentful-paint');
  const entries = [...performance.getEntriesByType('navigation'),
                   ...performance.getEntriesByType('resource')];
  const sum = k => entries.reduce((n, e) => n + (e[k] || 0), 0);
  return {fcp_ms: fcp ? Math.round(fcp.startTime) : null,
          transfer_bytes: sum('transferSize'), encoded_bytes: sum('encodedBodySize'),
          requests: entries.length};
}"""


@dataclass
class Kind:
    """One page kind: its name, the path to visit (from the site's facts), the main document's
    expected status, why it is skipped (``skip``: None to audit it) and what to wait for."""

    name: str
    path: Callable[[Site], str]
    status: int = 200
    skip: Callable[[Site], str | None] = lambda site: None
    ready: str | None = None  # a selector the page's script fills in after load


@dataclass
class Site:
    base: str
    runs: list[str]
    env_id_play: str | None
    play_reason: str
    community: bool
    report: dict[str, Any] = field(default_factory=dict)


KINDS: list[Kind] = [
    Kind("home", lambda s: "/"),
    Kind("env-search", lambda s: "/?q=word"),
    Kind("task-search", lambda s: "/d/tasks?q=count"),
    Kind("env", lambda s: "/d/tasks"),
    Kind("task", lambda s: f"/t/tasks/{TEXTSTATS}", ready=RUN_LIST),
    Kind("file", lambda s: f"/t/tasks/{TEXTSTATS}?file={FILE}", ready=RUN_LIST),
    Kind("not-found", lambda s: "/d/no-such-environment", status=404),
    Kind("run", lambda s: f"/r/{s.runs[0]}"),
    Kind("runs-list", lambda s: f"/runs?env=tasks&task={TEXTSTATS}"),
    Kind("compare", lambda s: "/compare?ids=" + ",".join(s.runs)),
    Kind("collection", lambda s: "/c/Starters"),
    Kind(
        "community",
        lambda s: "/community",
        skip=lambda s: None if s.community else "/community does not answer 200 here",
    ),
    Kind(
        "play",
        lambda s: f"/play/{s.env_id_play}",
        skip=lambda s: None if s.env_id_play else s.play_reason,
    ),
]


def _curated(data: Path) -> Any:
    """Curation settings with everything a page can show: a banner with a link, a featured
    environment and a collection."""
    from repogym.explorer.curation import CurationReader, SettingsFile

    def edit(s: dict[str, Any]) -> None:
        s["banner"] = {
            "text": "Maintenance on Saturday: runs may queue longer than usual.",
            "link": "https://example.org/status",
            "link_text": "status page",
        }
        s["featured"] = ["tasks"]
        s["collections"] = {"Starters": ["tasks"]}

    SettingsFile(data).change("ui-audit", "setup", edit)
    return CurationReader(data, interval=0)


@contextlib.contextmanager
def _openenv_server(factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A ``repogym serve`` of examples/tasks for the playground, or None without openenv."""
    try:
        import openenv.core  # noqa: F401

        from tests.openenv.conftest import serve_examples
    except ImportError:
        yield None
        return
    yield from serve_examples(factory)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """One explorer for the module: examples/tasks, runs on (the local sandbox) with an oracle
    and a nop run of the example task, and the playground when an OpenEnv server is cheap."""
    with _openenv_server(tmp_path_factory) as server:
        paths = [str(EXAMPLES)]
        store = open_store(paths, openenv=[server.url] if server else [])
        service = RunService(
            store, TaskLocator(store, paths), tmp_path_factory.mktemp("ui-runs"), RunLimits()
        )
        try:
            curation = _curated(tmp_path_factory.mktemp("ui-curation"))
            app = create_app(store, runs=service, mcp=False, curation=curation)
            with serve(app, lifespan="on") as base:
                v = Visitor(base)
                runs = [v.run(agent=a) for a in ("oracle", "nop")]
                v.close()
                assert [r["status"] for r in runs] == ["done", "done"], runs
                assert runs[0]["reward"] == 1.0, runs[0]
                community = httpx.get(base + "/community").status_code == 200
                play = server.url.removeprefix("http://") if server else None
                s = Site(
                    base,
                    [r["id"] for r in runs],
                    play,
                    "" if server else "no OpenEnv server here (needs the openenv extra)",
                    community,
                )
                yield s
                _write_report(s)
        finally:
            service.close()
            store.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch_chromium()


def _context(browser: Any, width: str, theme: str) -> Any:
    """A browser context at ``width`` in ``theme``, set as the toggle sets it (localStorage)
    and as the system would (``prefers-color-scheme``)."""
    w, h = WIDTHS[width]
    context = browser.new_context(viewport={"width": w, "height": h}, color_scheme=theme)
    context.add_init_script(
        f"try {{ localStorage.setItem('{THEME_KEY}', '{theme}'); }} catch (e) {{}}"
    )
    return context


def audit_page(
    page: Any, url: str, status: int, ready: str | None = None
) -> tuple[list[str], dict[str, Any]]:
    """Visit ``url`` (waiting for ``ready`` when given): the problems found and the page's
    first paint and bytes."""
    problems: list[str] = []

    def on_console(m: Any) -> None:
        if m.type != "error":
            return
        where = (m.location or {}).get("url", "")
        if status >= 400 and where == url and f"status of {status}" in m.text:
            return  # chromium reports the deliberate error status of the document itself
        problems.append(f"console error: {m.text} ({where})")

    def on_response(r: Any) -> None:
        if r.status >= 400 and not (r.url == url and r.status == status):
            problems.append(f"HTTP {r.status}: {r.url}")

    def on_failed(r: Any) -> None:  # a navigation cancelling a pending load is no failure
        if "ERR_ABORTED" not in (r.failure or ""):
            problems.append(f"request failed: {r.url} ({r.failure})")

    def on_error(exc: Any) -> None:
        problems.append(f"page error: {exc}")

    listeners = {
        "console": on_console,
        "pageerror": on_error,
        "response": on_response,
        "requestfailed": on_failed,
    }
    for event, listener in listeners.items():
        page.on(event, listener)
    try:
        resp = page.goto(url, wait_until="load")
        if resp is None or resp.status != status:
            problems.append(f"status {resp.status if resp else None}, expected {status}")
        page.wait_for_function(
            "() => performance.getEntriesByType('paint')"
            ".some(e => e.name === 'first-contentful-paint')",
            timeout=10_000,
        )
        if ready:
            page.wait_for_selector(ready, timeout=10_000)
        metrics = page.evaluate(METRICS_JS)
        overflow = page.evaluate(OVERFLOW_JS)
        tables = page.evaluate(SCROLLING_TABLES_JS, WIDE_TABLES)
    finally:
        for event, listener in listeners.items():
            page.remove_listener(event, listener)
    problems += [f"{t} is wider than its box: columns hidden behind a scroll" for t in tables]
    if overflow:
        problems.append(
            f"horizontal overflow of {overflow['over']}px: widest is {overflow['element']} "
            f"(right edge at {overflow['right']}px)"
        )
    if metrics["fcp_ms"] is None or metrics["fcp_ms"] > FIRST_PAINT_BUDGET_MS:
        problems.append(f"first paint {metrics['fcp_ms']} ms over {FIRST_PAINT_BUDGET_MS} ms")
    if metrics["encoded_bytes"] > PAGE_BYTES_BUDGET:
        problems.append(f"{metrics['encoded_bytes']} bytes over {PAGE_BYTES_BUDGET}")
    return problems, metrics


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("width", list(WIDTHS))
def test_every_page_kind(site: Site, browser: Any, width: str, theme: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    context = _context(browser, width, theme)
    page = context.new_page()
    problems: list[str] = []
    try:
        for kind in KINDS:
            row = site.report.setdefault(kind.name, {"path": None, "skipped": None, "shots": {}})
            reason = kind.skip(site)
            if reason:
                row["skipped"] = reason
                continue
            path = kind.path(site)
            row["path"] = path
            found, metrics = audit_page(page, site.base + path, kind.status, kind.ready)
            bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
            if (bg == DARK_BG) != (theme == "dark"):
                found.append(f"background {bg} is not the {theme} theme's")
            shot = ARTIFACTS / f"{kind.name}-{width}-{theme}.png"
            page.screenshot(path=str(shot), full_page=True)
            row["shots"][f"{width}-{theme}"] = {**metrics, "screenshot": str(shot)}
            problems += [f"{kind.name} {path}: {p}" for p in found]
    finally:
        context.close()
    assert problems == [], "\n".join(problems)


def test_the_audit_sees_overflow_and_errors(site: Site, browser: Any) -> None:
    """The checks fail when they should: a too-wide element is named, a script error, a
    missing resource and a table scrolling in its box are reported, and the 404 page kind
    passes only with its 404."""
    context = _context(browser, "phone", "light")
    page = context.new_page()
    try:
        assert audit_page(page, site.base + "/", 200)[0] == []
        page.route(  # a broken page: too wide, a script error, a missing image
            site.base + "/",
            lambda route: route.fulfill(
                status=200,
                content_type="text/html",
                body='<body><div id="wide" class="x" style="width:900px">w</div>'
                '<img src="/static/missing.png"><script>nope()</script>'
                '<div class="tablewrap" style="overflow-x:auto"><table class="runs">'
                '<tr><td style="white-space:nowrap">' + "x " * 80 + "</td></tr></table></div>"
                "</body>",
            ),
        )
        found, _ = audit_page(page, site.base + "/", 200)
        text = "\n".join(found)
        assert "horizontal overflow" in text and "div#wide.x" in text, text
        assert "page error" in text and "nope" in text, text
        assert "HTTP 404" in text and "missing.png" in text, text
        assert "table.runs is wider than its box" in text, text
        page.unroute(site.base + "/")
        assert audit_page(page, site.base + "/d/no-such-environment", 404)[0] == []
        assert any("status 404" in p for p in audit_page(page, site.base + "/d/nope", 200)[0])
    finally:
        context.close()


def _write_report(site: Site) -> None:
    """``report.json`` and a summary table (``pytest -s`` shows it)."""
    if not site.report:
        return
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "report.json").write_text(json.dumps(site.report, indent=2) + "\n")
    cols = [f"{w}-{t}" for w in WIDTHS for t in THEMES]
    print(f"\nUI audit: {ARTIFACTS} (first paint ms / KB encoded)")
    print(f"{'page kind':<12} " + " ".join(f"{c:>14}" for c in cols))
    for name, row in site.report.items():
        if row["skipped"]:
            print(f"{name:<12} skipped: {row['skipped']}")
            continue
        cells = []
        for c in cols:
            m = row["shots"].get(c)
            cells.append(f"{m['fcp_ms']}/{m['encoded_bytes'] // 1024}" if m else "-")
        print(f"{name:<12} " + " ".join(f"{c:>14}" for c in cells))
