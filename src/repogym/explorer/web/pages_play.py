"""The OpenEnv playground page (``/play/<env>``) and the forms it shows, built from the server's
``/schema``.

:func:`action_forms` turns the server's ``action`` JSON schema into one form per action kind: a
discriminated union (``oneOf``/``anyOf`` of object schemas, optionally with a
``discriminator``) gives one form per branch; a flat object whose ``type`` field is an ``enum``
(repogym's ``RepoAction``) gives one form per value, with that kind's own fields when the server
lists its actions at ``GET /tools``; anything else is one form. A field's widget follows its
schema: string → ``text`` (``textarea`` for long text such as ``content`` or ``command``),
integer/number → ``number``, boolean → ``checkbox``, ``enum`` → ``select``, ``const`` → fixed,
object/array/anything else → ``json``. ``metadata`` (where trainer-only data such as an
orchestrator token would go) never gets a field.

The page itself holds no data but ids and titles (escaped like every page); the forms are drawn
by ``static/play.js`` from ``GET /api/play/<env>/schema``, with ``textContent`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repogym.explorer.web.pages import Assets, e, env_url, layout

__all__ = ["action_forms", "field_spec", "play_page", "play_url", "reset_fields"]

MAX_FORMS = 50
MAX_FIELDS = 100
MAX_OPTIONS = 500
MAX_REF_HOPS = 16
LONG_TEXT = frozenset(
    {
        "body",
        "code",
        "command",
        "content",
        "diff",
        "input",
        "message",
        "patch",
        "prompt",
        "query",
        "script",
        "source",
        "stdin",
        "text",
    }
)
"""String fields shown as a textarea (by name)."""
HIDDEN = frozenset({"metadata"})


def play_url(env_id: str) -> str:
    """URL of an environment's playground page."""
    return "/play/" + env_url(env_id).removeprefix("/d/")


def api_url(env_id: str) -> str:
    """Base URL of an environment's playground API."""
    return "/api/play/" + env_url(env_id).removeprefix("/d/")


def bridge_path(env_id: str) -> str:
    """Path of an environment's MCP bridge endpoint (Streamable HTTP)."""
    return "/mcp/o/" + env_url(env_id).removeprefix("/d/")


# -- forms from the action schema ---------------------------------------------------------


