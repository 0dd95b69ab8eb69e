"""Server-rendered HTML pages of the explorer.

Every value that comes from data (titles, summaries, ids, file contents, facet values…) goes
through :func:`html.escape`; Markdown goes through the small safe renderer in ``markdown.py``.
Control characters from data (an escape sequence in a task folder's name, a bell in a title)
are shown as visible ``\\x1b``-style text on every page, never sent raw (:func:`layout`).
No inline script or style: behaviour lives in ``static/app.js``, looks in ``static/app.css``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from repogym.explorer.web import markdown, seo
from repogym.explorer.web.highlight import highlight, highlight_lines, language_for
from repogym.explorer.web.seo import PageMeta, head_tags

FACET_LABELS = {
    "kind": "Kind",
    "language": "Language",
    "category": "Category",
    "difficulty": "Difficulty",
    "pipeline": "Pipeline",
    "grading": "Grading",
    "network": "Network",
}
SORTS = ("relevance", "name", "tasks")
VIEW_MAX_BYTES = 512 * 1024
VIEW_MAX_LINES = 10_000
# C0 controls but tab, newline and carriage return; DEL; C1 controls
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def visible_controls(text: str) -> str:
    """``text`` with control characters written as ``\\x1b``-style text."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


@dataclass(frozen=True, slots=True)
class Assets:
    """Versioned URLs of the static files."""

    css: str
    js: str
    icon: str
    runs: str = ""
    """``static/runs.js`` (run panel, live runs, compare picks); empty: not loaded."""


def e(value: object) -> str:
    """Escape any value for HTML text and attributes (None → "")."""
    return html.escape("" if value is None else str(value), quote=True)


def env_url(env_id: str) -> str:
    """URL of an environment page (``org/name`` ids keep their slash)."""
    return "/d/" + quote(env_id, safe="/:@")


def task_url(env_id: str, task_id: str) -> str:
    """URL of a task page: the task id is the last path segment."""
    return "/t/" + quote(env_id, safe="/:@") + "/" + quote(task_id, safe=":@")


def raw_url(env_id: str, task_id: str, path: str) -> str:
    """URL of a task file's raw bytes."""
    return (
        "/api/files/"
        + quote(env_id, safe="/:@")
        + "/"
        + quote(task_id, safe=":@")
        + "/"
        + (quote(path, safe="/"))
    )


def url(path: str, params: Iterable[tuple[str, object]]) -> str:
    """``path`` with a query string built from non-empty params (repeatable keys kept)."""
    pairs = [(k, str(v)) for k, v in params if v not in (None, "")]
    return path + ("?" + urlencode(pairs) if pairs else "")


def _size(n: int | None) -> str:
    if n is None:
        return ""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


TOPSEARCH = (
    '<form class="topsearch" action="/" method="get" role="search">'
    '<input type="search" name="q" placeholder="Search environments"'
    ' aria-label="Search environments"></form>'
)


def layout(
    title: str, body: str, assets: Assets, *, topsearch: bool = True, meta: PageMeta | None = None
) -> str:
    """The base template: head with the versioned CSS/JS, a top bar with the theme toggle.
    ``meta`` gives the description and canonical path of the title, description, canonical and
    preview tags (:func:`.seo.head_tags`). Control characters anywhere in the page are made
    visible text."""
    return visible_controls(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        + head_tags(title, meta)
        + f'<link rel="stylesheet" href="{e(assets.css)}">'
        f'<link rel="icon" href="{e(assets.icon)}" type="image/svg+xml">'
        f'<script src="{e(assets.js)}"></script>'
        + (f'<script src="{e(assets.runs)}" defer></script>' if assets.runs else "")
        + "</head><body>"
        '<header class="top"><a class="brand" href="/">repogym <span>explorer</span></a>'
        + (TOPSEARCH if topsearch else "")
        + '<button id="theme" class="theme" type="button" aria-label="Switch light/dark theme"'
        ' title="Switch light/dark theme">◐</button></header>'
        f'<main id="main">{body}</main>'
        '<footer class="foot">Answers (solutions, expected outputs, grader data) are never shown.'
        "</footer></body></html>"
    )


