"""Which credentials are present and whether they work — never printing a secret.

Services and where their credentials come from:

| service | credential | checked with |
|---|---|---|
| github | ``GITHUB_TOKEN``, ``GH_TOKEN``, ``gh auth token`` | ``GET {REPOGYM_GITHUB_API}/user`` |
| gitlab | ``GITLAB_TOKEN`` | ``GET {REPOGYM_GITLAB_URL}/api/v4/user`` |
| huggingface | ``HF_TOKEN``, huggingface_hub's token file | ``GET {HF_ENDPOINT}/api/whoami-v2`` |
| openai | ``OPENAI_API_KEY`` | ``GET {OPENAI_BASE_URL}/models`` |
| anthropic | ``ANTHROPIC_API_KEY`` | ``GET {ANTHROPIC_BASE_URL}/v1/models`` |

huggingface_hub's token file is ``HF_TOKEN_PATH``, else ``$HF_HOME/token`` (``HF_HOME`` defaults to
``~/.cache/huggingface``).

Base URLs default to the public services and can point anywhere (GitHub Enterprise, self-hosted
GitLab, a local endpoint). A service that cannot be reached is reported as unknown, not failed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from repogym import http
from repogym._secrets import redact

DEFAULT_URLS = {
    "github": "https://api.github.com",
    "gitlab": "https://gitlab.com",
    "huggingface": "https://huggingface.co",
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}


# Where each service's token comes from. The readers (sources.github, hub.hf_registry, the
# workers' environment) ask here, so this module needs neither of them.


def token_from_cli(argv: list[str]) -> str | None:
    """The token a CLI prints (e.g. ``gh auth token``), or None when absent or failing."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(
            argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError):
        return None
    token = out.stdout.strip()
    return token if out.returncode == 0 and token else None


def github_token_source(
    env: Mapping[str, str] | None = None,
) -> tuple[str | None, str | None]:
    """(token, where it came from): ``GITHUB_TOKEN``, ``GH_TOKEN``, else ``gh auth token``."""
    env = os.environ if env is None else env
    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        value = env.get(name, "").strip()
        if value:
            return value, name
    token = token_from_cli(["gh", "auth", "token"])
    return (token, "gh auth token") if token else (None, None)


def hf_token_source(env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """The Hub token and where it came from: ``HF_TOKEN``, else huggingface_hub's token file."""
    env = os.environ if env is None else env
    token = env.get("HF_TOKEN", "").strip()
    if token:
        return token, "HF_TOKEN"
    if env.get("HF_TOKEN_PATH"):
        path = Path(env["HF_TOKEN_PATH"]).expanduser()
    else:
        cache = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", "~")) / ".cache")
        home = env.get("HF_HOME") or str(Path(cache) / "huggingface")
        path = Path(home).expanduser() / "token"
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None, None
    return (token, "huggingface token file") if token else (None, None)


@dataclass
class CredentialStatus:
    service: str
    present: bool
    source: str | None
    """Where the credential came from (an environment variable's name, ``gh auth token``)."""
    ok: bool | None
    """True works, False rejected, None not checked or service unreachable."""
    detail: str
    url: str

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _probe(
    url: str, headers: dict[str, str], secret: str, timeout_s: float
) -> tuple[bool | None, str]:
    """GET ``url`` with the credential's headers: True and who it is on 2xx, False on 401/403,
    None otherwise. Redirects are followed on the same origin only (never carrying the
    credential to another host); at most 64 KiB of the answer is read."""
    try:
        with http.client(timeout=timeout_s, headers=headers) as client:
            for _ in range(5):
                with client.stream("GET", url) as resp:
                    try:
                        target = http.follow_redirect(resp)
                    except http.RedirectRefused as exc:
                        return None, redact(str(exc), [secret])
                    if target is None:
                        status, phrase = resp.status_code, resp.reason_phrase
                        body = _read_at_most(resp, 65536) if resp.is_success else b""
                        break
                    url = target
            else:
                return None, "too many redirects"
    except (httpx.HTTPError, OSError, ValueError) as exc:
        root: BaseException = exc  # the socket error under httpx's wrappers names it best
        while root.__cause__ is not None or root.__context__ is not None:
            root = root.__cause__ or root.__context__  # type: ignore[assignment]
        return None, redact(f"unreachable ({type(root).__name__})", [secret])
    if not 200 <= status < 300:
        ok = False if status in (401, 403) else None
        return ok, redact(f"HTTP {status} {phrase}", [secret])
    who = ""
    try:
        data = json.loads(body.decode("utf-8", "replace"))
        if isinstance(data, dict):
            who = str(data.get("login") or data.get("username") or data.get("name") or "")
    except ValueError:
        pass
    return True, redact(f"HTTP {status}" + (f", as {who}" if who else ""), [secret])


def _read_at_most(resp: httpx.Response, limit: int) -> bytes:
    body = bytearray()
    for chunk in resp.iter_bytes():
        body += chunk
        if len(body) >= limit:
            break
    return bytes(body[:limit])


def check_credentials(
    env: Mapping[str, str] | None = None, *, timeout_s: float = 5.0, probe: bool = True
) -> list[CredentialStatus]:
    """Report every service's credential; with ``probe`` also ask the service if it works."""
    env = os.environ if env is None else env
    gh_token, gh_source = github_token_source(env)
    hf_token, hf_source = hf_token_source(env)
    specs = [
        (
            "github",
            gh_token,
            gh_source,
            env.get("REPOGYM_GITHUB_API"),
            "/user",
            lambda t: {"Authorization": f"Bearer {t}"},
        ),
        (
            "gitlab",
            env.get("GITLAB_TOKEN"),
            "GITLAB_TOKEN",
            env.get("REPOGYM_GITLAB_URL"),
            "/api/v4/user",
            lambda t: {"PRIVATE-TOKEN": t},
        ),
        (
            "huggingface",
            hf_token,
            hf_source,
            env.get("HF_ENDPOINT"),
            "/api/whoami-v2",
            lambda t: {"Authorization": f"Bearer {t}"},
        ),
        (
            "openai",
            env.get("OPENAI_API_KEY"),
            "OPENAI_API_KEY",
            env.get("OPENAI_BASE_URL"),
            "/models",
            lambda t: {"Authorization": f"Bearer {t}"},
        ),
        (
            "anthropic",
            env.get("ANTHROPIC_API_KEY"),
            "ANTHROPIC_API_KEY",
            env.get("ANTHROPIC_BASE_URL"),
            "/v1/models",
            lambda t: {"x-api-key": t, "anthropic-version": "2023-06-01"},
        ),
    ]
    out = []
    for service, secret, source, base, path, headers in specs:
        url = (base or DEFAULT_URLS[service]).rstrip("/") + path
        if not secret:
            out.append(CredentialStatus(service, False, None, None, "not set", url))
            continue
        if not probe:
            out.append(CredentialStatus(service, True, source, None, "not checked", url))
            continue
        ok, detail = _probe(url, headers(secret), secret, timeout_s)
        out.append(CredentialStatus(service, True, source, ok, detail, url))
    return out
