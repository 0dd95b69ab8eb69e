"""Harbor datasets on the Hugging Face Hub (tagged ``harbor``), read with ``huggingface_hub``.

:func:`hub_readers` lists the Hub's datasets tagged ``harbor`` when the Hub answers a quick
probe (else one log line and nothing: the explorer works offline); :class:`HubAdapter` opens
one dataset given as ``hf://datasets/ORG/NAME`` (or ``hf://ORG/NAME``). A dataset is read at
its current commit: its tasks are listed from the repository's file list (where ``task.toml``
files are, nothing downloaded), its card / ``registry.json`` / ``manifest.json`` are fetched
for the environment page, and each task's folder is downloaded when that task is read, then
read by the Harbor adapter. The environment id is ``org/name``; a task's id is its directory
name.

Downloads go file by file (``hf_hub_download``) into a plain folder per dataset commit
(``<cache>/repogym-explorer/datasets--ORG--NAME/<sha>``), never into the Hub's symlinked blob
cache: the Harbor adapter follows no symlink, so the files it reads must be real files. File
names the server lists are used only when they are plain relative paths (no ``..``, no leading
``/``, no backslash).

Every Hub call has a total deadline (``deadline``, default :data:`DEADLINE_S`; a task's download
:data:`DOWNLOAD_DEADLINE_S`): a server that trickles its answers is given up on with a one-line
error naming the URL and the deadline (see :mod:`._net`).

Private datasets: the listing skips them unless ``include_private`` is asked for, and a
private dataset opened by name is marked ``EnvDoc.private`` so the indexer leaves it out of
snapshots built for the public (the default).

The endpoint is ``HF_ENDPOINT`` (default ``https://huggingface.co``); the token is
``HF_TOKEN`` or the one ``huggingface_hub`` stored at login. Tokens never appear in errors or
logs. ``huggingface_hub`` is imported only when a Hub dataset is read.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from repogym import http
from repogym._secrets import redact
from repogym.explorer.adapters import _net
from repogym.explorer.adapters.base import AdapterError
from repogym.explorer.model import EnvDoc, TaskDoc

__all__ = ["HubAdapter", "HubReader", "hub_readers", "parse_hub_location"]

log = logging.getLogger("repogym.explorer.hub")

DEFAULT_ENDPOINT = "https://huggingface.co"
PROBE_TIMEOUT_S = 3.0
DEADLINE_S = 60.0  # each Hub API call, in total
DOWNLOAD_DEADLINE_S = 600.0  # one task's files, in total
TAG = "harbor"
META_FILES = ("README.md", "registry.json", "manifest.json")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def _plain_path(name: str) -> bool:
    """Whether a file name the server lists is a plain relative path (safe to download)."""
    parts = name.split("/")
    return (
        bool(name)
        and "\\" not in name
        and not any(ord(c) < 0x20 or c == "\x7f" for c in name)
        and all(p not in ("", ".", "..") for p in parts)
    )


def _skip() -> tuple[frozenset[str], frozenset[str]]:
    from repogym.explorer.adapters.harbor import SKIP_DIRS

    return SKIP_DIRS, SKIP_DIRS | {".cache"}


def _endpoint(endpoint: str | None) -> str:
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _public(url: str) -> str:
    """``url`` without any user:password part (sources and messages never carry credentials)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


def _token(token: str | None) -> str | None:
    if token is not None:
        return token or None
    from repogym.auth import hf_token_source

    return hf_token_source()[0]


def _require_hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise AdapterError(
            "reading Hugging Face Hub datasets needs huggingface_hub (pip install 'repogym[hub]')"
        ) from None
    return huggingface_hub


def parse_hub_location(location: str) -> str | None:
    """``hf://datasets/org/name``, ``hf://org/name`` or the dataset's page URL on the Hub
    (``HF_ENDPOINT/datasets/org/name``) → ``org/name``; None when not a Hub dataset."""
    page = f"{_endpoint(None)}/datasets/"
    if location.startswith(page):  # the dataset's page on the Hub
        rest = location[len(page) :].strip("/")
    elif location.startswith("hf://"):
        rest = location[len("hf://") :].strip("/").removeprefix("datasets/")
    else:
        return None
    return rest if _REPO.match(rest) and ".." not in rest else None


def _cache_dir(cache_dir: str | Path | None) -> Path | None:
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("REPOGYM_HUB_CACHE")
    return Path(env) if env else None  # None: huggingface_hub's own cache (HF_HOME)


