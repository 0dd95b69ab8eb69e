"""Runs from the explorer in a real browser: Playwright drives Debian's /usr/bin/chromium (never
a downloaded browser) through the run panel of a task page (start oracle and nop, watch their
events arrive, see the rewards), the task's runs list, the compare view and the run page, at a
desktop width in the light theme and a phone width in the dark theme; then an LLM run against a
stub model on 127.0.0.1 whose API key must reach the model and nothing else (no URL, storage,
cookie, page or stored record), followed live on its run page. Screenshots go to
test-artifacts/explorer/runs-*.png."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest

from tests.explorer.browser_support import ARTIFACTS, NEEDS_CHROMIUM, launch_chromium

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("uvicorn")

from repogym.explorer.runs import RunLimits, RunService  # noqa: E402
from repogym.explorer.runs.locate import TaskLocator  # noqa: E402
from repogym.explorer.store import open_store  # noqa: E402
from repogym.explorer.web import create_app  # noqa: E402
from tests.explorer.web_fixtures import EXAMPLES, serve  # noqa: E402
from tests.llm.stub_servers import openai_stub, openai_tools  # noqa: E402

ENV, TASK = "tasks", "textstats-word-count"
TASK_PATH = f"/t/{ENV}/{TASK}"
KEY = "sk-visitor-QX7PLM2W9Z-never-shown"
DARK_BG = "rgb(17, 20, 24)"

# (class, head, body) of every event of a timeline: JS-built and server-built must agree
EVENTS_JS = """els => els.map(li => [li.className, li.querySelector('.evhead').textContent,
  (li.querySelector('.evbody') || {}).textContent || ''])"""


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    runs_dir = tmp_path_factory.mktemp("explorer-runs")
    store = open_store([str(EXAMPLES)])
    limits = RunLimits(allow_internal_endpoints=True)  # the stub model listens on 127.0.0.1
    service = RunService(store, TaskLocator(store, [str(EXAMPLES)]), runs_dir, limits)
    try:
        with serve(create_app(store, runs=service, mcp=False)) as base:
            yield base, runs_dir
    finally:
        service.close()
        store.close()


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    yield from launch_chromium()


def _context(browser, width: int, height: int, scheme: str, problems: list[str]):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    page = context.new_page()
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    page.on(  # a navigation cancelling a pending load (an event stream, the icon) is no failure
        "requestfailed",
        lambda r: None if "ERR_ABORTED" in (r.failure or "") else problems.append(r.url),
    )
    return context, page


def _no_overflow(page, where: str) -> None:  # type: ignore[no-untyped-def]
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{where}: the page is {overflow}px wider than the viewport"


def _start(page, agent: str, previous: str | None) -> str:  # type: ignore[no-untyped-def]
    """Start a run of ``agent`` in the panel; wait until it ended; its id."""
    expect = sync_api.expect
    page.locator("#run-agent").select_option(agent)
    page.locator("#runs form.runstart button[type=submit]").click()
    live = page.locator("#runs .runlive")
    if previous:
        expect(live).not_to_have_attribute("data-run", previous)
    expect(live).to_be_visible()
    expect(live).to_have_attribute("data-done", "1", timeout=60_000)
    return str(live.get_attribute("data-run"))


FLOWS = {  # name: (viewport, color scheme, compare from the panel or from the runs page)
    "desktop-light": ((1280, 800), "light", "panel"),
    "phone-dark": ((390, 844), "dark", "runs-page"),
}


@pytest.mark.parametrize("flow", list(FLOWS))
def test_run_watch_compare(explorer, browser, flow: str) -> None:  # type: ignore[no-untyped-def]
    base, _ = explorer
    (width, height), scheme, compare_from = FLOWS[flow]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    context, page = _context(browser, width, height, scheme, problems)
    expect = sync_api.expect
    try:
        page.goto(base + TASK_PATH)
        assert (page.evaluate("getComputedStyle(document.body).backgroundColor") == DARK_BG) == (
            scheme == "dark"
        )
        expect(page.locator("#run-agent option")).to_have_count(3)  # oracle, nop, llm
        expect(page.locator("#runs .f-llm")).to_be_hidden()

        # oracle: events arrive in the panel, then the reward
        oracle = _start(page, "oracle", None)
        live = page.locator("#runs .runlive")
        expect(live.locator(".ev.k-phase").first).to_contain_text("Environment started")
        expect(live.locator(".ev.k-phase", has_text="Verifier finished")).to_have_count(1)
        expect(live.locator(".ev.k-verifier_output .evhead")).to_have_text("Verifier exited 0")
        expect(live.locator(".ev.k-reward .evhead")).to_have_text("Reward 1")
        expect(live.locator(".bigreward .val")).to_have_text("1")
        expect(live.locator(".bigreward")).to_have_class(re.compile(r"\br-full\b"))
        expect(live.locator(".rstatus")).to_have_text("done")
        live_events = live.locator("li.ev").evaluate_all(EVENTS_JS)
        assert [c for c, _, _ in live_events][:2] == ["ev k-status", "ev k-status"]

        # nop: reward 0; the list shows both runs
        nop = _start(page, "nop", oracle)
        expect(live.locator(".bigreward .val")).to_have_text("0")
        expect(live.locator(".bigreward")).to_have_class(re.compile(r"\br-zero\b"))
        rows = page.locator("#runs .runlist tbody tr")
        expect(page.locator(f"#runs .runlist tr[data-run='{nop}'] .reward")).to_have_text("0")
        expect(page.locator(f"#runs .runlist tr[data-run='{oracle}'] .reward")).to_have_text("1")
        assert rows.count() >= 2
        _no_overflow(page, "task page")
        wrap = page.locator("#runs .runlist .tablewrap")  # the runs table fits, even on a phone
        assert wrap.evaluate("el => el.scrollWidth - el.clientWidth") <= 0
        page.locator("#runs").screenshot(path=str(ARTIFACTS / f"runs-1-panel-{flow}.png"))

        # pick both and compare (from the panel, or from the runs page's form)
        if compare_from == "panel":
            button = page.locator("#runs .runlist button", has_text="Compare selected")
            page.locator(f"#runs tr[data-run='{oracle}'] input.pick").check()
            expect(button).to_be_disabled()
            page.locator(f"#runs tr[data-run='{nop}'] input.pick").check()
            button.click()
        else:
            page.locator("#runs .runlist a", has_text="All runs of this task").click()
            expect(page).to_have_url(re.compile(r"/runs\?env=tasks&task=textstats-word-count$"))
            _no_overflow(page, "runs page")
            page.locator("form.compare button[type=submit]").click()  # nothing picked yet
            expect(page.locator("form.compare .runerr")).to_have_text(
                "Pick two or more runs to compare."
            )
            page.locator(f"tr[data-run='{oracle}'] input.pick").check()
            page.locator(f"tr[data-run='{nop}'] input.pick").check()
            page.screenshot(path=str(ARTIFACTS / f"runs-2-list-{flow}.png"), full_page=True)
            page.locator("form.compare button[type=submit]").click()
        expect(page).to_have_url(re.compile(rf"/compare\?ids=({nop}(,|%2C){oracle})$"))
        cols = page.locator(".compare-cols .ccol")
        expect(cols).to_have_count(2)
        for run_id, agent, reward in ((oracle, "oracle", "1"), (nop, "nop", "0")):
            col = page.locator(f".ccol[data-run='{run_id}']")
            expect(col.locator("h2 a")).to_have_text(agent)
            expect(col.locator(".bigreward .val")).to_have_text(reward)
            expect(col.locator("td[data-f=reward]")).to_have_text(reward)
            expect(col.locator("td[data-f=status]")).to_have_text("done")
            expect(col.locator("td[data-f=duration]")).to_have_text(re.compile(r"^\d+\.\d s$"))
            expect(col.locator(".ev.k-verifier_output")).to_have_count(1)
        a, b = (cols.nth(i).bounding_box() for i in range(2))
        assert a and b
        if width > 760:  # side by side
            assert abs(a["y"] - b["y"]) < 1 and b["x"] >= a["x"] + a["width"]
        else:  # stacked
            assert b["y"] >= a["y"] + a["height"] and abs(a["x"] - b["x"]) < 1
        long_box = page.locator(".ccol .ev.k-verifier_output pre.evbody").first
        assert long_box.evaluate("el => getComputedStyle(el).overflowY") == "auto"
        assert long_box.evaluate("el => parseFloat(getComputedStyle(el).maxHeight)") > 0
        _no_overflow(page, "compare page")
        page.screenshot(path=str(ARTIFACTS / f"runs-3-compare-{flow}.png"), full_page=True)

        # the run page: the server's timeline is the one the panel built live
        page.locator(f".ccol[data-run='{oracle}'] h2 a").click()
        expect(page).to_have_url(base + f"/r/{oracle}")
        expect(page.locator("#run")).to_have_attribute("data-live", "0")
        expect(page.locator("#run .bigreward .val")).to_have_text("1")
        expect(page.locator("#details pre")).to_contain_text('"resolved": true')
        assert page.locator("#events li.ev").evaluate_all(EVENTS_JS) == live_events
        _no_overflow(page, "run page")
        page.screenshot(path=str(ARTIFACTS / f"runs-4-run-{flow}.png"), full_page=True)
    finally:
        context.close()
    assert problems == []


def test_llm_run_key_stays_in_the_post_body(explorer, browser) -> None:  # type: ignore[no-untyped-def]
    """The key goes to the model through the POST body only; the run page follows it live."""
    base, runs_dir = explorer
    go = threading.Event()

    def first_turn(_body: dict[str, Any]):  # type: ignore[no-untyped-def]
        go.wait(20)  # held until the run page is open: its events must come live
        return openai_tools([("bash", {"command": "echo hello from the model"})])

    problems: list[str] = []
    context, page = _context(browser, 1280, 800, "light", problems)
    urls: list[str] = []
    bodies: list[tuple[str, str, str]] = []
    page.on("framenavigated", lambda f: urls.append(f.url))

    def on_request(r) -> None:  # type: ignore[no-untyped-def]
        urls.append(r.url)
        bodies.append((r.method, r.url, r.post_data or ""))

    page.on("request", on_request)
    expect = sync_api.expect
    try:
        with openai_stub(first_turn, openai_tools([("finish", {"summary": "done"})])) as model:
            page.goto(base + TASK_PATH)
            page.locator("#run-agent").select_option("llm")
            expect(page.locator("#runs .f-llm")).to_be_visible()
            key = page.locator("#run-key")
            assert key.get_attribute("type") == "password"
            assert key.get_attribute("autocomplete") == "off"
            assert key.get_attribute("name") is None
            page.locator("#run-provider").select_option("openai")
            page.locator("#run-model").fill("stub-model")
            key.fill(KEY)
            page.locator("#run-steps").fill("4")

            # a refused start says why, inline
            page.locator("#run-endpoint").fill("ftp://127.0.0.1/v1")
            page.locator("#runs form.runstart button[type=submit]").click()
            expect(page.locator("#runs form.runstart .runerr")).to_have_text(
                "endpoint: only http:// and https:// URLs are accepted"
            )
            assert f"HTTP 400: {base}/api/runs" in problems
            assert all("400" in p for p in problems), problems  # and the console saying so
            problems.clear()

            page.locator("#run-endpoint").fill(model.base_url + "/v1")
            page.locator("#runs form.runstart button[type=submit]").click()
            expect(page.locator("#runs form.runstart .runerr")).to_be_hidden()
            link = page.locator("#runs .runlive a.runlink")
            expect(link).to_be_visible()
            run_id = str(page.locator("#runs .runlive").get_attribute("data-run"))
            expect(
                page.locator("#runs .runlive .ev.k-phase", has_text="Agent started")
            ).to_be_visible()
            page.locator("#runs").screenshot(path=str(ARTIFACTS / "runs-5-llm-panel.png"))

            # the run page, opened while the model thinks, follows the run as it goes
            link.click()
            expect(page).to_have_url(base + f"/r/{run_id}")
            expect(page.locator("#run")).to_have_attribute("data-live", "1")
            expect(page.locator("#run td[data-f=status]")).to_have_text("running")
            assert page.locator("#events .ev.k-model").count() == 0
            go.set()
            expect(page.locator("#events .ev.k-model").first).to_have_text(
                re.compile("Model: bash")
            )
            expect(page.locator("#events .ev.k-tool").first).to_contain_text("hello from the model")
            expect(page.locator("#events .ev.k-reward")).to_have_count(1, timeout=60_000)
            expect(page.locator("#run")).to_have_attribute("data-live", "0")
            expect(page.locator("#run td[data-f=status]")).to_have_text("done")
            expect(page.locator("#run .bigreward .val")).to_have_text("0")
            expect(page.locator("#run td[data-f=usage]")).to_contain_text("2 calls")
            live_events = page.locator("#events li.ev").evaluate_all(EVENTS_JS)
            page.screenshot(path=str(ARTIFACTS / "runs-6-llm-run.png"), full_page=True)
            page.reload()
            assert page.locator("#events li.ev").evaluate_all(EVENTS_JS) == live_events
            html = page.content()
            api = page.request.get(f"{base}/api/runs/{run_id}").text()

        # the key reached the model ...
        assert model.requests[0]["headers"].get("authorization") == f"Bearer {KEY}"
        # ... through the body of POST /api/runs and nowhere else
        carriers = [(m, u) for m, u, body in bodies if KEY in body]
        assert carriers == [("POST", f"{base}/api/runs")] * 2, carriers  # refused, started
        assert not [u for u in urls if KEY in u]
        assert KEY not in page.url
        assert KEY not in html and KEY not in api
        stored = page.evaluate(
            "JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage),"
            " document.cookie, history.length])"
        )
        assert KEY not in stored
        assert KEY not in json.dumps(context.cookies())
        for f in runs_dir.rglob("*"):
            if f.is_file():
                assert KEY.encode() not in f.read_bytes(), f
    finally:
        go.set()
        context.close()
    assert problems == []
