"""The curation settings on the public explorer's pages and run API (plain ASGI middleware).

- every HTML page gets the admins' banner (escaped text, one link, closable: a ``<details>``
  the visitor folds, no script needed) right after ``<body>``;
- a task page loses its run panel while runs are off (globally or for its environment);
- ``POST /api/runs`` is refused (403 with the reason) while runs are off for the environment
  it names or its agent is not offered; ``GET /api/runs/session`` says runs are off and
  lists only the agents offered.

``GET /api/curation`` (:func:`curation_api`) lists the pinned and featured environments, the
collections and the banner. Hidden environments are the store's business
(:class:`repogym.explorer.curated.CuratedStore`).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from typing import Any

from repogym.explorer.curation import Banner, CurationReader
from repogym.explorer.web.http import send_json

__all__ = ["CurationMiddleware", "banner_html", "curation_api"]

_PANEL = re.compile(rb'<section id="runs" class="runpanel" data-env="([^"]*)".*?</section>', re.S)


def banner_html(banner: Banner) -> str:
    """The banner's markup: text and link escaped; the link opens with no referrer."""
    link = ""
    if banner.link:
        label = banner.link_text or banner.link
        link = (
            f' <a href="{html.escape(banner.link)}" rel="noopener noreferrer nofollow">'
            f"{html.escape(label)}</a>"
        )
    # Its id is a digest of what it says: a visitor who closed it sees it closed on every page
    # (app.js keeps the id), until the admins say something else.
    ident = hashlib.sha256(f"{banner.text}\n{banner.link}".encode()).hexdigest()[:16]
    return (
        f'<details class="banner" open role="note" data-banner="{ident}">'
        '<summary aria-label="Show or close the notice"'
        ' title="Close">Notice ×</summary>'
        f"<p>{html.escape(banner.text)}{link}</p></details>"
    )


async def _send_whole(send: Any, start: dict, body: bytes) -> None:
    """Send a buffered answer whose body was rewritten: its start with the new length."""
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def curation_api(curation: CurationReader, ctx: Any) -> Any:
    """``GET /api/curation``: the pinned and featured environments, the collections and the
    banner, hidden environments left out; ``GET /c/{name}``: a collection's page (a router
    over the explorer's page context ``ctx``)."""
    from fastapi import APIRouter
    from fastapi.responses import Response

    from repogym.explorer.web import pages

    router = APIRouter()

    @router.get("/c/{name}", include_in_schema=False, response_model=None)
    async def collection(name: str) -> Response:
        ids = curation.collections().get(name)
        if ids is None:
            return ctx.page_error(404, "No such collection.")
        cards = [c for c in (ctx.store.env(i) for i in ids) if c is not None]
        return Response(
            pages.collection_page(name, cards, ctx.assets),
            media_type="text/html; charset=utf-8",
            headers={"Cache-Control": "public, max-age=5"},
        )

    @router.get("/api/curation", response_model=None)
    async def curated() -> Response:
        banner = curation.banner()
        body = {
            "pinned": curation.pinned(),
            "featured": curation.featured(),
            "collections": curation.collections(),
            "banner": banner.to_json() if banner else None,
        }
        return Response(
            json.dumps(body, ensure_ascii=False),
            media_type="application/json",
            headers={"Cache-Control": "public, max-age=5"},
        )

    return router


class CurationMiddleware:
    """Applies the curation settings to pages and the run API of the wrapped app."""

    def __init__(self, app: Any, curation: CurationReader) -> None:
        self.app = app
        self.curation = curation

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if path == "/api/runs" and method == "POST":
            await self._start_run(scope, receive, send)
            return
        if path == "/api/runs/session" and (
            self.curation.runs_refusal() is not None or self.curation.agents() is not None
        ):
            await self._session(scope, receive, send)
            return
        if method != "GET":
            await self.app(scope, receive, send)
            return
        await self._page(scope, receive, send)

    async def _start_run(self, scope: dict, receive: Any, send: Any) -> None:
        """Read the body, refuse when runs are off for its environment, else pass it on."""
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, receive, send)
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        env = agent = None
        try:
            parsed = json.loads(body)
            if isinstance(parsed, dict):
                env, agent = parsed.get("env"), parsed.get("agent")
        except (ValueError, UnicodeDecodeError):
            pass
        reason = self.curation.runs_refusal(env if isinstance(env, str) else None)
        offered = self.curation.agents()
        if reason is None and offered is not None and agent not in offered:
            reason = f"the {str(agent)[:40]} agent is not offered on this explorer"
        if reason is not None:
            await send_json(send, 403, {"error": reason})
            return
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return dict(await receive())

        await self.app(scope, replay, send)

    async def _session(self, scope: dict, receive: Any, send: Any) -> None:
        """The session answer, saying runs are off and offering only the agents chosen."""
        start: dict = {}
        parts: list[bytes] = []

        async def capture(message: dict) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            parts.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(parts)
            try:
                obj = json.loads(body)
                reason = self.curation.runs_refusal()
                if reason is not None:
                    obj.update(enabled=False, reason=reason)
                offered, limits = self.curation.agents(), obj.get("limits")
                if offered is not None and isinstance(limits, dict):
                    limits["agents"] = [a for a in limits.get("agents") or [] if a in offered]
                body = json.dumps(obj).encode()
            except (ValueError, AttributeError):
                pass
            await _send_whole(send, start, body)

        await self.app(scope, receive, capture)

    async def _page(self, scope: dict, receive: Any, send: Any) -> None:
        """HTML answers get the banner and lose a run panel that is off."""
        banner = self.curation.banner()
        refusal_all = self.curation.runs_refusal()
        start: dict = {}
        parts: list[bytes] = []
        edit = False

        async def capture(message: dict) -> None:
            nonlocal edit
            if message["type"] == "http.response.start":
                headers = message.get("headers", [])
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                encoded = any(k.lower() == b"content-encoding" for k, _ in headers)
                edit = ctype.startswith(b"text/html") and not encoded
                if not edit:
                    await send(message)
                else:
                    start.update(message)
                return
            if not edit:
                await send(message)
                return
            parts.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = self._edit(b"".join(parts), banner, refusal_all)
            await _send_whole(send, start, body)

        await self.app(scope, receive, capture)

    def _edit(self, body: bytes, banner: Banner | None, refusal_all: str | None) -> bytes:
        def panel(m: re.Match[bytes]) -> bytes:
            env = html.unescape(m.group(1).decode("utf-8", "replace"))
            if refusal_all is None and self.curation.runs_refusal(env) is None:
                return m.group(0)
            return b""

        body = _PANEL.sub(panel, body)
        if banner is not None:
            body = body.replace(b"<body>", b"<body>" + banner_html(banner).encode(), 1)
        return body
