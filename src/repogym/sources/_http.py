"""Shared HTTP plumbing for the remote sources: JSON GETs with retries, rate limits, pagination.

Requests go through :mod:`repogym.http` (httpx and its one retry policy). Retries 5xx answers
and connection errors with jittered exponential backoff; waits out rate limits whose reset is
within ``max_wait_s`` and otherwise raises :class:`~repogym.sources.SourceError`. Redirects are
followed only on the API's own origin. Tokens never appear in error messages.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

import httpx

from repogym import http
from repogym._secrets import redact
from repogym.sources import PullRequest, SourceError

__all__ = [
    "HostedRepo",
    "HttpClient",
    "Issue",
    "RemotePullRequest",
    "git_clone",
    "git_fetch",
    "issue_refs",
    "next_link",
]

_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
_ISSUE_REF = re.compile(
    r"\b(?:fix(?:e[sd])?|close[sd]?|resolve[sd]?)\s*:?\s+#(\d+)\b", re.IGNORECASE
)


@dataclass(slots=True)
class RemotePullRequest(PullRequest):
    """A merged pull/merge request from a hosting API (adds the draft flag and web URL)."""

    draft: bool = False
    url: str = ""


@dataclass(slots=True)
class Issue:
    """An issue a pull request says it fixes."""

    number: int
    title: str
    body: str
    labels: list[str] = field(default_factory=list)


def issue_refs(body: str) -> list[int]:
    """Issue numbers from ``fixes #N`` / ``closes #N`` / ``resolves #N``, in order, unique."""
    seen: list[int] = []
    for match in _ISSUE_REF.finditer(body or ""):
        num = int(match.group(1))
        if num not in seen:
            seen.append(num)
    return seen


def fetch_linked_issues(body: str, fetch: Callable[[int], Issue]) -> list[Issue]:
    """Issues named by ``fixes/closes/resolves #N`` in ``body``; ones not found are skipped."""
    found = []
    for num in issue_refs(body):
        try:
            found.append(fetch(num))
        except SourceError as exc:
            if "not found" not in str(exc):
                raise
    return found


