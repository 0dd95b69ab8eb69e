"""Explorer snapshot build time and size on synthetic environments and tasks.

    python benchmarks/explorer_build.py [--envs 7225] [--tasks 51498] [--out DIR] [--minimal]
                                        [--json]

:func:`synth_envs` yields (EnvDoc, [TaskDoc]) pairs shaped like generated Harbor datasets:
titles of a few words, summaries of one to three sentences, instructions of 1-3 KB, and the
files and sections a Harbor task has (instruction.md, a task.toml of its own, the
environment's Dockerfile, a grader script and verifier shared by many tasks, F2P/P2P lists,
a hidden test patch and a solution that withholding removes), with the sections the Harbor
adapter shows (instruction, environment, Dockerfile, grading, grader, task.toml,
provenance). Facets (kind, language, category, difficulty, pipeline, grading, network) come
from skewed distributions; task counts per environment are long-tailed. ``--minimal`` gives
each task only a short instruction section and no files (the earlier, much lighter pack).
``main()`` indexes them twice into one folder and prints, for each run, the two stages
of ``build_snapshot``: *ingest* (read each task, withhold answers, add its page to the
content-addressed pack) and *snapshot build* (index rows -> SQLite with FTS, checks, atomic
publish), plus sizes. The first run is cold; the second runs over unchanged sources, whose
tasks the pack recognises by fingerprint and does not read again. Other benchmarks import
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _calibrate import python_loop_ms  # noqa: E402

from repogym.explorer.build import build_snapshot  # noqa: E402
from repogym.explorer.index import MemoryReader  # noqa: E402
from repogym.explorer.model import EnvDoc, FileDoc, Section, TaskDoc  # noqa: E402

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


_VERIFIER = (
    "#!/usr/bin/env python3\n"
    '"""Run the F2P/P2P tests and write /logs/verifier/reward.txt (standard library only)."""\n'
    "import json, subprocess, sys\n\n"
    + "".join(
        f"def step_{i}(tests):\n"
        f"    out = subprocess.run([sys.executable, '-m', 'pytest', '-q', *tests],"
        f" capture_output=True, text=True)\n"
        f"    return {{t: ('PASSED ' + t) in out.stdout for t in tests}}  # pass {i}\n\n"
        for i in range(24)
    )
)
_TEST_SH = {
    pipe: "#!/bin/bash\n# generated grader entry point ({p})\nset -u\ncd /workspace/repo\n"
    "git apply --allow-empty /tests/test.patch || exit 1\nmkdir -p /logs/verifier\n"
    "python3 /tests/verifier.py --f2p /tests/f2p.json --p2p /tests/p2p.json \\\n"
    "  --out /logs/verifier > /logs/verifier/log.txt 2>&1\n".replace("{p}", pipe)
    for pipe, _ in _PIPES
}


def _task_toml(task_id: str, env_id: str, title: str, facets: dict[str, str], lang: str,
               f2p: list[str], p2p: list[str], digest: str) -> str:  # fmt: skip
    lines = [
        'schema_version = "1.4"', "", "[task]", f'name = "{env_id}/{task_id}"',
        f'description = "{title}"', f'keywords = ["{lang}", "{facets["category"]}"]', "",
        "[metadata]", f'difficulty = "{facets["difficulty"]}"',
        f'category = "{facets["category"]}"', "", "[agent]", "timeout_sec = 1800.0", "",
        "[verifier]", "timeout_sec = 900.0", "", "[environment]", "build_timeout_sec = 1200.0",
        "cpus = 2", "memory_mb = 4096", "storage_mb = 10240", 'network_mode = "no-network"', "",
        "[metadata.repo2env]", 'spec_version = "0.2.0"', f'pipeline = "{facets["pipeline"]}"',
        'pipeline_version = "3"', f'repo = "{env_id}"', f'ref = "{digest[:40]}"',
        'source_access = "public"', 'synthesis_llm = "none"',
        'reward_kinds = ["test_execution"]', f'content_hash = "sha256:{digest}"', "",
        f"[metadata.repo2env.{facets['pipeline']}]", f'language = "{lang}"',
        "fail_to_pass = [" + ", ".join(f'"{t}"' for t in f2p) + "]",
        "pass_to_pass = [" + ", ".join(f'"{t}"' for t in p2p) + "]", "",
    ]  # fmt: skip
    return "\n".join(lines)


def synth_envs(
    n_envs: int = 7225, n_tasks: int = 51498, seed: int = 7, *, minimal: bool = False
) -> Iterator[tuple[EnvDoc, list[TaskDoc]]]:
    """Yield ``n_envs`` synthetic environments holding ``n_tasks`` tasks in all.

    Tasks carry Harbor-like files and sections (see the module docstring); with ``minimal``,
    only a short instruction section.
    """
    rng = random.Random(seed)
    vocab = _vocab(rng)
    pool = [_sentence(rng, vocab, 8, 22) for _ in range(4000)]  # instruction sentences
    verifier = _VERIFIER.encode()
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
        image = {"python": "python:3.12-slim", "go": "golang:1.22"}.get(lang, f"{lang}:latest")
        dockerfile = (
            f"FROM {image}\nWORKDIR /workspace\nCOPY repo /workspace/repo\n"
            f"RUN cd repo && make deps  # {env_id}\nENV CI=1\n"
        )
        test_sh = _TEST_SH[pipeline]
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
            task_id = f"{owner}__{name}-{t}"
            digest = f"{rng.getrandbits(256):064x}"
            sections = [Section("instruction", "Instruction", instruction)]
            files: list[FileDoc] = []
            if not minimal:
                instruction = (
                    f"# {title}\n\n{text}\n\n"
                    + " ".join(rng.choices(pool, k=rng.randint(6, 20)))
                    + "\n\n## Acceptance\n\n"
                    + "".join(f"- {s}\n" for s in rng.choices(pool, k=3))
                )
                mod = rng.choice(vocab)
                f2p = [f"tests/test_{mod}.py::test_{rng.choice(vocab)}" for _ in range(2)]
                p2p = [f"tests/test_{mod}.py::test_{w}" for w in rng.sample(vocab, 5)]
                toml = _task_toml(task_id, env_id, title, facets, lang, f2p, p2p, digest)
                hunk = "".join(f"+    {s}\n" for s in rng.choices(pool, k=rng.randint(6, 20)))
                patch = (
                    f"diff --git a/src/{mod}.py b/src/{mod}.py\n--- a/src/{mod}.py\n"
                    f"+++ b/src/{mod}.py\n@@ -10,3 +10,12 @@\n{hunk}"
                )
                test_patch = patch.replace("src/", "tests/test_")
                sections = [
                    Section("instruction", "Instruction", instruction),
                    Section(
                        "environment",
                        "Environment",
                        f"- Runs in: **{image}**\n- Network: no-network\n"
                        "- Resources: 2 CPU, 4096 MB memory, 10240 MB storage\n"
                        "- Agent time limit: 1800 s",
                    ),
                    Section(
                        "dockerfile", "environment/Dockerfile", dockerfile, "code", "dockerfile"
                    ),
                    Section(
                        "grading",
                        "How it is graded",
                        f"- Grading: **{grading}**\n- Reward kinds: test_execution\n"
                        f"- Fail-to-pass tests (must go from failing to passing): {len(f2p)}\n"
                        f"- Pass-to-pass tests (must keep passing): {len(p2p)}\n"
                        "- Verifier time limit: 900 s\n"
                        "- Hidden tests are restored before grading (the test patch is withheld)",
                    ),
                    Section("grader", "tests/test.sh", test_sh, "code", "bash"),
                    Section("config", "task.toml", toml, "code", "toml"),
                    Section(
                        "provenance",
                        "Provenance",
                        f"- Repository: {env_id}\n- Ref: {digest[:40]}\n"
                        f"- Pipeline: {pipeline}\n- Content hash: sha256:{digest}",
                    ),
                ]
                raw = [
                    ("instruction.md", instruction.encode()),
                    ("task.toml", toml.encode()),
                    ("environment/Dockerfile", dockerfile.encode()),
                    ("tests/test.sh", test_sh.encode()),
                    ("tests/verifier.py", verifier),
                    ("tests/f2p.json", json.dumps(f2p, indent=2).encode()),
                    ("tests/p2p.json", json.dumps(p2p, indent=2).encode()),
                    ("tests/test.patch", test_patch.encode()),
                    ("solution/solve.sh", b"#!/bin/bash\ngit apply /solution/patch.diff\n"),
                    ("solution/patch.diff", patch.encode()),
                ]
                files = [FileDoc(path, len(data), data) for path, data in raw]
            tasks.append(
                TaskDoc(
                    id=task_id,
                    title=title,
                    summary=text[:300],
                    facets=facets,
                    grading=grading,
                    environment="text only" if grading == "diff" else image,
                    network=_pick(rng, _NET),
                    runnable=grading == "tests",
                    sections=sections,
                    files=files,
                    aliases=[f"sha256:{digest}"],
                )
            )
        yield env, tasks


class SynthReader(MemoryReader):
    """A reader over synthetic docs with a cheap fingerprint (the task's content digest), as a
    Harbor folder has one (its files' stat): a rebuild over unchanged sources reads nothing."""

    def fingerprint(self, task_id: str) -> str:
        return self._tasks[task_id].aliases[0]


def main(argv: list[str] | None = None) -> int:
    """Build a snapshot from synthetic data (cold, then again over unchanged sources) and print
    the times of both stages, sizes and rows."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", type=int, default=7225)
    ap.add_argument("--tasks", type=int, default=51498)
    ap.add_argument("--out", type=Path, default=None, help="snapshot folder (default: temp)")
    ap.add_argument("--minimal", action="store_true", help="instruction-only tasks, no files")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    data = list(synth_envs(args.envs, args.tasks, minimal=args.minimal))
    gen = time.perf_counter() - t0
    out = args.out or Path(tempfile.mkdtemp(prefix="repogym-explorer-bench-"))
    runs = []
    try:
        for label in ("cold", "unchanged"):
            readers = [SynthReader(env, tasks) for env, tasks in data]
            cpu0 = time.process_time()
            info = build_snapshot(readers, out)
            runs.append((label, info, time.process_time() - cpu0))
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    result: dict = {
        "envs": runs[0][1]["envs"],
        "tasks": runs[0][1]["tasks"],
        "snapshot_mb": round(runs[0][1]["bytes"] / 1e6, 1),
        "pack_mb": round(runs[0][1]["pack_bytes"] / 1e6, 1),
        "generate_seconds": round(gen, 2),
        "load_average": round(os.getloadavg()[0], 1),
        "python_loop_ms": python_loop_ms(),
    }
    for label, info, cpu in runs:
        result[label] = {
            "snapshot_seconds": info["snapshot_seconds"],
            "ingest_seconds": info["ingest_seconds"],
            "total_seconds": info["seconds"],
            "cpu_seconds": round(cpu, 3),
            "pages_new": info["pages_new"],
            "pages_reused": info["pages_reused"],
            "blobs_new": info["blobs_new"],
        }
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"{result['envs']} envs, {result['tasks']} tasks; snapshot (index: rows + FTS) "
        f"{result['snapshot_mb']} MB, pack (pages + bodies) {result['pack_mb']} MB "
        f"(synthetic data generated in {gen:.2f} s, not counted)"
    )
    for label, _info, _cpu in runs:
        r = result[label]
        print(
            f"{label:>9}: snapshot build {r['snapshot_seconds']:.2f} s (rows -> checked, "
            f"published SQLite); ingest {r['ingest_seconds']:.2f} s (read, withhold, pack: "
            f"{r['pages_new']} pages new, {r['pages_reused']} reused); total "
            f"{r['total_seconds']:.2f} s wall, {r['cpu_seconds']:.2f} s CPU"
        )
    print(
        f"target: snapshot build < 1 s; load average {result['load_average']}; machine speed: "
        f"a fixed Python loop takes {result['python_loop_ms']} ms (lower is faster)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
