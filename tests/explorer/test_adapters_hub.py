"""Harbor datasets on the Hub tagged ``harbor``: the real huggingface_hub client against a local
server that answers like the Hub (tests/explorer/stub_hub.py)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub", reason="needs the hub extra")

from repogym.explorer import withhold  # noqa: E402
from repogym.explorer.adapters import AdapterError, adapters, pick  # noqa: E402
from repogym.explorer.adapters.hub import (  # noqa: E402
    HubAdapter,
    HubReader,
    hub_readers,
    parse_hub_location,
)
from repogym.explorer.build import build_snapshot  # noqa: E402
from repogym.explorer.store import open_store  # noqa: E402
from repogym.hub.hf_registry import HfRegistry  # noqa: E402
from tests.conftest import EXAMPLES  # noqa: E402
from tests.explorer.stub_hub import HubState, card_tags, serve_hub  # noqa: E402
from tests.openenv.conftest import free_port  # noqa: E402

ALICE = "hf_ALICEsecret0explorer9a8b7c"
WRONG = "hf_WRONGsecret0explorer1d2e3f"
PRIVATE_MARK = "privatemarkerzq"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[str, HubState]]:
    """A stub Hub holding: alice/public-tasks (harbor), alice/secret-tasks (harbor, private),
    alice/notes (not tagged harbor); huggingface_hub points at it with alice's token."""
    with serve_hub({ALICE: "alice"}, page_size=1) as (url, state):
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setenv("HF_TOKEN", ALICE)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.setenv("REPOGYM_HUB_CACHE", str(tmp_path / "hub-cache"))
        monkeypatch.delenv("HF_TOKEN_PATH", raising=False)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        reg = HfRegistry(url, ALICE)
        reg.push(EXAMPLES, "alice/public-tasks")
        secret = tmp_path / "secret"
        shutil.copytree(EXAMPLES, secret)
        (secret / "hello-file" / "instruction.md").write_text(
            f"Write the {PRIVATE_MARK} greeting.\n"
        )
        reg.push(secret, "alice/secret-tasks", private=True)
        reg.api.create_repo("alice/notes", repo_type="dataset")
        reg.api.upload_file(
            path_or_fileobj=b"---\ntags:\n  - text\n---\n# notes\n",
            path_in_repo="README.md",
            repo_id="alice/notes",
            repo_type="dataset",
        )
        yield url, state


def test_listing_reads_public_harbor_datasets_only(hub: tuple[str, HubState]) -> None:
    url, state = hub
    found = dict(hub_readers())
    assert list(found) == ["hf://datasets/alice/public-tasks"]
    # the listing was paged (page size 1): the client followed the Link header
    listing_calls = [p for m, p in state.requests if p == "/api/datasets"]
    assert len(listing_calls) >= 3
    reader = found["hf://datasets/alice/public-tasks"]
    env = reader.env()
    assert (env.id, env.kind, env.private) == ("alice/public-tasks", "harbor", False)
    assert env.source == f"{url}/datasets/alice/public-tasks"
    assert env.facets["hub"] == "huggingface"
    assert env.run_options[0]["command"].startswith("repogym pull alice/public-tasks@")
    assert f"--registry hf+{url}" in env.run_options[0]["command"]
    assert ALICE not in repr(env)
    assert sorted(reader.task_ids()) == ["hello-file", "textstats-word-count"]
    doc = withhold.apply(reader.task("textstats-word-count"))
    files = {f.path: f for f in doc.files}
    assert files["solution/patch.diff"].data is None and files["solution/patch.diff"].withheld


def test_tasks_are_listed_without_download_and_fetched_one_by_one(
    hub: tuple[str, HubState],
) -> None:
    _url, state = hub
    reader = HubAdapter().open("hf://datasets/alice/public-tasks").prepare()
    env = reader.env()
    assert env.task_count == 2
    assert list(reader.task_ids()) == ["hello-file", "textstats-word-count"]

    def fetched() -> set[str]:
        prefix = "/datasets/alice/public-tasks/resolve/"
        return {p.split("/", 6)[6] for m, p in state.requests if p.startswith(prefix)}

    assert fetched() <= {"README.md", "registry.json", "manifest.json"}
    assert "README.md" in fetched()
    doc = reader.task("hello-file")
    assert doc.id == "hello-file" and doc.sections[0].id == "instruction"
    got = fetched()
    assert any(p.startswith("tasks/hello-file/") for p in got)
    assert not any(p.startswith("tasks/textstats-word-count/") for p in got)
    with pytest.raises(KeyError):
        reader.task("nope")


def test_include_private_lists_private_datasets_marked_private(hub: tuple[str, HubState]) -> None:
    found = dict(hub_readers(include_private=True))
    assert sorted(found) == ["hf://datasets/alice/public-tasks", "hf://datasets/alice/secret-tasks"]
    assert found["hf://datasets/alice/secret-tasks"].env().private is True