def next_link(headers: Mapping[str, str]) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header, or None."""
    for part in (headers.get("Link") or "").split(","):
        match = _NEXT.search(part)
        if match:
            return match.group(1)
    return None


@dataclass(slots=True)
class Response:
    """A finished HTTP exchange."""

    status: int
    headers: Mapping[str, str]  # case-insensitive names
    body: bytes

    def json(self) -> Any:
        """The body decoded as JSON."""
        return json.loads(self.body.decode("utf-8") or "null")


def _epoch(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


class HttpClient:
    """GETs JSON from one API with auth headers, retries and rate-limit handling.

    Requests go through :mod:`repogym.http` (httpx; :class:`~repogym.http.RetryPolicy`):
    connection errors and 5xx answers are retried ``retries`` times with jittered exponential
    backoff from ``backoff_s``; a rate limit is waited out when it resets within
    ``max_wait_s``. Redirects are followed only on the API's own origin (the token never
    travels elsewhere)."""

    max_redirects = 5

    def __init__(
        self,
        *,
        service: str,
        headers: Mapping[str, str],
        secrets: tuple[str, ...] = (),
        token_hint: str,
        max_wait_s: float = 60,
        backoff_s: float = 1.0,
        retries: int = 4,
        timeout_s: float = 30,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.service = service
        self._headers = dict(headers)
        self._secrets = tuple(s for s in secrets if s)
        self.token_hint = token_hint
        self.max_wait_s = max_wait_s
        self.backoff_s = backoff_s
        self.retries = retries
        self.timeout_s = timeout_s
        self._sleep = sleep
        self._clock = clock
        self.waited_s = 0.0

    @property
    def policy(self) -> http.RetryPolicy:
        """The retry policy these settings make."""
        return http.RetryPolicy(
            retries=self.retries, backoff_s=self.backoff_s, max_wait_s=self.max_wait_s
        )

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        return redact(text, self._secrets)

    def _fail(self, message: str) -> SourceError:
        return SourceError(self.redact(" ".join(message.split())))

    def _wait(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        self.waited_s += seconds
        self._sleep(seconds)

    def _rate_limit_reset(self, status: int, h: Mapping[str, str]) -> float | None:
        """Epoch of the reset when the answer is a rate-limit answer, else None."""
        now = self._clock()
        if status not in (403, 429):
            return None
        retry = http.retry_after_s(h, now)
        if retry is not None:
            return now + retry
        if h.get("X-RateLimit-Remaining") == "0" or h.get("RateLimit-Remaining") == "0":
            reset = _epoch(h.get("X-RateLimit-Reset")) or _epoch(h.get("RateLimit-Reset"))
            return reset if reset is not None else now + 60
        if status == 429:
            reset = _epoch(h.get("RateLimit-Reset")) or _epoch(h.get("X-RateLimit-Reset"))
            return reset if reset is not None else now + 60
        return None

    def _rate_limit(self, resp: httpx.Response) -> float | None:
        reset = self._rate_limit_reset(resp.status_code, resp.headers)
        # a reset given in whole seconds: a little after it, so the limit has really lifted
        return None if reset is None else reset - self._clock() + 0.25

    def _send(self, client: httpx.Client, url: str) -> Response:
        resp = http.send_with_retries(
            lambda: client.get(url),
            policy=self.policy,
            sleep=self._wait,
            rate_limit=self._rate_limit,
        )
        return Response(resp.status_code, resp.headers, resp.read())

    def get(self, url: str, *, what: str) -> Response:
        """GET ``url`` (``what`` names the resource in errors); a 2xx response or SourceError."""
        with http.client(timeout=self.timeout_s, headers=self._headers) as client:
            for _ in range(self.max_redirects + 1):
                try:
                    resp = self._send(client, url)
                except httpx.TransportError as exc:
                    raise self._fail(
                        f"{self.service}: cannot reach {what}: {http.reason(exc)}"
                    ) from None
                except httpx.HTTPError as exc:
                    raise self._fail(f"{self.service}: {what}: {http.reason(exc)}") from None
                if not 300 <= resp.status < 400 or "location" not in resp.headers:
                    break
                target = urljoin(url, resp.headers["location"])
                if not http.same_origin(target, url):
                    where = urlsplit(target).hostname or "elsewhere"
                    raise self._fail(
                        f"{self.service}: {what}: HTTP {resp.status} redirect to another "
                        f"host refused ({where})"
                    )
                url = target
            else:
                raise self._fail(f"{self.service}: {what}: too many redirects")
        if 200 <= resp.status < 300:
            return resp
        reset = self._rate_limit_reset(resp.status, resp.headers)
        if reset is not None:
            when = datetime.fromtimestamp(reset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            limit = resp.headers.get("X-RateLimit-Limit") or resp.headers.get(
                "RateLimit-Limit", "?"
            )
            raise self._fail(
                f"{self.service} API rate limit exceeded (limit {limit}/h) while reading "
                f"{what}; resets at {when} (max_wait_s={self.max_wait_s:g})"
            )
        if resp.status == 401:
            raise self._fail(
                f"{self.service}: bad or expired token (401) while reading {what}: "
                f"check {self.token_hint}"
            )
        if resp.status == 404:
            raise self._fail(
                f"{self.service}: {what} not found or private: set {self.token_hint} "
                "to a token that can read it"
            )
        raise self._fail(f"{self.service}: HTTP {resp.status} while reading {what}")

    def get_json(self, url: str, *, what: str) -> Any:
        """GET and decode JSON."""
        resp = self.get(url, what=what)
        try:
            return resp.json()
        except ValueError:
            raise self._fail(f"{self.service}: invalid JSON from {what}") from None

    def paginate(
        self, url: str, *, what: str, items: Callable[[Any], list[Any]] = lambda d: d
    ) -> Iterator[Any]:
        """Items of every page, following ``Link: rel="next"`` or ``X-Next-Page``."""
        next_url: str | None = url
        while next_url:
            resp = self.get(next_url, what=what)
            try:
                data = resp.json()
            except ValueError:
                raise self._fail(f"{self.service}: invalid JSON from {what}") from None
            yield from items(data)
            link = next_link(resp.headers)
            if link:
                next_url = link
                continue
            page = (resp.headers.get("X-Next-Page") or "").strip()
            next_url = _with_page(next_url, page) if page else None


def _with_page(url: str, page: str) -> str:
    """``url`` with its ``page`` query parameter set to ``page``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "page"]
    query.append(("page", page))
    return urlunsplit(parts._replace(query=urlencode(query)))


