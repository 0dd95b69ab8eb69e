"""An in-memory store with the same methods as ``repogym.explorer.store.Store``.

Used by the web layer's unit tests (templates, HTTP semantics) so they do not depend on the
SQLite snapshot; the route, security and browser tests use the real store.
"""

from __future__ import annotations

from repogym.explorer.model import EnvDoc, FileDoc, Section, TaskDoc

FACETS = ("kind", "language", "category", "difficulty", "pipeline", "grading", "network")


class FakeWithheld(Exception):
    """Raised for a withheld file; carries the reason like the real store's ``Withheld``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _env_card(env: EnvDoc, n: int) -> dict:
    return {
        "id": env.id,
        "kind": env.kind,
        "title": env.title,
        "summary": env.summary,
        "task_count": env.task_count if env.task_count is not None else n,
        "facets": dict(env.facets),
        "source": env.source,
    }


def _task_card(env_id: str, t: TaskDoc) -> dict:
    return {
        "env": env_id,
        "id": t.id,
        "title": t.title,
        "summary": t.summary,
        "facets": dict(t.facets),
        "grading": t.grading,
        "environment": t.environment,
        "network": t.network,
        "runnable": t.runnable,
    }


class FakeStore:
    """Substring search over a few EnvDoc/TaskDoc records held in memory."""

    def __init__(self, data: list[tuple[EnvDoc, list[TaskDoc]]], version: str = "v1") -> None:
        self._envs = {env.id: (env, {t.id: t for t in tasks}) for env, tasks in data}
        self._version = version
        self.calls = 0

    @property
    def version(self) -> str:
        return self._version

    def set_version(self, version: str) -> None:
        self._version = version

    def _env_facets(self, env: EnvDoc, tasks: dict[str, TaskDoc]) -> dict[str, set[str]]:
        vals: dict[str, set[str]] = {"kind": {env.kind}}
        for t in tasks.values():
            for k, v in t.facets.items():
                vals.setdefault(k, set()).add(v)
            vals.setdefault("grading", set()).add(t.grading)
            vals.setdefault("network", set()).add(t.network)
        for k, v in env.facets.items():
            vals.setdefault(k, set()).add(v)
        return vals

    def search(
        self,
        q: str = "",
        kind: str | None = None,
        filters: dict[str, list[str]] | None = None,
        sort: str = "relevance",
        page: int = 1,
        size: int = 24,
    ) -> dict:
        self.calls += 1
        filters = dict(filters or {})
        if kind:
            filters["kind"] = [kind]
        rows = []
        for env, tasks in self._envs.values():
            text = " ".join([env.id, env.title, env.summary, env.description]).lower()
            if q and not all(w in text for w in q.lower().split()):
                continue
            rows.append((env, tasks, self._env_facets(env, tasks)))

        def keep(vals: dict[str, set[str]], skip: str | None) -> bool:
            return all(
                any(v in vals.get(f, set()) for v in want)
                for f, want in filters.items()
                if f != skip and want
            )

        facets: dict[str, dict[str, int]] = {}
        for f in FACETS:
            counts: dict[str, int] = {}
            for _env, _tasks, vals in rows:
                if keep(vals, f):
                    for v in vals.get(f, ()):
                        counts[v] = counts.get(v, 0) + 1
            if counts:
                facets[f] = counts
        hits = [(e, t) for e, t, vals in rows if keep(vals, None)]
        if sort == "name":
            hits.sort(key=lambda x: x[0].title.lower())
        elif sort == "tasks":
            hits.sort(key=lambda x: -len(x[1]))
        start = (page - 1) * size
        items = [_env_card(e, len(t)) for e, t in hits[start : start + size]]
        return {"items": items, "total": len(hits), "page": page, "size": size, "facets": facets}

    def search_tasks(
        self,
        q: str = "",
        env: str | None = None,
        filters: dict[str, list[str]] | None = None,
        page: int = 1,
        size: int = 24,
    ) -> dict:
        self.calls += 1
        hits = []
        for e, tasks in self._envs.values():
            if env and e.id != env:
                continue
            for t in tasks.values():
                text = " ".join([t.id, t.title, t.summary]).lower()
                if q and not all(w in text for w in q.lower().split()):
                    continue
                if filters and not all(
                    t.facets.get(f) in want or getattr(t, f, None) in want
                    for f, want in filters.items()
                ):
                    continue
                hits.append(_task_card(e.id, t))
        start = (page - 1) * size
        return {
            "items": hits[start : start + size],
            "total": len(hits),
            "page": page,
            "size": size,
            "facets": {},
        }

    def env(self, env_id: str) -> dict | None:
        self.calls += 1
        if env_id not in self._envs:
            return None
        env, tasks = self._envs[env_id]
        card = _env_card(env, len(tasks))
        counts: dict[str, dict[str, int]] = {}
        for t in tasks.values():
            for k, v in {**t.facets, "grading": t.grading, "network": t.network}.items():
                counts.setdefault(k, {}).setdefault(v, 0)
                counts[k][v] += 1
        card.update(
            description=env.description,
            runs_in=env.runs_in,
            run_options=list(env.run_options),
            task_facets=counts,
        )
        return card

    def task(self, env_id: str, task_id: str) -> dict | None:
        self.calls += 1
        t = self._envs.get(env_id, (None, {}))[1].get(task_id)
        if t is None:
            return None
        card = _task_card(env_id, t)
        card.update(
            sections=[
                {
                    "id": s.id,
                    "title": s.title,
                    "body": s.body,
                    "format": s.format,
                    "language": s.language,
                }
                for s in t.sections
            ],
            files=[{"path": f.path, "size": f.size, "withheld": f.withheld} for f in t.files],
            withheld=list(t.withheld),
            aliases=list(t.aliases),
        )
        return card

    def file(self, env_id: str, task_id: str, path: str) -> bytes:
        self.calls += 1
        t = self._envs.get(env_id, (None, {}))[1].get(task_id)
        if t is None:
            raise KeyError(path)
        for f in t.files:
            if f.path == path:
                if f.withheld:
                    raise FakeWithheld(f.withheld)
                if f.data is None:
                    raise KeyError(path)
                return f.data
        raise KeyError(path)


def sample_store() -> FakeStore:
    """Two environments (one with a Hub-style ``org/name`` id), a few tasks and files."""
    py = b'import sys\n\n\ndef main():\n    """Say hi."""\n    print("hi <b>")  # comment\n'
    tasks = [
        TaskDoc(
            id="fix-bug",
            title="Fix the <script>alert(1)</script> bug",
            summary="Make the counter count.",
            facets={"category": "bugfix", "difficulty": "easy", "language": "python"},
            grading="tests",
            environment="python:3.12-slim",
            network="no-network",
            runnable=True,
            sections=[
                Section("instruction", "Instruction", "# Task\n\nFix `count()` <em>now</em>."),
                Section("config", "task.toml", '[task]\nname = "x"\n', "code", "toml"),
            ],
            files=[
                FileDoc("instruction.md", 20, b"Fix count()\n"),
                FileDoc("src/app.py", len(py), py),
                FileDoc("solution/solve.sh", 30, None, "solution (the answer)"),
                FileDoc("blob.bin", 4, b"\x00\x01\x02\x03"),
            ],
            withheld=["solution/ (the answer): 1 file"],
        ),
        TaskDoc(
            id="add-feature",
            title="Add a feature",
            summary="Add a flag.",
            facets={"category": "feature", "difficulty": "hard", "language": "python"},
            grading="tests",
            environment="python:3.12-slim",
            network="no-network",
            runnable=True,
            sections=[Section("instruction", "Instruction", "Add a `--flag`.")],
            files=[FileDoc("instruction.md", 14, b"Add a --flag.\n")],
        ),
    ]
    hub_task = TaskDoc(
        id="q-1",
        title="Question one",
        summary="What is 2+2?",
        facets={"category": "math"},
        grading="exact-match",
        environment="text only",
        network="unknown",
        runnable=False,
        sections=[Section("instruction", "Instruction", "What is 2+2?")],
        files=[],
    )
    return FakeStore(
        [
            (
                EnvDoc(
                    "local-set",
                    "harbor",
                    "Local set",
                    "Two local tasks.",
                    description="A **local** dataset.",
                    source="/data/local-set",
                    runs_in="local sandbox (bubblewrap) or Docker",
                    run_options=[{"label": "Run with repogym", "command": "repogym run local-set"}],
                ),
                tasks,
            ),
            (EnvDoc("org/hub-set", "rows", "Hub set", "Math rows."), [hub_task]),
        ]
    )
