"""Server-rendered pages of rollouts: a run (timeline, reward, details), run lists, compare.

Same rules as :mod:`.pages`: every value from data escaped, no inline script or style. Run dicts
are :meth:`repogym.explorer.runs.store.RunRecord.public` (plus ``events``), already masked; no
page says who started a run. ``static/runs.js`` draws the run panel of task pages
(:func:`runs_panel`), follows a running run live (``data-live``) and builds the same event
markup as :func:`event_html` for live events: the texts below are written so that Python and
JavaScript print them alike (``1.0`` as ``1``, ``None`` as nothing, compact JSON).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

from repogym.explorer.web.pages import Assets, e, env_url, layout, task_url, url

PHASES = {
    "environment_setup": "Environment",
    "agent_execution": "Agent",
    "verifier": "Verifier",
}


def _txt(value: Any) -> str:
    """A value as JavaScript's ``String()`` prints it (None as "", 1.0 as 1, True as true)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def _plain(value: Any) -> Any:
    """``value`` with integral floats as ints (JSON as JavaScript writes it)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _json(value: Any, indent: int | None = None) -> str:
    """JSON as ``JSON.stringify(value, null, indent)`` writes it."""
    seps = (",", ": ") if indent else (",", ":")
    return json.dumps(
        _plain(value), ensure_ascii=False, indent=indent, separators=seps, default=str
    )


def _when(ts: Any) -> str:
    if not isinstance(ts, int | float):
        return ""
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def reward_text(run: Mapping[str, Any]) -> str:
    r = run.get("reward")
    return "—" if r is None else f"{r:g}"


def _reward_class(r: Any) -> str:
    if not isinstance(r, int | float):
        return "none"
    return "full" if r >= 1 else "zero" if r <= 0 else "part"


def _status(run: Mapping[str, Any]) -> str:
    status = str(run.get("status") or "")
    return f'<span class="rstatus s-{e(status)}">{e(status)}</span>'


def _reward(run: Mapping[str, Any]) -> str:
    cls = _reward_class(run.get("reward"))
    return f'<span class="reward r-{cls}">{e(reward_text(run))}</span>'


def _big_reward(run: Mapping[str, Any]) -> str:
    """The reward, large (run page; runs.js updates it when the reward event arrives)."""
    cls = _reward_class(run.get("reward"))
    return (
        f'<p class="bigreward r-{cls}" data-f="bigreward"><span class="lbl">Reward</span> '
        f'<span class="val">{e(reward_text(run))}</span></p>'
    )


def event_html(ev: Mapping[str, Any]) -> str:
    """One event of a run's timeline (``eventNode`` in static/runs.js builds the same markup
    for live events; keep the two in step)."""
    kind = str(ev.get("kind") or "")
    data = ev.get("data") or {}
    if not isinstance(data, Mapping):
        data = {"value": data}
    seq = ev.get("seq")
    head = ""
    body = ""
    if kind == "phase":
        phase = _txt(data.get("phase"))
        state = "started" if data.get("state") == "start" else "finished"
        head = f"{PHASES.get(phase, phase)} {state}"
        if data.get("agent"):
            head += f" ({_txt(data['agent'])})"
    elif kind == "status":
        head = f"Run {_txt(data.get('status'))}"
    elif kind == "model":
        calls = ", ".join(_txt(c) for c in data.get("tool_calls") or []) or "no tool call"
        head = f"Model: {calls}"
        body = _txt(data.get("text"))
    elif kind == "tool":
        head = f"Tool {_txt(data.get('name'))}" + (" (error)" if data.get("is_error") else "")
        args = data.get("arguments")
        body = (_json(args, 1) + "\n→ " if args else "") + _txt(data.get("output"))
    elif kind == "agent_output":
        head = f"Agent exited {_txt(data.get('exit_code'))}" + (
            " (timed out)" if data.get("timed_out") else ""
        )
        body = _txt(data.get("text"))
    elif kind == "verifier_output":
        head = f"Verifier exited {_txt(data.get('exit_code'))}"
        body = _txt(data.get("text"))
    elif kind == "reward":
        reward = data.get("reward")
        head = f"Reward {'—' if reward is None else _txt(reward)}"
        details = data.get("details")
        if details:
            body = _json(details, 1)
        if data.get("error"):
            body = (body + "\n" if body else "") + _txt(data.get("error"))
    elif kind == "error":
        head = f"Error: {_txt(data.get('kind'))}"
        body = _txt(data.get("text"))
    else:
        head = kind
        body = _json(data)
    pre = f'<pre class="evbody">{e(body)}</pre>' if body.strip() else ""
    return (
        f'<li class="ev k-{e(kind)}" data-seq="{e(seq)}"><span class="evhead">{e(head)}</span>'
        f"{pre}</li>"
    )


def _summary(run: Mapping[str, Any]) -> str:
    duration = run.get("duration_s")
    rows = [
        ("Agent", "agent", e(run.get("agent"))),
        ("Status", "status", _status(run)),
        ("Reward", "reward", _reward(run)),
        ("Started", "started", e(_when(run.get("started") or run.get("created")))),
        (
            "Duration",
            "duration",
            e(f"{duration:.1f} s" if isinstance(duration, int | float) else ""),
        ),
    ]
    usage = run.get("usage") or {}
    if usage:
        rows.append(
            (
                "Model use",
                "usage",
                e(
                    f"{usage.get('model_calls', 0)} calls, "
                    f"{usage.get('input_tokens', 0)}+{usage.get('output_tokens', 0)} tokens"
                ),
            )
        )
    if run.get("error"):
        rows.append(("Error", "error", e(run.get("error"))))
    rows += _judge_rows(run.get("details"))
    body = "".join(f'<tr><th>{k}</th><td data-f="{f}">{v}</td></tr>' for k, f, v in rows)
    return f'<table class="kv runsum">{body}</table>'


def _judge_rows(details: Any) -> list[tuple[str, str, str]]:
    """What the judge found: the canaries it planted (tests that must fail) and the tamper
    reasons that set the reward to 0."""
    if not isinstance(details, Mapping):
        return []
    rows = []
    canaries = details.get("canaries")
    if isinstance(canaries, Mapping) and canaries.get("run"):
        failed, planted = canaries.get("failed", 0), canaries["run"]
        text = f"{failed} of {planted} failed" + (" (as they must)" if failed == planted else "")
        rows.append(("Canaries", "canaries", e(text)))
    tamper = details.get("tamper")
    if details.get("tampered") and isinstance(tamper, list) and tamper:
        shown = "; ".join(str(t) for t in tamper[:3]) + (" …" if len(tamper) > 3 else "")
        rows.append(("Tamper", "tamper", f'<span class="bad">{e(shown)}</span>'))
    return rows


def _details(run: Mapping[str, Any]) -> str:
    details = run.get("details")
    if not details:
        return ""
    return (
        '<section id="details"><h2>Reward details</h2><pre class="text evbody">'
        f"{e(_json(details, 2))}</pre></section>"
    )


def run_page(run: Mapping[str, Any], assets: Assets, task_title: str) -> str:
    """A run: summary, reward details and the event timeline (live while it runs)."""
    env_id, task_id = str(run["env"]), str(run["task"])
    live = run.get("status") not in ("done", "error")
    events = "".join(event_html(ev) for ev in run.get("events") or [])
    note = (
        '<p class="runnote" data-f="livenote">Running: events appear as they happen.</p>'
        if live
        else ""
    )
    body = (
        f'<nav class="crumbs"><a href="/">Environments</a> / '
        f'<a href="{e(env_url(env_id))}">{e(env_id)}</a> / '
        f'<a href="{e(task_url(env_id, task_id))}">{e(task_id)}</a> / <span>run</span></nav>'
        f"<h1>Run of {e(task_title)}</h1>"
        f'<section id="run" class="runhead" data-run="{e(run["id"])}"'
        f' data-live="{"1" if live else "0"}">'
        f"{_big_reward(run)}{_summary(run)}{note}</section>{_details(run)}"
        f'<section><h2>Events</h2><ol id="events" class="events">{events}</ol></section>'
        f'<p><a href="{e(url("/runs", [("env", env_id), ("task", task_id)]))}">'
        "All runs of this task</a></p>"
    )
    return layout(f"Run {run['id']}", body, assets)


def runs_table(runs: Sequence[Mapping[str, Any]], *, selectable: bool = True) -> str:
    """Runs as a table, with check boxes to pick runs to compare (runs.js builds the same
    table on task pages from ``GET /api/runs``)."""
    if not runs:
        return '<p class="empty">No runs yet.</p>'
    rows = []
    for r in runs:
        pick = (
            f'<td class="pickc"><input type="checkbox" class="pick" value="{e(r["id"])}"'
            f' aria-label="Compare run {e(r["id"])}"></td>'
            if selectable
            else ""
        )
        rows.append(
            f'<tr data-run="{e(r["id"])}">{pick}'
            f'<td class="rid"><a href="/r/{e(r["id"])}">{e(r["id"])}</a></td>'
            f'<td class="agent">{e(r.get("agent"))}</td><td>{_status(r)}</td><td>{_reward(r)}</td>'
            f'<td class="when">{e(_when(r.get("created")))}</td></tr>'
        )
    head = '<th class="pickc"><span class="sr">Compare</span></th>' if selectable else ""
    return (
        '<div class="tablewrap"><table class="runs"><thead><tr>'
        f'{head}<th>Run</th><th>Agent</th><th>Status</th><th>Reward</th><th class="when">Started'
        f"</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def runs_page(
    runs: Sequence[Mapping[str, Any]], assets: Assets, *, env: str, task: str | None
) -> str:
    """The runs of a task (every dataset holding it) or of an environment; runs.js puts the
    checked runs into ``ids`` when the compare form is sent."""
    where = (
        f'<a href="{e(env_url(env))}">{e(env)}</a>'
        + (f' / <a href="{e(task_url(env, task))}">{e(task)}</a>' if task else "")
        + " / <span>runs</span>"
    )
    body = (
        f'<nav class="crumbs"><a href="/">Environments</a> / {where}</nav>'
        f"<h1>Runs of {e(task or env)}</h1>"
        f'<form class="compare" action="/compare" method="get">'
        f"{runs_table(runs)}"
        '<input type="hidden" name="ids" value="">'
        '<div class="runactions"><button type="submit" class="btn" data-compare>'
        'Compare selected</button><span class="runerr" role="alert" hidden></span></div></form>'
    )
    return layout(f"Runs of {task or env}", body, assets)


def compare_page(runs: Sequence[Mapping[str, Any]], assets: Assets) -> str:
    """Two or more runs of the same task side by side (stacked on narrow screens)."""
    cols = []
    for r in runs:
        events = "".join(event_html(ev) for ev in r.get("events") or [])
        cols.append(
            f'<section class="ccol" data-run="{e(r["id"])}">'
            f'<h2><a href="/r/{e(r["id"])}">{e(r.get("agent"))}</a>'
            f' <small class="id">{e(r["id"])}</small></h2>{_big_reward(r)}{_summary(r)}'
            f'<h3>Events</h3><ol class="events">{events}</ol></section>'
        )
    tasks = {(str(r["env"]), str(r["task"])) for r in runs}
    keys = {r.get("key") for r in runs}
    note = "" if len(keys) == 1 else '<p class="warn">These runs are of different tasks.</p>'
    env_id, task_id = sorted(tasks)[0]
    body = (
        f'<nav class="crumbs"><a href="/">Environments</a> / '
        f'<a href="{e(env_url(env_id))}">{e(env_id)}</a> / '
        f'<a href="{e(task_url(env_id, task_id))}">{e(task_id)}</a> / <span>compare</span></nav>'
        f"<h1>Compare {len(runs)} runs</h1>{note}"
        f'<div class="compare-cols n{min(len(runs), 4)}">{"".join(cols)}</div>'
    )
    return layout("Compare runs", body, assets)


def runs_panel(env_id: str, task_id: str, runnable: bool) -> str:
    """The run panel on a task page: filled in by static/runs.js from ``/api/runs/session``
    (the start form), ``POST /api/runs`` and the run's events (the live view) and
    ``GET /api/runs`` (the task's runs, to compare)."""
    if not runnable:
        return ""
    runs = url("/runs", [("env", env_id), ("task", task_id)])
    return (
        f'<section id="runs" class="runpanel" data-env="{e(env_id)}" data-task="{e(task_id)}">'
        "<h2>Run an agent</h2>"
        "<p class=\"runnote\">Runs start on this machine's sandbox and are graded by the task's"
        " verifier.</p>"
        '<noscript><p class="empty">Starting runs needs JavaScript.</p></noscript>'
        '<div class="runform"></div><div class="runlive" aria-live="polite" hidden></div>'
        f'<div class="runlist" data-all="{e(runs)}"></div></section>'
    )