def _git_runner(
    url: str, *, user: str, token: str | None, redact: Callable[[str], str]
) -> Callable[..., None]:
    """A ``run(args, cwd=None)`` for git commands against ``url``; the token travels in the
    environment (an ``http.extraHeader``), never on the command line or in a config file."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    basic = None
    if token and url.startswith("https://"):
        basic = base64.b64encode(f"{user}:{token}".encode()).decode()
        env.update(
            GIT_CONFIG_COUNT="1",
            GIT_CONFIG_KEY_0="http.extraHeader",
            GIT_CONFIG_VALUE_0=f"Authorization: Basic {basic}",
        )
    secrets = [s for s in (token, basic) if s]

    def run(args: list[str], cwd: Path | None = None) -> None:
        try:
            proc = subprocess.run(
                ["git", *args],
                capture_output=True,
                text=True,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise SourceError(f"git not runnable: {exc}") from None
        if proc.returncode != 0:
            msg = " ".join((proc.stderr or proc.stdout).split())[-300:]
            for secret in secrets:
                msg = msg.replace(secret, "***")
            raise SourceError(redact(f"git {args[0]} failed: {msg}"))

    return run


def git_clone(
    url: str,
    dest: str | os.PathLike[str],
    *,
    ref: str | None,
    user: str,
    token: str | None,
    redact: Callable[[str], str],
    bare: bool = False,
) -> Path:
    """``git clone url dest`` then ``git checkout ref``; the token travels in the environment.

    ``bare=True`` makes a bare clone (no work tree; ``ref`` must then be None).
    """
    dest_path = Path(dest)
    run = _git_runner(url, user=user, token=token, redact=redact)
    if ref is not None and (not ref or ref.startswith("-")):
        raise SourceError(f"invalid ref {ref!r}")
    if bare and ref:
        raise SourceError("a bare clone has no work tree to check out a ref in")
    run(["clone", "--quiet", *(["--bare"] if bare else []), "--", url, str(dest_path)])
    if ref:
        run(["checkout", "--quiet", "--detach", ref, "--"], cwd=dest_path)
    return dest_path


def git_fetch(
    url: str,
    repo: str | os.PathLike[str],
    refspecs: list[str],
    *,
    user: str,
    token: str | None,
    redact: Callable[[str], str],
) -> None:
    """``git fetch url refspecs…`` into the repository at ``repo`` (SourceError on failure)."""
    for spec in refspecs:
        if not spec or spec.lstrip("+").startswith("-"):
            raise SourceError(f"invalid refspec {spec!r}")
    run = _git_runner(url, user=user, token=token, redact=redact)
    run(["fetch", "--quiet", "--no-tags", "--", url, *refspecs], cwd=Path(repo))


class HostedRepo:
    """What GitHub and GitLab sources share: clone, fetch and linked issues.

    Subclasses set ``service`` and ``git_user`` (the user name that goes with a token over
    HTTPS) and provide ``http``, ``_token``, ``repo_id()``, ``repo_info()`` and ``issue()``.
    """

    service = ""
    git_user = ""
    http: HttpClient
    _token: str | None

    def repo_id(self) -> str:  # pragma: no cover - provided by subclasses
        raise NotImplementedError

    def repo_info(self) -> Any:  # pragma: no cover - provided by subclasses
        raise NotImplementedError

    def issue(self, number: int) -> Issue:  # pragma: no cover - provided by subclasses
        raise NotImplementedError

    def _clone_url(self) -> str:
        url = self.repo_info().clone_url
        if not url:
            raise SourceError(f"{self.service}: no clone URL for {self.repo_id()}")
        return url

    def clone(
        self, dest: str | os.PathLike[str], ref: str | None = None, *, bare: bool = False
    ) -> Path:
        """``git clone`` the repository into ``dest`` and check out ``ref`` (detached) if given;
        ``bare=True`` makes a bare clone."""
        return git_clone(
            self._clone_url(),
            dest,
            ref=ref,
            user=self.git_user,
            token=self._token,
            redact=self.http.redact,
            bare=bare,
        )

    def fetch(self, repo: str | os.PathLike[str], refspecs: list[str]) -> None:
        """``git fetch`` ``refspecs`` from the repository into the clone at ``repo``."""
        git_fetch(
            self._clone_url(),
            repo,
            refspecs,
            user=self.git_user,
            token=self._token,
            redact=self.http.redact,
        )

    def linked_issues(self, pr: RemotePullRequest | str) -> list[Issue]:
        """Issues named by ``fixes/closes/resolves #N`` in the text; missing ones are skipped."""
        return fetch_linked_issues(pr if isinstance(pr, str) else pr.body, self.issue)
