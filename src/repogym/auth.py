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
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from repogym._secrets import redact
from repogym.hub.hf_registry import hf_token_source
from repogym.sources.github import github_token_source

DEFAULT_URLS = {
    "github": "https://api.github.com",
    "gitlab": "https://gitlab.com",
    "huggingface": "https://huggingface.co",
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}


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
    req = urllib.request.Request(url, headers={"User-Agent": "repogym", **headers})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - http(s) only
            body = resp.read(65536).decode("utf-8", "replace")
            who = ""
            try:
                data = json.loads(body)
                if isinstance(data, dict):
                    who = str(data.get("login") or data.get("username") or data.get("name") or "")
            except ValueError:
                pass
            return True, redact(f"HTTP {resp.status}" + (f", as {who}" if who else ""), [secret])
    except urllib.error.HTTPError as exc:
        ok = False if exc.code in (401, 403) else None
        return ok, redact(f"HTTP {exc.code} {exc.reason}", [secret])
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, redact(f"unreachable ({type(reason).__name__})", [secret])


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
