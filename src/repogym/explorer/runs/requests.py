"""What a visitor may ask for when starting a run, checked before anything runs.

:class:`RunRequest` is the body of ``POST /api/runs``. An LLM endpoint given by a visitor must be
``http(s)``, carry no credentials and, unless the operator allows it, must not resolve to an
address of the explorer's own network (loopback, private, link-local…): the explorer would
otherwise make requests on the visitor's behalf into places the visitor cannot reach.
:func:`check_endpoint` is called when the run is requested and again right before the agent
starts (a name may resolve differently by then).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["PROVIDERS", "RunRequest", "check_endpoint", "parse_request"]

PROVIDERS = ("openai", "anthropic", "vllm", "sglang", "ollama")


class RunRequest(BaseModel):
    """``POST /api/runs``: which task, which agent, and the agent's settings."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    env: str = Field(min_length=1, max_length=500)
    task: str = Field(min_length=1, max_length=500)
    agent: Literal["oracle", "nop", "command", "llm"]
    command: str | None = Field(None, max_length=10_000)
    provider: Literal["openai", "anthropic", "vllm", "sglang", "ollama"] | None = None
    model: str | None = Field(None, max_length=200, pattern=r"^[\w.:/@+-]+$")
    endpoint: str | None = Field(None, max_length=2000)
    api_key: str | None = Field(None, max_length=4000)
    max_steps: int | None = Field(None, ge=1, le=1000)

    def agent_label(self) -> str:
        """The agent as records show it (never the endpoint or the key)."""
        if self.agent == "llm":
            return f"llm:{self.provider}/{self.model}"
        return self.agent

    def __repr__(self) -> str:  # the key never reaches a log through a repr
        return f"RunRequest(env={self.env!r}, task={self.task!r}, agent={self.agent_label()!r})"

    __str__ = __repr__


def parse_request(body: object) -> RunRequest:
    """The request, or ValueError with one line naming the bad field (never its value)."""
    try:
        req = RunRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first.get("loc", ())) or "body"
        if first.get("type") == "extra_forbidden":
            raise ValueError(f"{name}: unknown field") from None
        raise ValueError(f"{name}: {first.get('msg')}") from None
    if req.agent == "command" and not req.command:
        raise ValueError("command: the command agent needs a command")
    if req.agent == "llm":
        if not req.provider or not req.model:
            raise ValueError("the llm agent needs a provider and a model")
        if not req.endpoint:
            raise ValueError("endpoint: the llm agent needs your model endpoint (http or https)")
    return req


def _is_internal(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


def check_endpoint(url: str, *, allow_internal: bool) -> str | None:
    """Why ``url`` may not be used as a visitor's model endpoint, or None when it may."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "endpoint: not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "endpoint: only http:// and https:// URLs are accepted"
    if not parts.hostname:
        return "endpoint: the URL has no host"
    if parts.username or parts.password:
        return "endpoint: credentials in the URL are not accepted (give the key separately)"
    if allow_internal:
        return None
    try:
        infos = socket.getaddrinfo(parts.hostname, port or 443, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return f"endpoint: {parts.hostname} does not resolve"
    for info in infos:
        if _is_internal(str(info[4][0])):
            return (
                f"endpoint: {parts.hostname} is an address of the explorer's own network; "
                "this explorer only calls public endpoints"
            )
    return None
