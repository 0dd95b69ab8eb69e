"""Registry credentials and the answers to a registry's ``401`` challenge.

**Where credentials come from**, first match wins:

1. ``REPOGYM_REGISTRY_USERNAME`` and ``REPOGYM_REGISTRY_PASSWORD`` (a password or an access
   token), for every registry;
2. the Docker client's config file (``$DOCKER_CONFIG/config.json``, else
   ``~/.docker/config.json``): ``auths.<host>.auth`` (base64 ``user:password``) or
   ``username``/``password``, matched by host (``https://host/v1/``-style keys too) — what
   ``docker login`` writes. Credential helpers (``credsStore``, ``credHelpers``) are programs
   that repogym does not run: a host served only by one is answered anonymously, and the
   refusal says to set the variables above.

**Challenges.** ``Basic`` is answered with the credentials; ``Bearer realm=…,service=…,scope=…``
by asking the realm for a token (with the credentials when there are any) for the scopes the
request needs. Credentials and tokens never appear in a message, a log or an exception.
"""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

_PARAM = re.compile(r'(\w+)="([^"]*)"')
USER_VAR = "REPOGYM_REGISTRY_USERNAME"
PASSWORD_VAR = "REPOGYM_REGISTRY_PASSWORD"


class AuthError(Exception):
    """The registry wants credentials we do not have, or refused them (one line)."""


class TokenUnavailable(AuthError):
    """The token service did not answer, or answered 5xx/429: worth another try."""


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str
    source: str
    """Where they came from (``environment`` or the config file's path), for messages."""

    def __repr__(self) -> str:  # never the secret
        return f"Credentials(username={self.username!r}, source={self.source!r})"

    @property
    def basic(self) -> str:
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode()


def _docker_config() -> Path:
    root = os.environ.get("DOCKER_CONFIG")
    return Path(root, "config.json") if root else Path.home() / ".docker" / "config.json"


def _host_of(key: str) -> str:
    key = re.sub(r"^[a-z]+://", "", key.strip().lower())
    return key.split("/", 1)[0]


def credentials_for(host: str, environ: dict[str, str] | None = None) -> Credentials | None:
    """Credentials for registry ``host`` (``host[:port]``), or None (anonymous)."""
    env = os.environ if environ is None else environ
    user, password = env.get(USER_VAR, ""), env.get(PASSWORD_VAR, "")
    if user and password:
        return Credentials(user, password, "environment")
    path = _docker_config()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    auths = doc.get("auths") if isinstance(doc, dict) else None
    if not isinstance(auths, dict):
        return None
    want = {host.lower()}
    if host.lower() in ("docker.io", "registry-1.docker.io", "index.docker.io"):
        want |= {"docker.io", "registry-1.docker.io", "index.docker.io"}
    for key, entry in auths.items():
        if _host_of(str(key)) not in want or not isinstance(entry, dict):
            continue
        if entry.get("auth"):
            try:
                raw = base64.b64decode(str(entry["auth"])).decode()
            except (ValueError, UnicodeDecodeError):
                continue
            u, sep, p = raw.partition(":")
            if sep and u:
                return Credentials(u, p, str(path))
        if entry.get("username") and entry.get("password"):
            return Credentials(str(entry["username"]), str(entry["password"]), str(path))
    return None


def challenge_answer(
    http: httpx.Client,
    challenge: str,
    scopes: list[str],
    creds: Credentials | None,
    endpoint: str,
) -> str:
    """The ``Authorization`` header that answers ``challenge`` for ``scopes``."""
    import httpx

    scheme, _, params = challenge.partition(" ")
    scheme = scheme.lower()
    if scheme == "basic":
        if creds is None:
            raise AuthError(
                f"registry {endpoint} asks for credentials: run `docker login` for it or set "
                f"{USER_VAR} and {PASSWORD_VAR}"
            )
        return creds.basic
    if scheme != "bearer":
        raise AuthError(f"registry {endpoint} asks for {scheme or 'unknown'} authentication")
    fields = dict(_PARAM.findall(params))
    realm = fields.get("realm")
    if not realm:
        raise AuthError(f"registry {endpoint}: Bearer challenge without a realm")
    query: list[tuple[str, str | int | float | bool | None]] = []
    if fields.get("service"):
        query.append(("service", fields["service"]))
    for scope in scopes or [fields.get("scope", "")]:
        if scope:
            query.append(("scope", scope))
    headers = {"Authorization": creds.basic} if creds is not None else {}
    try:
        resp = http.get(realm, params=query, headers=headers)
    except httpx.HTTPError as exc:
        raise TokenUnavailable(
            f"token service {realm} is unreachable ({type(exc).__name__})"
        ) from None
    if resp.status_code >= 500 or resp.status_code == 429:
        raise TokenUnavailable(f"token service {realm} answered {resp.status_code}")
    if resp.status_code in (401, 403):
        who = f"as {creds.username} ({creds.source})" if creds else "anonymously"
        raise AuthError(f"token service {realm} refused {who}: {resp.status_code}")
    if resp.status_code != 200:
        raise AuthError(f"token service {realm} answered {resp.status_code}")
    try:
        body = resp.json()
    except ValueError:
        raise AuthError(f"token service {realm} sent no JSON") from None
    token = body.get("token") or body.get("access_token") if isinstance(body, dict) else None
    if not isinstance(token, str) or not token:
        raise AuthError(f"token service {realm} sent no token")
    return f"Bearer {token}"
