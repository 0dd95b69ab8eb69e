"""The admin changes: each one validates its JSON body and edits the settings' JSON form.

:data:`ACTIONS` maps the name in ``POST /admin/api/<name>`` to a function ``(body) -> edit``,
where ``edit(settings_json)`` changes the settings in place; a bad body raises
:class:`repogym.explorer.curation.CurationError` before anything is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from repogym.explorer.curation import CurationError

__all__ = ["ACTIONS", "Edit"]

Edit = Callable[[dict[str, Any]], None]


def _str(body: dict[str, Any], key: str, limit: int = 300) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise CurationError(f"{key} must be a non-empty string up to {limit} characters")
    return value.strip()


def _flag(body: dict[str, Any], key: str, default: bool = True) -> bool:
    value = body.get(key, default)
    if not isinstance(value, bool):
        raise CurationError(f"{key} must be true or false")
    return value


def _toggle(list_key: str, body_flag: str) -> Callable[[dict[str, Any]], Edit]:
    def make(body: dict[str, Any]) -> Edit:
        env, on = _str(body, "env"), _flag(body, body_flag)

        def edit(s: dict[str, Any]) -> None:
            ids = [i for i in s[list_key] if i != env]
            s[list_key] = [*ids, env] if on else ids

        return edit

    return make


def _pin(body: dict[str, Any]) -> Edit:
    """``{env, pinned=true, position?}``: pin (at ``position``, default last) or unpin."""
    env, on = _str(body, "env"), _flag(body, "pinned")
    pos = body.get("position")
    if pos is not None and (isinstance(pos, bool) or not isinstance(pos, int) or pos < 0):
        raise CurationError("position must be a whole number ≥ 0")

    def edit(s: dict[str, Any]) -> None:
        ids = [i for i in s["pinned"] if i != env]
        if on:
            ids.insert(len(ids) if pos is None else pos, env)
        s["pinned"] = ids

    return edit


def _collection(body: dict[str, Any]) -> Edit:
    """``{name, ids}``: set a named collection (dataset or OpenEnv server ids); no ids
    removes it."""
    name, ids = _str(body, "name", 100), body.get("ids") or []
    if not isinstance(ids, list):
        raise CurationError("ids must be a list of dataset or OpenEnv server ids")

    def edit(s: dict[str, Any]) -> None:
        if ids:
            s["collections"][name] = ids
        else:
            s["collections"].pop(name, None)

    return edit


def _banner(body: dict[str, Any]) -> Edit:
    """``{text, link?, link_text?}``; an empty text removes the banner."""
    text = body.get("text") or ""

    def edit(s: dict[str, Any]) -> None:
        if not text:
            s["banner"] = None
        else:
            s["banner"] = {
                "text": text,
                "link": body.get("link") or "",
                "link_text": body.get("link_text") or "",
            }

    return edit


def _runs(body: dict[str, Any]) -> Edit:
    """``{enabled, env?}``: runs on/off globally, or for one environment."""
    on = _flag(body, "enabled")
    env = _str(body, "env") if body.get("env") is not None else None

    def edit(s: dict[str, Any]) -> None:
        if env is None:
            s["runs"]["enabled"] = on
            return
        off = [i for i in s["runs"]["off"] if i != env]
        s["runs"]["off"] = off if on else [*off, env]

    return edit


def _limits(body: dict[str, Any]) -> Edit:
    """``{limits: {max_concurrent, per_hour, time_limit_s, budget_usd, max_steps}}``;
    a null value removes that limit."""
    limits = body.get("limits")
    if not isinstance(limits, dict):
        raise CurationError("limits must be an object")

    def edit(s: dict[str, Any]) -> None:
        for k, v in limits.items():
            if v is None:
                s["limits"].pop(k, None)
            else:
                s["limits"][k] = v

    return edit


def _agents(body: dict[str, Any]) -> Edit:
    """``{agents: [names] | null}``: the agents offered (null: the explorer's own)."""
    agents = body.get("agents")
    if agents is not None and not isinstance(agents, list):
        raise CurationError("agents must be a list of agent names or null")

    def edit(s: dict[str, Any]) -> None:
        s["agents"] = agents

    return edit


def _rollout(body: dict[str, Any]) -> Edit:
    """``{run, hidden=true}``: take a rollout off the community view (or put it back)."""
    run, on = _str(body, "run"), _flag(body, "hidden")

    def edit(s: dict[str, Any]) -> None:
        ids = [i for i in s["community_hidden"] if i != run]
        s["community_hidden"] = [*ids, run] if on else ids

    return edit


def _stop(body: dict[str, Any]) -> Edit:
    """``{run, clear=false}``: ask a running rollout to stop (or forget the request)."""
    run, clear = _str(body, "run"), _flag(body, "clear", False)

    def edit(s: dict[str, Any]) -> None:
        if clear:
            s["stop"].pop(run, None)
        else:
            s["stop"].setdefault(run, round(time.time(), 3))

    return edit


ACTIONS: dict[str, Callable[[dict[str, Any]], Edit]] = {
    "hide": _toggle("hidden", "hidden"),
    "pin": _pin,
    "feature": _toggle("featured", "featured"),
    "collection": _collection,
    "banner": _banner,
    "runs": _runs,
    "limits": _limits,
    "agents": _agents,
    "rollout": _rollout,
    "stop": _stop,
}
