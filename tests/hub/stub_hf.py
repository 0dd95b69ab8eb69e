"""A small in-memory server that answers the part of the Hugging Face Hub API that
``huggingface_hub`` uses to create a dataset repo, commit files, tag, list and download them.

Kept honest to the real service where the client depends on it:

- auth: ``Authorization: Bearer <token>``; an unknown token is refused with 401 and
  ``X-Error-Message: Invalid credentials in Authorization header``; a private repo is invisible
  (404, or 401 when anonymous, both ``X-Error-Code: RepoNotFound``) to anyone but its owner;
- revisions: a branch name, a tag name or a full commit sha; unknown ones are 404
  ``X-Error-Code: RevisionNotFound``; missing files are 404 ``EntryNotFound``;
- commits: NDJSON (header, ``file`` in base64, ``deletedFile``, ``deletedFolder``) with an
  optional ``parentCommit`` that must be the branch head; every commit gets a sha1 id;
- preupload answers ``regular`` for every file (small text files, which is what tasks are).
  Large or binary files would be ``lfs`` on the real Hub, uploaded through LFS or Xet storage;
  this stub does not speak those protocols and refuses ``lfsFile`` lines;
- downloads: ``HEAD``/``GET /datasets/<repo>/resolve/<rev>/<path>`` with ``X-Repo-Commit``,
  ``ETag`` (the git blob sha1) and ``Content-Length``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Commit:
    oid: str
    parent: str | None
    message: str
    files: dict[str, bytes]


@dataclass
class Repo:
    repo_id: str
    owner: str
    private: bool
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def resolve(self, rev: str) -> str | None:
        if rev in self.branches:
            return self.branches[rev]
        if rev in self.tags:
            return self.tags[rev]
        return rev if rev in self.commits else None


class HubState:
    """Users (token → name), dataset repos and a log of the requests served."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = dict(users)
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._counter = 0

    def commit(self, repo: Repo, parent: str | None, message: str, files: dict[str, bytes]) -> str:
        self._counter += 1
        h = hashlib.sha1(f"{repo.repo_id}\0{parent}\0{message}\0{self._counter}\n".encode())
        for path in sorted(files):
            h.update(f"{path}\0{git_blob_sha1(files[path])}\n".encode())
        oid = h.hexdigest()
        repo.commits[oid] = Commit(oid, parent, message, dict(files))
        repo.branches["main"] = oid
        return oid


