"""Malicious datasets against the explorer on its own (no trust loader in front of it): real
folders with real symlinks and FIFOs, real SQLite snapshots, the real app.

1. Symlinked task files (``instruction.md``, ``tests/test.sh``, ``environment/Dockerfile``,
   ``task.toml``, a dataset ``README.md``, a whole ``tests/`` folder, row files and archives)
   point at a canary file on the host: its token must appear nowhere — not in a doc, not in
   the snapshot or pack bytes, not in any page, API answer or search result.
3. Each phase's network mode and the host variables a verifier asks for are shown (names only).
4. Control characters in task folder names never reach a page or a terminal raw.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from repogym.explorer.adapters import AdapterError  # noqa: E402
from repogym.explorer.adapters.harbor import HarborAdapter  # noqa: E402
from repogym.explorer.adapters.rows import RowsAdapter  # noqa: E402
from repogym.explorer.build import build_snapshot  # noqa: E402
from repogym.explorer.store import open_store  # noqa: E402
from repogym.explorer.web import create_app  # noqa: E402
from tests.explorer.web_fixtures import serve  # noqa: E402

LEAVING = "symlink leaving the task, not followed"


def _task_toml(description: str = "A task", extra: str = "") -> str:
    return (
        'schema_version = "1.4"\n[task]\n'
        f'name = "hostile/t"\ndescription = "{description}"\n'
        '[metadata]\ndifficulty = "easy"\n'
        '[environment]\nnetwork_mode = "no-network"\n' + extra
    )


def _task(ds: Path, name: str, *, instruction: str = "Do the thing.\n") -> Path:
    t = ds / name
    (t / "environment").mkdir(parents=True)
    (t / "tests").mkdir()
    (t / "task.toml").write_text(_task_toml("A hostile task"))
    (t / "instruction.md").write_text(instruction)
    (t / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\n")
    (t / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    return t


def _replace_with_link(path: Path, target: str | Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    os.symlink(target, path)


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A host folder with secrets in it, and the random token they hold."""
    root = tmp_path_factory.mktemp("hostile")
    token = "CANARY" + secrets.token_hex(12)
    host = root / "host"
    (host / "tests").mkdir(parents=True)
    (host / "secret.txt").write_text(f"host secret {token}\n")
    # valid task.toml text holding the token: parsed, it would show on the page
    (host / "config.toml").write_text(_task_toml(f"stolen {token}"))
    (host / "tests" / "test.sh").write_text(f"#!/bin/bash\n# {token}\n")
    (host / "rows.jsonl").write_text(json.dumps({"id": "leak", "question": f"q {token}"}) + "\n")
    with zipfile.ZipFile(host / "repo.zip", "w") as zf:
        zf.writestr("leak.txt", f"zip {token}")
    return root, token


@pytest.fixture(scope="module")
def hostile(canary: tuple[Path, str]) -> Path:
    """A Harbor dataset whose tasks point at the host through symlinks of every kind."""
    root, _token = canary
    host = root / "host"
    secret = host / "secret.txt"
    ds = root / "ds"
    ds.mkdir()
    t = _task(ds, "link-instruction")
    _replace_with_link(t / "instruction.md", secret)  # absolute target
    t = _task(ds, "link-test")
    _replace_with_link(t / "tests" / "test.sh", os.path.relpath(secret, t / "tests"))
    t = _task(ds, "link-dockerfile")
    _replace_with_link(t / "environment" / "Dockerfile", secret)
    t = _task(ds, "link-toml")
    _replace_with_link(t / "task.toml", host / "config.toml")
    t = _task(ds, "link-tests-folder")  # the folder above test.sh leaves the task
    _replace_with_link(t / "tests", host / "tests")
    t = _task(ds, "link-inside")  # a symlink that stays inside the task
    (t / "docs").mkdir()
    (t / "docs" / "real.md").write_text("Inside text.\n")
    _replace_with_link(t / "instruction.md", "docs/real.md")
    t = _task(ds, "fifo-task")  # opening a FIFO for reading blocks until a writer comes
    os.mkfifo(t / "environment" / "pipe")
    os.mkfifo(t / "tests" / "f2p.json")
    (t / "instruction.md").unlink()
    os.mkfifo(t / "instruction.md")
    t = _task(ds, "fifo-toml")
    (t / "task.toml").unlink()
    os.mkfifo(t / "task.toml")
    _task(ds, "plain-task", instruction="Count the words.\n")
    os.symlink(secret, ds / "README.md")
    os.symlink(secret, ds / "registry.json")
    return ds


