"""The admin app: a FastAPI app of its own (its own process and port) over the data folder.

Every request is authenticated first (:mod:`.auth`: 401 without credentials, 403 with wrong
ones) and its ``Host`` checked against the allow-list; writes are refused cross-site exactly as
the public run routes refuse them (:func:`repogym.explorer.web.csrf.check_csrf`: JSON body,
same origin, double-submit token). Routes:

- ``GET /admin/`` — the settings, the latest audit entries and a form per change;
- ``GET /admin/api/settings`` — ``{settings, error, audit}``;
- ``GET /admin/api/audit?last=N`` — the audit log's last entries;
- ``POST /admin/api/<action>`` — one change (:data:`.actions.ACTIONS`), written atomically
  with its audit line; answers the new settings.
"""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from repogym.explorer.admin.actions import ACTIONS
from repogym.explorer.admin.auth import AuthConfig
from repogym.explorer.admin.page import ADMIN_CSS, ADMIN_JS, admin_page
from repogym.explorer.curation import CurationError, SettingsFile, read_audit
from repogym.explorer.web.csrf import check_csrf, ensure_csrf_cookie, host_allowed

__all__ = ["ADMIN_CSP", "create_admin_app"]

ADMIN_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": ADMIN_CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
MAX_BODY = 64 * 1024


def create_admin_app(
    data_dir: Path, auth: AuthConfig, *, allowed_hosts: Sequence[str] | None = None
) -> Any:
    """The admin app over ``data_dir`` (the public explorer's ``--data``)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import Response

    settings = SettingsFile(data_dir)
    hosts = list(allowed_hosts) if allowed_hosts is not None else None
    app = FastAPI(title="repogym explorer admin", docs_url=None, redoc_url=None, openapi_url=None)

    def reply(body: Any, status: int = 200, media: str = "application/json") -> Response:
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
        return Response(text, status_code=status, media_type=media, headers=dict(_HEADERS))

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Response:
        if not host_allowed(request.headers.get("host", ""), hosts):
            return reply({"error": "unknown Host"}, 421)
        verdict = auth.check(request.headers.get("authorization"))
        if verdict.who is None:
            resp = reply({"error": verdict.reason}, verdict.status)
            if verdict.status == 401:
                resp.headers["WWW-Authenticate"] = 'Basic realm="repogym admin", charset="UTF-8"'
            return resp
        request.state.who = verdict.who
        refused = check_csrf(request)
        if refused:
            return reply({"error": refused}, 403)
        out: Response = await call_next(request)
        return out

    def state() -> dict[str, Any]:
        try:
            current, error = settings.read().to_json(), None
        except CurationError as exc:
            current, error = None, str(exc)
        return {"settings": current, "error": error, "audit": read_audit(data_dir, last=50)}

    @app.get("/admin")
    @app.get("/admin/")
    async def page(request: Request) -> Response:
        resp = reply(admin_page(state(), request.state.who), media="text/html; charset=utf-8")
        ensure_csrf_cookie(resp, request)
        return resp

    @app.get("/admin/admin.js")
    async def script() -> Response:
        return reply(ADMIN_JS, media="text/javascript; charset=utf-8")

    @app.get("/admin/admin.css")
    async def style() -> Response:
        return reply(ADMIN_CSS, media="text/css; charset=utf-8")

    @app.get("/admin/api/settings")
    async def get_settings() -> Response:
        return reply(state())

    @app.get("/admin/api/audit")
    async def audit(last: int = 100) -> Response:
        return reply({"audit": read_audit(data_dir, last=max(1, min(last, 10_000)))})

    @app.post("/admin/api/{action}")
    async def change(action: str, request: Request) -> Response:
        make = ACTIONS.get(action)
        if make is None:
            return reply({"error": f"no action {action[:40]!r}"}, 404)
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return reply({"error": "the body is too large"}, 413)
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return reply({"error": "the body is not JSON"}, 400)
        if not isinstance(body, dict):
            return reply({"error": "the body must be a JSON object"}, 400)
        try:
            import anyio.to_thread

            new = await anyio.to_thread.run_sync(
                settings.change, request.state.who, action, make(body)
            )
        except CurationError as exc:
            return reply({"error": str(exc)}, 400)
        return reply({"settings": new.to_json()})

    return app
