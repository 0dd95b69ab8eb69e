"""A small chat interface over OpenAI-compatible endpoints and Anthropic.

Specs look like ``"openai/gpt-4o-mini"`` or ``"anthropic/claude-3-5-haiku-latest"``. Providers:

* ``openai`` — any OpenAI-compatible endpoint (default: the OpenAI API; ``endpoint`` overrides).
* ``vllm`` — alias of ``openai``; an ``endpoint`` is required.
* ``sglang`` — alias of ``openai``; an ``endpoint`` is required.
* ``ollama`` — alias of ``openai``; ``endpoint`` defaults to ``http://127.0.0.1:11434/v1``.
* ``anthropic`` — the Anthropic Messages API.

Without an ``endpoint`` argument the SDKs' usual variables are read: ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY``, or ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``.

:meth:`LLM.chat` returns text; :meth:`LLM.tool_turn` runs one turn of a tool-calling
conversation (the wire formats are in :mod:`repogym._llm_wire`).

The ``openai`` and ``anthropic`` SDKs are optional (``pip install 'repogym[llm]'``) and are imported
only when a call is made, so importing this module stays cheap. The SDKs' own retries are disabled;
:class:`LLM` retries 429, 5xx and connection errors itself with the project's one retry policy
(:class:`repogym.http.RetryPolicy`: jittered exponential backoff), honouring ``Retry-After`` (up to
two minutes), then raises a one-line :class:`LLMError`. API keys never appear in errors or reprs.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Literal

from repogym._llm_wire import (
    ToolCall,
    ToolTurn,
    anthropic_request,
    assistant_message,
    openai_request,
    read_anthropic,
    read_openai,
)
from repogym._secrets import redact
from repogym.errors import RepogymError
from repogym.http import RetryPolicy, retry_after_s
from repogym.plugins import PluginError, Registry, instance_of

__all__ = [
    "PRICES_USD_PER_MTOK",
    "ChatResult",
    "ToolCall",
    "ToolTurn",
    "LLM",
    "LLMError",
    "PROVIDER_REGISTRY",
    "Provider",
    "Usage",
    "estimate_cost",
    "parse_llm_spec",
]

PROVIDERS = ("openai", "vllm", "sglang", "ollama", "anthropic")
"""The built-in providers, in the order messages list them."""
OLLAMA_DEFAULT_ENDPOINT = "http://127.0.0.1:11434/v1"


@dataclass(frozen=True)
class Provider:
    """What differs between providers: the wire protocol and where the endpoint comes from."""

    wire: Literal["openai", "anthropic"] = "openai"
    self_hosted: bool = False
    """Runs on the user's machines: no API key needed, no cost estimate."""
    engine: bool = False
    """An inference engine (vLLM, SGLang): an endpoint is required, and per-token logprobs and
    token ids are asked for by default."""
    default_endpoint: str | None = None

    @property
    def base_url_var(self) -> str:
        return "ANTHROPIC_BASE_URL" if self.wire == "anthropic" else "OPENAI_BASE_URL"

    @property
    def api_key_var(self) -> str:
        return "ANTHROPIC_API_KEY" if self.wire == "anthropic" else "OPENAI_API_KEY"


PROVIDER_REGISTRY: Registry[Provider] = Registry(
    "LLM provider",
    group="repogym.llm_providers",
    builtins={
        "openai": Provider(),
        "vllm": Provider(self_hosted=True, engine=True),
        "sglang": Provider(self_hosted=True, engine=True),
        "ollama": Provider(self_hosted=True, default_endpoint=OLLAMA_DEFAULT_ENDPOINT),
        "anthropic": Provider(wire="anthropic"),
    },
    check=instance_of(Provider, "a repogym.llm.Provider"),
)
"""Provider names → :class:`Provider`; plug-ins: entry points of ``repogym.llm_providers``
(an OpenAI-compatible service is one ``Provider(...)``)."""


def provider_names() -> list[str]:
    """The built-in providers in their usual order, then plug-ins by name."""
    return [*PROVIDERS, *(n for n in PROVIDER_REGISTRY.names() if n not in PROVIDERS)]


INSTALL_HINT = "pip install 'repogym[llm]'"
_PLACEHOLDER_KEY = "not-needed"
_MAX_RETRY_AFTER_S = 120.0

