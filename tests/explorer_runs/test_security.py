"""Attacks on the explorer's runs: cross-site starts, reading other visitors' runs, endpoints
into the explorer's own network, runs reading each other's files, and the operator's limits."""

from __future__ import annotations

import json
import shlex
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from repogym.explorer.runs import RunLimits
from repogym.taskdir import update_task_toml
from tests.explorer.web_fixtures import EXAMPLES
from tests.explorer_runs.fixtures import TEXTSTATS, Visitor, explorer
from tests.llm.stub_servers import openai_stub

pytest.importorskip("uvicorn")

START = {"env": "tasks", "task": TEXTSTATS, "agent": "nop"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    limits = RunLimits(allow_command=True, max_concurrent=2, per_visitor_per_hour=50)
    with explorer(tmp_path_factory.mktemp("runs"), limits=limits) as ex:
        yield ex


def _count_runs(site: Any) -> int:
    return len(site.service.records._select("", ()))


def test_cross_site_starts_are_refused_and_change_nothing(site) -> None:  # type: ignore[no-untyped-def]
    v = Visitor(site.base)
    before = _count_runs(site)
    good = {"X-CSRF-Token": v.csrf, "Origin": site.base}
    attempts = [
        v.http.post("/api/runs", json=START, headers={"Origin": site.base}),  # no token
        v.http.post("/api/runs", json=START, headers={**good, "X-CSRF-Token": "x" * 43}),
        v.http.post("/api/runs", json=START, headers={**good, "Origin": "https://evil.example"}),
        v.http.post("/api/runs", json=START, headers={**good, "Origin": "null"}),
        v.http.post("/api/runs", json=START, headers={**good, "Sec-Fetch-Site": "cross-site"}),
        v.http.post(  # what an HTML form on another site can send
            "/api/runs",
            content="env=tasks&task=textstats-word-count&agent=nop",
            headers={**good, "Content-Type": "application/x-www-form-urlencoded"},
        ),
        # a fresh client with the token but not the cookie (another site cannot read it)
        httpx.post(site.base + "/api/runs", json=START, headers=good),
    ]
    for r in attempts:
        assert r.status_code == 403, r.text
        assert r.json()["error"]
    # DNS rebinding: another name resolved to this machine is same-origin to the browser
    port = site.base.rsplit(":", 1)[1]
    rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    assert v.http.get("/api/runs/session", headers=rebound).status_code == 421
    r = v.http.post("/api/runs", json=START, headers={**good, **rebound})
    assert r.status_code == 421
    assert _count_runs(site) == before
    assert v.start(**START).status_code == 202  # the same request from the page is accepted


def test_bad_requests_get_one_line_and_no_run(site) -> None:  # type: ignore[no-untyped-def]
    v = Visitor(site.base)
    before = _count_runs(site)
    cases = {
        "agent": {**START, "agent": "root"},
        "unknown": {**START, "extra": 1},
        "no such task": {**START, "task": "nope"},
        "needs a command": {**START, "agent": "command"},
        "provider and a model": {**START, "agent": "llm"},
        "needs your model endpoint": {**START, "agent": "llm", "provider": "openai", "model": "m"},
    }
    for needle, body in cases.items():
        r = v.start(**body)
        assert r.status_code in (400, 404), (needle, r.text)
        assert needle in r.json()["error"] and "\n" not in r.json()["error"]
    bad = v.http.post(
        "/api/runs",
        content=b"{not json",
        headers={"X-CSRF-Token": v.csrf, "Content-Type": "application/json"},
    )
    assert bad.status_code == 400
    assert _count_runs(site) == before


@pytest.mark.parametrize(
    ("endpoint", "needle"),
    [
        ("ftp://models.example/v1", "only http:// and https://"),
        ("file:///etc/passwd", "only http:// and https://"),
        ("http://user:pw@models.example/v1", "credentials in the URL"),
        ("http://127.0.0.1:9/v1", "own network"),
        ("http://[::1]:9/v1", "own network"),
        ("http://169.254.169.254/latest", "own network"),
        ("http://10.1.2.3/v1", "own network"),
        ("http://localhost:9/v1", "own network"),
    ],
)
def test_visitor_endpoints_must_be_public_http(site, endpoint: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    v = Visitor(site.base)
    body = {**START, "agent": "llm", "provider": "openai", "model": "m", "endpoint": endpoint}
    r = v.start(**body, api_key="sk-x")
    assert r.status_code == 400 and needle in r.json()["error"], r.text


def test_endpoints_are_checked_again_when_the_run_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name that resolved to a public address when the run was asked for and to the
    explorer's own network when it starts (DNS rebinding) is refused at the start."""
    real = socket.getaddrinfo
    calls: list[str] = []

    def rebinding(host: Any, *args: Any, **kw: Any) -> Any:
        if host == "models.rebind.test":
            calls.append(host)
            address = "93.184.216.34" if len(calls) == 1 else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 443))]
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with openai_stub() as stub, explorer(tmp_path / "runs") as ex:
        v = Visitor(ex.base)
        rec = v.run(
            agent="llm",
            provider="openai",
            model="m",
            endpoint="http://models.rebind.test/v1",
            api_key="sk-x",
        )
        assert stub.requests == []
    assert len(calls) == 2
    assert rec["status"] == "error" and "own network" in rec["error"]


