"""Datasets on the Hugging Face Hub (``--registry hf``), through ``huggingface_hub``.

One push makes two commits on the dataset repo's ``main`` branch and one tag:

1. the *tasks commit*: ``tasks/<id>/…``, ``manifest.json`` and the dataset card ``README.md``;
   files under ``tasks/`` that the dataset no longer has are deleted, so is the previous
   ``registry.json`` (it pinned the previous tasks commit);
2. the *registry commit*: ``registry.json`` whose every task has ``git_url`` = the dataset repo's
   URL, ``git_commit_id`` = the tasks commit and ``path`` = ``tasks/<id>`` (a commit cannot hold its
   own id, hence the second commit; both commits hold the same tasks);
3. a tag named after the content revision (16 hex digits over the task ids and content hashes, the
   same id the file registry uses), on the registry commit.

The revision a push reports is the registry commit's sha. ``pull owner/name@REV`` takes a branch, a
tag (or a unique prefix of a content-revision tag) or a full commit sha. Pushing tasks that are
already ``main``'s content changes nothing and reports ``unchanged``.

The endpoint is ``HF_ENDPOINT`` (default ``https://huggingface.co``) for ``--registry hf``, or given
in the URL: ``hf+http://host:port`` / ``hf+https://host``. The token is ``HF_TOKEN``, else the
token ``huggingface_hub`` stored at login (``HF_TOKEN_PATH``, else ``$HF_HOME/token``). It never
appears in a file, message or result: errors are redacted with :func:`repogym._secrets.redact`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repogym._secrets import redact
from repogym.auth import hf_token_source
from repogym.hub._safety import PullStage, check_tree, safe_relpath
from repogym.hub.base import (
    META_FILES,
    PullResult,
    PushResult,
    RegistryError,
    collect_tasks,
    revision_of,
    stage_tasks,
    write_card_and_manifest,
)
from repogym.hub.received import MANIFEST, check_received, manifest_hashes
from repogym.taskdir.dataset import build_registry

if TYPE_CHECKING:
    from huggingface_hub import HfApi

DEFAULT_ENDPOINT = "https://huggingface.co"
_SHA = re.compile(r"^[0-9a-f]{40}$")
_CONTENT_REV = re.compile(r"^[0-9a-f]{16}$")


def _require_hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise RegistryError(
            "the Hugging Face Hub registry needs huggingface_hub: pip install 'repogym[hub]'"
        ) from None
    return huggingface_hub


class HfRegistry:
    """A registry on a Hugging Face Hub (or any server speaking its API) at ``endpoint``."""

    def __init__(self, endpoint: str | None = None, token: str | None = None) -> None:
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.token = token if token is not None else hf_token_source()[0]
        self._api: HfApi | None = None

    @property
    def api(self) -> HfApi:
        if self._api is None:
            hub = _require_hub()
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
            self._api = hub.HfApi(endpoint=self.endpoint, token=self.token or False)
        return self._api

    def repo_url(self, name: str) -> str:
        return f"{self.endpoint}/datasets/{name}"

    # --- errors -------------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        return redact(text, [self.token])

    @contextlib.contextmanager
    def _errors(self, name: str, rev: str | None = None) -> Iterator[None]:
        """Turn huggingface_hub and network failures into one-line, token-free RegistryErrors."""
        _require_hub()
        from huggingface_hub import errors

        entry_missing = _entry_not_found(errors)
        try:
            yield
        except RegistryError:
            raise
        except errors.RevisionNotFoundError:
            raise RegistryError(f"{name}: no revision {rev!r} on {self.endpoint}") from None
        except errors.RepositoryNotFoundError:
            hint = "" if self.token else " (set HF_TOKEN if it is private)"
            raise RegistryError(
                f"no dataset {name} on {self.endpoint}, or the token cannot read it{hint}"
            ) from None
        except entry_missing:
            raise RegistryError(f"{name}@{rev or 'main'}: a file is missing on the Hub") from None
        except errors.HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status == 401:
                raise RegistryError(
                    f"{self.endpoint} rejected the token (HTTP 401): set HF_TOKEN to a valid token"
                ) from None
            if status == 403:
                raise RegistryError(
                    f"{self.endpoint}: the token may not write to {name} (HTTP 403)"
                ) from None
            if status == 412:
                raise RegistryError(
                    f"{name} changed on the Hub during the push; push again"
                ) from None
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RegistryError(self._redact(f"{self.endpoint}: {first}")) from None
        except errors.LocalEntryNotFoundError as exc:
            raise RegistryError(
                self._redact(f"cannot reach {self.endpoint} ({type(exc).__name__})")
            ) from None
        except Exception as exc:
            if type(exc).__module__.startswith(("httpx", "httpcore", "requests", "urllib3")):
                raise RegistryError(
                    self._redact(f"cannot reach {self.endpoint} ({type(exc).__name__})")
                ) from None
            raise

    # --- revisions ----------------------------------------------------------------------------

    def _refs(self, name: str) -> tuple[dict[str, str], dict[str, str]]:
        refs = self.api.list_repo_refs(name, repo_type="dataset")
        branches = {r.name: r.target_commit for r in refs.branches}
        tags = {r.name: r.target_commit for r in refs.tags}
        return branches, tags

    def revisions(self, name: str) -> list[str]:
        """The content revisions pushed so far (the tags that name them)."""
        with self._errors(name):
            _, tags = self._refs(name)
        return sorted(t for t in tags if _CONTENT_REV.match(t))

    def resolve(self, name: str, rev: str | None) -> str:
        """The commit sha for a branch, a tag (or a unique content-revision prefix) or a sha."""
        with self._errors(name, rev):
            branches, tags = self._refs(name)
            rev = rev or "main"
            if rev in branches:
                return branches[rev]
            if rev in tags:
                return tags[rev]
            if _SHA.match(rev):
                info = self.api.repo_info(name, repo_type="dataset", revision=rev)
                return str(info.sha)
            matches = sorted(t for t in tags if t.startswith(rev))
            if len(matches) == 1:
                return tags[matches[0]]
        known = ", ".join(sorted(t for t in tags if _CONTENT_REV.match(t))) or "none"
        raise RegistryError(f"{name}: no single revision matches {rev!r} (known: {known})")

    def _read_json(self, name: str, path: str, revision: str, tmp: Path) -> Any:
        _require_hub()
        from huggingface_hub import errors

        entry_missing = _entry_not_found(errors)
        try:
            got = self.api.hf_hub_download(
                name, path, repo_type="dataset", revision=revision, local_dir=tmp / "meta"
            )
        except entry_missing:
            return None
        try:
            return json.loads(Path(got).read_text(encoding="utf-8"))
        except ValueError:
            return None

    # --- push ---------------------------------------------------------------------------------

    def push(self, src: Path, name: str, *, private: bool = False) -> PushResult:
        """Upload the tasks in one commit, then ``registry.json`` pinned to it; tag the content."""
        tasks = collect_tasks(src)
        for task in tasks:
            for path in task.path.rglob("*"):
                if path.is_symlink():
                    link = path.relative_to(task.path)
                    raise RegistryError(
                        f"{task.id}: {link} is a symlink; the Hub stores files only"
                    )
        if not self.token:
            raise RegistryError(
                f"pushing to {self.endpoint} needs a token: set HF_TOKEN "
                "(or log in with huggingface_hub)"
            )
        content_rev = revision_of(tasks)
        hub = _require_hub()
        with tempfile.TemporaryDirectory(prefix="repogym-push-") as tmp_s, self._errors(name):
            tmp = Path(tmp_s)
            staging = tmp / "dataset"
            staging.mkdir()
            copied = stage_tasks(tasks, staging)
            write_card_and_manifest(
                staging, copied, src, name, content_rev, private=private, registry="hf"
            )
            self.api.create_repo(name, repo_type="dataset", private=private, exist_ok=True)
            branches, tags = self._refs(name)
            head = branches.get("main")
            if head is not None and tags.get(content_rev) == head:
                registry = self._read_json(name, "registry.json", head, tmp) or []
                pinned = _pinned_commit(registry)
                return PushResult(
                    name, head, len(tasks), self.repo_url(name), True, tasks_commit=pinned
                )
            existing = (
                set(self.api.list_repo_files(name, repo_type="dataset", revision=head))
                if head
                else set()
            )
            adds, wanted = [], set()
            for path in sorted(staging.rglob("*")):
                if path.is_dir() or "__pycache__" in path.parts:
                    continue
                rel = path.relative_to(staging).as_posix()
                wanted.add(rel)
                adds.append(hub.CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(path)))
            deletes = [
                hub.CommitOperationDelete(path_in_repo=p)
                for p in sorted(existing - wanted)
                if p.startswith("tasks/") or p == "registry.json"
            ]
            first = self.api.create_commit(
                name,
                repo_type="dataset",
                operations=[*deletes, *adds],
                commit_message=f"repogym: {len(tasks)} task(s), content revision {content_rev}",
                parent_commit=head,
            )
            registry = build_registry(
                copied,
                staging,
                name=name,
                version=content_rev,
                description=f"{name} at content revision {content_rev}",
                git_url=self.repo_url(name),
                git_commit_id=first.oid,
            )
            second = self.api.create_commit(
                name,
                repo_type="dataset",
                operations=[
                    hub.CommitOperationAdd(
                        path_in_repo="registry.json",
                        path_or_fileobj=(json.dumps(registry, indent=2) + "\n").encode(),
                    )
                ],
                commit_message=f"repogym: registry.json pinned to {first.oid}",
                parent_commit=first.oid,
            )
            self.api.create_tag(
                name,
                tag=content_rev,
                revision=second.oid,
                repo_type="dataset",
                tag_message=f"content revision {content_rev}",
                exist_ok=True,
            )
        return PushResult(
            name, second.oid, len(tasks), self.repo_url(name), False, tasks_commit=first.oid
        )

    # --- pull ---------------------------------------------------------------------------------

    def pull(
        self, name: str, dest: Path, *, rev: str | None = None, task: str | None = None
    ) -> PullResult:
        """Download the dataset (or one task) at a revision into a staging folder beside
        ``dest``, then move it in. The Hub's file list is checked first: a path that is absolute,
        has an empty, ``.`` or ``..`` part (or a backslash or drive) refuses the whole pull; what
        arrives must match the revision's ``manifest.json`` (:mod:`repogym.hub.received`)."""
        sha = self.resolve(name, rev)
        label = f"{name}@{sha}"
        with self._errors(name, rev):
            files = self.api.list_repo_files(name, repo_type="dataset", revision=sha)
        for path in files:
            if not safe_relpath(path):
                raise RegistryError(
                    f"{label}: the repository lists the unsafe path {path!r} "
                    "(absolute, or with an empty, '.' or '..' part); refused"
                )
        by_task: dict[str, list[str]] = {}
        for path in files:
            parts = path.split("/")
            if parts[0] == "tasks" and len(parts) >= 3:
                by_task.setdefault(parts[1], []).append(path)
        tasks = sorted(by_task)
        if task is not None:
            if task not in tasks:
                raise RegistryError(f"{label} has no task {task!r}")
            tasks = [task]
        clash = [t for t in tasks if os.path.lexists(dest / "tasks" / t)]
        if clash:
            raise RegistryError(f"{dest}: tasks already present, e.g. {clash[0]}")
        metas = [m for m in META_FILES if m in files] if task is None else []
        checks = [MANIFEST] if MANIFEST in files and MANIFEST not in metas else []
        wanted = [p for t in tasks for p in sorted(by_task[t])] + metas + checks
        with PullStage(dest) as stage:
            got = stage.work / "snapshot"
            self._download(name, rev, sha, wanted, got, stage.work / "cache")
            manifest = got / MANIFEST
            if manifest.is_symlink() or (manifest.exists() and not manifest.is_file()):
                raise RegistryError(f"{label}: {MANIFEST} did not arrive as a file")
            listed = manifest_hashes(manifest.read_bytes() if manifest.exists() else None, label)
            for task_id in tasks:
                where = f"{label}: tasks/{task_id}"
                check_tree(got / "tasks" / task_id, where)
                links = [p for p in (got / "tasks" / task_id).rglob("*") if p.is_symlink()]
                if links:
                    raise RegistryError(f"{where}: the download made a symlink; refused")
                toml = got / "tasks" / task_id / "task.toml"
                if not toml.is_file():
                    raise RegistryError(f"{label}: task {task_id} came without task.toml")
                os.rename(got / "tasks" / task_id, stage.out / "tasks" / task_id)
            check_received(stage.out, tasks, listed, label, whole=task is None)
            for meta in metas:
                if (got / meta).is_symlink() or not (got / meta).is_file():
                    raise RegistryError(f"{label}: {meta} did not arrive as a file")
                os.rename(got / meta, stage.out / meta)
            stage.commit(tasks, metas)
        return PullResult(name, sha, tasks, dest)

    def _download(
        self, name: str, rev: str | None, sha: str, paths: list[str], into: Path, cache: Path
    ) -> None:
        """Fetch each of ``paths`` (already checked by :func:`safe_relpath`) at commit ``sha``;
        the local path of each is ours (``into/path``), never one the server chose."""
        root = os.path.realpath(into)
        # A file and a folder of one name (``x`` and ``x/y``) cannot both be written; which
        # one the parallel downloads meet first would decide the error, and the Hub client
        # moves a folder aside to put a file in its place: refuse the listing up front.
        folders = {p.rsplit("/", 1)[0] for p in paths if "/" in p}
        folders |= {f.rsplit("/", i)[0] for f in list(folders) for i in range(1, f.count("/") + 1)}
        both = sorted(set(paths) & folders)
        if both:
            raise RegistryError(
                f"{name}@{sha}: cannot write {both[0]!r} (it is both a file and a folder)"
            )

        def fetch(path: str) -> None:
            local = self.api.hf_hub_download(
                name,
                path,
                repo_type="dataset",
                revision=sha,
                local_dir=into,
                cache_dir=cache,
            )
            real = os.path.realpath(local)
            if real != os.path.join(root, *path.split("/")):
                raise RegistryError(f"{name}@{sha}: {path!r} landed outside its place; refused")

        into.mkdir(parents=True)
        pool = ThreadPoolExecutor(max_workers=4)
        futures = {pool.submit(fetch, p): p for p in paths}
        path = ""
        try:
            # Hub errors (some are OSErrors) become RegistryErrors in here; a local OSError
            # (e.g. the list holds a file and a folder of one name) comes out as itself.
            with self._errors(name, rev):
                for future in futures:
                    path = futures[future]
                    future.result()
        except OSError as exc:
            raise RegistryError(
                f"{name}@{sha}: cannot write {path!r} ({exc.strerror or type(exc).__name__})"
            ) from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _entry_not_found(errors: Any) -> type[Exception]:
    """The "file not in this revision" error (renamed in huggingface_hub 1.0)."""
    return getattr(errors, "RemoteEntryNotFoundError", None) or errors.EntryNotFoundError


def _pinned_commit(registry: Any) -> str | None:
    try:
        return registry[0]["tasks"][0].get("git_commit_id")
    except (LookupError, TypeError, AttributeError):
        return None


def parse_hf_url(url: str) -> str | None:
    """``hf`` → None (``HF_ENDPOINT`` or the public Hub); ``hf+http(s)://host`` → that endpoint."""
    if url == "hf":
        return None
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("hf+http", "hf+https") or not rest.strip("/"):
        raise RegistryError(
            f"unsupported registry {url!r}: use hf, hf+https://HOST or file:///PATH"
        )
    return f"{scheme.removeprefix('hf+')}://{rest}".rstrip("/")
