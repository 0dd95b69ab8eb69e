"""What search engines and link previews read: the public base URL, per-page meta tags,
``robots.txt`` and the sitemap's XML.

Absolute URLs (canonical links, ``og:url``, sitemap entries) start with the explorer's public
base URL: the one configured (``create_app(public_url=…)``, ``--public-url``,
``$REPOGYM_PUBLIC_URL``), else the request's own scheme and ``Host`` when that name is allowed
(the same list as the MCP and run endpoints); otherwise there is none and pages carry no
absolute URL. :class:`PublicBase` works it out once per request and keeps it, with the page's
path, in a context variable that :func:`head_tags` reads, so every page kind gets canonical and
preview tags without each route passing them on.

Descriptions are made from what a page already shows (titles and summaries, which are shown on
cards and pages and never hold withheld answers). Standard library only.
"""

from __future__ import annotations

import contextvars
import html
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from repogym.explorer.web.csrf import host_allowed

__all__ = [
    "PUBLIC_URL_ENV",
    "SITEMAP_NS",
    "PageMeta",
    "PublicBase",
    "clip",
    "configured_public_url",
    "current_base",
    "env_description",
    "head_tags",
    "normalize_public_url",
    "robots_txt",
    "sitemap_index_xml",
    "task_description",
    "urlset_xml",
]

PUBLIC_URL_ENV = "REPOGYM_PUBLIC_URL"
"""The environment variable naming the public base URL (``https://explore.example.org``)."""
SITE_NAME = "repogym explorer"
SITE_DESCRIPTION = (
    "Explore RL environments: what an agent is told, what it runs in and how it is graded, "
    "without the answers."
)
SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
DESCRIPTION_MAX = 200
"""Characters of a meta description at most (search engines show about 160)."""
ROBOTS_DISALLOW = ("/api/", "/play/", "/r/", "/runs", "/compare", "/mcp/")
"""Paths crawlers are asked to leave alone: the JSON API and raw files, the playground, runs
and the MCP endpoints (per-visitor, live or costly; none of it is catalog content)."""
_HOST = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$")
_SPACE = re.compile(r"\s+")


class RequestPlace(NamedTuple):
    """The public base URL of the request being answered ("" none) and its path and query."""

    base: str
    path: str
    query: str


_PLACE: contextvars.ContextVar[RequestPlace | None] = contextvars.ContextVar(
    "repogym_explorer_place", default=None
)


def normalize_public_url(url: str) -> str:
    """``url`` as a base URL (scheme and host, optionally a path prefix, no trailing slash);
    ValueError when it is not an absolute http(s) URL without credentials, query or fragment."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"public URL {url!r}: not an absolute http(s) URL")
    if "@" in parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"public URL {url!r}: no credentials, query or fragment")
    if not _HOST.match(parts.netloc):
        raise ValueError(f"public URL {url!r}: not a host name")
    return f"{parts.scheme}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def base_for(scope: dict, public_url: str, hosts: Sequence[str] | None) -> str:
    """The public base URL for a request: ``public_url`` when set, else the request's scheme and
    ``Host`` when that name is well formed and allowed (``hosts``; None: any), else ""."""
    if public_url:
        return public_url
    host = ""
    for k, v in scope.get("headers") or ():
        if k == b"host":
            host = v.decode("latin-1").strip()
            break
    if not host or not _HOST.match(host) or not host_allowed(host, hosts):
        return ""
    scheme = "https" if scope.get("scheme") == "https" else "http"
    return f"{scheme}://{host.lower()}"


class PublicBase:
    """ASGI middleware: works out the public base URL of each HTTP request and keeps it (with
    the path) for the pages rendered while answering it (:func:`current_base`)."""

    def __init__(self, app: Any, *, public_url: str = "", hosts: Sequence[str] | None) -> None:
        self.app = app
        self.public_url = public_url
        self.hosts = hosts

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        place = RequestPlace(
            base_for(scope, self.public_url, self.hosts),
            str(scope.get("path") or "/"),
            (scope.get("query_string") or b"").decode("latin-1"),
        )
        token = _PLACE.set(place)
        try:
            await self.app(scope, receive, send)
        finally:
            _PLACE.reset(token)


def current_base() -> str:
    """The public base URL of the request being answered ("" none known)."""
    place = _PLACE.get()
    return place.base if place is not None else ""


def clip(text: object, limit: int = DESCRIPTION_MAX) -> str:
    """``text`` on one line, cut at a word boundary to ``limit`` characters (with "…")."""
    s = _SPACE.sub(" ", "" if text is None else str(text)).strip()
    if len(s) <= limit:
        return s
    cut = s[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:") + "…"


@dataclass(frozen=True, slots=True)
class PageMeta:
    """What a page says about itself to search engines and link previews."""

    description: str = SITE_DESCRIPTION
    path: str | None = None
    """The canonical path (``/t/env/task``); None: the request's own path and query."""
    kind: str = "website"
    """``og:type``: ``website`` or ``article`` (a task)."""
    index: bool = True
    """False: ``<meta name="robots" content="noindex">`` (error pages)."""