def test_visitors_see_only_their_own_runs_until_graded(site) -> None:  # type: ignore[no-untyped-def]
    alice, bob = Visitor(site.base), Visitor(site.base)
    r = alice.start(env="tasks", task=TEXTSTATS, agent="command", command="sleep 3")
    run_id = r.json()["id"]
    # running: only alice can read it, its events, its page or compare it
    assert alice.http.get(f"/api/runs/{run_id}").json()["mine"] is True
    for path in (f"/api/runs/{run_id}", f"/api/runs/{run_id}/events", f"/r/{run_id}"):
        assert bob.http.get(path).status_code == 404, path
    assert bob.http.get("/api/compare", params={"ids": run_id}).json()["runs"] == []
    listed = bob.http.get("/api/runs", params={"env": "tasks", "task": TEXTSTATS}).json()
    assert run_id not in [x["id"] for x in listed["runs"]]
    alice.follow(run_id)
    # finished and graded: bob sees it, never who ran it
    seen = bob.http.get(f"/api/runs/{run_id}").json()
    assert seen["reward"] == 0.0 and seen["mine"] is False
    assert "owner" not in seen and alice.http.cookies.get("rg_visitor") not in str(seen)


def test_ungraded_runs_stay_with_their_owner(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    task = ds / "noreward"
    shutil.copytree(EXAMPLES / "hello-file", task)
    (task / "tests" / "test.sh").write_text("#!/usr/bin/env bash\necho no reward file\n")
    update_task_toml(task)  # the copy's own content hash (the explorer checks it before a run)
    with explorer(tmp_path / "runs", [str(ds)]) as ex:
        alice, bob = Visitor(ex.base), Visitor(ex.base)
        rec = alice.run(env="ds", task="noreward", agent="nop")
        assert rec["status"] == "error" and rec["reward"] is None
        assert bob.http.get(f"/api/runs/{rec['id']}").status_code == 404
        assert bob.http.get("/api/runs", params={"env": "ds"}).json()["runs"] == []


def test_owner_visibility_hides_every_run_from_others(tmp_path: Path) -> None:
    with explorer(tmp_path / "runs", limits=RunLimits(visibility="owner")) as ex:
        alice, bob = Visitor(ex.base), Visitor(ex.base)
        rec = alice.run(agent="nop")
        assert rec["reward"] == 0.0
        assert bob.http.get(f"/api/runs/{rec['id']}").status_code == 404
        assert bob.http.get("/api/runs", params={"env": "tasks"}).json()["runs"] == []
        assert alice.http.get("/api/runs", params={"env": "tasks"}).json()["runs"]


def test_a_run_cannot_read_another_runs_files(site) -> None:  # type: ignore[no-untyped-def]
    """Two runs at once: the second looks everywhere it can for the first one's file, and for
    the explorer's run records on the host."""
    alice, bob = Visitor(site.base), Visitor(site.base)
    mark = "marker-7f3a9c-private"
    a = alice.start(
        env="tasks",
        task="hello-file",
        agent="command",
        command=f"echo {mark} > /app/{mark}.txt; echo {mark} > /tmp/{mark}.txt; sleep 4",
    )
    assert a.status_code == 202
    time.sleep(1.0)
    look = (
        "find / \\( -path /proc -o -path /sys \\) -prune -o -name 'marker-*' -print 2>/dev/null;"
        f" cat /app/marker-* /tmp/marker-* 2>&1; ls {site.folder} 2>&1; echo looked"
    )
    b = bob.run(env="tasks", task="hello-file", agent="command", command=look)
    alice.follow(a.json()["id"])
    [out] = [e["data"]["text"] for e in b["events"] if e["kind"] == "agent_output"]
    assert "looked" in out
    assert mark not in out
    assert "runs.sqlite" not in out


def test_operator_limits(tmp_path: Path) -> None:
    limits = RunLimits(per_visitor_per_hour=1, max_concurrent=1, max_queued=0, allow_command=True)
    with explorer(tmp_path / "runs", limits=limits) as ex:
        alice, bob = Visitor(ex.base), Visitor(ex.base)
        first = alice.start(env="tasks", task=TEXTSTATS, agent="command", command="sleep 2")
        assert first.status_code == 202
        again = alice.start(**START)
        assert again.status_code == 429 and "per hour" in again.json()["error"]
        assert again.headers["retry-after"]
        busy = bob.start(**START)
        assert busy.status_code == 429 and "busy" in busy.json()["error"]
        alice.follow(first.json()["id"])
        assert Visitor(ex.base).start(**START).status_code == 202


def test_fresh_cookies_do_not_make_a_new_visitor(tmp_path: Path) -> None:
    from repogym.explorer.runs import RunRefused
    from repogym.explorer.runs.requests import parse_request
    from repogym.explorer.runs.service import ADDRESS_FACTOR

    with explorer(tmp_path / "runs", limits=RunLimits(per_visitor_per_hour=1)) as ex:
        svc = ex.service
        req = parse_request(START)
        for n in range(ADDRESS_FACTOR):  # one run per cookie, all from one remote address
            svc.start(req, svc.owner_of(f"visitor-cookie-{n:040d}"), "203.0.113.7")
        with pytest.raises(RunRefused, match="from one address"):
            svc.start(req, svc.owner_of("visitor-cookie-fresh-" + "0" * 30), "203.0.113.7")
        svc.start(req, svc.owner_of("visitor-cookie-other-" + "0" * 30), "198.51.100.2")


def test_disabled_runs_and_agents(tmp_path: Path) -> None:
    with explorer(tmp_path / "off", limits=RunLimits(enabled=False)) as ex:
        v = Visitor(ex.base)
        assert v.session["enabled"] is False and "turned off" in v.session["reason"]
        r = v.start(**START)
        assert r.status_code == 503 and "turned off" in r.json()["error"]
        assert 'id="runs"' not in v.http.get(f"/t/tasks/{TEXTSTATS}").text
    with explorer(tmp_path / "on") as ex:
        v = Visitor(ex.base)
        assert v.session["limits"]["agents"] == ["oracle", "nop", "llm"]
        r = v.start(env="tasks", task=TEXTSTATS, agent="command", command="id")
        assert r.status_code == 403 and "not enabled" in r.json()["error"]


def test_events_are_pushed_not_polled(site) -> None:  # type: ignore[no-untyped-def]
    """A reader waiting on a running run gets each event as it happens."""
    v = Visitor(site.base)
    r = v.start(env="tasks", task=TEXTSTATS, agent="command", command="sleep 1")
    got: list[float] = []
    t0 = time.monotonic()

    def read() -> None:
        with v.http.stream("GET", f"/api/runs/{r.json()['id']}/events") as resp:
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    got.append(time.monotonic() - t0)
                if line.startswith("event: end"):
                    return

    t = threading.Thread(target=read)
    t.start()
    t.join(60)
    assert len(got) >= 8
    assert got[0] < got[-1] - 0.8  # the first events arrived before the agent's second passed


def test_a_run_cannot_buy_its_reward(site) -> None:  # type: ignore[no-untyped-def]
    """An agent started from the explorer that plants a reward file, rewrites the tests to
    pass, and adds a sitecustomize hook that forces exit 0 earns what doing nothing earns."""
    v = Visitor(site.base)
    hack = (
        "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; "
        "for f in tests/test_*.py; do printf 'import unittest\\nclass T(unittest.TestCase):\\n"
        '    def test_ok(self): pass\\n\' > "$f"; done; '
        "printf 'import os, atexit\\natexit.register(lambda: os._exit(0))\\n' > sitecustomize.py; "
        "echo planted"
    )
    hacked = v.run(agent="command", command=hack)
    nop = v.run(agent="nop")
    [out] = [e["data"]["text"] for e in hacked["events"] if e["kind"] == "agent_output"]
    assert "planted" in out
    assert hacked["reward"] == nop["reward"] == 0.0
    assert hacked["details"]["resolved"] is False


def test_code_under_test_cannot_buy_its_reward(site) -> None:  # type: ignore[no-untyped-def]
    """The judge attacks, from the explorer: the package writes reward files when it is
    imported and at exit (names built at run time), and patches unittest's result so every
    failure counts as a success. The judge's rights and the boot leave it what nop earns."""
    v = Visitor(site.base)
    code = (
        "import atexit, os, unittest\n"
        "def _w():\n"
        "    d = bytes.fromhex('2f6c6f67732f7665726966696572').decode()\n"
        "    try:\n"
        "        os.makedirs(d, exist_ok=True)\n"
        "        open(os.path.join(d, 'reward' + '.txt'), 'w').write('1')\n"
        "    except OSError:\n"
        "        pass\n"
        "_w()\n"
        "getattr(atexit, 'reg' + 'ister')(_w)\n"
        "_r = getattr(unittest, 'Text' + 'TestResult')\n"
        "setattr(_r, 'add' + 'Failure', getattr(_r, 'add' + 'Success'))\n"
    )
    hack = f"printf %s {shlex.quote(code)} >> textstats/__init__.py; echo planted"
    hacked = v.run(agent="command", command=hack)
    nop = v.run(agent="nop")
    assert hacked["reward"] == nop["reward"] == 0.0, hacked["details"]
    assert hacked["details"]["resolved"] is False


def test_tests_made_to_pass_are_caught_by_the_canaries(site) -> None:  # type: ignore[no-untyped-def]
    """From the explorer: the package's functions give every test method of their caller's
    module a no-op's code (names built at run time). The canaries planted in the run pass with
    them: a tamper, reward 0, named on the run's page."""
    from tests.adversarial.test_canary_attacks import HOLLOW_ON_FIRST_CALL

    v = Visitor(site.base)
    hack = f"printf %s {shlex.quote(HOLLOW_ON_FIRST_CALL)} >> textstats/__init__.py; echo planted"
    hacked = v.run(agent="command", command=hack)
    assert hacked["reward"] == 0.0, hacked["details"]
    tamper = hacked["details"].get("tamper")
    assert tamper, json.dumps(hacked["details"])[:3000]
    assert tamper and all(t.startswith("canary ") and " passed " in t for t in tamper), tamper
    page = v.http.get(f"/r/{hacked['id']}").text
    assert "Tamper" in page and "canary tests.test_counts.CountsTest." in page
    honest = v.run(agent="oracle")
    assert honest["reward"] == 1.0
    assert honest["details"]["canaries"]["failed"] == honest["details"]["canaries"]["run"] == 3
    assert "3 of 3 failed (as they must)" in v.http.get(f"/r/{honest['id']}").text