def _text(value: Any, limit: int = 400) -> str:
    flat = " ".join(str(value or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _resolve(schema: Any, root: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with local ``$ref`` s (``#/$defs/…``, ``#/definitions/…``) followed; the
    referring schema's own keys (title, description, default) win over the target's."""
    if not isinstance(schema, dict):
        return {}
    out = dict(schema)
    for _ in range(MAX_REF_HOPS):
        ref = out.get("$ref")
        if not isinstance(ref, str):
            break
        target: Any = None
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                defs = root.get(prefix[2:-1])
                target = defs.get(ref[len(prefix) :]) if isinstance(defs, dict) else None
        out.pop("$ref")
        if not isinstance(target, dict):
            break
        out = {**target, **out}
    return out


def _unwrap(schema: Any, root: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The schema of a value with ``null`` alternatives taken out (pydantic's optional fields:
    ``anyOf: [X, {type: null}]``), and whether null was one."""
    s = _resolve(schema, root)
    for key in ("anyOf", "oneOf"):
        branches = s.get(key)
        if not isinstance(branches, list) or not branches:
            continue
        resolved = [_resolve(b, root) for b in branches]
        kept = [b for b in resolved if b.get("type") != "null"]
        nullable = len(kept) < len(resolved)
        if len(kept) == 1:
            outer = {k: v for k, v in s.items() if k != key}
            return {**kept[0], **outer}, nullable
        return s, nullable
    kind = s.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        nullable = len(kinds) < len(kind)
        if len(kinds) == 1:
            return {**s, "type": kinds[0]}, nullable
        return {k: v for k, v in s.items() if k != "type"}, nullable
    return s, False


def field_spec(name: str, schema: Any, required: bool, root: Mapping[str, Any]) -> dict[str, Any]:
    """How the page shows one field: ``name``, ``label``, ``widget`` (text, textarea, number,
    checkbox, select, json, const), ``required``, and per widget ``options``, ``value``,
    ``step``/``min``/``max``, ``default``, ``description``."""
    s, _nullable = _unwrap(schema, root)
    spec: dict[str, Any] = {
        "name": name,
        "label": _text(s.get("title") or name, 80),
        "required": required,
    }
    if s.get("description"):
        spec["description"] = _text(s["description"], 300)
    if s.get("default") is not None:
        spec["default"] = s["default"]
    kind = s.get("type")
    enum = s.get("enum")
    if "const" in s:
        spec.update(widget="const", value=s["const"])
    elif isinstance(enum, list) and enum:
        spec.update(widget="select", options=enum[:MAX_OPTIONS])
    elif kind == "boolean":
        spec["widget"] = "checkbox"
    elif kind in ("integer", "number"):
        spec.update(widget="number", step=1 if kind == "integer" else "any")
        for key, out in (("minimum", "min"), ("maximum", "max")):
            value = s.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                spec[out] = value
    elif kind == "string":
        long = name.lower() in LONG_TEXT or (s.get("maxLength") or 0) > 500
        spec["widget"] = "textarea" if long else "text"
    else:
        spec.update(widget="json", shape="array" if kind == "array" else "object")
    return spec


def _fields(schema: Mapping[str, Any], root: Mapping[str, Any], skip: set[str]) -> list[dict]:
    props = schema.get("properties")
    if not isinstance(props, dict):
        return []
    required = set(schema.get("required") or [])
    return [
        field_spec(str(name), sub, name in required, root)
        for name, sub in list(props.items())[:MAX_FIELDS]
        if name not in skip and name not in HIDDEN
    ]


def _constant(schema: Any, root: Mapping[str, Any]) -> Any:
    """The one value a field allows (``const`` or a one-value ``enum``), else None."""
    s, _ = _unwrap(schema, root)
    if "const" in s:
        return s["const"]
    enum = s.get("enum")
    return enum[0] if isinstance(enum, list) and len(enum) == 1 else None


def _form(kind: Any, description: Any, fixed: dict[str, Any], fields: list[dict]) -> dict:
    return {
        "kind": _text(kind, 80),
        "description": _text(description),
        "fixed": fixed,
        "fields": fields,
    }


def _union_forms(top: Mapping[str, Any], branches: list[Any], root: Mapping[str, Any]) -> list:
    found = top.get("discriminator")
    named = found.get("propertyName") if isinstance(found, dict) else None
    forms = []
    for i, branch in enumerate(branches[:MAX_FORMS]):
        b = _resolve(branch, root)
        props = b.get("properties") if isinstance(b.get("properties"), dict) else {}
        assert isinstance(props, dict)
        tag, kind = None, None
        for name in [named] if isinstance(named, str) else list(props):
            if name in props and (value := _constant(props[name], root)) is not None:
                tag, kind = name, value
                break
        fixed = {tag: kind} if tag is not None else {}
        label = kind if kind is not None else (b.get("title") or f"action {i + 1}")
        forms.append(_form(label, b.get("description"), fixed, _fields(b, root, set(fixed))))
    return forms


def action_forms(
    action: Mapping[str, Any], kinds: Mapping[str, Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """One form per action kind of the ``action`` schema (see the module's notes). ``kinds``:
    the server's own list of actions (``GET /tools``: name → ``{"parameters", "description"}``),
    used for a flat schema whose ``type`` field names the kind."""
    root = action
    top = _resolve(action, root)
    for key in ("oneOf", "anyOf"):
        branches = top.get(key)
        if isinstance(branches, list) and branches:
            objects = [_resolve(b, root) for b in branches]
            if all(b.get("type") == "object" or "properties" in b for b in objects):
                return _union_forms(top, branches, root)
    props = top.get("properties") if isinstance(top.get("properties"), dict) else {}
    assert isinstance(props, dict)
    values: list[Any] = []
    if "type" in props:
        kind_schema, _ = _unwrap(props["type"], root)
        if isinstance(kind_schema.get("enum"), list):
            values = list(kind_schema["enum"])
        elif "const" in kind_schema:
            values = [kind_schema["const"]]
    if not values:
        return [
            _form(
                top.get("title") or "action", top.get("description"), {}, _fields(top, root, set())
            )
        ]
    forms = []
    for value in values[:MAX_FORMS]:
        own = (kinds or {}).get(str(value))
        params = own.get("parameters") if isinstance(own, Mapping) else None
        if isinstance(params, dict) and isinstance(params.get("properties"), dict):
            fields = _fields(params, params, {"type"})
            about = own.get("description") if isinstance(own, Mapping) else None
        else:
            fields = _fields(top, root, {"type"})
            about = None
        forms.append(_form(value, about, {"type": value}, fields))
    return forms


def reset_fields(reset_props: Mapping[str, Any] | None, task_ids: list[str]) -> list[dict]:
    """The optional fields of the Reset form: ``task_id`` when the server has a Task API (or its
    reset request names one), ``seed`` when its reset request takes one (OpenEnv's does;
    unknown without an OpenAPI document: offered)."""
    fields: list[dict[str, Any]] = []
    if task_ids or (reset_props is not None and "task_id" in reset_props):
        fields.append(
            {
                "name": "task_id",
                "label": "Task",
                "widget": "text",
                "required": False,
                "options": task_ids[:MAX_OPTIONS],
                "description": "A task id (suggestions from the server's task list); "
                "empty: the server picks.",
            }
        )
    if reset_props is None or "seed" in reset_props:
        fields.append(
            {
                "name": "seed",
                "label": "Seed",
                "widget": "number",
                "step": 1,
                "min": 0,
                "required": False,
                "description": "Optional: picks the task or the randomness of the episode.",
            }
        )
    return fields


# -- the page -----------------------------------------------------------------------------


def play_page(env: Mapping[str, Any], assets: Assets, script: str, idle_seconds: float) -> str:
    """The playground of one cataloged OpenEnv server: Reset / State / End, the action forms
    and the log (all drawn and driven by ``script``, ``static/play.js``)."""
    eid = str(env["id"])
    title = str(env.get("title") or eid)
    minutes = max(1, round(idle_seconds / 60))
    body = (
        f'<nav class="crumbs"><a href="/">Environments</a> / '
        f'<a href="{e(env_url(eid))}">{e(eid)}</a> / <span>Playground</span></nav>'
        f"<h1>Playground <small>{e(title)}</small></h1>"
        f'<p class="meta"><span class="badge">{e(env.get("kind"))}</span>'
        f' <span class="id">{e(eid)}</span>'
        + (f" · server <code>{e(env.get('source'))}</code>" if env.get("source") else "")
        + "</p>"
        '<p class="lead">Start an episode on the server, send actions, and read each '
        "observation, reward and done as it comes back. The explorer relays every request; "
        f"your episode ends when you end it, leave the page, or after {minutes} minute"
        f"{'s' if minutes != 1 else ''} without a request.</p>"
        f'<div id="play" class="play" data-api="{e(api_url(eid))}">'
        '<noscript><p class="empty">The playground needs JavaScript.</p></noscript>'
        '<div class="play-cols"><section class="play-ctl" aria-label="Episode">'
        '<h2>Episode</h2><form id="play-reset" class="play-form" novalidate>'
        '<div class="play-fields"></div><div class="play-btns">'
        '<button type="submit" id="play-reset-btn">Reset</button>'
        '<button type="button" id="play-state">State</button>'
        '<button type="button" id="play-end">End episode</button></div></form>'
        '<p id="play-status" class="play-status" role="status">Reading the server\'s action '
        "schema…</p>"
        '<h2>Actions</h2><div id="play-actions" class="play-actions"></div></section>'
        '<section class="play-logbox" aria-label="Log"><div class="play-loghead"><h2>Log</h2>'
        '<button type="button" id="play-clear">Clear</button></div>'
        '<ol id="play-log" class="play-log" aria-live="polite"></ol></section></div></div>'
        f'<script src="{e(script)}"></script>'
    )
    return layout(f"Playground · {title}", body, assets)