class HubReader:
    """One Harbor dataset on the Hub, read from a local copy of its current commit."""

    def __init__(
        self,
        repo_id: str,
        *,
        endpoint: str | None = None,
        token: str | None = None,
        cache_dir: str | Path | None = None,
        info: Any = None,
        deadline: float | None = None,
        download_deadline: float | None = None,
    ) -> None:
        self.repo_id = repo_id
        self.endpoint = _endpoint(endpoint)
        self.deadline = DEADLINE_S if deadline is None else deadline
        self.download_deadline = (
            DOWNLOAD_DEADLINE_S if download_deadline is None else download_deadline
        )
        self._token = _token(token)
        self.cache_dir = _cache_dir(cache_dir)
        self.location = f"hf://datasets/{repo_id}"
        self._dirs: dict[str, str] | None = None
        self._files: list[str] = []
        self._meta: Path | None = None
        self._empty: tempfile.TemporaryDirectory[str] | None = None
        hub = _require_hub()
        self._api = hub.HfApi(endpoint=self.endpoint, token=self._token or False)
        self.info = (
            info
            if info is not None
            else self._call(self._api.dataset_info, repo_id, url=self._url("api/datasets"))
        )
        self.sha: str | None = getattr(self.info, "sha", None)
        self.private = bool(getattr(self.info, "private", False))

    def _redact(self, text: str) -> str:
        return redact(text, [self._token])

    def _url(self, kind: str = "datasets") -> str:
        return f"{_public(self.endpoint)}/{kind}/{self.repo_id}"

    def _call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        url: str | None = None,
        deadline: float | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run a huggingface_hub call within a total deadline (default ``self.deadline``);
        failures become one-line, token-free AdapterErrors naming the URL."""
        try:
            return _net.call(
                lambda: fn(*args, **kwargs),
                deadline=self.deadline if deadline is None else deadline,
                url=url or self._url(),
            )
        except AdapterError as exc:
            raise AdapterError(self._redact(str(exc))[:500]) from None
        except Exception as exc:
            name = type(exc).__name__
            if "NotFound" in name or "Unauthorized" in name:
                hint = "" if self._token else " (set HF_TOKEN if it is private)"
                msg = f"no dataset {self.repo_id} on {_public(self.endpoint)}, or no access{hint}"
            else:
                first = (str(exc).strip().splitlines() or [name])[0]
                msg = f"{self.repo_id} on {_public(self.endpoint)}: {name}: {first}"
            raise AdapterError(self._redact(msg)[:500]) from None

    # -- listing: one file-list request, no task downloaded ------------------------------
    def _task_dirs(self) -> dict[str, str]:
        """Task id → folder in the repo (where a ``task.toml`` is), shallowest first."""
        if self._dirs is None:
            files = self._call(
                self._api.list_repo_files,
                self.repo_id,
                repo_type="dataset",
                revision=self.sha,
                url=self._url("api/datasets"),
            )
            files = [f for f in files if isinstance(f, str) and _plain_path(f)]
            folders = sorted(
                {
                    f.rpartition("/")[0]
                    for f in files
                    if f == "task.toml" or f.endswith("/task.toml")
                },
                key=lambda d: (d.count("/") if d else -1, d),
            )
            dirs: dict[str, str] = {}
            for folder in folders:
                if any(folder.startswith(other + "/") for other in dirs.values() if other):
                    continue  # tasks do not nest
                tid = folder.rpartition("/")[2] or self.repo_id.split("/")[1]
                if tid in dirs:
                    tid = folder.replace("/", "__")
                dirs[tid] = folder
            self._dirs = dirs
            self._files = [str(f) for f in files]
        return self._dirs

    def _local_dir(self) -> Path:
        """Where this dataset's files at its commit are downloaded (real files, no links)."""
        _require_hub()
        from huggingface_hub import constants

        base = self.cache_dir or Path(constants.HF_HUB_CACHE)
        return (
            base
            / "repogym-explorer"
            / f"datasets--{self.repo_id.replace('/', '--')}"
            / (self.sha or "main")
        )

    def _download(self, names: list[str]) -> Path:
        """The files ``names`` at the dataset's commit, one by one into a plain folder of real
        files (reused: a file already there at this commit is not fetched again), all within
        ``download_deadline``."""
        hub = _require_hub()
        local = self._local_dir()

        def fetch() -> None:
            for name in names:
                hub.hf_hub_download(
                    self.repo_id,
                    name,
                    repo_type="dataset",
                    revision=self.sha,
                    local_dir=local,
                    endpoint=self.endpoint,
                    token=self._token or False,
                )

        if names:
            self._call(fetch, url=self._url(), deadline=self.download_deadline)
        local.mkdir(parents=True, exist_ok=True)
        return local

    def prepare(self) -> HubReader:
        """List the tasks and fetch the dataset's card now (errors surface here)."""
        self._task_dirs()
        self._meta_root()
        return self

    def _meta_root(self) -> Path:
        if self._meta is None:
            self._task_dirs()
            meta = [f for f in META_FILES if f in self._files]
            if meta:
                self._meta = self._download(meta)
            else:  # no card: an empty folder stands for it
                self._empty = tempfile.TemporaryDirectory(prefix="repogym-hub-")
                self._meta = Path(self._empty.name)
        return self._meta

    def env(self) -> EnvDoc:
        from repogym.explorer.adapters.harbor import HarborReader

        dirs = self._task_dirs()
        inner: EnvDoc = HarborReader(self._meta_root()).env()
        public = _public(self.endpoint)
        url = f"{public}/datasets/{self.repo_id}"
        registry = "hf" if self.endpoint == DEFAULT_ENDPOINT else f"hf+{public}"
        name = self.repo_id.split("/")[1]
        pull = f"repogym pull {self.repo_id}" + (f"@{self.sha}" if self.sha else "")
        pull += f" ./{name}" + (f" --registry {registry}" if registry != "hf" else "")
        inner.id = self.repo_id
        if inner.title in ("", inner.id) or re.fullmatch(r"[0-9a-f]{40}", inner.title):
            inner.title = self.repo_id
        if re.fullmatch(r"Harbor tasks( \(\d+\))?", inner.summary or ""):
            inner.summary = f"Harbor tasks ({len(dirs)})"
        inner.source = url
        inner.private = self.private
        inner.task_count = len(dirs)
        inner.facets = {**inner.facets, "hub": "huggingface"}
        inner.run_options = [
            {"label": "Pull with repogym", "command": pull},
            {"label": "Then run, verify or serve", "command": f"repogym run ./{name}"},
        ]
        return inner

    def task_ids(self) -> Iterator[str]:
        """Task ids from the repository's file list (nothing is downloaded)."""
        yield from self._task_dirs()

    def task(self, task_id: str) -> TaskDoc:
        """Download this task's folder (cached) and read it as a Harbor task."""
        from repogym.explorer.adapters.harbor import HarborReader

        folder = self._task_dirs().get(task_id)
        if folder is None:
            raise KeyError(task_id)
        # a single-task dataset (task.toml at the top) is the whole repository
        prefix = f"{folder}/" if folder else ""
        names = [f for f in self._files if f.startswith(prefix)]
        local = self._download(names)
        root = local / folder if folder else local
        # huggingface_hub keeps its download notes in .cache/ at the top of the folder
        task_skip, top_skip = _skip()
        reader = HarborReader(root, skip=task_skip if folder else top_skip)
        local_ids = list(reader.task_ids())
        if not local_ids:
            raise AdapterError(f"{self.repo_id}/{task_id}: task.toml missing after download")
        doc: TaskDoc = reader.task(local_ids[0])
        doc.id = task_id
        return doc


