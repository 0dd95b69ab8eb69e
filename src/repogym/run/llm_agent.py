"""The built-in coding agent: ``--agent llm:<provider>/<model>``.

A small tool-calling loop over :class:`repogym.llm.LLM`. The model gets the system prompt
(:data:`SYSTEM_PROMPT`), the task's instruction and five tools
(:data:`repogym.run.agent_tools.TOOLS`), and acts until it calls ``finish`` or a limit stops it
(model calls, tokens, cost, wall time, or replies without a tool call). Every model call, tool
call and observation is recorded as an ATIF trajectory (:mod:`repogym.run.trajectory`).

The loop (:func:`run_loop`) knows only a :class:`~repogym.run.agent_tools.Workspace`, so the
same code drives a trial's sandbox session and a remote OpenEnv episode.

Secrets: the API key comes from ``--agent-opt api_key=…`` or the SDK's environment variable; it
is given to the HTTP client only — never to the sandbox, the trajectory, the result or a log.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from repogym._secrets import redact_url
from repogym.llm import LLM, LLMError, ToolTurn
from repogym.run.agent_tools import TOOLS, SessionWorkspace, ToolResult, Workspace, run_tool
from repogym.run.agents import AgentContext, AgentOutcome
from repogym.run.models import EventSink, ModelEvent, ToolEvent
from repogym.run.trajectory import TrajectoryRecorder
from repogym.sandbox import Session
from repogym.taskdir import Task

__all__ = [
    "SYSTEM_PROMPT",
    "LLMAgent",
    "LLMAgentOptions",
    "LoopResult",
    "parse_agent_options",
    "run_loop",
]

AGENT_NAME = "repogym-llm"

SYSTEM_PROMPT = """\
You are a software engineer working on a task in a Linux sandbox. The working directory is \
{workdir}; relative paths are resolved there.

Act through the tools: run commands with bash, read files with read_file, change them with \
str_replace or write_file. Work step by step: explore the code, reproduce the problem if there is \
one, make the change yourself, and check it by running the relevant tests or commands.

Your work is graded afterwards by checks you cannot see, run on the files you leave in the \
working directory. Editing or deleting tests does not help: the checks bring their own copy.
{network}
When the task is done, call finish with a short summary of what you changed."""

NO_NETWORK = "The network is not available in this sandbox.\n"

NO_TOOL_NUDGE = (
    "Your reply had no tool call. Use the tools to work on the task, and call finish when it "
    "is done."
)
CUT_OFF_NUDGE = (
    "Your reply was cut off at the output token limit before a complete tool call. Use "
    "shorter tool calls (e.g. str_replace on a part instead of rewriting a whole file)."
)


class LLMAgentOptions(BaseModel):
    """``--agent-opt key=value`` settings of the built-in agent (documented in docs/agents.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str | None = Field(None, description="Base URL (else *_BASE_URL or the default).")
    api_key: str | None = Field(None, description="Key (else OPENAI_API_KEY / ANTHROPIC_API_KEY).")
    max_steps: int = Field(50, ge=1, description="Model calls at most.")
    max_tokens: int | None = Field(None, ge=1, description="Input+output tokens over the run.")
    max_output_tokens: int = Field(4096, ge=16, description="Output tokens per model call.")
    max_cost_usd: float | None = Field(None, gt=0, description="Cost over the run (priced models).")
    time_limit_s: float | None = Field(None, gt=0, description="Wall time (≤ the task's timeout).")
    temperature: float = Field(0.0, ge=0, le=2)
    command_timeout_s: float = Field(120, gt=0, description="Default timeout of a bash call.")
    max_observation_chars: int = Field(16000, ge=200, description="Tool output kept per call.")
    max_no_tool_replies: int = Field(3, ge=1, description="Replies without a tool call in a row.")
    logprobs: bool | None = Field(None, description="Ask for logprobs (default: vllm/sglang).")
    token_ids: bool | None = Field(None, description="Ask for token ids (default: vllm/sglang).")
    retries: int = Field(3, ge=0, le=10, description="Retries of 429/5xx/connection errors.")
    request_timeout_s: float = Field(300, gt=0, description="Timeout of one model request.")
    system_prompt_file: Path | None = Field(None, description="Replace the system prompt.")

    def public(self) -> dict[str, Any]:
        """The options as recorded in results and trajectories: no key, no URL credentials."""
        data = self.model_dump(mode="json", exclude_none=True, exclude={"api_key"})
        if self.endpoint:
            data["endpoint"] = redact_url(self.endpoint)
        return data


def parse_agent_options(pairs: dict[str, str] | None) -> LLMAgentOptions:
    """Validate ``--agent-opt`` pairs; a bad one raises ValueError naming the option."""
    try:
        return LLMAgentOptions.model_validate(pairs or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first.get("loc", ())) or "?"
        if first.get("type") == "extra_forbidden":
            known = ", ".join(LLMAgentOptions.model_fields)
            raise ValueError(f"--agent-opt {name}: unknown option; known: {known}") from None
        raise ValueError(f"--agent-opt {name}: {first.get('msg')}") from None


@dataclass
class LoopResult:
    """How a run of the loop ended."""

    stop_reason: str
    """finished | max_steps | max_tokens | max_cost | time_limit | no_tool_calls | llm_error"""
    model_calls: int = 0
    tool_calls: int = 0
    error: str | None = None
    summary: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    events: list[str] = field(default_factory=list)

    def usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 8),
            "model_calls": self.model_calls,
        }