def test_private_hub_dataset_never_enters_a_public_snapshot(
    hub: tuple[str, HubState], tmp_path: Path
) -> None:
    # the token can read the private dataset, and it is even named explicitly: still left out
    explicit = HubAdapter().open("hf://datasets/alice/secret-tasks")
    assert explicit.env().private is True
    out = tmp_path / "snap"
    result = build_snapshot([explicit], out, hub=True)
    assert result["envs"] == 1
    assert any("alice/secret-tasks: private" in e for e in result["errors"])
    store = open_store(snapshot=out)
    try:
        ids = [c["id"] for c in store.search()["items"]]
        assert ids == ["alice/public-tasks"]
        assert store.env("alice/secret-tasks") is None
        assert store.search(PRIVATE_MARK)["total"] == 0
        assert store.search_tasks(PRIVATE_MARK)["total"] == 0
    finally:
        close = getattr(store, "close", None)
        if close:
            close()
    for f in out.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert PRIVATE_MARK.encode() not in data, f
            assert b"secret-tasks" not in data, f


def test_hf_location_opens_through_the_registry(hub: tuple[str, HubState]) -> None:
    assert "hub" in [a.name for a in adapters()]  # a built-in
    assert pick("hf://datasets/alice/public-tasks").name == "hub"
    assert pick("hf://alice/public-tasks").name == "hub"
    page = f"{hub[0]}/datasets/alice/public-tasks"
    assert parse_hub_location(page) == "alice/public-tasks"
    assert pick(page).name == "hub"  # not taken for an OpenEnv server
    assert parse_hub_location("hf://datasets/../etc") is None
    assert parse_hub_location("/local/folder") is None
    with pytest.raises(AdapterError, match="no dataset alice/missing"):
        HubAdapter().open("hf://datasets/alice/missing")


def test_wrong_token_error_is_one_line_and_token_free(hub: tuple[str, HubState]) -> None:
    with pytest.raises(AdapterError) as err:
        HubReader("alice/secret-tasks", token=WRONG).prepare()
    text = str(err.value)
    assert "\n" not in text and "alice/secret-tasks" in text
    assert WRONG not in text and WRONG[3:15] not in text


def test_unreachable_hub_is_skipped_with_one_log_line(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    with caplog.at_level(logging.WARNING, logger="repogym.explorer.hub"):
        assert list(hub_readers(endpoint=endpoint, timeout=1.0)) == []
    (record,) = caplog.records
    assert f"Hugging Face Hub at {endpoint} not reachable" in record.getMessage()
    caplog.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with caplog.at_level(logging.WARNING, logger="repogym.explorer.hub"):
        assert list(hub_readers(endpoint=endpoint)) == []
    assert "HF_HUB_OFFLINE" in caplog.records[0].getMessage()


def test_store_with_hub_and_no_network_still_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    store = open_store([str(EXAMPLES)], hub=True)
    try:
        assert [c["id"] for c in store.search()["items"]] == ["tasks"]
    finally:
        close = getattr(store, "close", None)
        if close:
            close()


def test_card_tags_parser() -> None:
    assert card_tags(b"---\ntags:\n  - harbor\n  - 'x'\nprivate: true\n---\n# t") == ["harbor", "x"]
    assert card_tags(b"# no front matter") == []


def test_task_files_are_downloaded_as_real_files_and_read(hub: tuple[str, HubState]) -> None:
    """The Hub's own cache links every file to a blob; the explorer reads no symlink, so a
    task is downloaded into a folder of real files and its text is shown."""
    reader = HubAdapter().open("hf://datasets/alice/public-tasks").prepare()
    doc = reader.task("hello-file")
    files = {f.path: f for f in doc.files}
    assert not any((f.withheld or "").startswith("symlink") for f in doc.files), files
    assert files["instruction.md"].data and not any(p.startswith(".cache") for p in files)
    instruction = next(s.body for s in doc.sections if s.id == "instruction")
    assert instruction.strip() and "symlink" not in instruction
    local = reader._local_dir()
    assert local.is_dir() and not [p for p in local.rglob("*") if p.is_symlink()]


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("tasks/a/task.toml", True),
        ("task.toml", True),
        ("../evil/task.toml", False),
        ("tasks/../../x", False),
        ("/etc/passwd", False),
        ("tasks//a", False),
        ("tasks\\a", False),
        ("tasks/\x1b[31m/task.toml", False),
    ],
)
def test_only_plain_listed_names_are_downloaded(name: str, ok: bool) -> None:
    from repogym.explorer.adapters.hub import _plain_path

    assert _plain_path(name) is ok


def test_downloads_default_to_a_folder_beside_the_hub_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from huggingface_hub import constants

    monkeypatch.delenv("REPOGYM_HUB_CACHE", raising=False)
    info = SimpleNamespace(sha="a" * 40, private=False)
    reader = HubReader("alice/tasks", endpoint="http://127.0.0.1:9", token="", info=info)
    assert reader._local_dir() == (
        Path(constants.HF_HUB_CACHE) / "repogym-explorer" / "datasets--alice--tasks" / ("a" * 40)
    )
