"""push / pull through the Hugging Face Hub registry: the real huggingface_hub client against a
local server that answers like the Hub (tests/hub/stub_hf.py)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.auth import check_credentials, hf_token_source
from repogym.cli import app
from repogym.hub import RegistryError, open_registry
from repogym.hub.hf_registry import HfRegistry
from repogym.taskdir import discover
from tests.conftest import EXAMPLES, ROOT, write_task
from tests.hub.stub_hf import HubState, serve_hub

ALICE = "hf_ALICEsecret7c4e9a1b2d3f"
BOB = "hf_BOBsecret5a6b7c8d9e0f11"
WRONG = "hf_WRONGsecret0a1b2c3d4e5f"

cli = CliRunner()


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[str, HubState]]:
    """The stub Hub with users alice and bob; the environment points huggingface_hub at it."""
    with serve_hub({ALICE: "alice", BOB: "bob"}) as (url, state):
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setenv("HF_TOKEN", ALICE)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.delenv("HF_TOKEN_PATH", raising=False)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        yield url, state


def hashes(root: Path) -> dict[str, str]:
    return {t.id: t.compute_hash() for t in discover(root).tasks}


def run(*args: str) -> dict:
    res = cli.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def files_at(state: HubState, repo: str, oid: str) -> dict[str, bytes]:
    return state.repos[repo].commits[oid].files


def test_push_creates_repo_and_pins_registry_to_the_tasks_commit(
    hub: tuple[str, HubState],
) -> None:
    url, state = hub
    pushed = run("push", str(EXAMPLES), "alice/ds", "--registry", "hf")
    repo = state.repos["alice/ds"]
    assert not repo.private and pushed["tasks"] == 2 and not pushed["unchanged"]
    assert pushed["location"] == f"{url}/datasets/alice/ds"
    head, tasks_commit = pushed["revision"], pushed["tasks_commit"]
    assert repo.branches["main"] == head
    # One commit holds the tasks; the next one only adds registry.json pinned to it.
    assert repo.commits[head].parent == tasks_commit
    assert set(files_at(state, "alice/ds", head)) - set(
        files_at(state, "alice/ds", tasks_commit)
    ) == {"registry.json"}
    tasks_files = files_at(state, "alice/ds", tasks_commit)
    for task in discover(EXAMPLES).tasks:
        for f in task.path.rglob("*"):
            if f.is_file():
                rel = f"tasks/{task.id}/{f.relative_to(task.path).as_posix()}"
                assert tasks_files[rel] == f.read_bytes(), rel
    assert {"manifest.json", "README.md", ".gitattributes"} <= set(tasks_files)
    registry = json.loads(files_at(state, "alice/ds", head)["registry.json"])
    entries = registry[0]["tasks"]
    assert {e["name"] for e in entries} == {"hello-file", "textstats-word-count"}
    for entry in entries:
        assert entry["git_url"] == f"{url}/datasets/alice/ds"
        assert entry["git_commit_id"] == tasks_commit
        assert f"{entry['path']}/task.toml" in tasks_files
    # The content revision names the push as a tag, as in the file registry.
    content_rev = registry[0]["version"]
    assert repo.tags == {content_rev: head}
    card = tasks_files["README.md"].decode()
    assert "# alice/ds" in card and content_rev in card and "--registry hf" in card
    # Same tasks again: nothing is committed.
    commits = len(repo.commits)
    again = run("push", str(EXAMPLES), "alice/ds")
    assert again["unchanged"] and again["revision"] == head
    assert again["tasks_commit"] == tasks_commit and len(repo.commits) == commits


def test_round_trip_and_revision_pinning(hub: tuple[str, HubState], tmp_path: Path) -> None:
    _, state = hub
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    original = hashes(data)
    first = run("push", str(data), "alice/ds")
    (data / "textstats-word-count" / "instruction.md").write_text("Count the words, again.\n")
    shutil.rmtree(data / "hello-file")
    second = run("push", str(data), "alice/ds")
    assert second["revision"] != first["revision"] and not second["unchanged"]
    head_files = files_at(state, "alice/ds", second["revision"])
    assert not any(p.startswith("tasks/hello-file/") for p in head_files)

    latest = run("pull", "alice/ds", str(tmp_path / "latest"))
    assert latest["revision"] == second["revision"]
    assert latest["tasks"] == ["textstats-word-count"]
    assert hashes(tmp_path / "latest") == hashes(data)
    registry = json.loads((tmp_path / "latest" / "registry.json").read_text())
    assert registry[0]["tasks"][0]["git_commit_id"] == second["tasks_commit"]

    # An older revision by commit sha, by content-revision tag, and by a prefix of it.
    old_registry = json.loads(files_at(state, "alice/ds", first["revision"])["registry.json"])
    content_rev = old_registry[0]["version"]
    for i, rev in enumerate([first["revision"], content_rev, content_rev[:8]]):
        dest = tmp_path / f"old{i}"
        old = run("pull", f"alice/ds@{rev}", str(dest))
        assert old["revision"] == first["revision"]
        assert hashes(dest) == original
        assert (dest / "manifest.json").is_file() and (dest / "README.md").is_file()
    # The tasks commit itself is pullable: same tasks, no registry.json yet.
    pinned = run("pull", f"alice/ds@{first['tasks_commit']}", str(tmp_path / "pinned"))
    assert hashes(tmp_path / "pinned") == original
    assert not (tmp_path / "pinned" / "registry.json").exists()
    assert sorted(HfRegistry().revisions("alice/ds")) == sorted(state.repos["alice/ds"].tags)
    assert pinned["tasks"] == ["hello-file", "textstats-word-count"]


def test_pull_one_task(hub: tuple[str, HubState], tmp_path: Path) -> None:
    run("push", str(EXAMPLES), "alice/ds")
    got = run("pull", "alice/ds", str(tmp_path / "one"), "--task", "hello-file")
    assert got["tasks"] == ["hello-file"]
    assert [p.name for p in (tmp_path / "one" / "tasks").iterdir()] == ["hello-file"]
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["tasks"]
    assert hashes(tmp_path / "one") == {"hello-file": hashes(EXAMPLES)["hello-file"]}
    # The other task can join it later; pulling one that is already there is refused.
    run("pull", "alice/ds", str(tmp_path / "one"), "--task", "textstats-word-count")
    assert hashes(tmp_path / "one") == hashes(EXAMPLES)
    res = cli.invoke(app, ["pull", "alice/ds", str(tmp_path / "one"), "--task", "hello-file"])
    assert res.exit_code == 2 and "already present" in res.output


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_errors_are_one_line_exit_2_and_write_nothing(
    hub: tuple[str, HubState], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, state = hub
    run("push", str(EXAMPLES), "alice/secret", "--private")
    assert state.repos["alice/secret"].private
    dest = tmp_path / "out"
    down = f"hf+http://127.0.0.1:{_closed_port()}"
    cases = [
        # (HF_TOKEN, args, expected fragment)
        (BOB, ["pull", "alice/secret", str(dest)], "no dataset alice/secret"),
        ("", ["pull", "alice/secret", str(dest)], "set HF_TOKEN if it is private"),
        (WRONG, ["pull", "alice/secret", str(dest)], "rejected the token (HTTP 401)"),
        (ALICE, ["pull", "alice/missing", str(dest)], "no dataset alice/missing"),
        (ALICE, ["pull", "alice/secret@nope", str(dest)], "no single revision matches"),
        (ALICE, ["pull", "alice/secret@" + "0" * 40, str(dest)], "no revision"),
        (ALICE, ["pull", "alice/secret", str(dest), "--task", "zzz"], "no task 'zzz'"),
        (ALICE, ["pull", "alice/secret", str(dest), "--registry", down], "cannot reach"),
        (ALICE, ["push", str(EXAMPLES), "bob/ds", "--registry", down], "cannot reach"),
        ("", ["push", str(EXAMPLES), "alice/other"], "needs a token"),
        (WRONG, ["push", str(EXAMPLES), "alice/other"], "rejected the token"),
        (BOB, ["push", str(EXAMPLES), "alice/secret"], "may not write to alice/secret"),
        (ALICE, ["push", str(EXAMPLES), "alice/x", "--registry", "hf+ftp://h"], "unsupported"),
    ]
    before = {k: dict(r.commits) for k, r in state.repos.items()}
    for token, args, fragment in cases:
        monkeypatch.setenv("HF_TOKEN", token)
        res = cli.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert fragment in res.output, (args, res.output)
        assert len(res.output.strip().splitlines()) == 1, res.output
        assert not dest.exists(), args
        for secret in (ALICE, BOB, WRONG):
            assert secret[3:15] not in res.output
    assert {k: dict(r.commits) for k, r in state.repos.items()} == before
    assert "alice/other" not in state.repos
    del url


def test_pull_into_existing_folder_keeps_its_files(
    hub: tuple[str, HubState], tmp_path: Path
) -> None:
    run("push", str(EXAMPLES), "alice/ds")
    dest = tmp_path / "out"
    (dest / "tasks").mkdir(parents=True)
    (dest / "notes.txt").write_text("mine\n")
    res = cli.invoke(app, ["pull", "alice/ds@ffffffff", str(dest)])
    assert res.exit_code == 2
    assert sorted(p.name for p in dest.iterdir()) == ["notes.txt", "tasks"]
    assert not any((dest / "tasks").iterdir())
    run("pull", "alice/ds", str(dest))
    assert hashes(dest) == hashes(EXAMPLES) and (dest / "notes.txt").read_text() == "mine\n"
    assert not [p for p in dest.iterdir() if p.name.startswith(".")]


def test_token_never_leaves_the_environment(hub: tuple[str, HubState], tmp_path: Path) -> None:
    """With HF_TOKEN set, the token is in no pushed or pulled file and no output or error."""
    url, state = hub
    outputs = []
    for args in (
        ["push", str(EXAMPLES), "alice/ds", "--json"],
        ["push", str(EXAMPLES), "alice/ds"],
        ["pull", "alice/ds", str(tmp_path / "got"), "--json"],
        ["pull", "alice/ds", str(tmp_path / "got2")],
        ["pull", "alice/ds@nope", str(tmp_path / "x")],
        ["pull", "alice/none", str(tmp_path / "x")],
        ["auth", "check", "--json"],
    ):
        res = cli.invoke(app, args)
        outputs += [res.stdout, res.stderr]
    pieces = {ALICE[i : i + 8] for i in range(len(ALICE) - 7)}
    blobs = [o.encode() for o in outputs]
    blobs += [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
    blobs += [b for r in state.repos.values() for c in r.commits.values() for b in c.files.values()]
    for blob in blobs:
        assert not any(piece.encode() in blob for piece in pieces)
    assert any(b"alice/ds" in b for b in blobs)  # the scan did see the outputs
    del url


def test_card_summarizes_yield_and_verification(hub: tuple[str, HubState], tmp_path: Path) -> None:
    _, state = hub
    data = tmp_path / "data"
    toml = (EXAMPLES / "hello-file" / "task.toml").read_text()
    toml = toml.replace("[metadata.repo2env]\n", '[metadata.repo2env]\npipeline = "example"\n', 1)
    toml += (
        '\n[metadata.repo2env.evaluation]\nstatus = "flaky"\noracle_runs = 3\n'
        'oracle_passes = 2\nnop_reward = 0.0\nbackend = "local"\n'
        'reasons = ["oracle reruns disagree: [1.0, 0.0, 1.0]"]\n'
    )
    write_task(data / "tasks", "graded", toml=toml)
    write_task(data / "tasks", "plain")
    report = {"yield": {"candidates": 40, "kept": 2, "dropped": {"no_f2p": 30, "flaky": 8}}}
    (data / "generate-report.json").write_text(json.dumps(report))
    pushed = run("push", str(data), "alice/card")
    card = files_at(state, "alice/card", pushed["revision"])["README.md"].decode()
    assert "40 candidates → 2 tasks." in card and "| no_f2p | 30 |" in card
    assert "| graded | flaky | 2/3 | 0.0 | local | oracle reruns disagree" in card
    assert "| flaky | 1 |" in card and "| unverified | 1 |" in card
    assert "| plain |" not in card


def test_symlinks_are_refused(hub: tuple[str, HubState], tmp_path: Path) -> None:
    task = write_task(tmp_path / "data", "linked")
    (task / "environment" / "link").symlink_to("Dockerfile")
    res = cli.invoke(app, ["push", str(tmp_path / "data"), "alice/links"])
    assert res.exit_code == 2 and "is a symlink" in res.output
    assert "alice/links" not in hub[1].repos


def test_registry_urls_and_missing_client(
    hub: tuple[str, HubState], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = hub
    assert open_registry("hf").endpoint == url
    assert open_registry("hf+https://hub.example.org/").endpoint == "https://hub.example.org"
    assert open_registry("hf+http://127.0.0.1:9").endpoint == "http://127.0.0.1:9"
    for bad in ("hf+ftp://x", "hf+http://", "hub"):
        with pytest.raises(RegistryError):
            open_registry(bad)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(RegistryError, match=r"pip install 'repogym\[hub\]'"):
        HfRegistry().push(EXAMPLES, "alice/ds")
    monkeypatch.delitem(sys.modules, "huggingface_hub")
    # Importing the package never loads huggingface_hub.
    code = "import sys, repogym, repogym.hub, repogym.cli; print('huggingface_hub' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        check=True,
    )
    assert out.stdout.strip() == "False"


def test_stored_token_and_auth_check(
    hub: tuple[str, HubState], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = hub
    home = tmp_path / "hf-home"
    home.mkdir()
    (home / "token").write_text(BOB + "\n")
    monkeypatch.delenv("HF_TOKEN")
    assert hf_token_source() == (BOB, "huggingface token file")
    assert HfRegistry().token == BOB
    hf = next(s for s in check_credentials() if s.service == "huggingface")
    assert hf.ok and hf.source == "huggingface token file" and "as bob" in hf.detail
    assert hf.url == f"{url}/api/whoami-v2"
    # HF_TOKEN wins over the file; a token the Hub does not know fails the check, unprinted.
    monkeypatch.setenv("HF_TOKEN", WRONG)
    res = cli.invoke(app, ["auth", "check", "--json"])
    hf_json = next(s for s in json.loads(res.stdout) if s["service"] == "huggingface")
    assert hf_json["ok"] is False and hf_json["source"] == "HF_TOKEN"
    assert res.exit_code == 1 and WRONG[3:15] not in res.output
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "nowhere"))
    monkeypatch.delenv("HF_TOKEN")
    assert hf_token_source() == (None, None)


def test_hub_error_text_is_redacted() -> None:
    """A server that echoes the token in an error message does not get it printed."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    reg = HfRegistry("http://127.0.0.1:9", token=ALICE)
    request = httpx2.Request("POST", "http://127.0.0.1:9/api/datasets/alice/ds/commit/main")
    response = httpx2.Response(400, request=request)
    with pytest.raises(RegistryError) as caught, reg._errors("alice/ds"):
        raise HfHubHTTPError(
            f"400 Bad request: token {ALICE} is not allowed here", response=response
        )
    message = str(caught.value)
    assert "400 Bad request" in message and "***" in message
    assert not any(ALICE[i : i + 8] in message for i in range(len(ALICE) - 7))