def system_prompt(workdir: str, network: bool, template: str | None = None) -> str:
    """The system prompt for a working directory and network policy."""
    return (template or SYSTEM_PROMPT).format(
        workdir=workdir, network="" if network else NO_NETWORK
    )


def run_loop(
    llm: LLM,
    ws: Workspace,
    instruction: str,
    opts: LLMAgentOptions,
    *,
    time_limit_s: float,
    recorder: TrajectoryRecorder,
    network: bool,
    on_event: EventSink | None = None,
) -> LoopResult:
    """Let the model work on ``instruction`` in ``ws`` until it finishes or a limit stops it."""
    template = opts.system_prompt_file.read_text() if opts.system_prompt_file else None
    prompt = system_prompt(ws.workdir, network, template)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": prompt},
        {"role": "user", "content": instruction},
    ]
    recorder.system(prompt)
    recorder.user(instruction)
    deadline = time.monotonic() + time_limit_s
    result = LoopResult(stop_reason="")
    sample = opts.logprobs, opts.token_ids
    self_hosted = llm.info.engine
    logprobs = self_hosted if sample[0] is None else sample[0]
    token_ids = self_hosted if sample[1] is None else sample[1]
    no_tool = 0

    def stop_for_limit() -> str | None:
        if result.model_calls >= opts.max_steps:
            return "max_steps"
        if opts.max_tokens and result.input_tokens + result.output_tokens >= opts.max_tokens:
            return "max_tokens"
        if opts.max_cost_usd and (result.cost_usd or 0.0) >= opts.max_cost_usd:
            return "max_cost"
        if deadline - time.monotonic() <= 0:
            return "time_limit"
        return None

    while True:
        reason = stop_for_limit()
        if reason:
            result.stop_reason = reason
            break
        budget = opts.max_output_tokens
        if opts.max_tokens:
            used = result.input_tokens + result.output_tokens
            budget = max(16, min(budget, opts.max_tokens - used))
        try:
            turn: ToolTurn = llm.tool_turn(
                messages,
                TOOLS,
                max_tokens=budget,
                temperature=opts.temperature,
                logprobs=logprobs,
                token_ids=token_ids,
            )
        except LLMError as exc:
            result.stop_reason, result.error = "llm_error", str(exc)
            break
        result.model_calls += 1
        result.input_tokens += turn.input_tokens
        result.output_tokens += turn.output_tokens
        if turn.cost_usd is None:
            result.cost_usd = None
        elif result.cost_usd is not None:
            result.cost_usd += turn.cost_usd
        step = recorder.agent_turn(turn)
        messages.append(turn.message)
        ModelEvent(text=turn.text, tool_calls=[c.name for c in turn.tool_calls]).send(on_event)
        if not turn.tool_calls:
            no_tool += 1
            if no_tool >= opts.max_no_tool_replies:
                result.stop_reason = "no_tool_calls"
                result.summary = turn.text
                break
            cut = turn.finish_reason in ("length", "max_tokens")
            nudge = CUT_OFF_NUDGE if cut else NO_TOOL_NUDGE
            messages.append({"role": "user", "content": nudge})
            recorder.user(nudge)
            continue
        no_tool = 0
        finished = _run_tools(turn, ws, opts, deadline, result, recorder, step, messages, on_event)
        if finished:
            result.stop_reason = "finished"
            break
    return result


