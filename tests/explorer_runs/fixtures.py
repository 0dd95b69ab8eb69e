"""An explorer with runs on, served on 127.0.0.1, and a visitor that drives its API."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from repogym.explorer.runs import RunLimits, RunService
from repogym.explorer.runs.locate import TaskLocator
from repogym.explorer.store import open_store
from repogym.explorer.web import create_app
from repogym.sandbox import BACKENDS
from repogym.sandbox.fake import FakeSandbox
from tests.explorer.web_fixtures import EXAMPLES, serve

TEXTSTATS = "textstats-word-count"
FAKE = "fake-host"
"""The name :func:`explorer` gives the fake sandbox running commands on the host: for runs whose
checks are the explorer's bookkeeping (records, events, limits, masking), not isolation. The
example's verifier pays no reward there (its integrity record comes from a build RUN step,
which the fake never runs): such runs are graded 0."""


class HostFakeSandbox(FakeSandbox):
    """:class:`FakeSandbox` with ``host=True``, for code that names its backend."""

    def __init__(self) -> None:
        super().__init__(host=True)


@dataclass
class Explorer:
    base: str
    service: RunService
    folder: Path


@contextlib.contextmanager
def explorer(
    runs_dir: Path,
    paths: list[str] | None = None,
    limits: RunLimits | None = None,
    sandbox: str = "local",
) -> Iterator[Explorer]:
    """The explorer over ``paths`` (default: examples/tasks) with runs kept in ``runs_dir``,
    run on the ``sandbox`` backend (:data:`FAKE`: the fake sandbox, commands on the host)."""
    paths = paths or [str(EXAMPLES)]
    if sandbox == FAKE:
        BACKENDS.register(FAKE, HostFakeSandbox, hidden=True)
    store = open_store(paths)
    service = RunService(
        store, TaskLocator(store, paths), runs_dir, limits or RunLimits(), sandbox=sandbox
    )
    try:
        with serve(create_app(store, runs=service, mcp=False)) as base:
            yield Explorer(base, service, runs_dir)
    finally:
        service.close()
        store.close()
        if sandbox == FAKE:
            BACKENDS.unregister(FAKE)


class Visitor:
    """A browser's view of the explorer: its own cookies and CSRF token."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.http = httpx.Client(base_url=base, timeout=120)
        self.session = self.http.get("/api/runs/session").json()
        self.csrf = self.session["csrf"]

    def start(self, **body: Any) -> httpx.Response:
        return self.http.post(
            "/api/runs", json=body, headers={"X-CSRF-Token": self.csrf, "Origin": self.base}
        )

    def run(self, env: str = "tasks", task: str = TEXTSTATS, **body: Any) -> dict[str, Any]:
        """Start a run and follow its events to the end; the run record with ``events``."""
        r = self.start(env=env, task=task, **body)
        assert r.status_code == 202, r.text
        run_id = r.json()["id"]
        events = self.follow(run_id)
        rec = self.http.get(f"/api/runs/{run_id}").json()
        rec["streamed"] = events
        return rec

    def follow(self, run_id: str, after: int = 0) -> list[dict[str, Any]]:
        """Every SSE ``run`` event of the run after ``after``, until ``end``."""
        events: list[dict[str, Any]] = []
        name = ""
        with self.http.stream("GET", f"/api/runs/{run_id}/events?after={after}") as resp:
            assert resp.status_code == 200, resp.read()
            for line in resp.iter_lines():
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: ") and name == "run":
                    events.append(json.loads(line[6:]))
                elif line.startswith("data: ") and name == "end":
                    break
        return events

    def close(self) -> None:
        self.http.close()


def copy_task(dest_root: Path, name: str = TEXTSTATS) -> Path:
    dest = dest_root / name
    shutil.copytree(EXAMPLES / name, dest)
    return dest
