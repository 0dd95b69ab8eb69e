"""Hostile registries and datasets: push and pull refuse them, write nothing, leak nothing.

Each attack is built here with real folders and symlinks (a hand-made folder registry) or by
committing hostile file names straight into the local fake Hub (tests/hub/stub_hf.py). A canary —
``tmp_path/host/secret.txt`` holding a random token, beside a ``host/tasks/loot`` task that holds
it too, so ``host`` looks like a revision — is what every attack aims at; the token must appear in
no file under the destination or any registry a pulled dataset is pushed to again.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.hub import RegistryError, open_registry
from repogym.hub._safety import MAX_DEPTH, PullStage, safe_relpath
from repogym.hub.file_registry import FileRegistry
from repogym.taskdir import discover
from tests.conftest import EXAMPLES, snapshot, write_task
from tests.hub.stub_hf import HubState, serve_hub

ALICE = "hf_ALICEsecret7c4e9a1b2d3f"
cli = CliRunner()


# ------------------------------------------------------------------------------------ helpers


@dataclass
class Canary:
    token: str
    host: Path

    @property
    def secret(self) -> Path:
        return self.host / "secret.txt"


@pytest.fixture
def canary(tmp_path: Path) -> Canary:
    token = f"CANARY-{secrets.token_hex(16)}"
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text(token + "\n")
    # `host` also looks like a revision folder (tasks/<id>/, registry.json), so a registry
    # pointing at it would hand the token over if pull followed it.
    loot = write_task(host / "tasks", "loot", instruction=f"{token}\n")
    (loot / "secret.txt").write_text(token + "\n")
    (host / "registry.json").write_text(json.dumps([{"name": token}]))
    return Canary(token, host)


def leaks(token: str, *roots: Path) -> list[str]:
    """Files under ``roots`` (read through symlinks) holding ``token``, symlinks whose text
    holds it, and symlinks resolving outside their root."""
    found = []
    for root in roots:
        if not os.path.lexists(root):
            continue
        real_root = os.path.realpath(root)
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                if os.path.islink(path):
                    real = os.path.realpath(path)
                    if token in os.readlink(path) or not real.startswith(real_root + os.sep):
                        found.append(path)
                if os.path.isfile(path):
                    try:
                        data = Path(path).read_bytes()
                    except OSError:
                        continue
                    if token.encode() in data:
                        found.append(path)
    return found


def hashes(root: Path) -> dict[str, str]:
    return {t.id: t.compute_hash() for t in discover(root).tasks}


def publish(tmp_path: Path, data: Path = EXAMPLES) -> tuple[str, Path, Path]:
    """A real folder registry holding ``data`` as acme/ds: (URL, dataset folder, revision)."""
    root = tmp_path / "registry"
    FileRegistry(root).push(data, "acme/ds")
    ds = root / "acme" / "ds"
    return f"file://{root}", ds, ds / "revisions" / (ds / "refs" / "main").read_text().strip()


def refused(args: list[str], fragment: str, token: str) -> str:
    res = cli.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert token not in res.output
    return res.output


def listing(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def link(path: Path, target: str | Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


# --------------------------------------------------------------- 1. refs and revision paths


@pytest.mark.parametrize(
    ("ref", "fragment"),
    [
        ("{host}", "not a revision id"),  # absolute path
        ("../../../../host", "not a revision id"),  # relative, from revisions/
        ("0123456789abcdef/../../../../../host", "not a revision id"),
        ("latest", "not a revision id"),  # a folder that exists, named otherwise
        ("ffffffffffffffff", "not in revisions/"),
        ("symlink", "refs/main is a symlink"),
    ],
)
def test_pull_refuses_refs_that_are_not_revisions(
    tmp_path: Path, canary: Canary, ref: str, fragment: str
) -> None:
    reg, ds, rev = publish(tmp_path)
    shutil.copytree(canary.host, ds / "revisions" / "latest")
    main = ds / "refs" / "main"
    if ref == "symlink":
        fake = "abcdefabcdefabcd"
        (ds / "revisions" / fake).symlink_to(canary.host)
        (canary.host / "ref").write_text(fake + "\n")
        link(main, canary.host / "ref")
    else:
        main.write_text(ref.format(host=canary.host) + "\n")
    before = snapshot(tmp_path / "registry")
    dest = tmp_path / "a" / "b" / "got"  # its parents are missing: they are removed again
    refused(["pull", "acme/ds", str(dest), "--registry", reg], fragment, canary.token)
    assert not (tmp_path / "a").exists()
    assert snapshot(tmp_path / "registry") == before
    # The same through the API; a revision given by prefix matches revision ids only.
    with pytest.raises(RegistryError, match="no single revision"):
        FileRegistry(tmp_path / "registry").pull("acme/ds", dest, rev="lat")
    assert FileRegistry(tmp_path / "registry").revisions("acme/ds") == sorted(
        [rev.name] + (["abcdefabcdefabcd"] if ref == "symlink" else [])
    )
    assert not (tmp_path / "a").exists()


def test_pull_from_a_registry_that_is_a_file(tmp_path: Path, canary: Canary) -> None:
    (tmp_path / "reg").write_text("not a folder\n")
    dest = tmp_path / "got"
    url = f"file://{tmp_path / 'reg'}"
    refused(["pull", "acme/ds", str(dest), "--registry", url], "cannot read", canary.token)
    assert not dest.exists()


# ------------------------------------------------ 2. symlinked registry folders and files


def _symlinked(kind: str, ds: Path, rev: Path, canary: Canary) -> str:
    """Make one folder or file of the registry a symlink to the host; the expected fragment."""
    if kind == "revision":
        fake = "abcdefabcdefabcd"
        (ds / "revisions" / fake).symlink_to(canary.host)
        (ds / "refs" / "main").write_text(fake + "\n")
        return "is a symlink or not a folder"
    if kind == "revision-relative":
        fake = "abcdefabcdefabcd"
        (ds / "revisions" / fake).symlink_to("../../../../host")
        (ds / "refs" / "main").write_text(fake + "\n")
        return "is a symlink or not a folder"
    if kind == "dataset":
        # A whole dataset that lives on the host, in the registry's layout.
        fake = "abcdefabcdefabcd"
        shutil.copytree(canary.host / "tasks", canary.host / "ds" / "revisions" / fake / "tasks")
        (canary.host / "ds" / "refs").mkdir()
        (canary.host / "ds" / "refs" / "main").write_text(fake + "\n")
        shutil.rmtree(ds)
        ds.symlink_to(canary.host / "ds")
        return "is a symlink or not a folder"
    if kind == "tasks":
        link(rev / "tasks", canary.host / "tasks")
        return "tasks is a symlink"
    if kind == "task":
        (rev / "tasks" / "loot").symlink_to(canary.host / "tasks" / "loot")
        return "'loot' is a symlink"
    if kind == "registry.json":
        link(rev / "registry.json", canary.secret)
        return "'registry.json' is a symlink"
    if kind == "task.toml":
        link(
            rev / "tasks" / "textstats-word-count" / "task.toml",
            canary.host / "tasks" / "loot" / "task.toml",
        )
        return "leaving the task"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    ["revision", "revision-relative", "dataset", "tasks", "task", "registry.json", "task.toml"],
)
def test_pull_refuses_symlinked_registry_entries(tmp_path: Path, canary: Canary, kind: str) -> None:
    reg, ds, rev = publish(tmp_path)
    fragment = _symlinked(kind, ds, rev, canary)
    dest = tmp_path / "got"
    refused(["pull", "acme/ds", str(dest), "--registry", reg], fragment, canary.token)
    assert not dest.exists()
    assert listing(tmp_path) == ["host", "registry"]  # no temporary folder left beside dest
    assert not leaks(canary.token, tmp_path / "registry" / "acme" / "ds" / "refs")


# ------------------------------------------------------------ 2. symlinks inside a dataset


def test_links_inside_a_task_are_kept_as_links_and_repushed_as_links(
    tmp_path: Path, canary: Canary
) -> None:
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    task = data / "hello-file"
    (task / "environment" / "inner").symlink_to("Dockerfile")
    (task / "docs").symlink_to("solution")  # a folder link, no loop
    (task / "dangling").symlink_to("environment/not-yet-built")  # inside, lexically
    reg, _, _ = publish(tmp_path, data)
    dest = tmp_path / "got"
    res = cli.invoke(app, ["pull", "acme/ds", str(dest), "--registry", reg])
    assert res.exit_code == 0, res.output
    got = dest / "tasks" / "hello-file"
    for rel, text in [("environment/inner", "Dockerfile"), ("docs", "solution")]:
        assert (got / rel).is_symlink() and os.readlink(got / rel) == text
    assert os.readlink(got / "dangling") == "environment/not-yet-built"
    assert hashes(dest) == hashes(data)
    # Pushed again (a second folder registry) they stay links; the Hub refuses them (files only).
    FileRegistry(tmp_path / "again").push(dest, "acme/ds")
    again = FileRegistry(tmp_path / "again")
    rev = again.resolve("acme/ds", None)
    pushed = tmp_path / "again" / "acme" / "ds" / "revisions" / rev / "tasks" / "hello-file"
    assert (pushed / "environment" / "inner").is_symlink()
    assert not leaks(canary.token, dest, tmp_path / "again", tmp_path / "registry")


def _plant_link(kind: str, task: Path, canary: Canary) -> str:
    env = task / "environment"
    if kind == "absolute":
        (env / "leak").symlink_to(canary.secret)
    elif kind == "relative":
        (env / "leak").symlink_to("../" * 12 + "host/secret.txt")
    elif kind == "neighbour":  # leaves the task, stays in the dataset
        (env / "leak").symlink_to("../../hello-file/instruction.md")
    elif kind == "chain":
        (env / "a").symlink_to("b")
        (env / "b").symlink_to(canary.secret)
    elif kind == "folder":
        (env / "d").symlink_to(canary.host)
    elif kind == "through-a-folder-link":
        # Lexically environment/host/secret.txt, inside; really tests/../../host: outside.
        (env / "d").symlink_to("../tests")
        (env / "leak").symlink_to("d/../../host/secret.txt")
    else:
        raise AssertionError(kind)
    return "leaving the task"


LEAVING = ["absolute", "relative", "neighbour", "chain", "folder", "through-a-folder-link"]


@pytest.mark.parametrize("kind", LEAVING)
def test_pull_refuses_links_leaving_a_task(tmp_path: Path, canary: Canary, kind: str) -> None:
    reg, _, rev = publish(tmp_path)
    fragment = _plant_link(kind, rev / "tasks" / "textstats-word-count", canary)
    dest = tmp_path / "got"
    refused(["pull", "acme/ds", str(dest), "--registry", reg], fragment, canary.token)
    # The first task (hello-file) was fine: it is not left behind either.
    assert not dest.exists() and listing(tmp_path) == ["host", "registry"]
    with pytest.raises(RegistryError, match=fragment):
        FileRegistry(tmp_path / "registry").pull("acme/ds", dest, task="textstats-word-count")
    assert not dest.exists()


# ------------------------------------------------------- 3. loops, depth, atomic pull


def _plant_loop(kind: str, task: Path) -> str:
    env = task / "environment"
    if kind == "self":
        (env / "x").symlink_to("x")
    elif kind == "pair":
        (env / "a").symlink_to("b")
        (env / "b").symlink_to("a")
    elif kind == "dot":
        (env / "loop").symlink_to(".")
    elif kind == "parent":
        (env / "loop").symlink_to("..")
    elif kind == "cross":
        (env / "a").mkdir()
        (env / "b").mkdir()
        (env / "a" / "x").symlink_to("../b")
        (env / "b" / "y").symlink_to("../a")
    elif kind == "deep":
        deep = env.joinpath(*["d"] * (MAX_DEPTH + 20))
        deep.mkdir(parents=True)
        (deep / "f").write_text("bottom\n")
        return "nested deeper than"
    else:
        raise AssertionError(kind)
    return "loop"


@pytest.mark.parametrize("existing", [False, True], ids=["new-dest", "existing-dest"])
@pytest.mark.parametrize("kind", ["self", "pair", "dot", "parent", "cross", "deep"])
def test_pull_refuses_loops_and_leaves_nothing(
    tmp_path: Path, canary: Canary, kind: str, existing: bool
) -> None:
    reg, _, rev = publish(tmp_path)
    fragment = _plant_loop(kind, rev / "tasks" / "textstats-word-count")
    dest = tmp_path / "got"
    if existing:
        write_task(dest / "tasks", "mine")
        (dest / "notes.txt").write_text("mine\n")
        (dest / "registry.json").write_text("[]\n")
    before, beside = snapshot(dest), listing(tmp_path)
    refused(["pull", "acme/ds", str(dest), "--registry", reg], fragment, canary.token)
    assert listing(tmp_path) == beside
    if existing:
        assert snapshot(dest) == before
        assert listing(dest / "tasks") == ["mine"]
    else:
        assert not dest.exists()


def test_push_refuses_loops(tmp_path: Path, canary: Canary) -> None:
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    (data / "hello-file" / "environment" / "loop").symlink_to("..")
    with pytest.raises(RegistryError, match="loop"):
        FileRegistry(tmp_path / "registry").push(data, "acme/ds")
    assert not (tmp_path / "registry" / "acme").exists()
    del canary


def test_pull_stage_undoes_a_half_done_move(tmp_path: Path) -> None:
    """If moving into an existing destination fails half way, the moves made are undone."""
    dest = tmp_path / "got"
    write_task(dest / "tasks", "b-clash")
    (dest / "registry.json").write_text("mine\n")
    before = snapshot(dest)
    with pytest.raises(RegistryError, match="already present"), PullStage(dest) as stage:
        for name in ("a-new", "b-clash"):
            write_task(stage.out / "tasks", name)
        (stage.out / "registry.json").write_text("theirs\n")
        stage.commit(["a-new", "b-clash"], ["registry.json"])
    assert snapshot(dest) == before and listing(tmp_path) == ["got"]


# ---------------------------------------------------------------- 4. push: every registry


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubState]:
    with serve_hub({ALICE: "alice"}) as (url, state):
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setenv("HF_TOKEN", ALICE)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.delenv("HF_TOKEN_PATH", raising=False)
        yield state


def _hub_blobs(state: HubState) -> list[bytes]:
    return [b for r in state.repos.values() for c in r.commits.values() for b in c.files.values()]


def _plant_special(kind: str, task: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    env = task / "environment"
    if kind == "fifo":
        os.mkfifo(env / "pipe")
        return "is a FIFO"
    if kind == "socket":
        monkeypatch.chdir(env)  # a socket path must be short
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind("sock")
        return "is a socket"
    if kind == "device":
        try:  # /dev/null's numbers: harmless even if a broken push read it
            os.mknod(env / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root")
        return "is a device node"
    raise AssertionError(kind)


PUSH_ATTACKS = ["absolute-link", "relative-link", "fifo", "socket", "device"]


@pytest.mark.timeout(60)  # a FIFO read by a broken push would block
@pytest.mark.parametrize("kind", PUSH_ATTACKS)
@pytest.mark.parametrize("where", ["file", "hf"])
def test_push_refuses_links_leaving_the_task_and_special_files(
    tmp_path: Path,
    canary: Canary,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    kind: str,
    where: str,
) -> None:
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    task = data / "textstats-word-count"
    if kind == "absolute-link":
        (task / "environment" / "leak").symlink_to(canary.secret)
        fragment = "leaving the task"
    elif kind == "relative-link":
        (task / "environment" / "leak").symlink_to("../../../host/secret.txt")
        fragment = "leaving the task"
    else:
        fragment = _plant_special(kind, task, monkeypatch)
    state: HubState | None = None
    if where == "hf":
        state = request.getfixturevalue("hub")
        url = "hf"
    else:
        url = f"file://{tmp_path / 'registry'}"
    with pytest.raises(RegistryError, match=fragment):
        open_registry(url).push(data, "alice/ds")
    # Through the command: exit 2 (the command's own trust check may refuse first, in its words).
    res = cli.invoke(app, ["push", str(data), "alice/ds", "--registry", url])
    assert res.exit_code == 2, res.output
    assert canary.token not in res.output
    if state is not None:
        assert "alice/ds" not in state.repos
        assert not any(canary.token.encode() in b for b in _hub_blobs(state))
    else:
        assert not (tmp_path / "registry").exists()


# ------------------------------------------------------------------------ 5. Hub pull


def _hub_commit(state: HubState, repo_id: str, extra: dict[str, bytes]) -> None:
    """Commit files under any names straight into the fake Hub (as a hostile server would)."""
    with state.lock:
        repo = state.repos[repo_id]
        head = repo.branches["main"]
        files = {**repo.commits[head].files, **extra}
        state.commit(repo, head, "hostile", files)


def _unsafe_paths(canary: Canary) -> dict[str, str]:
    secret = str(canary.secret).lstrip("/")
    return {
        "absolute": str(canary.secret),
        "dotdot": "tasks/hello-file/" + "../" * 40 + secret,  # clamps at / then goes down
        "dotdot-task": "tasks/../../host/secret.txt",
        "empty-part": "tasks//hello-file/x.txt",
        "dot-part": "tasks/./hello-file/x.txt",
        "backslash": "tasks/hello-file/..\\..\\..\\x.txt",
    }


@pytest.mark.parametrize(
    "kind", ["absolute", "dotdot", "dotdot-task", "empty-part", "dot-part", "backslash"]
)
def test_hub_pull_refuses_unsafe_paths(
    hub: HubState, tmp_path: Path, canary: Canary, kind: str
) -> None:
    open_registry("hf").push(EXAMPLES, "alice/ds")
    _hub_commit(hub, "alice/ds", {_unsafe_paths(canary)[kind]: b"OVERWRITTEN\n"})
    host_before = snapshot(canary.host)
    dest = tmp_path / "got"
    refused(["pull", "alice/ds", str(dest)], "unsafe path", canary.token)
    assert not dest.exists() and "hf-home" not in listing(tmp_path)
    assert listing(tmp_path) == ["host"]
    assert snapshot(canary.host) == host_before
    assert canary.secret.read_text() == canary.token + "\n"


@pytest.mark.parametrize("existing", [False, True], ids=["new-dest", "existing-dest"])
def test_hub_pull_is_atomic(hub: HubState, tmp_path: Path, canary: Canary, existing: bool) -> None:
    """A task that arrives broken (after the others have downloaded) leaves nothing behind."""
    open_registry("hf").push(EXAMPLES, "alice/ds")
    _hub_commit(hub, "alice/ds", {"tasks/zzz-broken/notes.txt": b"no task.toml\n"})
    dest = tmp_path / "got"
    if existing:
        write_task(dest / "tasks", "mine")
        (dest / "README.md").write_text("mine\n")
    before, beside = snapshot(dest), listing(tmp_path)
    refused(["pull", "alice/ds", str(dest)], "came without task.toml", canary.token)
    assert listing(tmp_path) == beside
    if existing:
        assert snapshot(dest) == before
    else:
        assert not dest.exists()
    # The good tasks still pull one by one, and what lands holds no host file.
    got = open_registry("hf").pull("alice/ds", dest, task="hello-file")
    assert got.tasks == ["hello-file"]
    assert not leaks(canary.token, dest)


def test_pulled_then_repushed_dataset_carries_no_host_file(
    hub: HubState, tmp_path: Path, canary: Canary
) -> None:
    """End to end over both registries: a hostile folder registry cannot launder the canary
    through pull into a Hub push."""
    reg, _, rev = publish(tmp_path)
    (rev / "tasks" / "hello-file" / "environment" / "leak").symlink_to(canary.secret)
    dest = tmp_path / "got"
    refused(["pull", "acme/ds", str(dest), "--registry", reg], "leaving the task", canary.token)
    # Pull only the clean task, then publish it on the Hub.
    FileRegistry(tmp_path / "registry").pull("acme/ds", dest, task="textstats-word-count")
    open_registry("hf").push(dest, "alice/again")
    assert not leaks(canary.token, dest)
    assert not any(canary.token.encode() in b for b in _hub_blobs(hub))


def test_hub_pull_refuses_a_file_that_is_also_a_folder(
    hub: HubState, tmp_path: Path, canary: Canary
) -> None:
    """A listing that holds ``x`` and ``x/y`` cannot be written; one line, nothing left."""
    open_registry("hf").push(EXAMPLES, "alice/ds")
    _hub_commit(hub, "alice/ds", {"tasks/hello-file/instruction.md/x": b"x\n"})
    dest = tmp_path / "got"
    refused(["pull", "alice/ds", str(dest)], "cannot write", canary.token)
    assert not dest.exists() and listing(tmp_path) == ["host"]


@pytest.mark.parametrize("where", ["file", "hf"])
def test_card_never_reads_a_symlinked_generate_report(
    tmp_path: Path, canary: Canary, request: pytest.FixtureRequest, where: str
) -> None:
    """The card's yield comes from DATASET/generate-report.json: a symlink there could name
    any host file, so it is not read (and a report that is not an object is ignored)."""
    host_report = canary.host / "report.json"
    dropped = {canary.token: 1}
    host_report.write_text(json.dumps({"yield": {"candidates": 9, "dropped": dropped}}))
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    (data / "generate-report.json").symlink_to(host_report)
    if where == "hf":
        state = request.getfixturevalue("hub")
        open_registry("hf").push(data, "alice/ds")
        assert not any(canary.token.encode() in b for b in _hub_blobs(state))
    else:
        FileRegistry(tmp_path / "registry").push(data, "alice/ds")
        assert not leaks(canary.token, tmp_path / "registry")
    (data / "generate-report.json").unlink()
    (data / "generate-report.json").write_text("[1, 2]")
    FileRegistry(tmp_path / "other").push(data, "alice/ds")


# ------------------------------------------------------------------------------ the checks


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        ("tasks/a/task.toml", True),
        ("tasks/a/[id].tsx", True),
        ("README.md", True),
        ("", False),
        ("/etc/passwd", False),
        ("tasks/../x", False),
        ("tasks/a/..", False),
        ("tasks//a", False),
        ("tasks/./a", False),
        ("tasks/a/", False),
        ("tasks\\..\\x", False),
        ("C:/x", False),
        ("tasks/a\0b", False),
    ],
)
def test_safe_relpath(path: str, ok: bool) -> None:
    assert safe_relpath(path) is ok


def test_leak_scanner_sees_links_and_copies(tmp_path: Path, canary: Canary) -> None:
    """The scanner these tests rely on finds a copied token and a link out."""
    (tmp_path / "a").mkdir()
    assert leaks(canary.token, tmp_path / "a") == []
    (tmp_path / "a" / "copy").write_text(canary.token)
    (tmp_path / "a" / "out").symlink_to(canary.host)
    assert len(leaks(canary.token, tmp_path / "a")) == 2