def _chips(values: Sequence[tuple[str, str, bool]], cls: str = "chips") -> str:
    items = "".join(
        f'<a class="chip{" on" if on else ""}" href="{e(href)}"'
        f"{' aria-current=' + chr(34) + 'true' + chr(34) if on else ''}>{label}</a>"
        for label, href, on in values
    )
    return f'<nav class="{cls}">{items}</nav>'


def _pager(total: int, page: int, size: int, make_url) -> str:  # type: ignore[no-untyped-def]
    pages = max(1, -(-total // max(size, 1)))
    if pages <= 1:
        return ""
    prev = (
        f'<a rel="prev" href="{e(make_url(page - 1))}">← Previous</a>'
        if page > 1
        else '<span class="off">← Previous</span>'
    )
    nxt = (
        f'<a rel="next" href="{e(make_url(page + 1))}">Next →</a>'
        if page < pages
        else '<span class="off">Next →</span>'
    )
    return f'<nav class="pager">{prev}<span>Page {page} of {pages}</span>{nxt}</nav>'


def _facet_tags(facets: Mapping[str, object] | None) -> str:
    if not facets:
        return ""
    tags = "".join(
        f'<li><span class="k">{e(k)}</span> {e(v)}</li>' for k, v in sorted(facets.items()) if v
    )
    return f'<ul class="tags">{tags}</ul>' if tags else ""


def env_card(card: Mapping) -> str:
    """One environment card."""
    n = card.get("task_count")
    count = f"{n} task{'s' if n != 1 else ''}" if n is not None else "tasks: unknown"
    return (
        '<article class="card">'
        f'<h2><a href="{e(env_url(card["id"]))}">{e(card.get("title") or card["id"])}</a></h2>'
        f'<p class="meta"><span class="badge">{e(card.get("kind"))}</span> {e(count)}'
        f' · <span class="id">{e(card["id"])}</span></p>'
        f'<p class="sum">{e(card.get("summary"))}</p>{_facet_tags(card.get("facets"))}</article>'
    )


def task_card(card: Mapping, *, show_env: bool = False) -> str:
    """One task card (in an environment's task list; ``show_env`` names the environment)."""
    run = "runs here" if card.get("runnable") else "not runnable here"
    where = (
        f'<a class="env" href="{e(env_url(card["env"]))}">{e(card["env"])}</a> · '
        if show_env
        else ""
    )
    return (
        '<article class="card task">'
        f'<h3><a href="{e(task_url(card["env"], card["id"]))}">'
        f"{e(card.get('title') or card['id'])}</a></h3>"
        f'<p class="meta">{where}<span class="badge">{e(card.get("grading"))}</span> '
        f"{e(card.get('environment'))} · {e(card.get('network'))} · {e(run)}"
        f' · <span class="id">{e(card["id"])}</span></p>'
        f'<p class="sum">{e(card.get("summary"))}</p>{_facet_tags(card.get("facets"))}</article>'
    )


@dataclass(slots=True)
class SearchState:
    """The home page's state, all of it kept in the URL."""

    q: str = ""
    kind: str = ""
    filters: dict[str, list[str]] | None = None
    sort: str = "relevance"
    page: int = 1

    def params(
        self,
        *,
        kind: str | None = None,
        filters: dict[str, list[str]] | None = None,
        sort: str | None = None,
        page: int = 1,
    ) -> list[tuple[str, object]]:
        """Query parameters of this search with some changed (``page`` back to 1 unless given)."""
        kind = self.kind if kind is None else kind
        filters = (self.filters if filters is None else filters) or {}
        sort = self.sort if sort is None else sort
        out: list[tuple[str, object]] = [("q", self.q), ("kind", kind)]
        for name, values in sorted(filters.items()):
            out += [("f", f"{name}:{v}") for v in values]
        if sort != "relevance":
            out.append(("sort", sort))
        if page != 1:
            out.append(("page", page))
        return out

    def toggled(self, name: str, value: str) -> dict[str, list[str]]:
        filters = {k: list(v) for k, v in (self.filters or {}).items()}
        values = filters.setdefault(name, [])
        if value in values:
            values.remove(value)
        else:
            values.append(value)
        return {k: v for k, v in filters.items() if v}


def curated_strip(featured: Sequence[Mapping], collections: Mapping[str, int]) -> str:
    """What the curators feature, and links to their collections (empty: nothing curated)."""
    out = ""
    if featured:
        out += (
            '<section class="featured" aria-label="Featured"><h2>Featured</h2>'
            f'<div class="list">{"".join(env_card(c) for c in featured)}</div></section>'
        )
    if collections:
        links = [
            (f"{e(name)} <small>{int(n)}</small>", f"/c/{quote(name, safe='')}", False)
            for name, n in collections.items()
        ]
        out += f'<nav class="collections" aria-label="Collections">{_chips(links)}</nav>'
    return out


def collection_page(name: str, cards: Sequence[Mapping], assets: Assets) -> str:
    """A curators' collection: its environments' cards, in the curators' order."""
    body = (
        f'<nav class="crumbs"><a href="/">Environments</a> / <span>{e(name)}</span></nav>'
        f"<h1>{e(name)}</h1>"
        '<p class="muted">A collection of this explorer\'s curators.</p>'
        + (
            "".join(env_card(c) for c in cards)
            or '<p class="empty">This collection has no environment to show.</p>'
        )
    )
    return layout(name, body, assets)


def home(
    result: Mapping,
    state: SearchState,
    assets: Assets,
    *,
    tasks: Mapping | None = None,
    curated: str = "",
) -> str:
    """The home page: search box, kind chips, facet filters, cards and paging; with search
    words, also the first tasks they match (``tasks``: a ``search_tasks`` answer); ``curated``
    (:func:`curated_strip`) above the results."""
    facets: Mapping[str, Mapping[str, int]] = result.get("facets") or {}
    hidden = "".join(
        f'<input type="hidden" name="{e(k)}" value="{e(v)}">'
        for k, v in state.params()
        if k not in ("q", "page") and v not in (None, "")
    )
    form = (
        '<form class="search" action="/" method="get" role="search" data-live>'
        f'<input id="q" type="search" name="q" value="{e(state.q)}" autocomplete="off"'
        ' placeholder="Search environments: name, task words, language…" aria-label="Search">'
        f'{hidden}<button type="submit">Search</button></form>'
    )
    kinds = facets.get("kind") or {}
    chips = [("All", url("/", state.params(kind="")), not state.kind)]
    chips += [
        (f"{e(k)} <small>{int(n)}</small>", url("/", state.params(kind=k)), state.kind == k)
        for k, n in sorted(kinds.items())
    ]
    groups = []
    for name, label in FACET_LABELS.items():
        values = facets.get(name) or {}
        if name == "kind" or not values:
            continue
        chosen = set((state.filters or {}).get(name, []))
        links = "".join(
            f'<li><a class="{"on" if v in chosen else ""}"'
            f' href="{e(url("/", state.params(filters=state.toggled(name, v))))}">'
            f"{e(v)} <small>{int(n)}</small></a></li>"
            for v, n in sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))[:30]
        )
        groups.append(f"<details open><summary>{e(label)}</summary><ul>{links}</ul></details>")
    total = int(result.get("total") or 0)
    sorts = _chips(
        [(s, url("/", state.params(sort=s)), state.sort == s) for s in SORTS], "chips sort"
    )
    task_hits = int((tasks or {}).get("total") or 0)
    cards = "".join(env_card(c) for c in result.get("items") or []) or (
        '<p class="empty">No environment matches'
        + (" by its name or description; tasks below do." if task_hits else ".")
        + " Try fewer words or filters.</p>"
    )
    pager = _pager(
        total,
        int(result.get("page") or state.page),
        int(result.get("size") or 24),
        lambda p: url("/", state.params(page=p)),
    )
    body = (
        '<section class="hero"><h1>Explore RL environments</h1>'
        "<p>What an agent is told, what it runs in and how it is graded, without the answers.</p>"
        f"{form}</section>{curated}"
        f'<div id="results">{_chips(chips)}<div class="cols">'
        f'<aside class="facets" aria-label="Filters">{"".join(groups)}</aside>'
        f'<section class="list"><div class="bar"><p class="count">{total} environment'
        f"{'s' if total != 1 else ''}</p>{sorts}</div>{cards}{pager}"
        f"{_task_hits(tasks, state.q)}</section></div></div>"
    )
    plain = not (state.q or state.kind or state.filters) and state.sort == "relevance"
    plain = plain and state.page == 1
    meta = PageMeta(
        description=(
            seo.SITE_DESCRIPTION
            if not state.q
            else f"{total} environment{'s' if total != 1 else ''} matching {state.q}"
        ),
        path="/" if plain else None,
    )
    return layout("Search" if not state.q else state.q, body, assets, topsearch=False, meta=meta)


