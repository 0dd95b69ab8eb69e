"""The home page lists the tasks the search words match, not only environments (real store)."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from repogym.explorer.store import open_store  # noqa: E402
from repogym.explorer.web import create_app  # noqa: E402
from tests.explorer.web_fixtures import EXAMPLES, MARK, planted_dataset  # noqa: E402


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    data = planted_dataset(tmp_path_factory.mktemp("home-tasks"))
    return TestClient(create_app(open_store([str(EXAMPLES), str(data)])))


def test_words_that_name_a_task_find_it_on_the_home_page(client: TestClient) -> None:
    # "word" is in the textstats-word-count task, not in any environment's name.
    envs = client.get("/api/search", params={"q": "word"}).json()
    tasks = client.get("/api/search/tasks", params={"q": "word"}).json()
    assert any(t["id"] == "textstats-word-count" for t in tasks["items"])
    page = client.get("/", params={"q": "word"})
    assert page.status_code == 200
    assert "matching task" in page.text
    assert 'href="/t/tasks/textstats-word-count"' in page.text
    assert 'href="/d/tasks"' in page.text  # the card names its environment
    if not envs["items"]:
        assert "tasks below do" in page.text


def test_no_words_no_task_list_and_answers_stay_out(client: TestClient) -> None:
    assert "matching task" not in client.get("/").text
    page = client.get("/", params={"q": "leaky"})
    assert "matching task" in page.text
    assert MARK not in page.text


def test_words_matching_nothing(client: TestClient) -> None:
    page = client.get("/", params={"q": "zzqqxxunmatched"})
    assert page.status_code == 200
    assert "matching task" not in page.text
    assert "No environment matches." in page.text
