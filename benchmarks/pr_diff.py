"""pr_diff: generation speed and the rewards of typical answers, on a synthetic PR history.

    python benchmarks/pr_diff.py [--prs 20] [--modules 40] [--jobs 1]

Builds a git repository of ``--modules`` Python modules and ``--prs`` squash-merged PRs (each
adds a function to one module, with a test), runs ``pr_diff`` on it (verify gate included: two
oracle runs and a nop per task), and prints tasks per hour. Then, on one task in the local
sandbox, prints the reward, its components and the verifier's time for: the gold (oracle), an
empty answer (nop), an unrelated edit, the right function with other names, and deleting the
file the gold changes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

from repogym.pipelines import generate
from repogym.run.agents import CommandAgent, NopAgent, OracleAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.spec import GenerationInput
from repogym.taskdir import load_task


def _git(repo: Path, *args: str, tick: int = 0) -> None:
    env = dict(
        os.environ,
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="Bench",
        GIT_AUTHOR_EMAIL="bench@example.com",
        GIT_COMMITTER_NAME="Bench",
        GIT_COMMITTER_EMAIL="bench@example.com",
        GIT_AUTHOR_DATE=f"{1_700_000_000 + 60 * tick} +0000",
        GIT_COMMITTER_DATE=f"{1_700_000_000 + 60 * tick} +0000",
    )
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def build_history(repo: Path, prs: int, modules: int) -> None:
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    pkg = repo / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for m in range(modules):
        body = "".join(f"\n\ndef f{m}_{k}(x):\n    return x + {k}\n" for k in range(20))
        (pkg / f"mod{m}.py").write_text(f'"""Module {m}."""\n' + body)
    (repo / "tests").mkdir()
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "Initial package")
    for n in range(1, prs + 1):
        m = n % modules
        path = pkg / f"mod{m}.py"
        path.write_text(
            path.read_text()
            + f'\n\ndef scaled_{n}(values, factor):\n    """Scale by {n}."""\n'
            + f"    return [v * factor * {n} for v in values]\n"
        )
        (repo / "tests" / f"test_scaled_{n}.py").write_text(
            f"from pkg.mod{m} import scaled_{n}\n\n\n"
            f"def test_it():\n    assert scaled_{n}([1], 1)\n"
        )
        _git(repo, "add", "-A")
        msg = (
            f"Add a scaling helper number {n} to module {m} (#{n})\n\n"
            f"Callers need to multiply every value of a list by a factor and by {n}."
        )
        _git(repo, "commit", "-q", "-m", msg, tick=n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prs", type=int, default=20)
    ap.add_argument("--modules", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    for name in ("REPOGYM_JUDGE_URL", "REPOGYM_JUDGE_MODEL", "REPOGYM_JUDGE_API_KEY"):
        os.environ.pop(name, None)
    work = Path(tempfile.mkdtemp(prefix="repogym-prdiff-bench-"))
    try:
        repo = work / "lib"
        build_history(repo, args.prs, args.modules)
        out = work / "out"
        start = time.monotonic()
        result = generate(
            GenerationInput(repo=str(repo), pipeline="pr_diff", out=out, jobs=args.jobs)
        )
        wall = time.monotonic() - start
        s = result.stats
        print(
            f"generate: {s.seen} candidates, {s.kept} tasks in {wall:.1f} s "
            f"({s.kept / wall * 3600:,.0f} tasks/hour, {wall / max(s.kept, 1):.2f} s/task, "
            f"jobs={args.jobs}); dropped: {dict(s.drops)}"
        )
        task = load_task(out / "tasks" / f"local__lib-{args.prs}")
        m = args.prs % args.modules
        runner = TrialRunner(get_backend("local"))
        answers = {
            "gold (oracle)": OracleAgent(),
            "empty (nop)": NopAgent(),
            "unrelated edit": CommandAgent(
                f"printf '\\ndef other():\\n    return 0\\n' >> pkg/mod{(m + 1) % args.modules}.py"
            ),
            "same function, other names": CommandAgent(
                f"printf '\\n\\ndef scaled_{args.prs}(xs, k):\\n"
                f"    return [x * k * {args.prs} for x in xs]\\n' >> pkg/mod{m}.py"
            ),
            "delete the gold's file": CommandAgent(f"rm pkg/mod{m}.py"),
        }
        for label, agent in answers.items():
            o = runner.run(task, agent)
            v = o.timings["verifier"]
            secs = (
                datetime.fromisoformat(v.finished_at) - datetime.fromisoformat(v.started_at)
            ).total_seconds()
            comps = {k: round(x, 3) for k, x in (o.reading.rewards or {}).items() if k != "reward"}
            print(f"{label:28s} reward {o.reward!s:8s} verifier {secs:.2f} s  {comps}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