def _task_hits(tasks: Mapping | None, q: str) -> str:
    """The first tasks the search words match, across environments (home page)."""
    items = (tasks or {}).get("items") or []
    if not items:
        return ""
    total = int((tasks or {}).get("total") or len(items))
    more = (
        f'<p class="more">Showing {len(items)} of {total}; open an environment to search '
        "all of its tasks.</p>"
        if total > len(items)
        else ""
    )
    cards = "".join(task_card(c, show_env=True) for c in items)
    return (
        f'<section class="task-hits" aria-label="Matching tasks"><h2>{total} matching task'
        f"{'s' if total != 1 else ''}</h2>{cards}{more}</section>"
    )


def _openenv_links(env: Mapping) -> str:
    """For a cataloged OpenEnv server: its playground and its MCP bridge endpoint."""
    if env.get("kind") != "openenv" or not env.get("source"):
        return ""
    tail = quote(str(env["id"]), safe="/:@")
    return (
        '<section id="try"><h2>Try it</h2><ul class="opts">'
        f'<li><a class="play-link" href="/play/{e(tail)}">Playground</a>: reset, send actions '
        "and read the observations in the browser.</li>"
        f"<li>MCP bridge (Streamable HTTP) for agents: <code>/mcp/o/{e(tail)}</code> on this "
        "explorer (reset, step, state and the server's own tools).</li></ul></section>"
    )


