"""Tests for repogym.llm against local stub servers (no network beyond 127.0.0.1)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from repogym.llm import LLM, LLMError, Usage, estimate_cost, parse_llm_spec
from tests.llm.stub_servers import anthropic_ok, anthropic_stub, error, openai_ok, openai_stub

SECRET = "sk-test-ZQX9-very-distinctive-secret-4242"
MESSAGES = [{"role": "user", "content": "say hello"}]


@pytest.fixture(autouse=True)
def _no_env_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def _openai(stub, spec: str = "openai/gpt-4o-mini", **kw) -> LLM:
    kw.setdefault("backoff_s", 0.001)
    return LLM(spec, endpoint=stub.base_url + "/v1", **kw)


def _anthropic(stub, spec: str = "anthropic/claude-3-5-haiku-20241022", **kw) -> LLM:
    kw.setdefault("backoff_s", 0.001)
    return LLM(spec, endpoint=stub.base_url, **kw)


# -- specs ----------------------------------------------------------------------------------


def test_parse_spec() -> None:
    assert parse_llm_spec("openai/gpt-4o-mini") == ("openai", "gpt-4o-mini")
    assert parse_llm_spec("vllm/meta-llama/Llama-3-8B") == ("vllm", "meta-llama/Llama-3-8B")
    assert parse_llm_spec("Anthropic/claude-3-5-haiku") == ("anthropic", "claude-3-5-haiku")


@pytest.mark.parametrize("spec", ["bogus/model", "openai", "openai/", "/gpt-4o"])
def test_bad_spec(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_llm_spec(spec)
    assert "\n" not in str(info.value)


def test_unknown_provider_message() -> None:
    with pytest.raises(ValueError, match="unknown LLM provider 'bogus'"):
        LLM("bogus/model", endpoint="http://127.0.0.1:1/v1")


def test_vllm_requires_endpoint_and_ollama_defaults() -> None:
    with pytest.raises(ValueError, match="endpoint"):
        LLM("vllm/some-model")
    llm = LLM("ollama/llama3")
    assert llm.endpoint == "http://127.0.0.1:11434/v1"


def test_missing_key_for_hosted_api() -> None:
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        LLM("openai/gpt-4o-mini")
    with pytest.raises(LLMError, match="ANTHROPIC_API_KEY"):
        LLM("anthropic/claude-3-5-haiku")


# -- normal answers and accounting ----------------------------------------------------------


def test_openai_answer_and_accounting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with openai_stub(openai_ok("hi there", 1000, 500)) as stub:
        llm = _openai(stub)
        result = llm.chat(MESSAGES, max_tokens=50, temperature=0.2)
        llm.chat(MESSAGES)
    assert result.text == "hi there"
    assert (result.input_tokens, result.output_tokens) == (1000, 500)
    assert result.cost_usd == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)
    assert (result.provider, result.model) == ("openai", "gpt-4o-mini")
    assert result.latency_s >= 0
    sent = stub.requests[0]
    assert sent["json"]["model"] == "gpt-4o-mini"
    assert sent["json"]["max_tokens"] == 50
    assert sent["json"]["temperature"] == 0.2
    assert sent["json"]["messages"] == MESSAGES
    assert sent["headers"]["authorization"] == f"Bearer {SECRET}"
    assert llm.usage == Usage(
        calls=2, input_tokens=2000, output_tokens=1000, cost_usd=2 * result.cost_usd
    )


def test_anthropic_answer_and_system_prompt() -> None:
    with anthropic_stub(anthropic_ok("bonjour", 2000, 100)) as stub:
        llm = _anthropic(stub, api_key=SECRET)
        result = llm.chat([{"role": "system", "content": "be brief"}, *MESSAGES], max_tokens=64)
    assert result.text == "bonjour"
    assert (result.input_tokens, result.output_tokens) == (2000, 100)
    assert result.cost_usd == pytest.approx((2000 * 0.80 + 100 * 4.00) / 1e6)
    sent = stub.requests[0]
    assert sent["path"] == "/v1/messages"
    # Older SDKs send x-api-key, newer ones a bearer token.
    auth = sent["headers"].get("x-api-key") or sent["headers"].get("authorization")
    assert auth in (SECRET, f"Bearer {SECRET}")
    assert sent["json"]["system"] == "be brief"
    assert sent["json"]["messages"] == MESSAGES
    assert sent["json"]["max_tokens"] == 64
    assert sent["json"]["temperature"] == 0.0
    assert llm.usage.calls == 1 and llm.usage.cost_usd == pytest.approx(result.cost_usd)


def test_local_endpoint_without_key_and_unknown_cost() -> None:
    with openai_stub(openai_ok("ok", 3, 4)) as stub:
        llm = _openai(stub, spec="vllm/Qwen/Qwen2.5-0.5B")
        result = llm.chat(MESSAGES)
    assert result.text == "ok" and result.cost_usd is None
    assert stub.requests[0]["json"]["model"] == "Qwen/Qwen2.5-0.5B"
    assert llm.usage.unpriced_calls == 1 and llm.usage.cost_usd == 0.0


def test_estimate_cost_table() -> None:
    assert estimate_cost("openai", "gpt-4o-mini-2024-07-18", 1_000_000, 0) == pytest.approx(0.15)
    assert estimate_cost("openai", "gpt-4o", 0, 1_000_000) == pytest.approx(10.0)
    assert estimate_cost("openai", "my-finetune", 10, 10) is None
    assert estimate_cost("ollama", "gpt-4o", 10, 10) is None


# -- retries --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_500_recovers_on_retry(kind: str) -> None:
    ok = openai_ok("recovered") if kind == "openai" else anthropic_ok("recovered")
    make_stub, make_llm = (
        (openai_stub, _openai) if kind == "openai" else (anthropic_stub, _anthropic)
    )
    with make_stub(error(500), error(503), ok) as stub:
        result = make_llm(stub, api_key=SECRET).chat(MESSAGES)
    assert result.text == "recovered"
    assert len(stub.requests) == 3


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_429_with_retry_after_recovers(kind: str) -> None:
    ok = openai_ok("later") if kind == "openai" else anthropic_ok("later")
    make_stub, make_llm = (
        (openai_stub, _openai) if kind == "openai" else (anthropic_stub, _anthropic)
    )
    with make_stub(error(429, "slow down", {"Retry-After": "1"}), ok) as stub:
        llm = make_llm(stub, api_key=SECRET)
        start = time.monotonic()
        result = llm.chat(MESSAGES)
        elapsed = time.monotonic() - start
    assert result.text == "later"
    assert len(stub.requests) == 2
    assert elapsed >= 0.9  # honoured Retry-After, not the 1 ms backoff


def test_persistent_failure_raises_after_max_retries() -> None:
    with openai_stub(error(503, "overloaded")) as stub:
        llm = _openai(stub, api_key=SECRET, max_retries=2)
        with pytest.raises(LLMError) as info:
            llm.chat(MESSAGES)
    assert len(stub.requests) == 3  # first try + 2 retries
    err = info.value
    msg = str(err)
    assert "\n" not in msg
    assert "openai/gpt-4o-mini" in msg and "HTTP 503" in msg and "not rate limited" in msg
    assert (err.status, err.rate_limited, err.attempts) == (503, False, 3)
    assert llm.usage.calls == 0


def test_persistent_rate_limit_is_named() -> None:
    with anthropic_stub(error(429, "rate limit", {"Retry-After": "0"})) as stub:
        llm = _anthropic(stub, api_key=SECRET, max_retries=1)
        with pytest.raises(LLMError, match=r"HTTP 429 \(rate limited\)") as info:
            llm.chat(MESSAGES)
    assert len(stub.requests) == 2
    assert info.value.rate_limited and info.value.provider == "anthropic"


def test_client_error_not_retried() -> None:
    with openai_stub(error(400, "bad request")) as stub, pytest.raises(LLMError, match="HTTP 400"):
        _openai(stub, api_key=SECRET).chat(MESSAGES)
    assert len(stub.requests) == 1


def test_connection_error_retried_then_fails() -> None:
    with openai_stub() as stub:
        endpoint = stub.base_url + "/v1"
    # The server is shut down: every attempt is refused.
    llm = LLM(
        "openai/gpt-4o-mini", endpoint=endpoint, api_key=SECRET, max_retries=2, backoff_s=0.001
    )
    with pytest.raises(LLMError, match="no response") as info:
        llm.chat(MESSAGES)
    assert info.value.attempts == 3 and info.value.status is None


def test_timeout_is_applied() -> None:
    llm = LLM("openai/gpt-4o-mini", endpoint="http://127.0.0.1:9/v1", timeout_s=7)
    assert llm._get_client().timeout == 7


# -- secret hygiene -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_api_key_never_leaks(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Services echo (parts of) the key in 401 messages; the error must not.
    echo = f"Incorrect API key provided: {SECRET}. Also {SECRET[:12]}...{SECRET[-6:]}"
    env = "OPENAI_API_KEY" if kind == "openai" else "ANTHROPIC_API_KEY"
    monkeypatch.setenv(env, SECRET)
    make_stub, make_llm = (
        (openai_stub, _openai) if kind == "openai" else (anthropic_stub, _anthropic)
    )
    with make_stub(error(401, echo)) as stub:
        llm = make_llm(stub)
        with pytest.raises(LLMError) as info:
            llm.chat(MESSAGES)
    err = info.value
    texts = [str(err), repr(err), repr(llm), str(err.args), repr(vars(err)), repr(llm.usage)]
    for text in texts:
        assert SECRET not in text
        assert SECRET[:12] not in text
    assert "HTTP 401" in str(err)
    assert err.__cause__ is None and err.__context__ is None


# -- import hygiene -------------------------------------------------------------------------


def test_import_does_not_load_sdks() -> None:
    code = (
        "import sys, repogym, repogym.llm\n"
        "bad = [m for m in ('openai', 'anthropic', 'httpx') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_sdk_message() -> None:
    code = (
        "import sys\n"
        "sys.modules['openai'] = None\n"
        "from repogym.llm import LLM, LLMError\n"
        "llm = LLM('ollama/llama3')\n"
        "try:\n"
        "    llm.chat([{'role': 'user', 'content': 'x'}])\n"
        "except LLMError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'repogym[llm]'" in out.stdout