def head_tags(title: str, meta: PageMeta | None) -> str:
    """The ``<title>``, description, canonical link and Open Graph / Twitter tags of a page
    (absolute URLs only when the request's public base URL is known)."""
    meta = meta or PageMeta()
    full = f"{title} · {SITE_NAME}" if title else SITE_NAME
    desc = clip(meta.description) or SITE_DESCRIPTION
    e = html.escape
    tags = [
        f"<title>{e(full)}</title>",
        f'<meta name="description" content="{e(desc)}">',
        f'<meta property="og:site_name" content="{e(SITE_NAME)}">',
        f'<meta property="og:type" content="{e(meta.kind)}">',
        f'<meta property="og:title" content="{e(clip(title, 120) or SITE_NAME)}">',
        f'<meta property="og:description" content="{e(desc)}">',
        '<meta name="twitter:card" content="summary">',
    ]
    place = _PLACE.get()
    if place is not None and place.base:
        path = meta.path
        if path is None:
            path = place.path + ("?" + place.query if place.query else "")
        where = place.base + path
        tags.insert(2, f'<link rel="canonical" href="{e(where)}">')
        tags.append(f'<meta property="og:url" content="{e(where)}">')
    if not meta.index:
        tags.append('<meta name="robots" content="noindex">')
    return "".join(tags)


def env_description(env: Mapping[str, Any]) -> str:
    """An environment page's description: its summary (as its card shows it), kind and size."""
    n = env.get("task_count")
    facts = f"{env.get('kind') or 'environment'} environment"
    if n:
        facts += f", {int(n)} task{'s' if n != 1 else ''}"
    summary = clip(env.get("summary"), DESCRIPTION_MAX - len(facts) - 3)
    return f"{summary} · {facts}" if summary else facts.capitalize()


def task_description(doc: Mapping[str, Any]) -> str:
    """A task page's description: its summary (the instruction's opening, as its card shows
    it) and how it is graded; never anything from its files or other sections."""
    facts = f"Task of {doc.get('env')}, graded by {doc.get('grading') or 'unknown'}"
    summary = clip(doc.get("summary") or doc.get("title"), DESCRIPTION_MAX - len(facts) - 3)
    return f"{summary} · {facts}" if summary else facts


def robots_txt(base: str) -> str:
    """``robots.txt``: the public pages allowed, the API, raw files, runs, playground and MCP
    disallowed, and the sitemap named when the base URL is known."""
    lines = ["User-agent: *", "Allow: /"]
    lines += [f"Disallow: {p}" for p in ROBOTS_DISALLOW]
    if base:
        lines += ["", f"Sitemap: {base}/sitemap.xml"]
    return "\n".join(lines) + "\n"


def _x(text: str) -> str:
    return html.escape(text, quote=True)


def sitemap_index_xml(base: str, shards: int, lastmod: str) -> bytes:
    """A sitemap index naming ``/sitemap-1.xml`` … ``/sitemap-<shards>.xml``."""
    mod = f"<lastmod>{_x(lastmod)}</lastmod>" if lastmod else ""
    items = "".join(
        f"<sitemap><loc>{_x(f'{base}/sitemap-{n}.xml')}</loc>{mod}</sitemap>"
        for n in range(1, shards + 1)
    )
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{SITEMAP_NS}">'
        f"{items}</sitemapindex>\n"
    ).encode()


def urlset_xml(base: str, paths: Iterable[str]) -> bytes:
    """A sitemap of the pages at ``paths`` (already percent-encoded), as absolute URLs."""
    items = "".join(f"<url><loc>{_x(base + p)}</loc></url>" for p in paths)
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{SITEMAP_NS}">{items}</urlset>\n'
    ).encode()


def configured_public_url(public_url: str | None) -> str:
    """The base URL from ``public_url``, else from :data:`PUBLIC_URL_ENV` ("" neither)."""
    value = public_url if public_url is not None else os.environ.get(PUBLIC_URL_ENV, "")
    return normalize_public_url(value) if value else ""