def test_push_racing_another_push_fails_cleanly(
    hub: tuple[str, HubState], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tasks commit names the head it saw; if main moved meanwhile the Hub refuses it."""
    _, state = hub
    first = run("push", str(EXAMPLES), "alice/ds")
    data = tmp_path / "data"
    write_task(data, "other")
    run("push", str(data), "alice/ds")  # main moves on
    stale = HfRegistry()
    real_refs = stale._refs

    def seen_before(name: str) -> tuple[dict[str, str], dict[str, str]]:
        branches, tags = real_refs(name)
        return {**branches, "main": first["revision"]}, tags

    monkeypatch.setattr(stale, "_refs", seen_before)
    commits = len(state.repos["alice/ds"].commits)
    write_task(data, "third")
    with pytest.raises(RegistryError, match="changed on the Hub during the push"):
        stale.push(data, "alice/ds")
    assert len(state.repos["alice/ds"].commits) == commits


@pytest.mark.slow
def test_cli_processes_use_hf_endpoint(hub: tuple[str, HubState], tmp_path: Path) -> None:
    """Real ``repogym`` processes, configured only by the environment; quiet on stderr."""
    url, state = hub
    exe = str(Path(sys.executable).parent / "repogym")
    env = {**os.environ, "HF_ENDPOINT": url, "HF_TOKEN": ALICE, "HF_HOME": str(tmp_path / "h")}
    push = subprocess.run(
        [exe, "push", str(EXAMPLES), "alice/proc", "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert push.returncode == 0, push.stderr
    assert push.stderr == "" and json.loads(push.stdout)["tasks"] == 2
    assert state.repos["alice/proc"].branches["main"] == json.loads(push.stdout)["revision"]
    pull = subprocess.run(
        [exe, "pull", "alice/proc", str(tmp_path / "got")], env=env, capture_output=True, text=True
    )
    assert pull.returncode == 0 and pull.stderr == "", pull.stderr
    assert pull.stdout.startswith("pulled 2 task(s) of alice/proc@")
    assert hashes(tmp_path / "got") == hashes(EXAMPLES)
    assert not (tmp_path / "h").exists()  # nothing cached in HF_HOME
