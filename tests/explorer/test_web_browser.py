"""The explorer in a real browser: Playwright drives Debian's /usr/bin/chromium (never a
downloaded browser) through home → search → environment → task → file viewer → line link, at a
desktop and a phone width, in the light and dark themes. Screenshots go to
test-artifacts/explorer/."""

from __future__ import annotations

import re

import pytest

from tests.explorer.browser_support import ARTIFACTS, NEEDS_CHROMIUM, launch_chromium

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]

sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("uvicorn")

from repogym.explorer.store import open_store  # noqa: E402
from repogym.explorer.web import create_app  # noqa: E402
from tests.explorer.web_fixtures import EXAMPLES, MARK, XSS, planted_dataset, serve  # noqa: E402

VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    dataset = planted_dataset(tmp_path_factory.mktemp("web-browser"))
    app = create_app(open_store([str(EXAMPLES), str(dataset)]))
    with serve(app) as url:
        yield url


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    yield from launch_chromium()


def _bg(page, selector: str) -> str:  # type: ignore[no-untyped-def]
    return page.eval_on_selector(selector, "el => getComputedStyle(el).backgroundColor")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_browse_search_read(base_url: str, browser, size: str, scheme: str) -> None:  # type: ignore[no-untyped-def]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    width, height = VIEWPORTS[size]
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    page = context.new_page()
    problems: list[str] = []
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    page.on(  # a navigation cancelling a pending icon load is not a failure
        "requestfailed",
        lambda r: None if "ERR_ABORTED" in (r.failure or "") else problems.append(r.url),
    )
    shot = f"{size}-{scheme}"
    expect = sync_api.expect
    try:
        # home
        page.goto(base_url + "/")
        expect(page.locator("h1")).to_have_text("Explore RL environments")
        expect(page.locator("#results article.card")).to_have_count(2)
        dark_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (dark_bg == "rgb(17, 20, 24)") == (scheme == "dark"), dark_bg
        page.screenshot(path=str(ARTIFACTS / f"1-home-{shot}.png"), full_page=True)

        # search as you type: results and URL follow the words
        page.locator("#q").press_sequentially("secret", delay=20)
        expect(page).to_have_url(re.compile(r"/\?q=secret$"))
        expect(page.locator("#results article.card")).to_have_count(1)
        expect(page.locator("#results .count")).to_have_text("1 environment")
        page.screenshot(path=str(ARTIFACTS / f"2-search-{shot}.png"), full_page=True)

        # environment page
        page.locator("#results article.card h2 a").click()
        expect(page).to_have_url(base_url + "/d/secret-set")
        expect(page.locator("#results article.card")).to_have_count(2)
        page.locator("#q").press_sequentially("words", delay=20)
        expect(page.locator("#results article.card")).to_have_count(1)
        expect(page.locator("#results article.card h3")).to_contain_text("Count the words")
        page.locator("#q").fill("")
        page.locator("#q").press_sequentially("leaky", delay=20)
        expect(page.locator("#results article.card h3")).to_contain_text("Leaky task")
        page.screenshot(path=str(ARTIFACTS / f"3-env-{shot}.png"), full_page=True)

        # task page: instruction, environment, grading, what was withheld
        page.locator("#results article.card h3 a").click()
        expect(page).to_have_url(base_url + "/t/secret-set/leaky-task")
        expect(page.locator("h1")).to_contain_text(XSS)  # shown as text, not run
        expect(page.locator("#withheld")).to_contain_text("What was withheld")
        expect(page.locator("#withheld li").first).to_be_visible()
        expect(page.locator("#s-instruction")).to_contain_text("Write the right output")
        expect(page.locator(".files .wh").first).to_contain_text("withheld:")
        page.screenshot(path=str(ARTIFACTS / f"4-task-{shot}.png"), full_page=True)

        # file viewer with highlighting, then a line link
        page.locator(".files a", has_text="environment/main.py").click()
        expect(page).to_have_url(re.compile(r"\?file=environment%2Fmain\.py#viewer$"))
        expect(page.locator("#viewer h2")).to_have_text("environment/main.py")
        expect(page.locator("#L3 code")).to_have_text("    return 41")
        expect(page.locator("#L1 .tok-kw")).to_have_text("def")
        plain_bg = _bg(page, "#L30")
        page.locator("#L30 a.n").click()
        expect(page).to_have_url(re.compile(r"#L30$"))
        expect(page.locator("#L30")).to_have_class(re.compile(r"\bhl\b"))
        assert _bg(page, "#L30") != plain_bg
        page.locator("#L33 a.n").click(modifiers=["Shift"])
        expect(page).to_have_url(re.compile(r"#L30-L33$"))
        expect(page.locator(".l.hl")).to_have_count(4)
        page.screenshot(path=str(ARTIFACTS / f"5-viewer-{shot}.png"), full_page=False)

        # a shared line link highlights on load
        page.goto(page.url.replace("#L30-L33", "#L5"))
        page.reload()
        expect(page.locator("#L5")).to_have_class(re.compile(r"\bhl\b"))

        # the toggle switches theme and remembers it
        before = page.evaluate("getComputedStyle(document.body).backgroundColor")
        page.locator("#theme").click()
        after = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert after != before
        page.reload()
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == after
        page.screenshot(path=str(ARTIFACTS / f"6-toggled-{shot}.png"))

        # phone width: nothing wider than the screen except the scrolling code box
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"page is {overflow}px wider than the viewport"
        assert MARK not in page.content()
    finally:
        context.close()
    assert problems == []


def test_a_closed_banner_stays_closed_until_it_changes(browser, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The admins' banner, closed once by a visitor, is closed on the next pages; a new banner
    opens again."""
    from repogym.explorer.curation import CurationReader, SettingsFile

    settings = SettingsFile(tmp_path)

    def say(text: str) -> None:
        def edit(s):  # type: ignore[no-untyped-def]
            s["banner"] = {"text": text, "link": "https://example.org/notice", "link_text": "more"}

        settings.change("test", "banner", edit)

    say("Maintenance tonight")
    app = create_app(open_store([str(EXAMPLES)]), curation=CurationReader(tmp_path, interval=0))
    with serve(app) as url:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.goto(url + "/")
        assert page.is_visible("details.banner p")
        page.click("details.banner summary")
        assert not page.is_visible("details.banner p")
        page.goto(url + "/d/tasks")
        page.wait_for_load_state("domcontentloaded")
        assert page.eval_on_selector("details.banner", "el => el.open") is False
        say("New notice")
        page.goto(url + "/t/tasks/hello-file")  # a page not in the browser's cache (max-age)
        assert page.eval_on_selector("details.banner", "el => el.open") is True
        assert "New notice" in page.inner_text("details.banner")
        context.close()
