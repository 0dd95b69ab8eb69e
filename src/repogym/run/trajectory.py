"""Agent trajectories in Harbor's Agent Trajectory Interchange Format (ATIF).

A trial's trajectory is ``<trial>/agent/trajectory.json``, where Harbor's viewer looks for it.
Steps: the system prompt (``system``), the instruction (``user``), then one ``agent`` step per
model call with its text, reasoning, tool calls, the observation of each call (matched by
``source_call_id``) and metrics: token counts, cost, and — when the endpoint returns them —
prompt/completion token ids and per-token logprobs, so a trainer need not re-tokenise. Notes the
loop adds between model calls (a reply without a tool call, a limit reached) are ``system``
steps. Nothing secret enters: the recorder is given only messages, tool calls and observations.

Written as ATIF v1.8 (v1.8 added audio content parts; repogym writes text only, so a v1.8 file
differs from a v1.7 one by its ``schema_version``). :func:`read_trajectory` reads any ATIF v1.x
file, so trajectories written by earlier versions (v1.7) still read.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from pathlib import Path
from typing import Any

from repogym import __version__
from repogym._llm_wire import ToolTurn
from repogym.atomic import atomic_write

__all__ = ["ATIF_VERSION", "TrajectoryError", "TrajectoryRecorder", "read_trajectory"]

ATIF_VERSION = "ATIF-v1.8"
_ATIF_V1 = re.compile(r"ATIF-v1\.\d+")


class TrajectoryError(ValueError):
    """A file that is not an ATIF v1.x trajectory (one line)."""


def read_trajectory(path: Path) -> dict[str, Any]:
    """A trajectory file as a dict: any ATIF v1.x (v1.7 as written before, v1.8 now).

    Checks what readers rely on — a JSON object with an ATIF v1 ``schema_version``, an ``agent``
    object and a list of ``steps`` objects — and raises :class:`TrajectoryError` otherwise."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TrajectoryError(f"{path}: cannot read: {exc}") from None
    if not isinstance(doc, dict):
        raise TrajectoryError(f"{path}: not a JSON object")
    version = doc.get("schema_version")
    if not isinstance(version, str) or not _ATIF_V1.fullmatch(version):
        raise TrajectoryError(f"{path}: schema_version {version!r} is not ATIF v1.x")
    steps = doc.get("steps")
    if not isinstance(doc.get("agent"), dict) or not isinstance(steps, list):
        raise TrajectoryError(f"{path}: an ATIF trajectory needs an agent and a list of steps")
    if not all(isinstance(step, dict) for step in steps):
        raise TrajectoryError(f"{path}: every step must be an object")
    return doc


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat()


class TrajectoryRecorder:
    """Collects the steps of one agent run and writes them as ATIF JSON."""

    def __init__(
        self,
        *,
        session_id: str,
        agent_name: str,
        model_name: str,
        tools: list[dict[str, Any]],
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.agent: dict[str, Any] = {
            "name": agent_name,
            "version": __version__,
            "model_name": model_name,
            "tool_definitions": [{"type": "function", "function": t} for t in tools],
        }
        if extra:
            self.agent["extra"] = extra
        self.steps: list[dict[str, Any]] = []
        self.totals = {"prompt": 0, "completion": 0, "cached": 0, "cost": 0.0}
        self.unpriced = 0

    def _add(self, step: dict[str, Any]) -> dict[str, Any]:
        step = {"step_id": len(self.steps) + 1, "timestamp": _now(), **step}
        self.steps.append(step)
        return step

    def system(self, message: str) -> None:
        self._add({"source": "system", "message": message})

    def user(self, message: str) -> None:
        self._add({"source": "user", "message": message})

    def agent_turn(self, turn: ToolTurn) -> dict[str, Any]:
        """Record a model reply; its observations are added with :meth:`observe`."""
        metrics: dict[str, Any] = {
            "prompt_tokens": turn.input_tokens,
            "completion_tokens": turn.output_tokens,
        }
        if turn.cached_tokens is not None:
            metrics["cached_tokens"] = turn.cached_tokens
        if turn.cost_usd is not None:
            metrics["cost_usd"] = turn.cost_usd
        else:
            self.unpriced += 1
        for key in ("prompt_token_ids", "completion_token_ids", "logprobs"):
            value = getattr(turn, key)
            if value is not None:
                metrics[key] = value
        metrics["extra"] = {"latency_s": round(turn.latency_s, 4)}
        if turn.finish_reason:
            metrics["extra"]["finish_reason"] = turn.finish_reason
        step: dict[str, Any] = {
            "source": "agent",
            "model_name": turn.model,
            "message": turn.text,
            "llm_call_count": 1,
            "metrics": metrics,
        }
        if turn.reasoning:
            step["reasoning_content"] = turn.reasoning
        if turn.tool_calls:
            calls = []
            for c in turn.tool_calls:
                call: dict[str, Any] = {
                    "tool_call_id": c.id,
                    "function_name": c.name,
                    "arguments": c.arguments if c.arguments is not None else {},
                }
                if c.error is not None:
                    call["extra"] = {"raw_arguments": c.raw_arguments, "error": c.error}
                calls.append(call)
            step["tool_calls"] = calls
        self.totals["prompt"] += turn.input_tokens
        self.totals["completion"] += turn.output_tokens
        self.totals["cached"] += turn.cached_tokens or 0
        self.totals["cost"] += turn.cost_usd or 0.0
        return self._add(step)

    def observe(self, step: dict[str, Any], call_id: str, content: str, is_error: bool) -> None:
        """Attach one tool call's result to the agent step that made the call."""
        result: dict[str, Any] = {"source_call_id": call_id, "content": content}
        if is_error:
            result["extra"] = {"is_error": True}
        step.setdefault("observation", {"results": []})["results"].append(result)

    def to_json(self, *, stop_reason: str, notes: str | None = None) -> dict[str, Any]:
        """The whole trajectory as an ATIF document."""
        priced = self.unpriced == 0
        doc: dict[str, Any] = {
            "schema_version": ATIF_VERSION,
            "session_id": self.session_id,
            "agent": self.agent,
            "steps": self.steps,
            "final_metrics": {
                "total_prompt_tokens": self.totals["prompt"],
                "total_completion_tokens": self.totals["completion"],
                "total_cached_tokens": self.totals["cached"],
                "total_cost_usd": round(float(self.totals["cost"]), 8) if priced else None,
                "total_steps": len(self.steps),
                "extra": {"stop_reason": stop_reason, "unpriced_model_calls": self.unpriced},
            },
        }
        if doc["final_metrics"]["total_cost_usd"] is None:
            del doc["final_metrics"]["total_cost_usd"]
        if notes:
            doc["notes"] = notes
        return doc

    def write(self, path: Path, *, stop_reason: str, notes: str | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = self.to_json(stop_reason=stop_reason, notes=notes)
        atomic_write(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