def env_page(env: Mapping, tasks: Mapping, q: str, page: int, assets: Assets) -> str:
    """An environment page: description, where it runs, run options and its task list."""
    eid = env["id"]
    opts = "".join(
        f'<li><span>{e(o.get("label"))}</span><pre class="cmd"><code>{e(o.get("command"))}'
        "</code></pre></li>"
        for o in env.get("run_options") or []
    )
    facet_counts = env.get("task_facets") or env.get("facets_counts") or {}
    counts = ""
    if isinstance(facet_counts, Mapping) and facet_counts:
        rows = "".join(
            f"<tr><th>{e(FACET_LABELS.get(k, k))}</th><td>"
            + ", ".join(
                f"{e(v)} ({int(n)})" for v, n in sorted(vals.items(), key=lambda kv: -kv[1])[:12]
            )
            + "</td></tr>"
            for k, vals in sorted(facet_counts.items())
            if isinstance(vals, Mapping)
        )
        counts = f'<table class="kv">{rows}</table>'
    total = int(tasks.get("total") or 0)
    items = "".join(task_card(c) for c in tasks.get("items") or []) or (
        '<p class="empty">No task matches.</p>'
    )
    here = env_url(eid)
    pager = _pager(
        total,
        int(tasks.get("page") or page),
        int(tasks.get("size") or 24),
        lambda p: url(here, [("q", q), ("page", p if p != 1 else "")]),
    )
    desc = markdown.render(env.get("description") or "") if env.get("description") else ""
    body = (
        f'<nav class="crumbs"><a href="/">Environments</a> / <span>{e(eid)}</span></nav>'
        f"<h1>{e(env.get('title') or eid)}</h1>"
        f'<p class="meta"><span class="badge">{e(env.get("kind"))}</span>'
        f' <span class="id">{e(eid)}</span>'
        + (f" · source <code>{e(env.get('source'))}</code>" if env.get("source") else "")
        + "</p>"
        f'<p class="lead">{e(env.get("summary"))}</p>'
        + (f'<section class="md">{desc}</section>' if desc else "")
        + (
            f"<section><h2>Runs in</h2><p>{e(env.get('runs_in'))}</p></section>"
            if env.get("runs_in")
            else ""
        )
        + (f'<section><h2>Run options</h2><ul class="opts">{opts}</ul></section>' if opts else "")
        + _openenv_links(env)
        + (f"<section><h2>Tasks at a glance</h2>{counts}</section>" if counts else "")
        + f"<section><h2>Tasks <small>{int(env.get('task_count') or total)}</small></h2>"
        f'<form class="search" action="{e(here)}" method="get" role="search" data-live>'
        f'<input id="q" type="search" name="q" value="{e(q)}" autocomplete="off"'
        ' placeholder="Search this environment\'s tasks" aria-label="Search tasks">'
        '<button type="submit">Search</button></form>'
        f'<div id="results"><p class="count">{total} task{"s" if total != 1 else ""}</p>'
        f"{items}{pager}</div></section>"
    )
    meta = PageMeta(seo.env_description(env), env_url(eid), index=not env.get("private"))
    return layout(env.get("title") or eid, body, assets, meta=meta)


