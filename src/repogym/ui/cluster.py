"""The table of ``repogym cluster status``."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from repogym.ui import escape, out


def _size(n: int | None) -> str:
    if n is None:
        return "—"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def _cpus(total: float, free: float | None) -> str:
    return f"{free:g}/{total:g}" if free is not None else f"?/{total:g}"


def _memory(total: int, free: int | None) -> str:
    gib = 1 << 30
    shown = f"{free / gib:.1f}" if free is not None else "?"
    return f"{shown}/{total / gib:.1f} GiB"


def print_status(status: Any) -> None:
    """Nodes, one per row, then each node's problems (a :class:`ClusterStatus`)."""
    table = Table(
        title=f"Ray cluster {escape(status.address)} — driver: repogym {escape(status.repogym)}, "
        f"Python {escape(status.python)}",
        title_justify="left",
    )
    table.add_column("node", no_wrap=True)
    for name in ("up", "CPUs", "GiB", "sandbox", "cache", "shared"):
        table.add_column(name, no_wrap=True)
    roots: dict[str, list[str]] = {}
    notes: list[str] = []
    for n in status.nodes:
        p = n.probe or {}
        shared = p.get("shared_cache") or {}
        layers = shared.get("layers") or {}
        cache = "—"
        if p:
            more = "" if p.get("cache_size_complete", True) else "+"
            cache = f"{_size(p.get('cache_bytes'))}{more}"
            roots.setdefault(str(p.get("cache_root")), []).append(n.short_id)
        counts = "—"
        if shared.get("url"):
            counts = f"{layers.get('hits', 0)}/{layers.get('misses', 0)}/{layers.get('uploads', 0)}"
        if p and (p.get("repogym"), p.get("python")) != (status.repogym, status.python):
            notes.append(
                f"[red]node {escape(n.short_id)} has repogym {escape(str(p.get('repogym')))}, "
                f"Python {escape(str(p.get('python')))}: not the driver's[/]"
            )
        table.add_row(
            escape(n.short_id[:8]) + ("*" if n.head else ""),
            "[green]yes[/]" if n.alive else "[red]no[/]",
            _cpus(n.cpus, n.cpus_free),
            _memory(n.memory_bytes, n.memory_free_bytes).removesuffix(" GiB"),
            escape(p["sandbox"]) if p.get("sandbox") else "[red]none[/]" if p else "—",
            cache,
            counts,
        )
    out.print(table)
    out.print("CPUs and GiB: free/all; shared: hits/misses/uploads; * the head node")
    for n in status.nodes:
        out.print(f"node {escape(n.short_id[:8])}: {escape(n.address)}")
    for note in notes:
        out.print(note)
    for root, ids in roots.items():
        where = "every live node" if len(roots) == 1 else ", ".join(ids)
        out.print(f"cache root {escape(root)} on {escape(where)}")
    urls = {str((n.probe or {}).get("shared_cache", {}).get("url") or "") for n in status.nodes}
    for url in sorted(urls - {""}):
        out.print(f"shared cache {escape(url)}")
    if urls == {""}:
        out.print("shared cache: not set on any node (REPOGYM_SHARED_CACHE)")
    for n in status.nodes:
        for problem in n.problems:
            out.print(f"[yellow]{escape(n.short_id)}:[/] {escape(problem)}")
