"""A live OpenEnv server as an environment, read over HTTP.

The adapter reads ``/health`` (reachability), ``/metadata``, ``/schema`` and ``/openapi.json``
for the environment's page, and the Task API for its tasks: ``/list_environments`` then
``/{env}/tasks`` and ``/{env}/tasks/{index}`` when the server has them, else ``/tasks`` and
``/tasks/{index}`` (what ``repogym serve`` exposes). Requests go only to the given host: no
redirects are followed, server-provided names are percent-encoded into single path segments,
and credentials in the URL are refused. Answer-like keys a server might put in its task
listing (``answer``, ``expected_output``, ``solution`` …) are withheld, at any depth.

Every request has a total deadline (``deadline``, default :data:`DEADLINE_S`) besides the
per-read ``timeout``: a server that trickles its answer a byte at a time is given up on at the
deadline with a one-line error naming the URL (see :mod:`._net`).

The environment id is ``host:port``; a task's id is the Task API's ``task_id`` (or ``name``,
or its index), made URL-safe and prefixed by the server environment's name when the server
has more than one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from repogym.explorer.adapters import _net
from repogym.explorer.adapters.base import AdapterError
from repogym.explorer.adapters.processors import scrub, summarize
from repogym.explorer.model import EnvDoc, Section, TaskDoc
from repogym.explorer.withhold import mask_yamlish

__all__ = ["OpenEnvAdapter", "OpenEnvReader"]

TIMEOUT_S = 10.0  # each socket read
DEADLINE_S = 60.0  # each request, in total
MAX_BYTES = 16 * 1024 * 1024
_SAFE_ID = re.compile(r"[^A-Za-z0-9._-]+")


def parse_server_url(url: str) -> tuple[str, str]:
    """``(base URL without trailing slash, "host:port")``; :class:`AdapterError` when unusable."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise AdapterError(f"not a server URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AdapterError("an OpenEnv server is given as http://HOST:PORT")
    if parts.username or parts.password:
        raise AdapterError(
            "credentials in an OpenEnv server URL are not accepted (give http://HOST:PORT)"
        )
    if parts.query or parts.fragment:
        raise AdapterError("an OpenEnv server URL has no query or fragment")
    port = port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname
    shown = f"[{host}]" if ":" in host else host
    base = f"{parts.scheme}://{shown}:{port}{parts.path.rstrip('/')}"
    return base, f"{shown}:{port}"


def _safe_id(value: Any) -> str:
    return _SAFE_ID.sub("_", str(value)).strip("._-")[:120]


@dataclass(slots=True)
class _TaskRef:
    env: str | None  # the server's environment name (None: the plain /tasks route)
    key: str  # index (or id) used in the detail route
    listing: dict[str, Any]