def _section(sec: Mapping) -> str:
    fmt, body = sec.get("format") or "markdown", sec.get("body") or ""
    if fmt == "markdown":
        inner = f'<div class="md">{markdown.render(body)}</div>'
    elif fmt == "code":
        lang = sec.get("language") or ""
        inner = f'<pre class="code"><code>{highlight(body, lang)}</code></pre>'
    else:
        inner = f'<pre class="text">{e(body)}</pre>'
    return f'<section id="s-{e(sec.get("id"))}"><h2>{e(sec.get("title"))}</h2>{inner}</section>'


def viewer(env_id: str, task_id: str, path: str, data: bytes | None, reason: str | None) -> str:
    """The file viewer: highlighted lines with numbered anchors (``#L12``) and line links."""
    raw = raw_url(env_id, task_id, path)
    head = f'<div class="vhead"><h2>{e(path)}</h2>'
    if reason is not None:
        return (
            f'<section id="viewer" class="viewer">{head}</div>'
            f'<p class="withheld-note">Withheld: {e(reason)}. This file is part of the answer'
            " or the grader's data, so it is not shown.</p></section>"
        )
    assert data is not None
    head += f'<a class="rawlink" href="{e(raw)}">raw</a> <span>{_size(len(data))}</span></div>'
    binary = b"\x00" in data[:8192]
    text = ""
    if not binary:
        try:
            text = data[:VIEW_MAX_BYTES].decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(data[:VIEW_MAX_BYTES]) - 4:
                binary = True
            else:
                text = data[: exc.start].decode("utf-8")
    if binary:
        return (
            f'<section id="viewer" class="viewer">{head}<p class="empty">Binary file; '
            f'<a href="{e(raw)}">download it</a>.</p></section>'
        )
    lines = highlight_lines(text, language_for(path))
    cut = len(data) > VIEW_MAX_BYTES or len(lines) > VIEW_MAX_LINES
    lines = lines[:VIEW_MAX_LINES]
    rows = "".join(
        f'<div class="l" id="L{i}"><a class="n" href="#L{i}" aria-label="Line {i}">{i}</a>'
        f"<code>{line}</code></div>"
        for i, line in enumerate(lines, 1)
    )
    more = (
        f'<p class="empty">Shortened; <a href="{e(raw)}">see the whole file</a>.</p>' if cut else ""
    )
    return (
        f'<section id="viewer" class="viewer">{head}<div class="src">{rows}</div>{more}</section>'
    )