class HubAdapter:
    """``hf://datasets/ORG/NAME``: one Harbor dataset on the Hugging Face Hub."""

    name = "hub"

    def detect(self, location: str) -> float:
        return 1.0 if parse_hub_location(location) else 0.0

    def open(self, location: str) -> HubReader:
        repo_id = parse_hub_location(location)
        if repo_id is None:
            raise AdapterError(f"{location}: a Hub dataset is given as hf://datasets/ORG/NAME")
        return HubReader(repo_id)


def probe(endpoint: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the Hub answers its dataset listing quickly, else a one-line reason."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    url = f"{_endpoint(endpoint)}/api/datasets?filter={TAG}&limit=1"
    try:
        resp = _net.get(url, timeout=timeout, deadline=timeout, max_bytes=1024 * 1024)
    except AdapterError as exc:
        return str(exc).splitlines()[0]
    except (OSError, ValueError, httpx.HTTPError) as exc:
        return http.reason(exc)
    if resp.status >= 400:  # a redirect is an answer too: the Hub client follows it
        return f"HTTP {resp.status}"
    return None


def hub_readers(
    *,
    include_private: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    cache_dir: str | Path | None = None,
    tag: str = TAG,
    timeout: float = PROBE_TIMEOUT_S,
) -> Iterator[tuple[str, HubReader]]:
    """``(location, reader)`` for every Hub dataset tagged ``tag``, ready to index.

    Only when the Hub is reachable: otherwise one log line and nothing. Private datasets are
    skipped unless ``include_private``; a dataset that cannot be downloaded or read is skipped
    with a log line.
    """
    base = _endpoint(endpoint)
    why = probe(base, timeout)
    if why is not None:
        log.warning(
            "Hugging Face Hub at %s not reachable (%s): Hub datasets skipped", _public(base), why
        )
        return
    hub = _require_hub()
    secret = _token(token)
    api = hub.HfApi(endpoint=base, token=secret or False)
    try:
        infos = _net.call(
            lambda: list(api.list_datasets(filter=tag)),
            deadline=DEADLINE_S,
            url=f"{_public(base)}/api/datasets",
        )
    except Exception as exc:
        msg = redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, [secret])
        log.warning("Hugging Face Hub datasets skipped: listing failed (%s)", msg)
        return
    for info in infos:
        repo_id = str(getattr(info, "id", ""))
        if not _REPO.match(repo_id):
            continue
        if getattr(info, "private", False) and not include_private:
            log.info("Hub dataset %s is private: skipped", repo_id)
            continue
        try:
            reader = HubReader(
                repo_id, endpoint=base, token=secret or "", cache_dir=cache_dir, info=info
            ).prepare()
        except AdapterError as exc:
            log.warning("Hub dataset %s skipped: %s", repo_id, exc)
            continue
        yield reader.location, reader
