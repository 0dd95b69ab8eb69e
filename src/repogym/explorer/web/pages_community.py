"""The community page: leaderboards, recent public rollouts and the tasks nobody has tried.

Same rules as :mod:`.pages`: every value from data escaped, no inline script or style. The
dicts come from :class:`repogym.explorer.community.Community` (no owner, usage or details).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from repogym.explorer.community import GROUPINGS
from repogym.explorer.web.pages import Assets, e, env_url, layout, task_url, url
from repogym.explorer.web.pages_runs import reward_text


def _pct(x: Any) -> str:
    return f"{100 * float(x):.0f} %" if isinstance(x, int | float) else ""


def leaderboard_table(rows: Sequence[Mapping[str, Any]], by: str) -> str:
    """Rows per group and agent: pass rate with its 95 % interval, runs and tasks tried."""
    if not rows:
        return '<p class="empty">No graded public runs yet.</p>'
    label = {"env": "Environment", "domain": "Domain", "category": "Category"}[by]
    body = []
    for r in rows:
        group = str(r["group"])
        cell = f'<a href="{e(env_url(group))}">{e(group)}</a>' if by == "env" else e(group)
        body.append(
            f'<tr><td>{cell}</td><td class="agent">{e(r["agent"])}</td>'
            f"<td>{_pct(r['pass_rate'])}</td>"
            f'<td class="ci">{_pct(r["ci_low"])} – {_pct(r["ci_high"])}</td>'
            f"<td>{e(r['passes'])}/{e(r['runs'])}</td><td>{e(r['tasks'])}</td></tr>"
        )
    return (
        '<div class="tablewrap"><table class="runs board"><thead><tr>'
        f"<th>{label}</th><th>Agent</th><th>Pass rate</th><th>95 % interval</th>"
        f"<th>Passed/runs</th><th>Tasks tried</th></tr></thead><tbody>{''.join(body)}"
        "</tbody></table></div>"
    )


def rollouts_table(runs: Sequence[Mapping[str, Any]]) -> str:
    if not runs:
        return '<p class="empty">No graded public runs yet.</p>'
    rows = [
        f'<tr><td class="rid"><a href="/r/{e(r["id"])}">{e(r["id"])}</a></td>'
        f'<td><a href="{e(task_url(str(r["env"]), str(r["task"])))}">{e(r["task"])}</a>'
        f' <span class="muted">in {e(r["env"])}</span></td>'
        f'<td class="agent">{e(r["agent"])}</td><td>{e(reward_text(r))}</td></tr>'
        for r in runs
    ]
    return (
        '<div class="tablewrap"><table class="runs"><thead><tr><th>Run</th><th>Task</th>'
        f"<th>Agent</th><th>Reward</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def untried_list(untried: Mapping[str, Any]) -> str:
    env = str(untried["env"])
    items = "".join(
        f'<li><a href="{e(task_url(env, str(t["id"])))}">{e(t["title"] or t["id"])}</a></li>'
        for t in untried["items"]
    )
    head = (
        f"<p>{e(untried['untried'])} of {e(untried['tasks'])} tasks of "
        f'<a href="{e(env_url(env))}">{e(env)}</a> have no graded run yet.</p>'
    )
    return head + (f'<ul class="untried">{items}</ul>' if items else "")


def community_page(
    board: Sequence[Mapping[str, Any]],
    by: str,
    runs: Sequence[Mapping[str, Any]],
    assets: Assets,
    *,
    env: str | None = None,
    untried: Mapping[str, Any] | None = None,
) -> str:
    """Leaderboard (grouped by ``by``), recent public rollouts and, for one environment, the
    tasks nobody has tried."""
    keep = [("env", env)] if env else []
    names = {"env": "by environment", "domain": "by domain", "category": "by category"}
    tabs = "".join(
        f'<a class="chip{" on" if g == by else ""}"'
        f' href="{e(url("/community", [("by", g), *keep]))}">{e(names[g])}</a>'
        for g in GROUPINGS
    )
    scope = f" of {e(env)}" if env else ""
    body = (
        '<nav class="crumbs"><a href="/">Environments</a> / <span>community</span></nav>'
        f"<h1>Community{scope}</h1>"
        '<p class="muted">Finished, graded runs of public environments. A run passes when its '
        "reward is 1; the interval is a 95 % Wilson score interval.</p>"
        f'<h2>Leaderboard</h2><div class="chips">{tabs}</div>{leaderboard_table(board, by)}'
        f"<h2>Recent rollouts</h2>{rollouts_table(runs)}"
    )
    if untried is not None:
        body += f"<h2>Tasks nobody has tried</h2>{untried_list(untried)}"
    return layout(f"Community{' of ' + env if env else ''}", body, assets)
