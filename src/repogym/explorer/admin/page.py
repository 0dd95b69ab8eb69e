"""The admin page (server-rendered, every value escaped) and its script and style.

Each form names its action (``data-action``); ``admin.js`` turns its fields into the JSON body
of ``POST /admin/api/<action>`` with the double-submit CSRF header, then reloads.
"""

from __future__ import annotations

import json
import time
from html import escape as e
from typing import Any

__all__ = ["ADMIN_CSS", "ADMIN_JS", "admin_page"]

# (action, title, fields: (name, label, kind)); kinds: text, bool, int, list, json
FORMS: list[tuple[str, str, list[tuple[str, str, str]]]] = [
    (
        "hide",
        "Hide or show an environment",
        [("env", "environment id", "text"), ("hidden", "hidden", "bool")],
    ),
    (
        "pin",
        "Pin or unpin an environment",
        [
            ("env", "environment id", "text"),
            ("pinned", "pinned", "bool"),
            ("position", "position (0 = first)", "int"),
        ],
    ),
    (
        "feature",
        "Feature an environment",
        [("env", "environment id", "text"), ("featured", "featured", "bool")],
    ),
    (
        "collection",
        "Set a collection (no ids: remove it)",
        [("name", "name", "text"), ("ids", "dataset / OpenEnv ids, comma-separated", "list")],
    ),
    (
        "banner",
        "Banner (empty text: remove it)",
        [
            ("text", "text", "text"),
            ("link", "link (https://… or /path)", "text"),
            ("link_text", "link text", "text"),
        ],
    ),
    (
        "runs",
        "Runs on or off (no environment: everywhere)",
        [("env", "environment id (optional)", "text"), ("enabled", "runs on", "bool")],
    ),
    (
        "limits",
        "Run limits (JSON, null removes one)",
        [("limits", '{"max_concurrent": 2, "per_hour": 20, "time_limit_s": 900}', "json")],
    ),
    (
        "agents",
        "Agents offered (empty: the explorer's own choice)",
        [("agents", "agents, comma-separated (oracle, nop, llm, command)", "list")],
    ),
    (
        "rollout",
        "Take a rollout off the community view",
        [("run", "run id", "text"), ("hidden", "off the community view", "bool")],
    ),
    (
        "stop",
        "Stop a running rollout",
        [("run", "run id", "text"), ("clear", "forget the request", "bool")],
    ),
]


def _form(action: str, title: str, fields: list[tuple[str, str, str]]) -> str:
    inputs = []
    for name, label, kind in fields:
        attrs = f'name="{e(name)}" data-kind="{e(kind)}"'
        if kind == "bool":
            checked = "" if name in ("clear",) else " checked"
            inputs.append(f'<label><input type="checkbox" {attrs}{checked}> {e(label)}</label>')
        else:
            typ = "number" if kind == "int" else "text"
            inputs.append(
                f'<label>{e(label)} <input type="{typ}" {attrs} autocomplete="off"></label>'
            )
    return (
        f'<form class="act" data-action="{e(action)}"><h3>{e(title)}</h3>'
        + "".join(inputs)
        + '<button type="submit">Apply</button><output></output></form>'
    )


def admin_page(state: dict[str, Any], who: str) -> str:
    """The page: who is signed in, the settings, a form per change, the latest audit."""
    settings = state.get("settings")
    error = state.get("error")
    rows = []
    for entry in reversed(state.get("audit") or []):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(entry.get("at") or 0)))
        rows.append(
            f"<tr><td>{e(when)}</td><td>{e(str(entry.get('who')))}</td>"
            f"<td>{e(str(entry.get('action')))}</td>"
            f"<td><code>{e(json.dumps(entry.get('after'), ensure_ascii=False))}</code></td></tr>"
        )
    shown = json.dumps(settings, indent=1, ensure_ascii=False) if settings is not None else ""
    problem = (
        f'<p class="err">The settings file does not parse: {e(error)}. The public explorer '
        "keeps its last good settings; fix or remove the file.</p>"
        if error
        else ""
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="robots" content="noindex"><title>Explorer admin</title>'
        '<link rel="stylesheet" href="/admin/admin.css">'
        '<script src="/admin/admin.js" defer></script></head><body>'
        f"<header><h1>Explorer admin</h1><p>Signed in as <b>{e(who)}</b>.</p></header>"
        f'{problem}<main><section class="forms">'
        + "".join(_form(*f) for f in FORMS)
        + '</section><section><h2>Settings</h2><pre id="settings">'
        + e(shown)
        + "</pre><h2>Latest changes</h2><table><thead><tr><th>when (UTC)</th><th>who</th>"
        "<th>what</th><th>after</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section></main></body></html>"
    )


ADMIN_JS = r"""
(function () {
  function cookie(name) {
    var m = document.cookie.match(new RegExp('(?:^|; )' + name + '=([^;]*)'));
    return m ? decodeURIComponent(m[1]) : '';
  }
  function value(input) {
    var kind = input.dataset.kind, v = input.value.trim();
    if (kind === 'bool') return input.checked;
    if (kind === 'int') return v === '' ? undefined : parseInt(v, 10);
    if (kind === 'list') return v === '' ? (input.name === 'agents' ? null : [])
      : v.split(',').map(function (s) { return s.trim(); }).filter(Boolean);
    if (kind === 'json') return v === '' ? {} : JSON.parse(v);
    return v === '' ? undefined : v;
  }
  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    if (!form.dataset || !form.dataset.action) return;
    ev.preventDefault();
    var out = form.querySelector('output'), body = {};
    try {
      form.querySelectorAll('input').forEach(function (i) {
        var v = value(i);
        if (v !== undefined) body[i.name] = v;
      });
    } catch (err) { out.textContent = String(err); return; }
    fetch('/admin/api/' + form.dataset.action, {
      method: 'POST', credentials: 'same-origin',
      headers: {'Content-Type': 'application/json', 'X-CSRF-Token': cookie('rg_csrf')},
      body: JSON.stringify(body)
    }).then(function (r) { return r.json().then(function (j) { return [r.ok, j]; }); })
      .then(function (res) {
        if (res[0]) location.reload(); else out.textContent = res[1].error || 'refused';
      })
      .catch(function (err) { out.textContent = String(err); });
  });
})();
"""

ADMIN_CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:72rem;padding:1rem}
.forms{display:grid;grid-template-columns:repeat(auto-fill,minmax(18rem,1fr));gap:1rem}
form.act{border:1px solid #8884;border-radius:6px;padding:.6rem}
form.act h3{margin:.1rem 0 .4rem;font-size:1rem}
form.act label{display:block;margin:.25rem 0}
form.act input[type=text],form.act input[type=number]{width:100%;box-sizing:border-box}
output{display:block;color:#b00}
.err{color:#b00;font-weight:600}
pre{background:#8881;padding:.6rem;overflow:auto;max-height:24rem}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #8884;padding:.2rem;
text-align:left;vertical-align:top}code{word-break:break-all}
"""
