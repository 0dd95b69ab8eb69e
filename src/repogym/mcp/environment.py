"""An MCP server over an explorer store: the environments (task sets) it indexes, as tools.

:class:`EnvironmentCatalog` is the tools' logic, without the SDK: it reads only what the
explorer's pages read (``Store.env``, ``Store.search_tasks``, ``Store.task``, ``Store.file``),
so answers are withheld exactly as there — withholding happens once, when a task is indexed
(:mod:`repogym.explorer.withhold`), and a withheld file is refused here as it is on the pages.
:func:`build_server` wraps a catalog in the SDK's low-level ``Server`` (tool errors are results
with ``isError``, never protocol failures); :func:`run_stdio` serves one over stdin/stdout.

A catalog serves one environment (the HTTP endpoint ``/mcp/d/<env>``, or a store holding one)
or every environment of a store; then the tools take an ``env`` argument. The tools' names,
schemas and argument checks are :mod:`repogym.mcp._env_schema`'s (re-exported here).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from repogym import __version__
from repogym.explorer.facets import TASK_FILTER_COLUMNS
from repogym.explorer.store import Withheld
from repogym.mcp._env_schema import (
    TOOL_NAMES,
    ToolInputError,
    ToolOutput,
    ToolSpec,
    check_arguments,
    tool_specs,
)
from repogym.ui import safe_text

__all__ = [
    "TOOL_NAMES",
    "EnvironmentCatalog",
    "ToolInputError",
    "ToolOutput",
    "ToolSpec",
    "build_server",
    "check_arguments",
    "run_stdio",
    "serve_stdio",
    "tool_specs",
]

log = logging.getLogger("repogym.mcp")

MAX_FILE_CHARS = 200_000
"""Most characters one read_task_file answer holds (cut at a line end)."""
MAX_SECTION_CHARS = 20_000
"""Most characters of one section of a task in get_task."""
MAX_DESCRIPTION_CHARS = 8000
MAX_ENVS_LISTED = 1000
GRADING_NOTES = {
    "tests": "the task's tests run on the agent's work (hidden tests restored); the reward is "
    "the fail-to-pass rate times the pass-to-pass rate",
    "diff": "the agent's change is compared with a reference change",
    "reward-script": "a grader script in tests/ writes the reward",
    "exact-match": "the answer is compared with a reference answer",
    "llm-judge": "a model or rubric judges the answer",
    "unknown": "the task does not say",
}


# ---------------------------------------------------------------------------- the tools


def _pending(doc: Mapping[str, Any]) -> bool:
    """A task listed but not read yet (a listing snapshot while indexing continues)."""
    return not doc.get("sections") and not doc.get("files")


def _unsafe_path(path: str) -> bool:
    parts = path.split("/")
    return path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts)


def _text(value: Any) -> str:
    """Data shown to the model: line ends normalised, terminal control characters visible."""
    return safe_text(str(value if value is not None else "").replace("\r\n", "\n"))


def _cut(text: str, limit: int, hint: str) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n\n[… shortened; {hint}]"


def _fence(body: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in body:
        ticks += "`"
    return f"{ticks}{lang}\n{body.rstrip()}\n{ticks}"


def _size(n: Any) -> str:
    try:
        size = int(n)
    except (TypeError, ValueError):
        return "size unknown"
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


class EnvironmentCatalog:
    """The tools over a store (``repogym.explorer.store.Store`` or anything with its
    ``env``, ``search``, ``search_tasks``, ``task`` and ``file`` methods).

    ``env`` fixes the environment; without it a store holding one environment is served as
    that one, and a store of several gives every tool an ``env`` argument.
    """

    def __init__(self, store: Any, env: str | None = None) -> None:
        self.store = store
        if env is None:
            ids = self.env_ids()
            if len(ids) == 1:
                env = ids[0]
        self.env = env
        self.specs = {s.name: s for s in tool_specs(multi=env is None)}

    # -- what the server says about itself

    @property
    def title(self) -> str:
        return f"repogym environment {self.env}" if self.env else "repogym environments"

    @property
    def instructions(self) -> str:
        what = f"the RL environment {self.env!r}" if self.env else "several RL environments"
        return (
            f"Browse the tasks of {what} (repogym): what a coding agent is told, what it runs "
            "in and how it is graded. Start with describe_environment; find tasks with "
            "list_tasks or search_tasks; read one with get_task and its files with "
            "read_task_file. Answers (solutions, gold patches, hidden tests, expected outputs) "
            "are withheld."
        )

    def env_ids(self) -> list[str]:
        """Ids of the store's environments (at most :data:`MAX_ENVS_LISTED`)."""
        ids: list[str] = []
        page = 1
        while len(ids) < MAX_ENVS_LISTED:
            res = self.store.search(sort="name", page=page, size=200)
            ids += [str(card["id"]) for card in res["items"]]
            if not res["items"] or len(ids) >= int(res["total"]):
                break
            page += 1
        return ids[:MAX_ENVS_LISTED]

    # -- calling

    def call(self, name: str, arguments: Any) -> ToolOutput:
        """Run tool ``name``; raises :class:`ToolInputError` with a one-line reason."""
        spec = self.specs.get(name)
        if spec is None:
            known = ", ".join(self.specs)
            raise ToolInputError(f"unknown tool {str(name)[:60]!r} (tools: {known})")
        args = check_arguments(spec.input_schema, arguments)
        handler = getattr(self, "_" + name)
        result: ToolOutput = handler(args)
        return result

    # -- helpers

    def _env_arg(self, args: Mapping[str, Any]) -> str | None:
        """The environment a call is about (None: every environment); it must exist."""
        env = self.env if self.env is not None else args.get("env")
        if env is None:
            return None
        if self.store.env(env) is None:
            if self.env is not None:
                raise ToolInputError(f"environment {env!r} is no longer served here")
            raise ToolInputError(f"no environment {env!r} (describe_environment lists them)")
        return str(env)

    @staticmethod
    def _filter_args(args: Mapping[str, Any]) -> dict[str, list[str]]:
        filters: dict[str, list[str]] = {}
        for name in TASK_FILTER_COLUMNS:
            value = args.get(name)
            if value is None:
                continue
            filters[name] = [("true" if value else "false") if isinstance(value, bool) else value]
        return filters

    def _cards(
        self,
        env: str | None,
        q: str,
        filters: dict[str, list[str]],
        offset: int,
        limit: int,
    ) -> tuple[list[dict[str, Any]], int]:
        """Task cards ``offset`` … ``offset + limit`` and the total (the store pages by page
        number: the window spans at most two of its pages)."""
        page = offset // limit + 1
        res = self.store.search_tasks(q=q, env=env, filters=filters or None, page=page, size=limit)
        total = int(res["total"])
        items = list(res["items"])[offset % limit :]
        if offset % limit and len(items) < limit and offset + len(items) < total:
            more = self.store.search_tasks(
                q=q, env=env, filters=filters or None, page=page + 1, size=limit
            )
            items += list(more["items"])[: limit - len(items)]
        return items, total

    def _task_doc(self, env: str | None, task_id: str) -> dict[str, Any]:
        if env is not None:
            doc = self.store.task(env, task_id)
            if doc is None:
                raise ToolInputError(
                    f"no task {task_id!r} in environment {env!r} "
                    "(list_tasks or search_tasks give task ids)"
                )
        else:
            found = [d for e in self.env_ids() if (d := self.store.task(e, task_id)) is not None]
            if not found:
                raise ToolInputError(
                    f"no task {task_id!r} in any environment (list_tasks or search_tasks give "
                    "task ids)"
                )
            if len(found) > 1:
                envs = ", ".join(str(d.get("env")) for d in found[:5])
                raise ToolInputError(
                    f"task {task_id!r} is in several environments ({envs}): give env"
                )
            doc = found[0]
        if _pending(doc):
            raise ToolInputError(f"task {task_id!r} is still being indexed: try again in a moment")
        return dict(doc)

    @staticmethod
    def _card(card: Mapping[str, Any]) -> dict[str, Any]:
        keys = ("env", "id", "title", "summary", "facets", "grading", "environment", "network")
        out = {k: card.get(k) for k in keys}
        out["runnable"] = bool(card.get("runnable"))
        return out

    def _list_text(self, head: str, cards: list[dict[str, Any]], total: int, offset: int) -> str:
        if not cards:
            return f"{head}: no task." if total == 0 else f"{head}: none at offset {offset}."
        lines = [f"{head}: {offset + 1}-{offset + len(cards)} of {total}."]
        for c in cards:
            where = f" (env {_text(c['env'])})" if self.env is None else ""
            lines.append(
                f"- {_text(c['id'])}{where}: {_text(c.get('title'))} "
                f"[{_text(c.get('grading'))}; {_text(c.get('environment'))}; "
                f"{_text(c.get('network'))}]"
            )
            summary = " ".join(_text(c.get("summary")).split())
            if summary:
                lines.append("  " + (summary[:240] + "…" if len(summary) > 240 else summary))
        if offset + len(cards) < total:
            lines.append(f"More: offset={offset + len(cards)}.")
        return "\n".join(lines)

    # -- the tools (each takes checked arguments)

    def _describe_environment(self, args: Mapping[str, Any]) -> ToolOutput:
        env = self._env_arg(args)
        if env is None:
            res = self.store.search(sort="name", size=200)
            cards = [
                {k: c.get(k) for k in ("id", "kind", "title", "summary", "task_count", "source")}
                for c in res["items"]
            ]
            lines = [f"{res['total']} environment(s); pass env to describe one:"]
            lines += [
                f"- {_text(c['id'])} ({_text(c.get('kind'))}, {c.get('task_count') or 0} "
                f"tasks): {_text(c.get('summary'))}"
                for c in cards
            ]
            return ToolOutput("\n".join(lines), {"total": res["total"], "environments": cards})
        doc = self.store.env(env)
        if doc is None:  # removed by a snapshot swap since _env_arg
            raise ToolInputError(f"environment {env!r} is no longer served here")
        facets: dict[str, dict[str, int]] = dict(doc.get("task_facets") or {})
        count = doc.get("task_count")
        if count is None:
            count = self.store.search_tasks(env=env, size=1)["total"]
        description = _cut(
            _text(doc.get("description")), MAX_DESCRIPTION_CHARS, "the explorer page has it all"
        )
        info = {
            "id": doc.get("id"),
            "title": doc.get("title"),
            "kind": doc.get("kind"),
            "source": doc.get("source"),
            "summary": doc.get("summary"),
            "task_count": count,
            "runs_in": doc.get("runs_in"),
            "grading": {
                kind: {"tasks": n, "how": GRADING_NOTES.get(kind, "")}
                for kind, n in (facets.get("grading") or {}).items()
            },
            "facets": facets,
            "run_options": list(doc.get("run_options") or []),
            "description": description,
        }
        lines = [
            f"# {_text(doc.get('title') or env)}",
            "",
            f"Environment {_text(env)} ({_text(doc.get('kind'))}), {count} task(s)"
            + (f", from {_text(doc.get('source'))}" if doc.get("source") else "")
            + ".",
        ]
        if doc.get("summary"):
            lines += ["", _text(doc.get("summary"))]
        if doc.get("runs_in"):
            lines += ["", f"Runs in: {_text(doc.get('runs_in'))}"]
        lines += ["", "## How tasks are graded"]
        grading = info["grading"]
        lines += [
            f"- {_text(k)} ({v['tasks']} task(s)): {v['how'] or 'see get_task'}"
            for k, v in grading.items()
        ] or ["- not stated (see get_task)"]
        shown = {k: v for k, v in facets.items() if k != "grading" and v}
        if shown:
            lines += ["", "## Tasks at a glance"]
            for name, values in sorted(shown.items()):
                vals = ", ".join(f"{_text(v)} ({n})" for v, n in list(values.items())[:20])
                lines.append(f"- {_text(name)}: {vals}")
        lines += [
            "",
            "Filters of list_tasks, search_tasks and random_task: "
            + ", ".join(TASK_FILTER_COLUMNS)
            + ".",
        ]
        if info["run_options"]:
            lines += ["", "## How to run it"]
            lines += [
                f"- {_text(o.get('label'))}: `{_text(o.get('command'))}`"
                for o in info["run_options"]
            ]
        if description:
            lines += ["", "## Description", "", description]
        lines += [
            "",
            "Answers are withheld: solutions, gold patches, hidden tests, expected outputs and "
            "answer-like metadata are never shown. list_tasks and search_tasks give task ids; "
            "get_task shows a task; read_task_file reads one of its files.",
        ]
        return ToolOutput("\n".join(lines), info)

    def _list_tasks(self, args: Mapping[str, Any]) -> ToolOutput:
        env = self._env_arg(args)
        filters = self._filter_args(args)
        cards, total = self._cards(env, "", filters, args["offset"], args["limit"])
        items = [self._card(c) for c in cards]
        head = f"Tasks of {env}" if env else "Tasks"
        if filters:
            head += " (" + ", ".join(f"{k}={v[0]}" for k, v in filters.items()) + ")"
        nxt = args["offset"] + len(items)
        return ToolOutput(
            self._list_text(_text(head), items, total, args["offset"]),
            {
                "total": total,
                "offset": args["offset"],
                "items": items,
                "next_offset": nxt if nxt < total else None,
            },
        )

    def _search_tasks(self, args: Mapping[str, Any]) -> ToolOutput:
        env = self._env_arg(args)
        filters = self._filter_args(args)
        query = args["query"].strip()
        if not query:
            raise ToolInputError("query must hold a word")
        cards, total = self._cards(env, query, filters, args["offset"], args["limit"])
        items = [self._card(c) for c in cards]
        head = f"Tasks matching {query!r}" + (f" in {env}" if env else "")
        nxt = args["offset"] + len(items)
        return ToolOutput(
            self._list_text(_text(head), items, total, args["offset"]),
            {
                "query": query,
                "total": total,
                "offset": args["offset"],
                "items": items,
                "next_offset": nxt if nxt < total else None,
            },
        )

    def _get_task(self, args: Mapping[str, Any]) -> ToolOutput:
        doc = self._task_doc(self._env_arg(args), args["task_id"])
        return self._task_output(doc)

    def _random_task(self, args: Mapping[str, Any]) -> ToolOutput:
        env = self._env_arg(args)
        filters = self._filter_args(args) or None
        total = int(self.store.search_tasks(env=env, filters=filters, size=1)["total"])
        if total == 0:
            raise ToolInputError("no task matches these filters")
        rng = random.Random(args.get("seed"))
        pick = rng.randrange(total)
        items = self.store.search_tasks(env=env, filters=filters, page=pick + 1, size=1)["items"]
        if not items:  # the snapshot changed in between
            raise ToolInputError("the task list changed: try again")
        card = items[0]
        return self._task_output(self._task_doc(str(card["env"]), str(card["id"])))

    def _read_task_file(self, args: Mapping[str, Any]) -> ToolOutput:
        env = self._env_arg(args)
        task_id, path = args["task_id"], args["path"]
        doc = self._task_doc(env, task_id)
        env_id = str(doc["env"])
        if _unsafe_path(path):
            raise ToolInputError(
                f"not a file of this task: {path[:200]!r} (paths are relative to the task "
                "folder, without '..', '.', empty parts, backslashes or a leading '/')"
            )
        entry = next((f for f in doc.get("files") or [] if f.get("path") == path), None)
        if entry is None:
            raise ToolInputError(
                f"not a file of this task: {path[:200]!r} (get_task lists its files)"
            )
        if entry.get("withheld"):
            raise ToolInputError(f"{path} is withheld: {entry['withheld']}")
        try:
            data = self.store.file(env_id, task_id, path)
        except Withheld as exc:
            raise ToolInputError(f"{path} is withheld: {exc.reason}") from None
        except KeyError:
            raise ToolInputError(f"not a file of this task: {path[:200]!r}") from None
        meta: dict[str, Any] = {"env": env_id, "task_id": task_id, "path": path, "bytes": len(data)}
        text: str | None = None
        if b"\x00" not in data[:8192]:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        if text is None:
            meta["binary"] = True
            note = f"{path}: a binary file of {len(data)} bytes, not shown as text."
            return ToolOutput(note, meta)
        lines = text.replace("\r\n", "\n").splitlines(keepends=True)
        start = args["start_line"]
        if lines and start > len(lines):
            raise ToolInputError(f"start_line {start} is past the end ({len(lines)} lines)")
        chunk: list[str] = []
        chars = 0
        for line in lines[start - 1 : start - 1 + args["max_lines"]]:
            if chunk and chars + len(line) > MAX_FILE_CHARS:
                break
            chunk.append(line[:MAX_FILE_CHARS])
            chars += len(chunk[-1])
        end = start + len(chunk) - 1
        meta.update(start_line=start, end_line=end, total_lines=len(lines))
        head = f"{path} ({len(data)} bytes): " + (
            f"lines {start}-{end} of {len(lines)}" if lines else "empty"
        )
        if end < len(lines):
            head += f"; more from start_line={end + 1}"
            meta["next_start_line"] = end + 1
        return ToolOutput(head + ".", meta, (safe_text("".join(chunk)),))

    def _task_output(self, doc: Mapping[str, Any]) -> ToolOutput:
        files = [
            {"path": f.get("path"), "size": f.get("size"), "withheld": f.get("withheld")}
            for f in doc.get("files") or []
        ]
        meta = {
            "env": doc.get("env"),
            "id": doc.get("id"),
            "title": doc.get("title"),
            "grading": doc.get("grading"),
            "environment": doc.get("environment"),
            "network": doc.get("network"),
            "runnable": bool(doc.get("runnable")),
            "facets": dict(doc.get("facets") or {}),
            "withheld": list(doc.get("withheld") or []),
            "files": files,
        }
        return ToolOutput(task_text(doc), meta)