def task_page(
    doc: Mapping,
    assets: Assets,
    *,
    file: str | None = None,
    file_html: str = "",
    pending: bool = False,
    panel: str = "",
) -> str:
    """A task page: instruction, environment, grading, what was withheld, files and viewer.
    ``panel`` (already safe HTML: the run panel) goes before the files.

    ``pending``: the task is listed but not read yet; the page says so instead of claiming
    that nothing was withheld.
    """
    env_id, task_id = doc["env"], doc["id"]
    here = task_url(env_id, task_id)
    run = "runs here" if doc.get("runnable") else "not runnable here"
    notes = doc.get("withheld") or []
    withheld = (
        '<section class="withheld none" id="withheld"><h2>Still indexing</h2>'
        "<p>This task is listed but not read yet: its instruction, files and what was "
        "withheld appear when indexing reaches it. Reload in a moment.</p></section>"
        if pending
        else '<section class="withheld" id="withheld"><h2>What was withheld</h2><ul>'
        + "".join(f"<li>{e(n)}</li>" for n in notes)
        + "</ul><p>Answers are kept out of this page, the API and the raw files.</p></section>"
        if notes
        else '<section class="withheld none" id="withheld"><h2>What was withheld</h2>'
        "<p>Nothing in this task looked like an answer.</p></section>"
    )
    files = []
    for f in doc.get("files") or []:
        p = f.get("path")
        if f.get("withheld"):
            files.append(
                f'<li class="wh"><span class="path">{e(p)}</span>'
                f'<span class="why">withheld: {e(f["withheld"])}</span></li>'
            )
        else:
            cur = ' aria-current="true" class="on"' if p == file else ""
            files.append(
                f'<li><a{cur} href="{e(url(here, [("file", p)]))}#viewer">{e(p)}</a>'
                f'<span class="size">{e(_size(f.get("size")))}</span></li>'
            )
    aliases = doc.get("aliases") or []
    body = (
        f'<nav class="crumbs"><a href="/">Environments</a> / '
        f'<a href="{e(env_url(env_id))}">{e(env_id)}</a> / <span>{e(task_id)}</span></nav>'
        f"<h1>{e(doc.get('title') or task_id)}</h1>"
        f'<p class="meta"><span class="badge">{e(doc.get("grading"))}</span> '
        f"{e(doc.get('environment'))} · {e(doc.get('network'))} · {e(run)}"
        f' · <span class="id">{e(task_id)}</span></p>'
        f"{_facet_tags(doc.get('facets'))}{withheld}"
        + "".join(_section(s) for s in doc.get("sections") or [])
        + panel
        + f'<section id="files"><h2>Files <small>{len(files)}</small></h2>'
        f'<ul class="files">{"".join(files)}</ul></section>'
        + file_html
        + (
            '<p class="meta">Same task as: '
            + ", ".join(f"<code>{e(a)}</code>" for a in aliases)
            + "</p>"
            if aliases
            else ""
        )
    )
    meta = PageMeta(seo.task_description(doc), here, kind="article")
    return layout(doc.get("title") or task_id, body, assets, meta=meta)


def error_page(status: int, message: str, assets: Assets) -> str:
    """A small page for 400/403/404."""
    titles = {400: "Bad request", 403: "Withheld", 404: "Not found"}
    title = titles.get(status, "Error")
    body = (
        f'<section class="error"><h1>{e(title)}</h1><p>{e(message)}</p>'
        '<p><a href="/">Back to the environments</a></p></section>'
    )
    return layout(title, body, assets, meta=PageMeta(message, index=False))