class OpenEnvReader:
    """One live OpenEnv server."""

    def __init__(self, url: str, timeout: float = TIMEOUT_S, deadline: float | None = None) -> None:
        from repogym.openenv_client import OpenEnvClientError, Origin

        self.base, self.host = parse_server_url(url)
        try:
            self.origin = Origin.parse(self.base)
        except OpenEnvClientError as exc:
            raise AdapterError(str(exc)) from None
        self.timeout = timeout
        self.deadline = DEADLINE_S if deadline is None else deadline
        self._openapi: dict[str, Any] | None = None
        self._refs: dict[str, _TaskRef] | None = None
        health = self._get("/health")
        if not isinstance(health, dict):
            raise AdapterError(f"{self.base}/health: not an OpenEnv health answer")

    # -- HTTP ---------------------------------------------------------------------------
    def _get(self, path: str) -> Any:
        """``GET path`` through :func:`repogym.openenv_client.fetch` (the server's origin only,
        no redirects, a total deadline, a size cap), its failures worded for the explorer."""
        from repogym.openenv_client import (
            OpenEnvClientError,
            RedirectRefused,
            TimedOut,
            Unreachable,
            fetch,
        )

        url = self.base + path
        try:
            resp = fetch(
                self.origin,
                path,
                timeout_s=self.timeout,
                deadline_s=self.deadline,
                max_bytes=MAX_BYTES,
                headers={"Accept": "application/json"},
            )
        except TimedOut:
            raise _net.DeadlineExceeded(
                f"{url}: no complete answer within the {self.deadline:g} s deadline"
            ) from None
        except RedirectRefused as exc:
            where = urlsplit(exc.location or "").netloc or "elsewhere"
            raise AdapterError(f"{url}: HTTP {exc.status} redirect refused (to {where})") from None
        except Unreachable as exc:
            raise AdapterError(f"cannot reach {url}: {exc.reason}") from None
        except OpenEnvClientError as exc:
            raise AdapterError(str(exc)) from None
        if resp.status >= 400:
            raise AdapterError(f"{url}: HTTP {resp.status} {resp.reason}".splitlines()[0])
        body = resp.body
        if len(body) > MAX_BYTES:
            raise AdapterError(f"{url}: answer larger than {MAX_BYTES} bytes")
        try:
            return json.loads(body)
        except ValueError:
            raise AdapterError(f"{url}: not JSON") from None

    def _get_opt(self, path: str) -> Any:
        try:
            return self._get(path)
        except AdapterError:
            return None

    def _paths(self) -> set[str]:
        if self._openapi is None:
            doc = self._get_opt("/openapi.json")
            self._openapi = doc if isinstance(doc, dict) else {}
        paths = self._openapi.get("paths")
        return set(paths) if isinstance(paths, dict) else set()

    def _has(self, pattern: str) -> bool:
        """Whether the server's OpenAPI lists a route like ``pattern`` (``{x}`` = any name)."""
        paths = self._paths()
        if not paths:
            return True  # no OpenAPI document: try the route
        rx = re.compile("^" + re.sub(r"\\\{[^}]*\\\}", r"\\{[^}]+\\}", re.escape(pattern)) + "$")
        return any(rx.match(p) for p in paths)

    # -- environment --------------------------------------------------------------------
    def env(self) -> EnvDoc:
        meta = self._get_opt("/metadata")
        meta = meta if isinstance(meta, dict) else {}
        schema = self._get_opt("/schema")
        notes: list[str] = []
        name = str(meta.get("name") or self.host)
        desc = str(meta.get("description") or "")
        parts = [mask_yamlish(desc, notes)] if desc else []
        readme = meta.get("readme_content")
        if isinstance(readme, str) and readme.strip():
            parts.append(mask_yamlish(readme, notes))
        if isinstance(schema, dict) and isinstance(schema.get("action"), dict):
            action = json.dumps(scrub(schema["action"], "", notes), indent=2)[:8000]
            parts.append("**Action schema**\n\n```json\n" + action + "\n```")
        routes = sorted(p for p in self._paths() if "task" in p or "environment" in p)
        if routes:
            parts.append("**Task API routes**: " + ", ".join(f"`{r}`" for r in routes))
        refs = self._safe_refs()
        count = len(refs) if refs is not None else None
        ws = "ws" + self.base[4:] + "/ws"
        facets = {"server": name}
        if meta.get("version"):
            facets["version"] = str(meta["version"])
        return EnvDoc(
            id=self.host,
            kind="openenv",
            title=name if name == self.host else f"{name} ({self.host})",
            summary=summarize(desc) if desc else f"OpenEnv server at {self.host}",
            description="\n\n".join(parts),
            source=self.base,
            runs_in=f"the OpenEnv server at {self.host} (an episode per WebSocket session)",
            run_options=[
                {
                    "label": "Connect with GenericEnvClient",
                    "command": (
                        "from openenv.core.generic_client import GenericEnvClient\n"
                        f'with GenericEnvClient(base_url="{self.base}").sync() as env:\n'
                        "    obs = env.reset().observation"
                    ),
                },
                {"label": "WebSocket", "command": ws},
            ],
            facets=facets,
            task_count=count,
        )

    # -- tasks --------------------------------------------------------------------------
    def _safe_refs(self) -> dict[str, _TaskRef] | None:
        try:
            return self._task_refs()
        except AdapterError:
            return None

    def _task_refs(self) -> dict[str, _TaskRef]:
        if self._refs is not None:
            return self._refs
        listings: list[tuple[str | None, list[Any]]] = []
        envs: list[str] = []
        if self._has("/list_environments") and self._has("/{env}/tasks"):
            data = self._get_opt("/list_environments")
            raw = data.get("environments") if isinstance(data, dict) else data
            for e in raw if isinstance(raw, list) else []:
                n = e.get("name") if isinstance(e, dict) else e
                if isinstance(n, str) and n:
                    envs.append(n)
        for e in envs:
            data = self._get(f"/{quote(e, safe='')}/tasks")
            listings.append((e, self._task_list(data)))
        if not listings:
            if not self._has("/tasks"):
                raise AdapterError(f"{self.base}: the server has no Task API (/tasks)")
            listings.append((None, self._task_list(self._get("/tasks"))))
        refs: dict[str, _TaskRef] = {}
        multi = len(listings) > 1
        for env, items in listings:
            for i, item in enumerate(items):
                info = item if isinstance(item, dict) else {"task_id": item}
                raw_id = next(
                    (info[k] for k in ("task_id", "id", "name") if info.get(k) not in (None, "")),
                    i,
                )
                tid = _safe_id(raw_id) or f"task-{i}"
                if multi and env:
                    tid = f"{_safe_id(env)}.{tid}"
                if tid in refs:
                    tid = f"{tid}-{i}"
                key = info.get("index", i)
                refs[tid] = _TaskRef(env, str(key), info)
        self._refs = refs
        return refs

    @staticmethod
    def _task_list(data: Any) -> list[Any]:
        items = data.get("tasks") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise AdapterError("the Task API answered without a task list")
        return items

    def task_ids(self) -> Iterator[str]:
        """Task ids from the Task API listing (one request per server environment)."""
        yield from self._task_refs()

    def task(self, task_id: str) -> TaskDoc:
        ref = self._task_refs().get(task_id)
        if ref is None:
            raise KeyError(task_id)
        key = quote(ref.key, safe="")
        detail: Any = None
        if ref.env is not None and self._has("/{env}/tasks/{index}"):
            detail = self._get_opt(f"/{quote(ref.env, safe='')}/tasks/{key}")
        elif ref.env is None and self._has("/tasks/{index}"):
            detail = self._get_opt(f"/tasks/{key}")
        info = {**ref.listing, **(detail if isinstance(detail, dict) else {})}
        removed: list[str] = []
        info = scrub(info, "", removed)
        notes = [f"task field {k!r} withheld (answer-like)" for k in sorted(removed)]
        instruction = next(
            (str(info[k]) for k in ("instruction", "prompt", "question") if info.get(k)), ""
        )
        description = str(info.get("description") or "")
        main = instruction or description
        text_only = bool(info.get("text_only"))
        shown_id = str(info.get("task_id") or info.get("id") or ref.key)
        sections = [
            Section(
                "instruction",
                "Instruction",
                instruction or description or "The server does not publish this task's text.",
            ),
            Section(
                "environment",
                "Environment",
                f"Runs on the OpenEnv server at `{self.host}`: open a WebSocket session "
                f'(`{"ws" + self.base[4:]}/ws`) and reset with `task_id="{shown_id}"`.'
                + (
                    "\n\nText-only task: the server has nothing to run an agent in."
                    if text_only
                    else ""
                ),  # fmt: skip
            ),
            Section(
                "grading",
                "How it is graded",
                "The server grades an episode and reports the reward in its observations.",
            ),
        ]
        rest = {
            k: v
            for k, v in info.items()
            if k not in ("instruction", "prompt", "question") and v not in (None, "")
        }
        if rest:
            body = json.dumps(rest, ensure_ascii=False, indent=2, default=str)
            sections.append(Section("metadata", "Metadata", body, format="code", language="json"))
        title = str(info.get("name") or shown_id)
        facets: dict[str, str] = {"source": "openenv"}
        if ref.env:
            facets["pipeline"] = ref.env
        if info.get("reproducibility"):
            facets["reproducibility"] = str(info["reproducibility"])
        return TaskDoc(
            id=task_id,
            title=title,
            summary=summarize(main),
            facets=facets,
            grading="reward-script" if not text_only else "unknown",
            environment=f"OpenEnv server {self.host}",
            network="unknown",
            runnable=not text_only,
            sections=sections,
            files=[],
            withheld=notes,
        )


class OpenEnvAdapter:
    """Live OpenEnv servers given by URL (``http://HOST:PORT``)."""

    name = "openenv"

    def detect(self, location: str) -> float:
        return 0.9 if location.startswith(("http://", "https://")) else 0.0

    def open(self, location: str) -> OpenEnvReader:
        return OpenEnvReader(location, deadline=DEADLINE_S)