def task_text(doc: Mapping[str, Any]) -> str:
    """A task as text: what its explorer page shows, in the same order (answers were withheld
    when it was indexed; withheld files are listed with their reason, never shown)."""
    run = "runs here (local sandbox)" if doc.get("runnable") else "not runnable here"
    lines = [
        f"# {_text(doc.get('title') or doc.get('id'))}",
        "",
        f"Task {_text(doc.get('id'))} of environment {_text(doc.get('env'))}: grading "
        f"{_text(doc.get('grading'))}; runs in {_text(doc.get('environment'))}; network "
        f"{_text(doc.get('network'))}; {run}.",
    ]
    facets = doc.get("facets") or {}
    if facets:
        lines.append(
            "Facets: " + ", ".join(f"{_text(k)}={_text(v)}" for k, v in sorted(facets.items()))
        )
    if doc.get("verifier_env"):
        names = ", ".join(_text(v) for v in doc["verifier_env"])
        lines.append(f"The verifier asks for host variables (names only): {names}.")
    notes = doc.get("withheld") or []
    lines += ["", "## What was withheld"]
    lines += [f"- {_text(n)}" for n in notes] or ["Nothing in this task looked like an answer."]
    for sec in doc.get("sections") or []:
        body = _cut(_text(sec.get("body")), MAX_SECTION_CHARS, "read_task_file has the file")
        fmt = sec.get("format") or "markdown"
        lines += ["", f"## {_text(sec.get('title') or sec.get('id'))}", ""]
        if fmt == "markdown":
            lines.append(body.rstrip())
        else:
            lang = _text(sec.get("language")) if fmt == "code" else "text"
            lines.append(_fence(body, lang))
    files = doc.get("files") or []
    lines += ["", f"## Files ({len(files)})"]
    for f in files:
        why = f"withheld: {_text(f['withheld'])}" if f.get("withheld") else _size(f.get("size"))
        lines.append(f"- {_text(f.get('path'))} ({why})")
    lines += ["", "read_task_file reads a file that is not withheld."]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- SDK