# USD per million (input, output) tokens, list prices of the providers' public pages as of 2025.
# Keys match the model name exactly or as a prefix (longest wins), so dated snapshots such as
# "gpt-4o-mini-2024-07-18" are priced too. Unknown models, and the local vllm/ollama providers,
# get cost None.
PRICES_USD_PER_MTOK: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
}


class LLMError(RepogymError, RuntimeError):
    """A failed LLM call, described in one line without secrets."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        model: str = "",
        status: int | None = None,
        rate_limited: bool = False,
        attempts: int = 0,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.status = status
        self.rate_limited = rate_limited
        self.attempts = attempts


@dataclass(frozen=True)
class ChatResult:
    """One chat completion: the text plus accounting."""

    text: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    model: str
    provider: str
    latency_s: float


@dataclass
class Usage:
    """Running totals over the calls made by one :class:`LLM`."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0

    def add(self, result: ChatResult) -> None:
        """Fold one result into the totals."""
        self.calls += 1
        self.input_tokens += result.input_tokens
        self.output_tokens += result.output_tokens
        if result.cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += result.cost_usd


def parse_llm_spec(spec: str) -> tuple[str, str]:
    """Split ``"provider/model"`` into ``(provider, model)``; the model may contain slashes."""
    provider, sep, model = spec.strip().partition("/")
    provider = provider.lower()
    if not sep or not provider or not model:
        raise ValueError(f"LLM spec must look like 'provider/model', got {spec!r}")
    if provider not in PROVIDER_REGISTRY:
        raise ValueError(
            f"unknown LLM provider {provider!r}; expected one of {', '.join(provider_names())}"
        )
    try:
        PROVIDER_REGISTRY.get(provider)
    except PluginError as exc:
        raise ValueError(str(exc)) from None
    return provider, model


def estimate_cost(provider: str, model: str, input_tokens: int, output_tokens: int) -> float | None:
    """USD cost from :data:`PRICES_USD_PER_MTOK`, or None if the model is unknown or local."""
    if provider in PROVIDER_REGISTRY and PROVIDER_REGISTRY.get(provider).self_hosted:
        return None
    name = model.lower()
    matches = [key for key in PRICES_USD_PER_MTOK if name == key or name.startswith(key + "-")]
    if not matches:
        return None
    price_in, price_out = PRICES_USD_PER_MTOK[max(matches, key=len)]
    return (input_tokens * price_in + output_tokens * price_out) / 1_000_000


@dataclass
class _Failure:
    """A normalised SDK exception: what the retry loop needs to know."""

    status: int | None
    retryable: bool
    retry_after_s: float | None
    detail: str


