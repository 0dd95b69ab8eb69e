"""Explorer snapshot build time and size on synthetic environments and tasks.

    python benchmarks/explorer_build.py [--envs 7225] [--tasks 51498] [--out DIR] [--json]

:func:`synth_envs` yields (EnvDoc, [TaskDoc]) pairs with realistic text sizes (titles of a few
words, summaries of one to three sentences, one instruction section per task: a minimal pack)
and facets (kind, language, category, difficulty, pipeline, grading, network) drawn from
skewed distributions; task counts per environment are long-tailed. ``main()`` builds and
publishes a snapshot from them (answers withheld, pack de-duplicated, FTS built, checks run)
and prints build seconds, snapshot size and row counts. Other benchmarks import
``synth_envs``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from repogym.explorer.index import MemoryReader
from repogym.explorer.model import EnvDoc, Section, TaskDoc
from repogym.explorer.store import build_snapshot

_SYL = ("ka", "lo", "mi", "ne", "ra", "tu", "vi", "so", "pe", "du", "go", "fa", "ze", "bi", "qu")
_TECH = tuple(
    [
        "parser",
        "cache",
        "server",
        "client",
        "queue",
        "router",
        "schema",
        "token",
        "stream",
        "buffer",
        "index",
        "query",
        "plugin",
        "config",
        "loader",
        "worker",
        "scheduler",
        "socket",
        "driver",
        "compiler",
        "runtime",
        "module",
        "widget",
        "renderer",
        "allocator",
        "tokenizer",
        "lexer",
        "resolver",
        "session",
        "handler",
        "encoder",
        "decoder",
        "logger",
        "metrics",
    ]
)
_VERBS = tuple(
    [
        "fix",
        "add",
        "handle",
        "support",
        "refactor",
        "optimise",
        "remove",
        "validate",
        "escape",
        "retry",
    ]
)
_LANGS = [("python", 40), ("typescript", 18), ("javascript", 12), ("go", 10), ("rust", 8),
          ("java", 6), ("c++", 3), ("ruby", 3)]  # fmt: skip
_CATS = [("bugfix", 50), ("feature", 25), ("refactor", 10), ("performance", 8), ("docs", 7)]
_DIFF = [("easy", 35), ("medium", 45), ("hard", 20)]
_PIPES = [("pr_runtime", 55), ("commit_runtime", 30), ("pr_diff", 15)]
_KINDS = [("harbor", 80), ("rows", 12), ("openenv", 8)]
_NET = [("no-network", 85), ("public", 15)]


def _pick(rng: random.Random, table: list[tuple[str, int]]) -> str:
    return rng.choices([v for v, _ in table], weights=[w for _, w in table])[0]


def _vocab(rng: random.Random, n: int = 3000) -> list[str]:
    words = set(_TECH)
    while len(words) < n:
        words.add("".join(rng.choice(_SYL) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _sentence(rng: random.Random, vocab: list[str], lo: int, hi: int) -> str:
    words = [rng.choice(vocab) for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + "."


def _counts(rng: random.Random, n_envs: int, n_tasks: int) -> list[int]:
    """Long-tailed task counts, at least one per environment, summing to ``n_tasks``."""
    n_tasks = max(n_tasks, n_envs)
    weights = [rng.paretovariate(1.2) for _ in range(n_envs)]
    total = sum(weights)
    spare = n_tasks - n_envs
    counts = [1 + int(spare * w / total) for w in weights]
    i = 0
    while sum(counts) < n_tasks:
        counts[i % n_envs] += 1
        i += 1
    return counts


def synth_envs(
    n_envs: int = 7225, n_tasks: int = 51498, seed: int = 7
) -> Iterator[tuple[EnvDoc, list[TaskDoc]]]:
    """Yield ``n_envs`` synthetic environments holding ``n_tasks`` tasks in all."""
    rng = random.Random(seed)
    vocab = _vocab(rng)
    for e, count in enumerate(_counts(rng, n_envs, n_tasks)):
        owner = "".join(rng.choice(_SYL) for _ in range(3))
        name = f"{rng.choice(_TECH)}-{rng.choice(vocab)}"
        kind = _pick(rng, _KINDS)
        env_id = f"{owner}/{name}-{e}" if kind != "harbor" else f"{owner}-{name}-{e}"
        lang = _pick(rng, _LANGS)
        pipeline = _pick(rng, _PIPES)
        summary = _sentence(rng, vocab, 8, 24)
        paragraphs = [_sentence(rng, vocab, 12, 30) for _ in range(rng.randint(2, 6))]
        description = "\n\n".join(["# " + name, summary, *paragraphs])
        env = EnvDoc(
            id=env_id,
            kind=kind,
            title=f"{owner}/{name}",
            summary=summary,
            description=description,
            source=f"/data/{env_id}",
            runs_in="local sandbox (bubblewrap) or Docker",
            run_options=[{"label": "Run with repogym", "command": f"repogym run /data/{env_id}"}],
            facets={"language": lang, "pipeline": pipeline},
            task_count=count,
        )
        tasks = []
        for t in range(count):
            verb = rng.choice(_VERBS)
            title = f"{verb.capitalize()} {rng.choice(_TECH)} {' '.join(rng.sample(vocab, 3))}"
            text = " ".join(_sentence(rng, vocab, 10, 25) for _ in range(rng.randint(1, 3)))
            instruction = f"{text}\n\n{_sentence(rng, vocab, 15, 40)}\n"
            grading = "diff" if pipeline == "pr_diff" else "tests"
            facets = {
                "language": lang,
                "pipeline": pipeline,
                "category": _pick(rng, _CATS),
                "difficulty": _pick(rng, _DIFF),
            }
            tasks.append(
                TaskDoc(
                    id=f"{owner}__{name}-{t}",
                    title=title,
                    summary=text[:300],
                    facets=facets,
                    grading=grading,
                    environment="text only" if grading == "diff" else f"{lang}:latest",
                    network=_pick(rng, _NET),
                    runnable=grading == "tests",
                    sections=[Section("instruction", "Instruction", instruction)],
                    files=[],  # minimal pack: the instruction section only
                    aliases=[f"sha256:{rng.getrandbits(256):064x}"],
                )
            )
        yield env, tasks


def main(argv: list[str] | None = None) -> int:
    """Build a snapshot from synthetic data and print time, size and rows."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", type=int, default=7225)
    ap.add_argument("--tasks", type=int, default=51498)
    ap.add_argument("--out", type=Path, default=None, help="snapshot folder (default: temp)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    data = list(synth_envs(args.envs, args.tasks))
    gen = time.perf_counter() - t0
    readers = [MemoryReader(env, tasks) for env, tasks in data]
    out = args.out or Path(tempfile.mkdtemp(prefix="repogym-explorer-bench-"))
    cpu0 = time.process_time()
    try:
        info = build_snapshot(readers, out)
        cpu = time.process_time() - cpu0
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    result = {
        "envs": info["envs"],
        "tasks": info["tasks"],
        "blobs": info["blobs"],
        "build_seconds": info["seconds"],
        "build_cpu_seconds": round(cpu, 3),
        "load_average": round(os.getloadavg()[0], 1),
        "bytes": info["bytes"],
        "mb": round(info["bytes"] / 1e6, 1),
        "generate_seconds": round(gen, 2),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"snapshot: {result['envs']} envs, {result['tasks']} tasks, {result['blobs']} blobs; "
            f"build {result['build_seconds']:.2f} s wall, {result['build_cpu_seconds']:.2f} s CPU "
            f"(load average {result['load_average']}); size {result['mb']} MB "
            f"(synthetic data generated in {gen:.2f} s, not counted)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