def build_server(catalog: EnvironmentCatalog) -> Any:
    """The SDK's low-level ``Server`` answering ``tools/list`` and ``tools/call`` from
    ``catalog``. Every failure of a call is a tool result with ``isError`` and one line."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    tools = [
        types.Tool(
            name=s.name,
            title=s.title,
            description=s.description,
            input_schema=s.input_schema,
            annotations=types.ToolAnnotations(
                title=s.title,
                read_only_hint=True,
                destructive_hint=False,
                idempotent_hint=s.idempotent,
                open_world_hint=False,
            ),
        )
        for s in catalog.specs.values()
    ]

    def failed(message: str) -> Any:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=safe_text(message))], is_error=True
        )

    async def list_tools(_ctx: Any, _params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: Any) -> Any:
        try:
            out = catalog.call(params.name, params.arguments)
        except ToolInputError as exc:
            return failed(str(exc).replace("\n", " "))
        except Exception as exc:  # a broken store or pack: one line, the server keeps serving
            log.warning("MCP tool %s failed: %s", str(params.name)[:60], exc, exc_info=True)
            return failed(f"{str(params.name)[:60]} failed: {type(exc).__name__}")
        blocks: list[Any] = [types.TextContent(type="text", text=t) for t in (out.text, *out.more)]
        return types.CallToolResult(content=blocks, structured_content=out.structured)

    return Server(
        "repogym",
        version=__version__,
        title=catalog.title,
        instructions=catalog.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(store: Any) -> None:
    """Serve every environment of ``store`` over stdin/stdout until the client closes."""
    from mcp.server.stdio import stdio_server

    server = build_server(EnvironmentCatalog(store))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(store: Any) -> None:
    """:func:`serve_stdio` in a new event loop (blocks)."""
    import anyio

    anyio.run(serve_stdio, store)