def _all_text(doc) -> str:  # type: ignore[no-untyped-def]
    parts = [doc.title, doc.summary, *doc.withheld, json.dumps(doc.facets)]
    for s in doc.sections:
        parts += [s.title, s.body]
    for f in doc.files:
        parts.append(f.path + " " + str(f.withheld))
        if f.data:
            parts.append(f.data.decode("utf-8", "replace"))
    return "\n".join(parts)


# -- 1. symlinks: the adapter --------------------------------------------------------------


def test_symlinked_task_files_show_as_symlinks_never_their_content(
    hostile: Path, canary: tuple[Path, str]
) -> None:
    _root, token = canary
    reader = HarborAdapter().open(str(hostile))
    env = reader.env()
    assert token not in env.description + env.title + env.summary
    assert LEAVING.replace("task", "dataset") in env.description  # the README is a symlink
    for tid in reader.task_ids():
        if tid in ("link-toml", "fifo-toml"):
            continue
        doc = reader.task(tid)
        assert token not in _all_text(doc), tid
    secs = {s.id: s.body for s in reader.task("link-instruction").sections}
    assert secs["instruction"] == f"`instruction.md` is a {LEAVING}: its content is not shown."
    files = {f.path: f for f in reader.task("link-instruction").files}
    assert files["instruction.md"].data is None and files["instruction.md"].withheld == LEAVING

    secs = {s.id: s.body for s in reader.task("link-test").sections}
    assert LEAVING in secs["grader"]
    doc = reader.task("link-dockerfile")
    assert LEAVING in {s.id: s.body for s in doc.sections}["dockerfile"]
    assert doc.runnable is False and "not read" in doc.environment
    doc = reader.task("link-tests-folder")
    grader = {s.id: s.body for s in doc.sections}["grader"]
    assert grader == f"`tests/test.sh` lies below `tests`, a {LEAVING}: its content is not shown."
    assert {f.path: f.withheld for f in doc.files}["tests"] == LEAVING


def test_a_symlinked_task_toml_is_refused_with_the_reason(
    hostile: Path, canary: tuple[Path, str]
) -> None:
    reader = HarborAdapter().open(str(hostile))
    assert "link-toml" in list(reader.task_ids())  # listed, so the refusal is visible
    with pytest.raises(AdapterError) as err:
        reader.task("link-toml")
    assert str(err.value) == f"link-toml: task.toml is a {LEAVING}"
    assert canary[1] not in str(err.value)


def test_a_symlink_inside_the_task_shows_its_target_as_text_only(hostile: Path) -> None:
    doc = HarborAdapter().open(str(hostile)).task("link-inside")
    files = {f.path: f for f in doc.files}
    assert files["instruction.md"].withheld == "symlink to docs/real.md, not followed"
    assert files["instruction.md"].data is None
    assert files["docs/real.md"].data == b"Inside text.\n"  # the real file itself is shown
    instruction = {s.id: s.body for s in doc.sections}["instruction"]
    assert "Inside text" not in instruction and "symlink to docs/real.md" in instruction


@pytest.mark.timeout(60)
def test_fifos_are_listed_never_opened_for_reading(hostile: Path) -> None:
    doc = HarborAdapter().open(str(hostile)).task("fifo-task")  # would block on a FIFO read
    files = {f.path: f.withheld for f in doc.files}
    assert files["environment/pipe"] == "not a regular file, not read"
    assert files["tests/f2p.json"] == "not a regular file, not read"
    assert files["instruction.md"] == "not a regular file, not read"
    instruction = {s.id: s.body for s in doc.sections}["instruction"]
    assert (
        instruction == "`instruction.md` is not a regular file, not read: its content is not shown."
    )
    with pytest.raises(AdapterError) as err:
        HarborAdapter().open(str(hostile)).task("fifo-toml")
    assert str(err.value) == "fifo-toml: task.toml is not a regular file, not read"


