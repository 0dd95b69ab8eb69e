"""The web app over a published snapshot: a re-publish changes the ETags and the answers, with
no restart; a rejected snapshot keeps the old one serving."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from repogym.explorer.build import build_snapshot  # noqa: E402
from repogym.explorer.store import open_store  # noqa: E402
from repogym.explorer.web import create_app  # noqa: E402
from tests.explorer.web_fixtures import EXAMPLES  # noqa: E402


def test_republish_swaps_content_and_etags(tmp_path: Path) -> None:
    ds = tmp_path / "examples"
    shutil.copytree(EXAMPLES, ds)
    out = tmp_path / "snap"
    build_snapshot([str(ds)], out)
    client = TestClient(create_app(open_store(snapshot=out, poll_seconds=0.0)))

    first = client.get("/api/envs/examples")
    assert first.json()["task_count"] == 2
    tag = first.headers["etag"]
    page_tag = client.get("/d/examples").headers["etag"]
    assert client.get("/api/envs/examples", headers={"If-None-Match": tag}).status_code == 304

    shutil.copytree(ds / "hello-file", ds / "hello-again")
    build_snapshot([str(ds)], out)

    second = client.get("/api/envs/examples", headers={"If-None-Match": tag})
    assert second.status_code == 200, "a new snapshot must not answer 304 to an old tag"
    assert second.json()["task_count"] == 3 and second.headers["etag"] != tag
    page = client.get("/d/examples", headers={"If-None-Match": page_tag})
    assert page.status_code == 200 and "hello-again" in page.text
    assert client.get("/t/examples/hello-again").status_code == 200

    # a corrupt snapshot behind a new pointer is rejected; the current one keeps serving
    pointer = json.loads((out / "CURRENT").read_text())
    bad = out / "snapshots" / ("0" * 64 + ".sqlite")
    bad.write_bytes(b"not a database" * 100)
    pointer.update(file=f"snapshots/{bad.name}", sha256="0" * 64, size=bad.stat().st_size)
    (out / "CURRENT").write_text(json.dumps(pointer))
    after = client.get("/api/envs/examples")
    assert after.status_code == 200 and after.json()["task_count"] == 3
    assert after.headers["etag"] == second.headers["etag"]
