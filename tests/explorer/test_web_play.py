"""The OpenEnv playground: forms from action schemas, the ``/api/play/<env>/…`` API against a
live ``repogym serve`` of examples/tasks cataloged by a real explorer (uvicorn, lifespan on),
its CSRF and host defences, idle end and cap, and the page in Debian's chromium (Playwright) at
a desktop and a phone width, light and dark. Screenshots go to test-artifacts/explorer/."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import httpx
import pytest
from pydantic import BaseModel, Field, TypeAdapter

from repogym.explorer.web.pages_play import action_forms, reset_fields

pytest.importorskip("uvicorn")
pytest.importorskip("openenv.core", reason="needs the openenv extra")

from repogym.explorer.store import open_store  # noqa: E402
from repogym.explorer.web import create_app  # noqa: E402
from tests.explorer.browser_support import ARTIFACTS, launch_chromium  # noqa: E402
from tests.explorer.web_fixtures import EXAMPLES, serve_with_lifespan  # noqa: E402
from tests.openenv.conftest import TOKEN, Server, serve_examples  # noqa: E402

VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}


# -- forms from schemas (no server) -------------------------------------------------------


class Move(BaseModel):
    """Move the cursor."""

    type: Literal["move"] = "move"
    dx: int
    speed: float | None = None


class Say(BaseModel):
    type: Literal["say"] = "say"
    text: str
    loud: bool = False
    mood: Literal["calm", "angry"] = "calm"
    extra: dict[str, Any] | None = None
    tags: list[str] = []


def test_forms_of_a_discriminated_union() -> None:
    schema = TypeAdapter(Annotated[Move | Say, Field(discriminator="type")]).json_schema()
    assert "oneOf" in schema and "$defs" in schema  # pydantic's shape
    forms = action_forms(schema)
    assert [f["kind"] for f in forms] == ["move", "say"]
    assert [f["fixed"] for f in forms] == [{"type": "move"}, {"type": "say"}]
    assert forms[0]["description"] == "Move the cursor."
    widgets = {f["name"]: (f["widget"], f["required"]) for form in forms for f in form["fields"]}
    assert widgets == {
        "dx": ("number", True),
        "speed": ("number", False),
        "text": ("textarea", True),
        "loud": ("checkbox", False),
        "mood": ("select", False),
        "extra": ("json", False),
        "tags": ("json", False),
    }
    fields = {f["name"]: f for form in forms for f in form["fields"]}
    assert fields["dx"]["step"] == 1 and fields["speed"]["step"] == "any"
    assert fields["mood"]["options"] == ["calm", "angry"] and fields["mood"]["default"] == "calm"
    assert fields["tags"]["shape"] == "array"


def test_forms_of_flat_and_plain_schemas() -> None:
    flat = {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["go", "stop"]},
            "where": {"type": "string", "title": "Where"},
            "metadata": {"type": "object"},
        },
        "required": ["type"],
    }
    forms = action_forms(flat)  # no /tools list: every field on every kind, metadata never
    assert [(f["kind"], f["fixed"], [x["name"] for x in f["fields"]]) for f in forms] == [
        ("go", {"type": "go"}, ["where"]),
        ("stop", {"type": "stop"}, ["where"]),
    ]
    own = {"stop": {"parameters": {"type": "object", "properties": {}}, "description": "Halt."}}
    assert action_forms(flat, own)[1] == {
        "kind": "stop",
        "description": "Halt.",
        "fixed": {"type": "stop"},
        "fields": [],
    }
    plain = {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}
    (form,) = action_forms(plain)
    assert form["fixed"] == {} and form["fields"][0]["widget"] == "number"
    assert [f["name"] for f in reset_fields(None, [])] == ["seed"]
    assert [f["name"] for f in reset_fields({"seed": {}}, ["a"])] == ["task_id", "seed"]
    assert reset_fields({}, []) == []


# -- a live server, cataloged ---------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve_examples(tmp_path_factory)


@pytest.fixture(scope="module")
def store(served: Server) -> Iterator[Any]:
    s = open_store([str(EXAMPLES)], openenv=[served.url])
    yield s
    s.close()


@pytest.fixture(scope="module")
def explorer(store: Any, served: Server) -> Iterator[tuple[str, str]]:
    """(the explorer's base URL, the OpenEnv server's environment id)."""
    with serve_with_lifespan(create_app(store)) as base:
        yield base, served.url.removeprefix("http://")


class Browser:
    """An API client holding one browser's cookie, as the page's script sends requests."""

    def __init__(self, base: str, env_id: str) -> None:
        self.http = httpx.Client(base_url=base, timeout=60)
        self.env_id = env_id
        page = self.http.get(f"/play/{env_id}")
        assert page.status_code == 200
        self.token = self.http.cookies["rg_csrf"]
        self.session = ""

    def headers(self, **extra: str) -> dict[str, str]:
        """The page script's headers; ``extra`` adds or replaces some (``X_Name`` → ``X-Name``)."""
        mine = {"X-CSRF-Token": self.token, "X-Play-Session": self.session}
        return mine | {k.replace("_", "-"): v for k, v in extra.items()}

    def call(self, method: str, what: str, body: Any = None, **headers: str) -> httpx.Response:
        kw: dict[str, Any] = {"headers": self.headers(**headers)}
        if body is not None:
            kw["json"] = body
        return self.http.request(method, f"/api/play/{self.env_id}/{what}", **kw)

    def open(self) -> str:
        res = self.call("POST", "session", {})
        assert res.status_code == 201, res.text
        self.session = res.json()["session"]
        return self.session

    def step(self, action: dict[str, Any]) -> httpx.Response:
        return self.call("POST", "step", {"action": action})