def test_a_folder_swapped_for_a_symlink_after_listing_is_not_read_through(
    tmp_path: Path, canary: tuple[Path, str]
) -> None:
    root, token = canary
    ds = tmp_path / "ds"
    t = _task(ds / "group", "swapped")
    reader = HarborAdapter().open(str(ds))
    assert list(reader.task_ids()) == ["swapped"]
    # between listing and reading, tests/ becomes a link to the host's folder...
    _replace_with_link(t / "tests", root / "host" / "tests")
    assert token not in _all_text(reader.task("swapped"))
    # ... and then the group folder above the task becomes a link to a copy elsewhere
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(ds / "group", elsewhere)
    (elsewhere / "swapped" / "instruction.md").write_text(token)
    shutil.rmtree(ds / "group")
    os.symlink(elsewhere, ds / "group")
    with pytest.raises(AdapterError, match="reached through a symlink"):
        reader.task("swapped")


def test_row_datasets_follow_no_symlink(tmp_path: Path, canary: tuple[Path, str]) -> None:
    root, token = canary
    host = root / "host"
    ds = tmp_path / "rows"
    ds.mkdir()
    (ds / "data.jsonl").write_text(
        json.dumps({"id": "a", "question": "What is two plus two?", "repo": "repo.zip"}) + "\n"
    )
    os.symlink(host / "rows.jsonl", ds / "more.jsonl")  # a row file
    os.symlink(host, ds / "sub")  # a folder of row files
    os.symlink(host / "secret.txt", ds / "README.md")
    os.symlink(host / "repo.zip", ds / "repo.zip")  # an archive beside the rows
    reader = RowsAdapter().open(str(ds))
    assert [f.path.name for f in reader.files] == ["data.jsonl"]
    env = reader.env()
    assert token not in env.description
    assert list(reader.task_ids()) == ["a"]
    doc = reader.task("a")
    assert token not in _all_text(doc)
    (archive,) = [f for f in doc.files if f.path.endswith(".archive")]
    assert "symlink" in archive.withheld and "not followed" in archive.withheld


# -- 1. symlinks: snapshot, pack, pages, API, search ----------------------------------------