class LLM:
    """Chat with one model: ``LLM("openai/gpt-4o-mini").chat([{"role": "user", ...}])``."""

    def __init__(
        self,
        spec: str,
        *,
        endpoint: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60,
        max_retries: int = 3,
        backoff_s: float = 1.0,
    ) -> None:
        self.provider, self.model = parse_llm_spec(spec)
        self.info = info = PROVIDER_REGISTRY.get(self.provider)
        endpoint = endpoint or os.environ.get(info.base_url_var) or None
        if info.engine and not endpoint:
            raise ValueError(
                f"provider {self.provider!r} needs an endpoint, e.g. http://127.0.0.1:8000/v1"
            )
        endpoint = endpoint or info.default_endpoint
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        self.backoff_s = backoff_s
        self.usage = Usage()
        env_var = info.api_key_var
        key = api_key or os.environ.get(env_var)
        if not key:
            if endpoint is None:
                raise LLMError(
                    f"{self.provider}/{self.model}: no API key; set {env_var}",
                    provider=self.provider,
                    model=self.model,
                )
            key = _PLACEHOLDER_KEY  # local endpoints usually need no key
        self._api_key = key
        self._client: Any = None

    def __repr__(self) -> str:
        return f"LLM({self.provider}/{self.model}, endpoint={self.endpoint!r})"

    # -- public API ---------------------------------------------------------------------------

    def chat(
        self, messages: list[dict[str, Any]], *, max_tokens: int = 1024, temperature: float = 0.0
    ) -> ChatResult:
        """Send ``messages`` and return the reply; retries transient failures, else LLMError."""
        client = self._get_client()

        def call() -> tuple[str, int, int]:
            if self.info.wire == "anthropic":
                return self._anthropic_call(client, messages, max_tokens, temperature)
            return self._openai_call(client, messages, max_tokens, temperature)

        (text, tin, tout), latency = self._with_retries(call)
        result = ChatResult(
            text=text,
            input_tokens=tin,
            output_tokens=tout,
            cost_usd=estimate_cost(self.provider, self.model, tin, tout),
            model=self.model,
            provider=self.provider,
            latency_s=latency,
        )
        self.usage.add(result)
        return result

    def tool_turn(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        max_tokens: int = 4096,
        temperature: float = 0.0,
        logprobs: bool = False,
        token_ids: bool = False,
    ) -> ToolTurn:
        """One model turn of a tool-calling conversation (neutral OpenAI-style ``messages``;
        tools as ``{"name", "description", "parameters"}``). ``logprobs``/``token_ids`` ask an
        OpenAI-compatible endpoint for per-token logprobs and vLLM-style token ids."""
        client = self._get_client()

        def call() -> dict[str, Any]:
            # The conversation is plain JSON already: it goes in ``extra_body``, which the SDKs
            # send as given, instead of through their per-field request transform, whose cost
            # grows with the history (≈0.2 ms per message: 90 ms a call at 400 messages).
            if self.info.wire == "anthropic":
                request = anthropic_request(messages, tools)
                kwargs = self._anthropic_temperature(client, temperature)
                extra = {**kwargs.pop("extra_body", {}), **request}
                resp = client.messages.create(
                    model=self.model, max_tokens=max_tokens, messages=[], extra_body=extra, **kwargs
                )
                return read_anthropic(resp)
            body = openai_request(tools, logprobs=logprobs, token_ids=token_ids)
            body["messages"] = [_openai_message(m) for m in messages]
            resp = client.chat.completions.create(
                model=self.model,
                messages=[],
                max_tokens=max_tokens,
                temperature=temperature,
                extra_body=body,
            )
            return read_openai(resp)

        parts, latency = self._with_retries(call)
        calls: list[ToolCall] = parts["tool_calls"]
        turn = ToolTurn(
            message=assistant_message(parts["text"], calls),
            cost_usd=estimate_cost(
                self.provider, self.model, parts["input_tokens"], parts["output_tokens"]
            ),
            model=self.model,
            provider=self.provider,
            latency_s=latency,
            **parts,
        )
        self.usage.add(
            ChatResult(
                turn.text,
                turn.input_tokens,
                turn.output_tokens,
                turn.cost_usd,
                self.model,
                self.provider,
                latency,
            )
        )
        return turn

    def _with_retries(self, call: Any) -> tuple[Any, float]:
        """``(call(), latency of the successful attempt)``; transient failures are retried."""
        attempt = 0
        while True:
            attempt += 1
            start = time.monotonic()
            try:
                value = call()
            except Exception as exc:  # classified below; re-raised if not an SDK API error
                failure = self._classify(exc)
                if failure is None:
                    raise
            else:
                return value, time.monotonic() - start
            # Raised outside the except block so the SDK exception (whose text may echo
            # the key) is neither the cause nor the context of the LLMError.
            if failure.retryable and attempt <= self.max_retries:
                time.sleep(self._delay(attempt, failure.retry_after_s))
                continue
            raise self._error(failure, attempt)

    # -- SDK plumbing -------------------------------------------------------------------------

    def _get_client(self) -> Any:
        if self._client is not None:
            return self._client
        sdk = self.info.wire
        try:
            module = __import__(sdk)
        except ImportError:
            raise LLMError(
                f"the {sdk!r} package is needed for provider {self.provider!r}: {INSTALL_HINT}",
                provider=self.provider,
                model=self.model,
            ) from None
        cls = module.Anthropic if sdk == "anthropic" else module.OpenAI
        self._client = cls(
            api_key=self._api_key,
            base_url=self.endpoint,
            timeout=self.timeout_s,
            max_retries=0,  # we retry ourselves, honouring Retry-After
        )
        return self._client

    def _openai_call(
        self, client: Any, messages: list[dict[str, Any]], max_tokens: int, temperature: float
    ) -> tuple[str, int, int]:
        resp = client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=max_tokens, temperature=temperature
        )
        text = (resp.choices[0].message.content or "") if resp.choices else ""
        usage = resp.usage
        tin = int(getattr(usage, "prompt_tokens", 0) or 0)
        tout = int(getattr(usage, "completion_tokens", 0) or 0)
        return text, tin, tout

    def _anthropic_call(
        self, client: Any, messages: list[dict[str, Any]], max_tokens: int, temperature: float
    ) -> tuple[str, int, int]:
        system = "\n\n".join(str(m["content"]) for m in messages if m.get("role") == "system")
        rest = [m for m in messages if m.get("role") != "system"]
        kwargs = self._anthropic_temperature(client, temperature)
        if system:
            kwargs["system"] = system
        resp = client.messages.create(
            model=self.model, messages=rest, max_tokens=max_tokens, **kwargs
        )
        text = "".join(getattr(block, "text", "") for block in resp.content if block.type == "text")
        tin = int(getattr(resp.usage, "input_tokens", 0) or 0)
        tout = int(getattr(resp.usage, "output_tokens", 0) or 0)
        return text, tin, tout

    @staticmethod
    def _anthropic_temperature(client: Any, temperature: float) -> dict[str, Any]:
        if _accepts_kwarg(client.messages.create, "temperature"):
            return {"temperature": temperature}
        # Newer SDKs dropped the typed argument; the request field is sent as-is.
        return {"extra_body": {"temperature": temperature}}

    # -- failure handling ---------------------------------------------------------------------

    def _classify(self, exc: Exception) -> _Failure | None:
        """Map an SDK exception to a :class:`_Failure`; None if it is not an SDK API error."""
        if isinstance(exc, ValueError) and str(exc) == "the reply has no choices":
            return _Failure(None, True, None, "the reply has no choices")
        module = type(exc).__module__.split(".")[0]
        if module not in ("openai", "anthropic"):
            return None
        sdk = __import__(module)
        if isinstance(exc, sdk.APIStatusError):
            status = int(exc.status_code)
            retryable = status == 429 or status >= 500
            return _Failure(status, retryable, _retry_after(exc.response.headers), _detail(exc))
        if isinstance(exc, sdk.APITimeoutError):
            return _Failure(None, True, None, f"timed out after {self.timeout_s}s")
        if isinstance(exc, sdk.APIConnectionError):
            return _Failure(None, True, None, "connection error")
        if isinstance(exc, sdk.APIError):
            return _Failure(None, False, None, _detail(exc))
        return None

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), _MAX_RETRY_AFTER_S)
        policy = RetryPolicy(
            retries=self.max_retries, backoff_s=self.backoff_s, max_wait_s=_MAX_RETRY_AFTER_S
        )
        return policy.backoff(attempt)

    def _error(self, failure: _Failure, attempts: int) -> LLMError:
        rate_limited = failure.status == 429
        status = f"HTTP {failure.status}" if failure.status is not None else "no response"
        kind = "rate limited" if rate_limited else "not rate limited"
        detail = self._scrub(failure.detail)
        msg = (
            f"{self.provider}/{self.model} failed after {attempts} attempt(s): "
            f"{status} ({kind}): {detail}"
        )
        return LLMError(
            msg,
            provider=self.provider,
            model=self.model,
            status=failure.status,
            rate_limited=rate_limited,
            attempts=attempts,
        )

    def _scrub(self, text: str) -> str:
        """One line, bounded, with the API key (and any long prefix of it) removed."""
        text = " ".join(text[:2000].split())
        key = self._api_key
        if key and key != _PLACEHOLDER_KEY:
            text = redact(text, [key])
        return text[:300]


def _openai_message(message: dict[str, Any]) -> dict[str, Any]:
    """A neutral message as the Chat Completions API takes it (``is_error`` is ours)."""
    if "is_error" in message:
        return {k: v for k, v in message.items() if k != "is_error"}
    return message


def _accepts_kwarg(func: Any, name: str) -> bool:
    """True if ``func`` has a parameter called ``name`` (SDK signatures vary by version)."""
    import inspect

    try:
        return name in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return True


def _retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), if present."""
    try:
        return retry_after_s(headers)
    except (AttributeError, TypeError):
        return None


def _detail(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return getattr(exc, "message", None) or type(exc).__name__
