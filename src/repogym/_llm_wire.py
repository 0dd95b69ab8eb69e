"""Tool-calling requests and replies in each provider's wire format.

The conversation is kept in one neutral form, OpenAI's chat format (``system``/``user``/
``assistant`` messages, ``tool_calls`` on assistant messages, ``tool`` messages with a
``tool_call_id``), and tools as ``{"name", "description", "parameters"}`` with a JSON schema.
This module turns that form into each API's request and each API's reply into a
:class:`ToolTurn`. It has no SDK imports of its own: replies are read by attribute, the way both
SDKs' response objects (and their ``model_extra`` fields) expose them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCall", "ToolTurn", "anthropic_request", "openai_request"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a model reply. ``arguments`` is None when the model's argument text was
    not a JSON object; ``error`` then says why, and ``raw_arguments`` keeps what it sent."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str
    error: str | None = None


@dataclass(frozen=True)
class ToolTurn:
    """One model reply in a tool-calling conversation, with its accounting.

    ``message`` is the assistant message to append to the neutral conversation (arguments that
    were not valid JSON are sent back as ``{}`` so strict servers accept the history; the raw
    text stays in :attr:`ToolCall.raw_arguments`). Token ids and logprobs are set when the
    endpoint returns them (vLLM's ``return_token_ids``; ``logprobs``)."""

    text: str
    tool_calls: list[ToolCall]
    message: dict[str, Any]
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    model: str
    provider: str
    latency_s: float
    reasoning: str | None = None
    cached_tokens: int | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str, str | None]:
    """``(arguments, raw_text, error)`` from a tool call's argument payload."""
    if isinstance(raw, dict):
        return raw, json.dumps(raw), None
    text = "" if raw is None else str(raw)
    if not text.strip():
        return {}, text, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, text, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return None, text, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, text, None


def assistant_message(text: str, calls: list[ToolCall]) -> dict[str, Any]:
    """The neutral assistant message for a reply."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": c.raw_arguments if c.arguments is not None else "{}",
                },
            }
            for c in calls
        ]
    return message


# -- OpenAI-compatible --------------------------------------------------------------------------


def openai_request(
    tools: list[dict[str, Any]], *, logprobs: bool, token_ids: bool
) -> dict[str, Any]:
    """The request fields of a Chat Completions tool turn besides model, messages and sampling
    (``return_token_ids`` is vLLM's)."""
    body: dict[str, Any] = {"tools": [{"type": "function", "function": t} for t in tools]}
    if logprobs:
        body["logprobs"] = True
    if token_ids:
        body["return_token_ids"] = True
    return body


def _extra(obj: Any, name: str) -> Any:
    """A field the SDK model does not declare (kept in ``model_extra``), or an attribute."""
    extra = getattr(obj, "model_extra", None) or {}
    if name in extra:
        return extra[name]
    return getattr(obj, name, None)


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return list(value)
    return None


def read_openai(resp: Any) -> dict[str, Any]:
    """The parts of a chat completion a :class:`ToolTurn` needs."""
    choices = getattr(resp, "choices", None) or []
    if not choices:
        raise ValueError("the reply has no choices")
    choice = choices[0]
    msg = choice.message
    calls: list[ToolCall] = []
    for n, tc in enumerate(getattr(msg, "tool_calls", None) or [], start=1):
        fn = getattr(tc, "function", None)
        name = str(getattr(fn, "name", "") or "")
        args, raw, error = parse_arguments(getattr(fn, "arguments", None))
        calls.append(ToolCall(str(getattr(tc, "id", "") or f"call_{n}"), name, args, raw, error))
    text = getattr(msg, "content", None) or ""
    reasoning = _extra(msg, "reasoning_content") or _extra(msg, "reasoning")
    usage = getattr(resp, "usage", None)
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    lp = getattr(choice, "logprobs", None)
    content = getattr(lp, "content", None) if lp is not None else None
    logprobs = [float(t.logprob) for t in content] if content else None
    return {
        "text": text,
        "reasoning": reasoning if isinstance(reasoning, str) and reasoning else None,
        "tool_calls": calls,
        "finish_reason": getattr(choice, "finish_reason", None),
        "input_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
        "output_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
        "cached_tokens": int(cached) if isinstance(cached, int) else None,
        "prompt_token_ids": _int_list(_extra(resp, "prompt_token_ids"))
        or _int_list(_extra(choice, "prompt_token_ids")),
        "completion_token_ids": _int_list(_extra(choice, "token_ids")),
        "logprobs": logprobs,
    }


# -- Anthropic ----------------------------------------------------------------------------------


def anthropic_request(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> dict[str, Any]:
    """``system``, ``messages`` and ``tools`` of a Messages API request for a neutral
    conversation. Tool results (and a user message right after them) share one user turn, as the
    API requires turns to alternate."""
    system = "\n\n".join(str(m["content"]) for m in messages if m.get("role") == "system")
    out: list[dict[str, Any]] = []

    def user_blocks() -> list[dict[str, Any]]:
        if out and out[-1]["role"] == "user":
            last = out[-1]
            if isinstance(last["content"], str):
                last["content"] = [{"type": "text", "text": last["content"]}]
            blocks: list[dict[str, Any]] = last["content"]
            return blocks
        fresh: list[dict[str, Any]] = []
        out.append({"role": "user", "content": fresh})
        return fresh

    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": str(m.get("content") or ""),
            }
            if m.get("is_error"):
                block["is_error"] = True
            user_blocks().append(block)
        elif role == "user":
            if out and out[-1]["role"] == "user":
                user_blocks().append({"type": "text", "text": str(m["content"])})
            else:
                out.append({"role": "user", "content": str(m["content"])})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": str(m["content"])})
            for tc in m.get("tool_calls") or []:
                args, _, _ = parse_arguments(tc["function"].get("arguments"))
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": tc["id"],
                        "name": tc["function"]["name"],
                        "input": args or {},
                    }
                )
            out.append({"role": "assistant", "content": blocks or ""})
    request: dict[str, Any] = {
        "messages": out,
        "tools": [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in tools
        ],
    }
    if system:
        request["system"] = system
    return request


def read_anthropic(resp: Any) -> dict[str, Any]:
    """The parts of a Messages API reply a :class:`ToolTurn` needs."""
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    for n, block in enumerate(getattr(resp, "content", None) or [], start=1):
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(str(getattr(block, "text", "")))
        elif kind == "thinking":
            thinking.append(str(getattr(block, "thinking", "")))
        elif kind == "tool_use":
            args, raw, error = parse_arguments(getattr(block, "input", None))
            calls.append(
                ToolCall(
                    str(getattr(block, "id", "") or f"toolu_{n}"),
                    str(getattr(block, "name", "")),
                    args,
                    raw,
                    error,
                )
            )
    usage = getattr(resp, "usage", None)
    cache_read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
    cache_write = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
    return {
        "text": "".join(texts),
        "reasoning": "".join(thinking) or None,
        "tool_calls": calls,
        "finish_reason": getattr(resp, "stop_reason", None),
        "input_tokens": int(getattr(usage, "input_tokens", 0) or 0) + cache_read + cache_write,
        "output_tokens": int(getattr(usage, "output_tokens", 0) or 0),
        "cached_tokens": cache_read or None,
        "prompt_token_ids": None,
        "completion_token_ids": None,
        "logprobs": None,
    }
