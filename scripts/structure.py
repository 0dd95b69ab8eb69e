#!/usr/bin/env python3
"""Print the structure figures of src/repogym: package import cycles, private names used across
packages, modules over 700 lines and functions over 100 lines.

    python scripts/structure.py           # summary and the offenders
    python scripts/structure.py --json    # the same as JSON
    python scripts/structure.py --mermaid # the package graph for docs/architecture.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.structure import graph  # noqa: E402

MODULE_LINES = 700
FUNCTION_LINES = 100


def figures() -> dict[str, object]:
    edges = graph.package_edges()
    cycles = graph.package_cycles(edges)
    private = graph.private_cross_package()
    sizes = graph.sizes()
    return {
        "modules": len(sizes.modules),
        "lines": sum(sizes.modules.values()),
        "package_edges": len(edges),
        "package_cycles": [f"{a} -> {b}" for a, b in cycles],
        "private_cross_package": [
            f"{i.module}:{i.line} -> {i.target} {list(i.names)}" for i in private
        ],
        "modules_over_700": {m: n for m, n in sorted(sizes.modules.items()) if n > MODULE_LINES},
        "functions_over_100": {
            f: n for f, n in sorted(sizes.functions.items()) if n > FUNCTION_LINES
        },
    }


def mermaid() -> str:
    """The package import graph as a mermaid flowchart, transitively reduced (an edge implied
    by a longer path is left out, so the picture stays readable; the test checks every edge)."""
    edges = sorted(graph.package_edges())
    succ: dict[str, set[str]] = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)

    def reachable(src: str, skip: tuple[str, str]) -> set[str]:
        seen: set[str] = set()
        stack = [src]
        while stack:
            node = stack.pop()
            for nxt in succ.get(node, ()):
                if (node, nxt) == skip or nxt in seen:
                    continue
                seen.add(nxt)
                stack.append(nxt)
        return seen

    kept = [(a, b) for a, b in edges if b not in reachable(a, (a, b))]
    names = sorted({n for e in kept for n in e})
    lines = ["flowchart TD"]
    lines += [f"    {n.strip('_')}[{n}]" for n in names]
    lines += [f"    {a.strip('_')} --> {b.strip('_')}" for a, b in kept]
    return "\n".join(lines)


def main() -> int:
    if "--mermaid" in sys.argv[1:]:
        print(mermaid())
        return 0
    data = figures()
    if "--json" in sys.argv[1:]:
        print(json.dumps(data, indent=2))
        return 0
    print(
        f"{data['modules']} modules, {data['lines']} lines, {data['package_edges']} package edges"
    )
    for key in (
        "package_cycles",
        "private_cross_package",
        "modules_over_700",
        "functions_over_100",
    ):
        items = data[key]
        assert isinstance(items, (list, dict))
        print(f"{key}: {len(items)}")
        for item in items:
            print(f"  {item}" + (f"  {items[item]}" if isinstance(items, dict) else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