class _Error(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        body: dict[str, Any] | None = None,
        **headers: str,
    ):
        super().__init__(message)
        self.status, self.code, self.headers, self.body = status, code, headers, body or {}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    # --- plumbing -----------------------------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(data).encode(), headers)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _user(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        if not auth:
            return None
        token = auth.removeprefix("Bearer ").strip()
        user = self.server.state.users.get(token)
        if user is None:
            raise _Error(401, "Invalid credentials in Authorization header")
        return user

    def _repo(self, repo_id: str, user: str | None, *, write: bool = False) -> Repo:
        repo = self.server.state.repos.get(repo_id)
        if repo is None or (repo.private and repo.owner != user):
            raise _Error(401 if user is None else 404, "Repository not found", "RepoNotFound")
        if write and repo.owner != user:
            raise _Error(403, "You don't have the rights to write to this repository")
        return repo

    def _commit_at(self, repo: Repo, rev: str) -> Commit:
        oid = repo.resolve(rev)
        if oid is None:
            raise _Error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        return repo.commits[oid]

    def _dispatch(self) -> None:
        state = self.server.state
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        query = parse_qs(url.query)
        with state.lock:
            state.requests.append((self.command, url.path))
            try:
                user = self._user()
                self._route(parts, query, user)
            except _Error as exc:
                headers = dict(exc.headers)
                if exc.code:
                    headers["X-Error-Code"] = exc.code
                headers["X-Error-Message"] = str(exc)
                self._json(exc.status, {"error": str(exc), **exc.body}, headers)

    do_GET = do_POST = do_HEAD = do_DELETE = _dispatch  # noqa: N815 - http.server API

    # --- routes -------------------------------------------------------------------------------

    def _route(self, parts: list[str], query: dict[str, list[str]], user: str | None) -> None:
        method = self.command
        if parts == ["api", "whoami-v2"] and method == "GET":
            if user is None:
                raise _Error(401, "Invalid credentials in Authorization header")
            return self._json(200, {"type": "user", "name": user, "orgs": []})
        if parts == ["api", "validate-yaml"] and method == "POST":
            self._body()
            return self._json(200, {"errors": [], "warnings": []})
        if parts == ["api", "repos", "create"] and method == "POST":
            return self._create_repo(json.loads(self._body() or b"{}"), user)
        if len(parts) >= 4 and parts[:2] == ["api", "datasets"]:
            repo_id, rest = f"{parts[2]}/{parts[3]}", parts[4:]
            return self._api_repo(method, repo_id, rest, query, user)
        if len(parts) >= 6 and parts[0] == "datasets" and parts[3] == "resolve":
            repo_id = f"{parts[1]}/{parts[2]}"
            return self._resolve(repo_id, parts[4], "/".join(parts[5:]), user)
        raise _Error(404, f"no route {method} {'/'.join(parts)}")

    def _create_repo(self, payload: dict[str, Any], user: str | None) -> None:
        if user is None:
            raise _Error(401, "You must be authenticated to create a repository")
        if payload.get("type") != "dataset":
            raise _Error(400, "this stub only hosts dataset repositories")
        owner = payload.get("organization") or user
        if owner != user:
            raise _Error(403, f"You don't have the rights to create a dataset under {owner}")
        repo_id = f"{owner}/{payload['name']}"
        base = f"http://{self.headers['Host']}"
        if repo_id in self.server.state.repos:
            url = f"{base}/datasets/{repo_id}"
            raise _Error(409, "You already created this dataset repo", body={"url": url})
        private = payload.get("visibility") == "private" or bool(payload.get("private"))
        repo = Repo(repo_id, owner, private)
        self.server.state.repos[repo_id] = repo
        gitattributes = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"
        self.server.state.commit(repo, None, "initial commit", {".gitattributes": gitattributes})
        return self._json(200, {"url": f"{base}/datasets/{repo_id}", "name": repo_id})

    def _api_repo(
        self,
        method: str,
        repo_id: str,
        rest: list[str],
        query: dict[str, list[str]],
        user: str | None,
    ) -> None:
        write = method == "POST"
        repo = self._repo(repo_id, user, write=write)
        if method == "GET" and (rest == [] or (len(rest) == 2 and rest[0] == "revision")):
            commit = self._commit_at(repo, rest[1] if rest else "main")
            return self._json(
                200,
                {
                    "id": repo.repo_id,
                    "author": repo.owner,
                    "sha": commit.oid,
                    "private": repo.private,
                    "siblings": [{"rfilename": p} for p in sorted(commit.files)],
                },
            )
        if method == "GET" and rest == ["refs"]:

            def refs(kind: str, table: dict[str, str]) -> list[dict[str, str]]:
                return [
                    {"name": n, "ref": f"refs/{kind}/{n}", "targetCommit": oid}
                    for n, oid in sorted(table.items())
                ]

            return self._json(
                200,
                {
                    "branches": refs("heads", repo.branches),
                    "tags": refs("tags", repo.tags),
                    "converts": [],
                },
            )
        if method == "GET" and len(rest) >= 2 and rest[0] == "tree":
            commit = self._commit_at(repo, rest[1])
            prefix = "/".join(rest[2:]).strip("/")
            recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
            return self._json(200, _tree(commit, prefix, recursive))
        if method == "POST" and len(rest) == 2 and rest[0] == "preupload":
            commit = self._commit_at(repo, rest[1])
            files = json.loads(self._body())["files"]
            answer = []
            for f in files:
                current = commit.files.get(f["path"])
                answer.append(
                    {
                        "path": f["path"],
                        "uploadMode": "regular",
                        "shouldIgnore": False,
                        "oid": git_blob_sha1(current) if current is not None else None,
                    }
                )
            return self._json(200, {"files": answer, "commitOid": commit.oid})
        if method == "POST" and len(rest) == 2 and rest[0] == "commit":
            return self._commit(repo, rest[1], self._body())
        if method == "POST" and len(rest) == 2 and rest[0] == "tag":
            commit = self._commit_at(repo, rest[1])
            tag = json.loads(self._body())["tag"]
            if tag in repo.tags or tag in repo.branches:
                raise _Error(409, f"Tag {tag} already exists")
            repo.tags[tag] = commit.oid
            return self._json(200, {"name": tag, "targetCommit": commit.oid})
        raise _Error(404, f"no route {method} api/datasets/{repo_id}/{'/'.join(rest)}")

    def _commit(self, repo: Repo, branch: str, body: bytes) -> None:
        if branch not in repo.branches:
            raise _Error(404, f"Invalid rev id: {branch}", "RevisionNotFound")
        head = repo.commits[repo.branches[branch]]
        files = dict(head.files)
        summary = ""
        for line in body.splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "header":
                summary = value.get("summary", "")
                parent = value.get("parentCommit")
                if parent is not None and not head.oid.startswith(parent):
                    raise _Error(412, "A commit has happened since. Please refresh and try again.")
            elif key == "file":
                if value.get("encoding") != "base64":
                    raise _Error(400, "file content must be base64")
                files[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                if value["path"] not in files:
                    raise _Error(404, f"File not found: {value['path']}", "EntryNotFound")
                del files[value["path"]]
            elif key == "deletedFolder":
                folder = value["path"].rstrip("/") + "/"
                for path in [p for p in files if p.startswith(folder)]:
                    del files[path]
            else:
                raise _Error(400, f"this stub does not accept {key!r} commit lines")
        if not summary:
            raise _Error(400, "commit summary is required")
        oid = self.server.state.commit(repo, head.oid, summary, files)
        repo.branches[branch] = oid
        base = f"http://{self.headers['Host']}"
        return self._json(
            200,
            {
                "success": True,
                "commitOid": oid,
                "commitUrl": f"{base}/datasets/{repo.repo_id}/commit/{oid}",
            },
        )

    def _resolve(self, repo_id: str, rev: str, path: str, user: str | None) -> None:
        repo = self._repo(repo_id, user)
        commit = self._commit_at(repo, rev)
        data = commit.files.get(path)
        if data is None:
            raise _Error(404, "Entry not found", "EntryNotFound", **{"X-Repo-Commit": commit.oid})
        headers = {"X-Repo-Commit": commit.oid, "ETag": f'"{git_blob_sha1(data)}"'}
        return self._send(200, data, headers, content_type="application/octet-stream")


def _tree(commit: Commit, prefix: str, recursive: bool) -> list[dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = {}
    base = prefix + "/" if prefix else ""
    for path, data in sorted(commit.files.items()):
        if not path.startswith(base):
            continue
        rel = path[len(base) :].split("/")
        folders = rel[:-1] if recursive else rel[:1] if len(rel) > 1 else []
        for i in range(len(folders)):
            folder = base + "/".join(rel[: i + 1])
            oid = hashlib.sha1(folder.encode()).hexdigest()
            entries.setdefault(folder, {"type": "directory", "path": folder, "oid": oid, "size": 0})
        if recursive or len(rel) == 1:
            entries[path] = {
                "type": "file",
                "path": path,
                "oid": git_blob_sha1(data),
                "size": len(data),
            }
    if prefix and not entries:
        raise _Error(404, f"Entry not found: {prefix}", "EntryNotFound")
    return list(entries.values())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: HubState


@contextmanager
def serve_hub(users: dict[str, str]) -> Iterator[tuple[str, HubState]]:
    """Run the stub on 127.0.0.1 (a free port); yields (base URL, state)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = HubState(users)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
