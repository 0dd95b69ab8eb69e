"""Routes of the community view (:mod:`repogym.explorer.community`), present when runs are on.

- ``GET /community[?by=env|domain|category][&env=E]``: the page.
- ``GET /api/community/rollouts?[env=E][&limit=N][&offset=N]`` → ``{rollouts: [...]}``.
- ``GET /api/community/leaderboard?[by=…][&env=E]`` → ``{by, rows: [...]}``.
- ``GET /api/community/untried?env=E[&limit=N][&offset=N]`` → ``{env, tasks, untried, items}``.

Answers change as runs finish: ``Cache-Control: no-store``. When the operator keeps runs to
their owners (``visibility = "owner"``) there is no community view: 404 with the reason.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from repogym.explorer.community import GROUPINGS, Community
from repogym.explorer.web import pages_community
from repogym.explorer.web.context import Context

NO_STORE = {"Cache-Control": "no-store"}
OFF = "runs on this explorer are visible only to whoever started them: there is no community view"


def _json(obj: Any, status: int = 200) -> Response:
    body = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
    return Response(body, status_code=status, media_type="application/json", headers=NO_STORE)


def _int(request: Request, name: str, default: int) -> int:
    try:
        return int(request.query_params.get(name) or default)
    except ValueError:
        return default


def router(ctx: Context, community: Community, *, public: bool) -> APIRouter:
    """The community page and API over ``community``; ``public`` False (runs kept to their
    owners) answers every route with 404 and the reason."""
    router = APIRouter()

    def scope(request: Request) -> tuple[str | None, Response | None]:
        """The ``env`` asked for, or the refusal: no community view, or no such public env."""
        if not public:
            return None, _json({"error": OFF}, 404)
        env = (request.query_params.get("env") or "").strip() or None
        if env is not None and community.public_env(env) is None:
            return env, _json({"error": "no such public environment"}, 404)
        return env, None

    @router.get("/api/community/rollouts")
    async def rollouts(request: Request) -> Response:
        env, refused = scope(request)
        if refused is not None:
            return refused
        limit, offset = _int(request, "limit", 50), _int(request, "offset", 0)
        return _json({"rollouts": community.rollouts(env=env, limit=limit, offset=offset)})

    @router.get("/api/community/leaderboard")
    async def leaderboard(request: Request) -> Response:
        env, refused = scope(request)
        if refused is not None:
            return refused
        by = request.query_params.get("by") or "env"
        if by not in GROUPINGS:
            return _json({"error": f"by: use one of {', '.join(GROUPINGS)}"}, 400)
        return _json({"by": by, "rows": community.leaderboard(by=by, env=env)})

    @router.get("/api/community/untried")
    async def untried(request: Request) -> Response:
        env, refused = scope(request)
        if refused is not None:
            return refused
        if env is None:
            return _json({"error": "no such public environment (?env=E)"}, 404)
        limit, offset = _int(request, "limit", 50), _int(request, "offset", 0)
        return _json(community.untried(env, limit=limit, offset=offset))

    @router.get("/community", include_in_schema=False)
    async def page(request: Request) -> Response:
        if not public:
            return ctx.page_error(404, OFF[0].upper() + OFF[1:] + ".")
        env, refused = scope(request)
        if refused is not None:
            return ctx.page_error(404, "No such public environment.")
        by = request.query_params.get("by") or "env"
        if by not in GROUPINGS:
            by = "env"
        text = pages_community.community_page(
            community.leaderboard(by=by, env=env),
            by,
            community.rollouts(env=env, limit=50),
            ctx.assets,
            env=env,
            untried=community.untried(env) if env else None,
        )
        return Response(
            text, media_type="text/html; charset=utf-8", headers=NO_STORE | {"Vary": "Cookie"}
        )

    return router
