"""The admin app and the public explorer as two real processes sharing one ``--data`` folder:
admin changes show in the public explorer within 5 s, each is in the audit log, the admin app
checks credentials and cross-site writes on every route, and the public app has no admin route."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from repogym.explorer.curation import SETTINGS_FILE, read_audit
from tests.explorer.web_fixtures import EXAMPLES, free_port
from tests.explorer_runs.fixtures import TEXTSTATS, Visitor

HELLO = "hello-file"
SOON = 5.0  # seconds an admin change may take to show in the public explorer


@dataclass
class Pair:
    public: str
    admin: str
    data: Path
    token: str
    http: httpx.Client  # the public explorer
    adm: httpx.Client  # the admin app, signed in, with its CSRF cookie

    def change(self, action: str, **body: Any) -> httpx.Response:
        r = self.adm.post(
            f"/admin/api/{action}",
            json=body,
            headers={"X-CSRF-Token": self.adm.cookies["rg_csrf"], "Origin": self.admin},
        )
        assert r.status_code == 200, r.text
        return r


def _wait(check: Callable[[], bool], what: str, limit: float = SOON) -> None:
    """Poll ``check`` until it holds; fail when ``limit`` seconds pass first."""
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, f"not within {limit}s: {what}"
        time.sleep(0.05)


def _start(cmd: list[str], ready: Callable[[], bool]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while True:
        try:
            if ready():
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{cmd[3:5]} did not start: {proc.communicate()[1][-2000:]}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    root = tmp_path_factory.mktemp("admin")
    for name in ("alpha", "beta"):
        shutil.copytree(EXAMPLES, root / name)
    data, token = root / "data", secrets.token_urlsafe(24)
    (root / "token").write_text(token + "\n")
    pport, aport = free_port(), free_port()
    public, admin = f"http://127.0.0.1:{pport}", f"http://127.0.0.1:{aport}"
    cli = [sys.executable, "-m", "repogym.cli", "explore"]
    p_cmd = [*cli, str(root / "alpha"), str(root / "beta"), "--port", str(pport)]
    p_cmd += ["--data", str(data), "--runs-dir", str(root / "runs"), "--allow-command-agent"]
    a_cmd = [*cli, "admin", "--data", str(data), "--port", str(aport)]
    a_cmd += ["--token-file", str(root / "token")]
    auth = {"Authorization": f"Bearer {token}"}

    def public_ready() -> bool:
        r = httpx.get(f"{public}/api/tasks/beta/{TEXTSTATS}", timeout=2)
        return r.status_code == 200 and not r.json().get("pending")

    procs = [_start(p_cmd, public_ready)]
    try:
        procs.append(
            _start(a_cmd, lambda: httpx.get(f"{admin}/admin/", headers=auth).status_code == 200)
        )
        with (
            httpx.Client(base_url=public, timeout=30) as http,
            httpx.Client(base_url=admin, timeout=30, headers=auth) as adm,
        ):
            assert adm.get("/admin/").status_code == 200  # sets the CSRF cookie
            yield Pair(public, admin, data, token, http, adm)
    finally:
        for proc in procs:
            proc.terminate()
            proc.communicate(timeout=30)


def _ids(pair: Pair, **params: Any) -> list[str]:
    r = pair.http.get("/api/search", params=params)
    assert r.status_code == 200
    return [c["id"] for c in r.json()["items"]]


def test_admin_routes_need_credentials(pair: Pair) -> None:
    for method, path in [
        ("GET", "/admin/"),
        ("GET", "/admin/api/settings"),
        ("POST", "/admin/api/hide"),
        ("GET", "/admin/nothing"),
    ]:
        r = httpx.request(method, pair.admin + path, json={"env": "beta"})
        assert r.status_code == 401, (path, r.text)
        assert r.headers["www-authenticate"].startswith("Basic")
        wrong = httpx.request(
            method,
            pair.admin + path,
            json={"env": "beta"},
            headers={"Authorization": "Bearer " + "x" * 32},
        )
        assert wrong.status_code == 403, (path, wrong.text)
        basic = httpx.request(method, pair.admin + path, auth=("root", "nope"))
        assert basic.status_code == 403
    ok = httpx.get(pair.admin + "/admin/", auth=("anyone", pair.token))
    assert ok.status_code == 200 and "Signed in as <b>token</b>" in ok.text
    assert "default-src 'none'" in ok.headers["content-security-policy"]
    assert (
        not (pair.data / SETTINGS_FILE).exists()
        or "beta" not in json.loads((pair.data / SETTINGS_FILE).read_text())["hidden"]
    )


def test_cross_site_writes_are_refused(pair: Pair) -> None:
    before = len(read_audit(pair.data))
    good = {"X-CSRF-Token": pair.adm.cookies["rg_csrf"], "Origin": pair.admin}
    attempts = [
        ({"Origin": pair.admin}, "X-CSRF-Token"),  # no double-submit header
        ({**good, "Origin": "http://evil.example"}, "Origin"),
        ({**good, "Sec-Fetch-Site": "cross-site"}, "cross-site"),
        ({**good, "X-CSRF-Token": "A" * 43}, "X-CSRF-Token"),
    ]
    for headers, needle in attempts:
        r = pair.adm.post("/admin/api/hide", json={"env": "beta"}, headers=headers)
        assert r.status_code == 403 and needle in r.json()["error"], r.text
    form = pair.adm.post(
        "/admin/api/hide",
        content="env=beta",
        headers={**good, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 403 and "application/json" in form.json()["error"]
    assert len(read_audit(pair.data)) == before
    assert "beta" in _ids(pair)


def test_the_public_app_has_no_admin_route(pair: Pair) -> None:
    for path in ("/admin", "/admin/", "/admin/api/settings", "/admin/api/hide", "/admin/x.js"):
        assert pair.http.get(path).status_code == 404, path
        assert pair.http.post(path, json={"env": "beta"}).status_code == 404, path
        auth = {"Authorization": f"Bearer {pair.token}"}
        assert pair.http.get(path, headers=auth).status_code == 404, path
    code = (
        "import sys, repogym.cli, repogym.explorer.web.app as a\n"
        "from repogym.explorer.curation import CurationReader\n"
        "a.create_app(object.__new__(object), curation=None, mcp=False)\n"
        "bad = [m for m in sys.modules if m.startswith('repogym.explorer.admin')]\n"
        "assert not bad, bad\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def _mcp_status(pair: Pair, env: str) -> int:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    r = pair.http.post(
        f"/mcp/d/{env}", json=body, headers={"Accept": "application/json, text/event-stream"}
    )
    return r.status_code


def test_hide_vanishes_everywhere_and_a_torn_file_changes_nothing(pair: Pair) -> None:
    assert _mcp_status(pair, "beta") == 200
    assert pair.http.get(f"/t/beta/{HELLO}").status_code == 200
    pair.change("hide", env="beta", hidden=True)
    _wait(lambda: "beta" not in _ids(pair), "beta hidden from /api/search")
    assert _ids(pair) == ["alpha"]
    for path in (
        "/d/beta",
        f"/t/beta/{HELLO}",
        "/api/envs/beta",
        f"/api/tasks/beta/{HELLO}",
        f"/api/files/beta/{HELLO}/instruction.md",
    ):
        assert pair.http.get(path).status_code == 404, path
    tasks = pair.http.get("/api/search/tasks", params={"q": "greeting", "size": 50}).json()
    assert tasks["items"] and {t["env"] for t in tasks["items"]} == {"alpha"}
    home = pair.http.get("/", params={"q": "hello"}).text
    assert "/d/alpha" in home and "/d/beta" not in home and "/t/beta/" not in home
    assert _mcp_status(pair, "beta") == 404 and _mcp_status(pair, "alpha") == 200
    last = read_audit(pair.data)[-1]
    assert (last["who"], last["action"], last["after"]) == ("token", "hide", {"hidden": ["beta"]})
    # a half-written settings file: the admin app reports it, the public one keeps beta hidden
    good = (pair.data / SETTINGS_FILE).read_bytes()
    (pair.data / SETTINGS_FILE).write_bytes(good[: len(good) // 2])
    state = pair.adm.get("/admin/api/settings").json()
    assert state["settings"] is None and "not valid JSON" in state["error"]
    assert "does not parse" in pair.adm.get("/admin/").text
    t_end = time.monotonic() + 2.5  # past the public side's re-read interval
    while time.monotonic() < t_end:
        assert "beta" not in _ids(pair)
        time.sleep(0.2)
    (pair.data / SETTINGS_FILE).write_bytes(good)
    pair.change("hide", env="beta", hidden=False)
    _wait(lambda: "beta" in _ids(pair), "beta back")
    assert pair.http.get(f"/t/beta/{HELLO}").status_code == 200


def test_pins_lead_the_home_page(pair: Pair) -> None:
    natural = _ids(pair)
    last = natural[-1]
    pair.change("pin", env=last, pinned=True)
    _wait(lambda: _ids(pair)[0] == last, f"{last} pinned first")
    assert sorted(_ids(pair)) == sorted(natural)  # nothing lost or doubled
    home = pair.http.get("/").text
    assert home.index(f'href="/d/{last}"') < home.index(f'href="/d/{natural[0]}"')
    assert read_audit(pair.data)[-1]["after"] == {"pinned": [last]}
    assert pair.http.get("/api/curation").json()["pinned"] == [last]
    pair.change("pin", env=last, pinned=False)
    _wait(lambda: _ids(pair) == natural, "pin removed")


def test_collections_and_featured(pair: Pair) -> None:
    pair.change("collection", name="Starters", ids=["alpha", "beta"])
    pair.change("feature", env="alpha", featured=True)
    _wait(lambda: pair.http.get("/api/curation").json()["featured"] == ["alpha"], "featured")
    cur = pair.http.get("/api/curation").json()
    assert cur["collections"] == {"Starters": ["alpha", "beta"]}
    assert pair.http.get("/api/envs/alpha").json()["featured"] is True
    home = pair.http.get("/").text  # the plain home page shows both, above the listing
    assert '<section class="featured"' in home and 'href="/d/alpha"' in home.split("results")[0]
    assert 'href="/c/Starters"' in home
    assert "featured" not in pair.http.get("/", params={"q": "alpha"}).text.split("results")[0]
    page = pair.http.get("/c/Starters")
    assert page.status_code == 200
    assert 'href="/d/alpha"' in page.text and 'href="/d/beta"' in page.text
    pair.change("hide", env="beta", hidden=True)  # a hidden member leaves the collection
    _wait(
        lambda: pair.http.get("/api/curation").json()["collections"]["Starters"] == ["alpha"],
        "collection without the hidden one",
    )
    assert 'href="/d/beta"' not in pair.http.get("/c/Starters").text
    pair.change("hide", env="beta", hidden=False)
    pair.change("collection", name="Starters", ids=[])
    pair.change("feature", env="alpha", featured=False)
    _wait(lambda: pair.http.get("/api/curation").json()["collections"] == {}, "removed")
    assert pair.http.get("/c/Starters").status_code == 404
    actions = [a["action"] for a in read_audit(pair.data)[-6:]]
    assert actions == ["collection", "feature", "hide", "hide", "collection", "feature"]


def test_banner_on_every_page_escaped(pair: Pair) -> None:
    text = 'Maintenance <script>alert("x")</script> tonight'
    pair.change("banner", text=text, link="https://example.org/a?b=1&c=2", link_text="details")
    pages = ["/", "/d/alpha", f"/t/alpha/{HELLO}", "/d/no-such-env"]
    _wait(lambda: "Maintenance" in pair.http.get("/d/alpha").text, "banner shown")
    for path in pages:
        page = pair.http.get(path).text
        assert '<details class="banner" open role="note" data-banner=' in page, path
        assert "Maintenance &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; tonight" in page
        assert '<script>alert("x")' not in page
        assert 'href="https://example.org/a?b=1&amp;c=2"' in page and ">details</a>" in page
        assert page.count('class="banner"') == 1
    assert read_audit(pair.data)[-1]["action"] == "banner"
    pair.change("banner", text="")
    _wait(lambda: "Maintenance" not in pair.http.get("/d/alpha").text, "banner removed")


def test_runs_off_per_environment_and_globally(pair: Pair) -> None:
    v = Visitor(pair.public)
    try:
        assert 'id="runs"' in pair.http.get(f"/t/alpha/{TEXTSTATS}").text
        pair.change("runs", env="alpha", enabled=False)
        _wait(
            lambda: 'id="runs"' not in pair.http.get(f"/t/alpha/{TEXTSTATS}").text, "run panel gone"
        )
        assert 'id="runs"' in pair.http.get(f"/t/beta/{TEXTSTATS}").text
        r = v.start(env="alpha", task=TEXTSTATS, agent="oracle")
        assert r.status_code == 403 and r.json()["error"] == "runs are turned off for alpha"
        pair.change("runs", enabled=False)
        _wait(lambda: not v.http.get("/api/runs/session").json()["enabled"], "runs off")
        session = v.http.get("/api/runs/session").json()
        assert session["reason"] == "runs are turned off on this explorer"
        r = v.start(env="beta", task=TEXTSTATS, agent="oracle")
        assert r.status_code == 403 and "turned off" in r.json()["error"]
        assert 'id="runs"' not in pair.http.get(f"/t/beta/{TEXTSTATS}").text
        # the agents offered change while runs are off: once runs are back, both apply
        pair.change("agents", agents=["oracle"])
        pair.change("runs", env="alpha", enabled=True)
        pair.change("runs", enabled=True)
        _wait(lambda: v.http.get("/api/runs/session").json()["enabled"], "runs back on")
        r = v.start(env="beta", task=TEXTSTATS, agent="nop")
        assert r.status_code == 403 and "nop agent is not offered" in r.json()["error"]
        assert v.http.get("/api/runs/session").json()["limits"]["agents"] == ["oracle"]
        pair.change("agents", agents=None)
        _wait(lambda: len(v.http.get("/api/runs/session").json()["limits"]["agents"]) > 1, "all")
        actions = [a["action"] for a in read_audit(pair.data)[-6:]]
        assert actions == ["runs", "runs", "agents", "runs", "runs", "agents"]
    finally:
        v.close()


def test_a_stop_request_ends_a_running_rollout(pair: Pair) -> None:
    v = Visitor(pair.public)
    try:
        r = v.start(env="beta", task=TEXTSTATS, agent="command", command="sleep 300")
        assert r.status_code == 202, r.text
        run_id = r.json()["id"]

        def status() -> dict[str, Any]:
            return v.http.get(f"/api/runs/{run_id}").json()

        def agent_started() -> bool:
            events = v.http.get(f"/api/runs/{run_id}", params={"events": 1}).json()
            return status()["status"] == "running" and any(
                e.get("kind") == "phase" and e["data"].get("phase") == "agent_execution"
                for e in events.get("events") or []
            )

        _wait(agent_started, "the agent runs", limit=120)
        pair.change("stop", run=run_id)
        _wait(lambda: status()["status"] in ("done", "error"), "the run stopped")
        rec = status()
        assert rec["status"] == "error" and rec["reward"] is None
        assert rec["error"] == "stopped by an administrator"
        assert read_audit(pair.data)[-1]["after"]["stop"].keys() == {run_id}
        # a hidden environment's runs leave the run pages and the runs API too
        listing = {"env": "beta", "task": TEXTSTATS}
        assert [x["id"] for x in v.http.get("/api/runs", params=listing).json()["runs"]] == [run_id]
        pair.change("hide", env="beta", hidden=True)
        _wait(lambda: v.http.get(f"/api/runs/{run_id}").status_code == 404, "run hidden")
        assert v.http.get(f"/r/{run_id}").status_code == 404
        assert v.http.get("/api/runs", params=listing).json()["runs"] == []
        assert v.http.get("/runs", params=listing).status_code == 404
        pair.change("hide", env="beta", hidden=False)
        _wait(lambda: v.http.get(f"/api/runs/{run_id}").status_code == 200, "run back")
    finally:
        v.close()


def test_accounts_with_hashed_passwords(tmp_path: Path) -> None:
    from repogym.explorer.admin import AuthConfig, create_admin_app
    from tests.explorer.web_fixtures import serve

    hashed = subprocess.run(
        [sys.executable, "-m", "repogym.cli", "explore", "admin", "--hash-password"],
        input="s3cret pass\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert hashed.startswith("scrypt$") and "s3cret" not in hashed
    accounts = tmp_path / "accounts"
    accounts.write_text(f"# admins\nalice:{hashed}\n")
    app = create_admin_app(tmp_path / "data", AuthConfig.from_accounts_file(accounts))
    with serve(app) as base, httpx.Client(base_url=base, auth=("alice", "s3cret pass")) as c:
        page = c.get("/admin/")
        assert page.status_code == 200 and "Signed in as <b>alice</b>" in page.text
        assert httpx.get(base + "/admin/").status_code == 401
        assert httpx.get(base + "/admin/", auth=("alice", "s3cret")).status_code == 403
        assert httpx.get(base + "/admin/", auth=("mallory", "s3cret pass")).status_code == 403
        bearer = {"Authorization": "Bearer s3cret pass"}  # accounts sign in with Basic
        assert httpx.get(base + "/admin/", headers=bearer).status_code == 401
        headers = {"X-CSRF-Token": c.cookies["rg_csrf"], "Origin": base}
        r = c.post("/admin/api/pin", json={"env": "e1", "position": 0}, headers=headers)
        assert r.status_code == 200 and r.json()["settings"]["pinned"] == ["e1"]
        bad = c.post(
            "/admin/api/banner", json={"text": "x", "link": "javascript:x"}, headers=headers
        )
        assert bad.status_code == 400 and "banner.link" in bad.json()["error"]
        assert c.post("/admin/api/nothing", json={}, headers=headers).status_code == 404
    audit = read_audit(tmp_path / "data")
    assert [(a["who"], a["action"]) for a in audit] == [("alice", "pin")]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([], "needs --data DIR"),
        (["--data", "D"], "exactly one of --token-file F or --accounts F"),
        (["--data", "D", "--token-file", "T"], "at least 16 characters"),
        (["--data", "D", "--accounts", "T"], "expected name:scrypt$"),
    ],
)
def test_admin_command_errors(tmp_path: Path, args: list[str], needle: str) -> None:
    (tmp_path / "T").write_text("short\n")
    args = [str(tmp_path / a) if a in ("D", "T") else a for a in args]
    cmd = [sys.executable, "-m", "repogym.cli", "explore", "admin", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_a_rollout_taken_off_the_community_view_leaves_it(pair: Pair) -> None:
    v = Visitor(pair.public)
    try:
        run_id = v.run(env="alpha", task=HELLO, agent="oracle")["id"]

        def shown() -> list[str]:
            r = pair.http.get("/api/community/rollouts", params={"env": "alpha"})
            return [x["id"] for x in r.json()["rollouts"]]

        _wait(lambda: run_id in shown(), "the graded run on the community view")
        pair.change("rollout", run=run_id, hidden=True)
        _wait(lambda: run_id not in shown(), "the rollout taken off")
        board = pair.http.get("/api/community/leaderboard", params={"env": "alpha"}).json()
        assert not any(r["agent"] == "oracle" for r in board["rows"]), board  # its only run
        assert v.http.get(f"/api/runs/{run_id}").status_code == 200  # its own page stays
        assert read_audit(pair.data)[-1]["action"] == "rollout"
        pair.change("rollout", run=run_id, hidden=False)
        _wait(lambda: run_id in shown(), "the rollout back")
    finally:
        v.close()


def test_run_limits_from_the_admin_lower_the_operators(pair: Pair) -> None:
    """Limits apply within seconds; an admin may lower the command line's, never raise them."""
    v = Visitor(pair.public)
    try:

        def limits() -> dict[str, Any]:
            return dict(v.http.get("/api/runs/session").json()["limits"])

        before = limits()
        pair.change("limits", limits={"per_hour": 0, "time_limit_s": 60, "max_steps": 10_000})
        _wait(lambda: limits()["per_visitor_per_hour"] == 0, "the hourly limit applied")
        now = limits()
        assert now["time_limit_s"] == 60 and now["max_steps"] == before["max_steps"]
        r = v.start(env="alpha", task=HELLO, agent="nop")
        assert r.status_code == 429 and "runs per hour" in r.json()["error"]
        pair.change("limits", limits={"per_hour": None, "time_limit_s": None, "max_steps": None})
        _wait(lambda: limits() == before, "the operator's limits back")
    finally:
        v.close()
