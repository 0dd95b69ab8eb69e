"""The Hub stub of tests/hub/stub_hf.py plus the dataset listing the explorer needs.

``GET /api/datasets?filter=TAG[&limit=N][&cursor=K]`` answers like the Hub: the datasets whose
card (README.md front matter ``tags:``) carries every filter tag, each as
``{"id", "author", "sha", "private", "tags"}``; private datasets only for their owner; pages of
``page_size`` with a ``Link: <…>; rel="next"`` header, which ``huggingface_hub`` follows.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

from tests.hub.stub_hf import HubState, Repo, _Error, _Handler, _Server

__all__ = ["HubState", "card_tags", "serve_hub"]


def card_tags(readme: bytes | None) -> list[str]:
    """The ``tags:`` list of a dataset card's YAML front matter."""
    if not readme:
        return []
    text = readme.decode("utf-8", "replace")
    m = re.match(r"^---\n(.*?)\n---", text, re.S)
    if not m:
        return []
    tags: list[str] = []
    inside = False
    for line in m.group(1).splitlines():
        if re.match(r"^tags:\s*$", line):
            inside = True
            continue
        if inside and (item := re.match(r"^\s+-\s*(.+?)\s*$", line)):
            tags.append(item.group(1).strip("'\""))
        elif inside and line and not line.startswith(" "):
            inside = False
    return tags


class _ListingHandler(_Handler):
    server: _ListingServer

    def _route(self, parts: list[str], query: dict[str, list[str]], user: str | None) -> None:
        if parts == ["api", "datasets"] and self.command == "GET":
            return self._list(query, user)
        return super()._route(parts, query, user)

    def _list(self, query: dict[str, list[str]], user: str | None) -> None:
        wanted = query.get("filter", [])
        rows: list[dict[str, Any]] = []
        for repo_id in sorted(self.server.state.repos):
            repo: Repo = self.server.state.repos[repo_id]
            if repo.private and repo.owner != user:
                continue
            head = repo.commits[repo.branches["main"]]
            tags = card_tags(head.files.get("README.md"))
            if all(t in tags for t in wanted):
                rows.append(
                    {
                        "id": repo_id,
                        "author": repo.owner,
                        "sha": head.oid,
                        "private": repo.private,
                        "tags": tags,
                    }
                )
        try:
            start = int(query.get("cursor", ["0"])[0])
            limit = int(query.get("limit", ["0"])[0]) or None
        except ValueError:
            raise _Error(400, "bad cursor or limit") from None
        if limit is not None:
            rows = rows[:limit]
        size = self.server.page_size
        page = rows[start : start + size]
        headers = {}
        if start + size < len(rows):
            q = {k: v for k, v in query.items() if k != "cursor"}
            nxt = urlencode(
                [(k, x) for k, vs in q.items() for x in vs] + [("cursor", start + size)]
            )
            headers["Link"] = f'<http://{self.headers["Host"]}/api/datasets?{nxt}>; rel="next"'
        return self._json(200, page, headers)


class _ListingServer(_Server):
    page_size: int = 100


@contextmanager
def serve_hub(users: dict[str, str], page_size: int = 100) -> Iterator[tuple[str, HubState]]:
    """Run the stub (with the listing route) on 127.0.0.1; yields (base URL, state)."""
    server = _ListingServer(("127.0.0.1", 0), _ListingHandler)
    server.state = HubState(users)
    server.page_size = page_size
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