@pytest.fixture(scope="module")
def built(hostile: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("hostile-snap")
    info = build_snapshot([str(hostile)], out)
    return out, info


@pytest.fixture(scope="module")
def client(built: tuple[Path, dict]):  # type: ignore[no-untyped-def]
    store = open_store(snapshot=built[0])
    yield TestClient(create_app(store))
    store.close()


def test_the_token_is_in_no_byte_of_the_snapshot_or_pack(
    built: tuple[Path, dict], canary: tuple[Path, str]
) -> None:
    out, info = built
    token = canary[1].encode()
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sqlite" for p in files) and (out / "pack.sqlite").is_file()
    for p in files:
        assert token not in p.read_bytes(), p
    assert info["tasks"] >= 7
    assert any("link-toml: task.toml is a symlink leaving the task" in e for e in info["errors"])
    assert not any(canary[1] in e for e in info["errors"])


def _every_route(client) -> list[str]:  # type: ignore[no-untyped-def]
    routes = ["/", "/d/ds", "/api/search", "/api/envs/ds", "/api/search/tasks?env=ds&size=100"]
    for t in client.get("/api/search/tasks", params={"env": "ds", "size": 100}).json()["items"]:
        tid = quote(t["id"], safe="")
        routes += [f"/t/ds/{tid}", f"/api/tasks/ds/{tid}"]
        for f in client.get(f"/api/tasks/ds/{tid}").json()["files"]:
            path = quote(f["path"], safe="/")
            routes += [
                f"/t/ds/{tid}?file={quote(f['path'], safe='')}",
                f"/api/files/ds/{tid}/{path}",
            ]
    return routes


def test_the_token_is_on_no_page_api_answer_or_search_result(
    client, canary: tuple[Path, str]
) -> None:  # type: ignore[no-untyped-def]
    token = canary[1]
    routes = _every_route(client)
    assert len(routes) > 30
    for route in routes:
        r = client.get(route)
        assert token not in r.text, route
    for q in (token, "CANARY", "host secret", "stolen"):
        # the search page repeats its query in the search box: search it for the others only
        for route in ("/api/search", "/api/search/tasks") + (("/",) if q != token else ()):
            r = client.get(route, params={"q": q})
            assert token not in r.text, (route, q)
        assert client.get("/api/search/tasks", params={"q": q}).json()["total"] == 0, q
        assert client.get("/api/search", params={"q": q}).json()["total"] == 0, q
    page = client.get("/t/ds/link-instruction").text
    assert "symlink leaving the task, not followed" in page
    doc = client.get("/api/tasks/ds/link-instruction").json()
    assert {f["path"]: f["withheld"] for f in doc["files"]}["instruction.md"] == LEAVING
    assert client.get("/api/files/ds/link-instruction/instruction.md").status_code == 403


def test_the_token_is_not_served_by_a_real_server(
    built: tuple[Path, dict], canary: tuple[Path, str]
) -> None:
    import urllib.request

    store = open_store(snapshot=built[0])
    try:
        with serve(create_app(store)) as base:
            for route in ("/t/ds/link-test", "/t/ds/link-dockerfile", "/api/tasks/ds/link-test"):
                with urllib.request.urlopen(base + route, timeout=30) as resp:
                    assert canary[1].encode() not in resp.read(), route
    finally:
        store.close()


def test_the_in_process_explorer_is_safe_too(hostile: Path, canary: tuple[Path, str]) -> None:
    store = open_store([str(hostile)])
    try:
        client = TestClient(create_app(store))
        for route in _every_route(client):
            assert canary[1] not in client.get(route).text, route
    finally:
        store.close()


# -- 3. network per phase, host variables of the verifier -----------------------------------

_PHASES_TOML = """schema_version = "1.4"
[task]
name = "hostile/phases"
description = "Phases"
[environment]
network_mode = "no-network"
[agent]
network_mode = "no-network"
[verifier]
network_mode = "public"
[verifier.env]
OPENAI_API_KEY = "${OPENAI_API_KEY}"
HOME_DIR = "${HOME:-/root}"
BOTH = "${OPENAI_API_KEY}:${AWS_SECRET_ACCESS_KEY:-none}"
PLAIN = "literal"
"""


@pytest.fixture(scope="module")
def phases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ds = tmp_path_factory.mktemp("phases") / "phases"
    t = _task(ds, "verifier-online")
    (t / "task.toml").write_text(_PHASES_TOML)
    t = _task(ds, "offline")
    (t / "task.toml").write_text(_task_toml("Offline", '[agent]\nnetwork_mode = "no-network"\n'))
    return ds


def test_each_phase_network_and_the_verifier_host_variables_are_shown(
    phases: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = "sk-HOSTVALUE" + secrets.token_hex(8)
    monkeypatch.setenv("OPENAI_API_KEY", value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", value)
    doc = HarborAdapter().open(str(phases)).task("verifier-online")
    assert doc.network == "public"  # the verifier may reach the network: not "no-network"
    assert doc.network_modes == {
        "environment": "no-network",
        "agent": "no-network",
        "verifier": "public",
    }
    assert doc.verifier_env == ["OPENAI_API_KEY", "HOME", "AWS_SECRET_ACCESS_KEY"]

    build_snapshot([str(phases)], tmp_path / "snap")
    store = open_store(snapshot=tmp_path / "snap")
    try:
        client = TestClient(create_app(store))
        api = client.get("/api/tasks/phases/verifier-online").json()
        assert api["network"] == "public"
        assert api["network_modes"] == doc.network_modes
        assert api["verifier_env"] == ["OPENAI_API_KEY", "HOME", "AWS_SECRET_ACCESS_KEY"]
        offline = client.get("/api/tasks/phases/offline").json()
        assert offline["network"] == "no-network"
        assert offline["network_modes"] == {"environment": "no-network", "agent": "no-network"}
        assert offline["verifier_env"] == []
        found = client.get("/api/search/tasks", params={"f": "network:public"}).json()
        assert [t["id"] for t in found["items"]] == ["verifier-online"]
        page = client.get("/t/phases/verifier-online").text
        assert "Verifier network: public" in page and "Agent network: no-network" in page
        assert "Host environment variables the verifier asks for" in page
        for name in ("OPENAI_API_KEY", "HOME", "AWS_SECRET_ACCESS_KEY"):
            assert f"<code>{name}</code>" in page
        for route in ("/t/phases/verifier-online", "/api/tasks/phases/verifier-online"):
            assert value not in client.get(route).text  # never a host value
    finally:
        store.close()


# -- 4. control characters in task folder names --------------------------------------------

BAD_NAMES = ["\x1b[31mred", "bell\x07", "title\x1b]0;pwned\x07"]


def test_control_characters_in_names_are_visible_text_in_html(tmp_path: Path) -> None:
    ds = tmp_path / "ctl"
    for name in BAD_NAMES:
        _task(ds, name, instruction=f"# Heading \x1b[2J\n\nClear {name}\n")
    build_snapshot([str(ds)], tmp_path / "snap")
    store = open_store(snapshot=tmp_path / "snap")
    try:
        client = TestClient(create_app(store))
        ids = [
            t["id"] for t in client.get("/api/search/tasks", params={"env": "ctl"}).json()["items"]
        ]
        assert sorted(ids) == sorted(BAD_NAMES)  # the data is kept as it is (JSON escapes it)
        pages = ["/", "/d/ctl", "/?q=Clear"] + [f"/t/ctl/{quote(n, safe='')}" for n in BAD_NAMES]
        pages += [f"/t/ctl/{quote(n, safe='')}?file=instruction.md" for n in BAD_NAMES]
        for route in pages:
            r = client.get(route)
            assert r.status_code == 200, route
            assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", r.text), route
        page = client.get(f"/t/ctl/{quote(BAD_NAMES[0], safe='')}").text
        assert "\\x1b[31mred" in page and "\\x1b[2J" in page
        assert "\\x07" in client.get(f"/t/ctl/{quote(BAD_NAMES[1], safe='')}").text
    finally:
        store.close()


def test_what_indexing_prints_has_no_raw_control_characters(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = tmp_path / "ctl"
    for name in BAD_NAMES:
        t = _task(ds, name)
        (t / "task.toml").write_text("this is [not toml\n")  # every task fails: error lines
    with caplog.at_level(logging.WARNING, logger="repogym.explorer"):
        info = build_snapshot([str(ds)], tmp_path / "snap")
    assert len(info["errors"]) == len(BAD_NAMES)
    control = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
    for line in info["errors"]:
        assert not control.search(line), line
    assert any("\\x1b[31mred" in line for line in info["errors"])
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("repogym.explorer")]
    assert any("task skipped" in m for m in logged)
    for m in logged:
        assert not control.search(m), m
    captured = capsys.readouterr()
    assert not control.search(captured.err + captured.out)


def test_explore_index_prints_control_characters_escaped(tmp_path: Path) -> None:
    """``repogym explore index`` on a row dataset whose folder name is an escape sequence and
    whose rows are partly malformed: the skipped-row lines (log and summary) show the name
    escaped."""
    import subprocess
    import sys

    ds = tmp_path / "\x1b]0;pwned\x07rows\x1b[2J"
    ds.mkdir()
    (ds / "data.jsonl").write_text(
        json.dumps({"id": "a", "question": "What is two plus two?"}) + "\nnot json\n"
    )
    argv = ["explore", "index", str(ds), "--out", str(tmp_path / "out")]
    res = subprocess.run(  # a real process: log lines reach its real stderr
        [sys.executable, "-c", "from repogym.cli import app; app()", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = res.stdout + res.stderr
    assert res.returncode == 0, output
    assert "1 task(s)" in output
    assert "skipped a row" in res.stderr  # the log line, as a terminal gets it
    assert "\\x1b]0;pwned\\x07rows\\x1b[2J" in res.stderr
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", output), repr(output)