def _run_tools(
    turn: ToolTurn,
    ws: Workspace,
    opts: LLMAgentOptions,
    deadline: float,
    result: LoopResult,
    recorder: TrajectoryRecorder,
    step: dict[str, Any],
    messages: list[dict[str, Any]],
    on_event: EventSink | None,
) -> bool:
    """Run the tool calls of one reply in order, recording each observation; whether the
    model called ``finish`` (the calls after it are skipped)."""
    finished = False
    for call in turn.tool_calls:
        if finished:
            res = ToolResult("skipped: finish was called earlier in this reply", is_error=True)
        elif call.arguments is None:
            res = ToolResult(
                f"error: {call.error}; send the arguments as one JSON object", is_error=True
            )
        else:
            remaining = max(1.0, deadline - time.monotonic())
            res = run_tool(
                call.name,
                call.arguments,
                ws,
                default_timeout_s=min(opts.command_timeout_s, remaining),
                max_timeout_s=remaining,
                max_chars=opts.max_observation_chars,
            )
        result.tool_calls += 1
        recorder.observe(step, call.id, res.content, res.is_error)
        message: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": call.id,
            "content": res.content,
        }
        if res.is_error:
            message["is_error"] = True
        messages.append(message)
        ToolEvent(
            name=call.name, arguments=call.arguments, is_error=res.is_error, output=res.content
        ).send(on_event)
        if res.finished:
            finished = True
            result.summary = res.content
    return finished


class LLMAgent:
    """``llm:<provider>/<model>``: the built-in tool-calling agent on a trial's sandbox."""

    name = "llm"

    def __init__(self, spec: str, options: dict[str, str] | None = None) -> None:
        self.spec = spec
        self.options = parse_agent_options(options)
        self._llm()  # an unknown provider, a missing key or SDK fails here, before any build

    def _llm(self, time_limit_s: float | None = None) -> LLM:
        opts = self.options
        timeout = opts.request_timeout_s
        if time_limit_s is not None:
            timeout = min(timeout, max(1.0, time_limit_s))
        return LLM(
            self.spec,
            endpoint=opts.endpoint,
            api_key=opts.api_key,
            timeout_s=timeout,
            max_retries=opts.retries,
        )

    def run(self, session: Session, task: Task, ctx: AgentContext) -> AgentOutcome:
        opts = self.options
        limit = min(ctx.timeout_s, opts.time_limit_s or math.inf)
        llm = self._llm(limit)
        recorder = TrajectoryRecorder(
            session_id=ctx.trial_name or uuid.uuid4().hex,
            agent_name=AGENT_NAME,
            model_name=f"{llm.provider}/{llm.model}",
            tools=TOOLS,
            extra={"options": opts.public(), "task": task.id},
        )
        start = time.monotonic()
        result = LoopResult(stop_reason="error")
        try:
            result = run_loop(
                llm,
                SessionWorkspace(session, ctx),
                ctx.instruction,
                opts,
                time_limit_s=limit,
                recorder=recorder,
                network=ctx.network,
                on_event=ctx.on_event,
            )
        finally:
            if ctx.logs_dir is not None:
                recorder.write(ctx.logs_dir / "trajectory.json", stop_reason=result.stop_reason)
        return AgentOutcome(
            exit_code=0 if result.error is None else 1,
            duration_s=time.monotonic() - start,
            output_tail=result.summary[-4000:],
            metadata={
                "model": f"{llm.provider}/{llm.model}",
                "usage": result.usage(),
                "steps": result.model_calls,
                "tool_calls": result.tool_calls,
                "stop_reason": result.stop_reason,
                **({"trajectory": "agent/trajectory.json"} if ctx.logs_dir else {}),
            },
            error=result.error,
        )
