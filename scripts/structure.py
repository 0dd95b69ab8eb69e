#!/usr/bin/env python3
"""Print the structure figures of src/repogym: package import cycles, private names used across
packages, modules over 700 lines and functions over 100 lines.

    python scripts/structure.py           # summary and the offenders
    python scripts/structure.py --json    # the same as JSON
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


def main() -> int:
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