def wait_sandboxes(server: Server, count: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while server.status()["open_sandboxes"] != count:
        assert time.monotonic() < deadline, server.status()
        time.sleep(0.05)


@pytest.mark.slow
def test_schema_page_and_links(explorer: tuple[str, str]) -> None:
    base, env_id = explorer
    schema = httpx.get(f"{base}/api/play/{env_id}/schema").json()
    assert [f["kind"] for f in schema["forms"]] == ["exec", "read", "write", "list"]
    exec_form = schema["forms"][0]
    assert exec_form["fixed"] == {"type": "exec"}
    assert [(f["name"], f["widget"], f["required"]) for f in exec_form["fields"]] == [
        ("command", "textarea", True),
        ("timeout_s", "number", False),
    ]
    reset = {f["name"]: f for f in schema["reset"]}
    assert reset["task_id"]["options"] == ["hello-file", "textstats-word-count"]
    assert reset["seed"]["widget"] == "number"

    page = httpx.get(f"{base}/play/{env_id}")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    cookie = page.headers["set-cookie"].lower()
    assert cookie.startswith("rg_csrf=") and "samesite=strict" in cookie and "path=/" in cookie
    assert "connect-src 'self'" in page.headers["content-security-policy"]
    assert not re.search(r"<script(?![^>]*\ssrc=)", page.text)  # no inline script
    assert " style=" not in page.text
    assert re.search(r'<script src="/static/play\.[0-9a-f]{12}\.js">', page.text)
    env_page = httpx.get(f"{base}/d/{env_id}").text
    assert f'href="/play/{env_id}"' in env_page and f"/mcp/o/{env_id}" in env_page
    assert "/play/" not in httpx.get(f"{base}/d/tasks").text  # a Harbor folder has none
    assert httpx.get(f"{base}/play/tasks").status_code == 404
    assert httpx.get(f"{base}/play/no-such-env").status_code == 404


@pytest.mark.slow
def test_an_episode_through_the_api(explorer: tuple[str, str], served: Server) -> None:
    base, env_id = explorer
    before = served.status()["open_sandboxes"]
    me, other = Browser(base, env_id), Browser(base, env_id)
    first = me.open()
    second = me.open()  # one episode per browser and environment: the first one ended
    assert first != second
    assert me.call("GET", "state", X_Play_Session=first).status_code == 404

    reset = me.call("POST", "reset", {"task_id": "hello-file"})
    assert reset.status_code == 200, reset.text
    assert reset.json()["observation"]["task_id"] == "hello-file"
    assert reset.json()["done"] is False
    assert served.status()["open_sandboxes"] == before + 1

    wrote = me.step({"type": "exec", "command": "printf 'played here' > note.txt"})
    assert wrote.status_code == 200 and wrote.json()["observation"]["exit_code"] == 0
    read = me.step({"type": "exec", "command": "cat note.txt"}).json()
    assert read["observation"]["stdout"] == "played here"
    assert read["reward"] == 0.0 and read["done"] is False  # finite before the end (RFC 008)
    assert me.step({"type": "read", "path": "note.txt"}).json()["observation"]["content"] == (
        "played here"
    )

    # refused before anything is sent: a token anywhere, a schema misfit, a kind's own fields
    for action, status, words in (
        (
            {"type": "exec", "command": "touch t", "metadata": {"orchestrator_token": TOKEN}},
            403,
            "orchestrator token",
        ),
        ({"type": "exec"}, 400, "missing required 'command'"),
        ({"type": "exec", "command": 3}, 400, "expected string"),
    ):
        res = me.step(action)
        assert res.status_code == status and words in res.json()["error"], res.text
    graded = me.step({"type": "evaluate"})  # goes through; the server refuses it itself
    assert graded.status_code == 200 and graded.json()["reward"] == 0.0
    assert "orchestration action" in graded.json()["observation"]["error"]
    token_reset = me.call("POST", "reset", {"task_id": "x", "orchestrator_token": TOKEN})
    assert token_reset.status_code == 403
    state = me.call("GET", "state")
    assert state.status_code == 200 and state.json()["step_count"] == 4
    assert state.json()["task_id"] == "hello-file"

    # another browser cannot use, read or end this episode, even with its id
    other.session = me.session
    for method, what, body in (("GET", "state", None), ("POST", "step", {"action": {}})):
        assert other.call(method, what, body).status_code in (400, 404)
    assert other.call("DELETE", "session").status_code == 404
    assert me.call("GET", "state").json()["step_count"] == 4

    ended = me.call("DELETE", "session")
    assert ended.status_code == 200 and ended.json() == {"ended": True}
    wait_sandboxes(served, before)
    gone = me.call("GET", "state")
    assert gone.status_code == 404 and "\n" not in gone.json()["error"]


@pytest.mark.slow
def test_csrf_refusals_have_no_effect(explorer: tuple[str, str], served: Server) -> None:
    base, env_id = explorer
    me = Browser(base, env_id)
    me.open()
    state0 = me.call("GET", "state").json()
    sandboxes = served.status()["open_sandboxes"]
    url = f"{base}/api/play/{env_id}"
    reset = {"task_id": "hello-file"}
    refused: list[httpx.Response] = [
        me.http.post(f"{url}/reset", json=reset, headers={"X-Play-Session": me.session}),
        me.call("POST", "reset", reset, X_CSRF_Token="wrong-" + me.token[6:]),
        me.call("POST", "reset", reset, Origin="https://evil.example"),
        me.call("POST", "reset", reset, Origin="null"),
        me.call("POST", "reset", reset, Sec_Fetch_Site="cross-site"),
        me.http.post(
            f"{url}/reset",
            content="task_id=hello-file",
            headers=me.headers(**{"Content-Type": "application/x-www-form-urlencoded"}),
        ),
        me.http.post(
            f"{url}/reset",
            content='{"task_id": "hello-file"}',
            headers=me.headers(**{"Content-Type": "text/plain"}),
        ),
        # a fresh client: the token without the cookie
        httpx.post(f"{url}/reset", json=reset, headers=me.headers()),
        httpx.post(f"{url}/session", json={}, headers=me.headers()),
        me.call("DELETE", "session", Origin="https://evil.example"),
    ]
    for res in refused:
        assert res.status_code == 403, (res.request.headers, res.text)
        assert set(res.json()) == {"error"} and "\n" not in res.json()["error"]
    # nothing happened: no reset, the episode is still there and unchanged
    assert served.status()["open_sandboxes"] == sandboxes
    assert me.call("GET", "state").json() == state0
    same_origin = me.call("POST", "reset", reset, Origin=base, Sec_Fetch_Site="same-origin")
    assert same_origin.status_code == 200
    # a request from another host name (DNS rebinding) is refused outright
    port = base.rsplit(":", 1)[1]
    rebound = me.call("POST", "step", {"action": {"type": "exec", "command": "touch r"}},
                      Host=f"evil.example:{port}")  # fmt: skip
    assert rebound.status_code == 421
    listing = me.step({"type": "exec", "command": "ls r"}).json()["observation"]
    assert listing["exit_code"] != 0
    assert me.call("DELETE", "session").status_code == 200
    wait_sandboxes(served, sandboxes)
    for env, expected in (("no-such-env", "no environment"), ("tasks", "not a cataloged")):
        res = httpx.get(f"{base}/api/play/{env}/schema")
        assert res.status_code == 404 and expected in res.json()["error"]


@pytest.mark.slow
def test_idle_episodes_end_and_sessions_are_capped(store: Any, served: Server) -> None:
    from fastapi import FastAPI

    from repogym.explorer.web import routes_play
    from repogym.explorer.web.context import Context

    hub = routes_play.PlayHub(store, max_sessions=1, idle_seconds=1.0)
    app = FastAPI(lifespan=hub.lifespan)
    app.include_router(routes_play.router(Context(store, result_cache=0), hub, allowed_hosts=None))
    env_id = served.url.removeprefix("http://")
    before = served.status()["open_sandboxes"]
    with serve_with_lifespan(app) as base:
        me, other = Browser(base, env_id), Browser(base, env_id)
        me.open()
        assert me.call("POST", "reset", {"task_id": "hello-file"}).status_code == 200
        full = other.call("POST", "session", {})
        assert full.status_code == 503 and "capacity reached" in full.json()["error"]
        wait_sandboxes(served, before)  # idle for a second: the reaper ended the episode
        assert me.call("GET", "state").status_code == 404
        other.open()  # room again
    assert not hub.sessions  # the app's end closed the rest


# -- the page in a browser -------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch_chromium()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("size", "scheme"),
    [("desktop", "light"), ("phone", "dark"), ("desktop", "dark"), ("phone", "light")],
)
def test_playground_in_a_browser(
    explorer: tuple[str, str], served: Server, browser: Any, size: str, scheme: str
) -> None:
    from playwright.sync_api import expect

    base, env_id = explorer
    before = served.status()["open_sandboxes"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    width, height = VIEWPORTS[size]
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "response", lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None
    )
    shot = f"{size}-{scheme}"
    try:
        if (size, scheme) == ("desktop", "light"):  # once: the environment page links here
            page.goto(f"{base}/d/{env_id}")
            page.locator("a.play-link").click()
            expect(page).to_have_url(f"{base}/play/{env_id}")
        else:
            page.goto(f"{base}/play/{env_id}")
        expect(page.locator("#play-status")).to_have_text(re.compile("Ready"))
        bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (bg == "rgb(17, 20, 24)") == (scheme == "dark"), bg
        expect(page.locator("#play-actions details.play-act summary")).to_have_text(
            ["exec", "read", "write", "list"]
        )

        page.locator("#play-reset-task_id").fill("hello-file")
        page.locator("#play-reset-btn").click()
        first = page.locator("#play-log li").first
        expect(first.locator(".play-what")).to_have_text("reset")
        expect(first.locator(".play-json")).to_contain_text('"task_id": "hello-file"')
        expect(first.locator(".play-done")).to_have_text("done: false")

        exec_form = page.locator('form[data-kind="exec"]')
        exec_form.locator("textarea[name=command]").fill(
            "printf '<b id=pwn>from the browser</b>' > note.txt && cat note.txt"
        )
        exec_form.get_by_role("button", name="Send exec").click()
        expect(first.locator(".play-what")).to_have_text("step exec")
        expect(first.locator(".play-json")).to_contain_text("<b id=pwn>from the browser</b>")
        expect(first.locator(".play-reward")).to_have_text("reward: 0")  # finite before the end
        assert page.locator("#pwn").count() == 0  # shown as text, never as markup
        expect(page.locator("#play-log li")).to_have_count(2)
        page.screenshot(path=str(ARTIFACTS / f"7-play-{shot}.png"), full_page=True)

        page.locator("#play-state").click()
        expect(first.locator(".play-json")).to_contain_text('"step_count": 1')
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"page is {overflow}px wider than the viewport"
        page.locator("#play-end").click()
        expect(first.locator(".play-what")).to_have_text("end")
        wait_sandboxes(served, before)
    finally:
        context.close()
    assert problems == []
