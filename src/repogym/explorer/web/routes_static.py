"""Routes of the static assets: content-hashed files under ``/static`` and ``/favicon.ico``."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from repogym.explorer.web.context import Context
from repogym.explorer.web.http import CACHE_PAGE, CACHE_STATIC


def router(ctx: Context) -> APIRouter:
    router = APIRouter()

    @router.get("/static/{name}", include_in_schema=False)
    async def static_file(name: str, request: Request) -> Response:
        hit = ctx.static.files.get(name)
        if hit is None:
            return Response("not found", status_code=404, media_type="text/plain")
        data, ctype, digest = hit
        etag = f'"{digest}"'
        headers = {"ETag": etag, "Cache-Control": CACHE_STATIC}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        return Response(data, media_type=ctype, headers=headers)

    @router.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        data, ctype, _ = ctx.static.files[ctx.assets.icon.rsplit("/", 1)[1]]
        return Response(data, media_type=ctype, headers={"Cache-Control": CACHE_PAGE})

    return router
