"""Mapping F2P ids (pytest node ids, unittest dotted ids, bare files, ``file > suite > name``) to
Python test files and qualnames, and to JS/TS test files.
"""

from __future__ import annotations

from collections.abc import Iterable

from repogym.pipelines._instructions.interface.context import Ctx
from repogym.pipelines._instructions.interface.model import JS_EXTS
from repogym.pipelines._instructions.interface.snapshot import Snap


def _match_file(path: str, candidates: Iterable[str], head: Snap) -> str | None:
    path = path.strip()
    if path.startswith("./"):
        path = path[2:]
    cands = sorted(candidates)
    if path in cands:
        return path
    suffix = [c for c in cands if c.endswith("/" + path)]
    if len(suffix) >= 1:
        return suffix[0]
    if head.is_file(path):
        return path
    return None


def map_ids(
    ctx: Ctx, f2p: list[str]
) -> tuple[dict[tuple[str, tuple[str, ...]], list[str]], dict[str, list[str]], list[str]]:
    """Python groups ``(file, qualname parts) -> ids``, JS files -> ids, unmapped ids."""
    py_files = [t for t in ctx.test_files if t.endswith(".py")]
    js_files = [t for t in ctx.test_files if t.endswith(JS_EXTS)]
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    js: dict[str, list[str]] = {}
    unmapped: list[str] = []
    for tid in f2p:
        if "::" in tid:
            path, _, rest = tid.partition("::")
            rel = _match_file(path, py_files, ctx.head) if path.endswith(".py") else None
            if rel is None or not ctx.is_test_file(rel):
                unmapped.append(tid)
                continue
            parts = rest.split("::")
            parts[-1] = parts[-1].split("[", 1)[0]
            groups.setdefault((rel, tuple(p for p in parts if p)), []).append(tid)
        elif " > " in tid:
            first = tid.split(" > ", 1)[0]
            rel = _match_file(first, js_files, ctx.head) if first.endswith(JS_EXTS) else None
            if rel is None:
                unmapped.append(tid)
            else:
                js.setdefault(rel, []).append(tid)
        elif tid.endswith(".py"):
            rel = _match_file(tid, py_files, ctx.head)
            if rel is None or not ctx.is_test_file(rel):
                unmapped.append(tid)
            else:
                groups.setdefault((rel, ()), []).append(tid)
        elif tid.endswith(JS_EXTS):
            rel = _match_file(tid, js_files, ctx.head)
            if rel is None:
                unmapped.append(tid)
            else:
                js.setdefault(rel, []).append(tid)
        else:
            parts = tid.split(" ", 1)[0].split(".")
            for k in range(len(parts), 0, -1):
                if not all(p.isidentifier() for p in parts[:k]):
                    continue
                rel = _match_file("/".join(parts[:k]) + ".py", py_files, ctx.head)
                if rel is not None and ctx.is_test_file(rel):
                    groups.setdefault((rel, tuple(parts[k:])), []).append(tid)
                    break
            else:
                unmapped.append(tid)
    return groups, js, unmapped
