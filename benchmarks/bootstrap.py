"""Environment setup success rate on a fixed list of small public repositories.

Fetch the repositories first (full clones: ``--years-back`` reads their history), e.g.::

    mkdir -p ~/repogym-bench && cd ~/repogym-bench
    python /path/to/repogym/benchmarks/bootstrap.py --clone-commands | sh

which runs ``git clone https://github.com/OWNER/NAME OWNER__NAME`` for each repository of
:data:`REPOS`. Then::

    python benchmarks/bootstrap.py --dir ~/repogym-bench [--jobs 2] [--years-back 2] [--refresh]

bootstraps and checks each clone found (build + collect in the local sandbox, exactly as
``repogym bootstrap --repos`` does), prints one line per repository as it finishes, then the
success rate overall and per language, the failure causes grouped, and the time per
repository. Clones not found are listed and left out of the numbers. Results are appended to
``--results`` (default ``<dir>/bootstrap-bench[-<at>].jsonl``) as each repository finishes;
``--resume`` continues a killed run. Check outcomes are cached by repository, commit and
recipe (``$REPOGYM_CACHE/recipes``): use ``--refresh`` for cold numbers.

The list mixes Python packaging styles (setuptools, flit, hatch, poetry, version from git
tags), pytest and unittest, JavaScript runners (mocha, vitest, tap, ava, uvu) and one Rust and
one Go crate, so the figure reflects what repogym meets in the field rather than its best case.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

from repogym.bootstrap.survey import At, RepoResult, run_survey, totals

REPOS: list[tuple[str, str]] = [
    # Python
    ("pallets/itsdangerous", "python"),
    ("pallets/markupsafe", "python"),
    ("pallets/click", "python"),
    ("tkem/cachetools", "python"),
    ("more-itertools/more-itertools", "python"),
    ("hukkin/tomli", "python"),
    ("python-humanize/humanize", "python"),
    ("jd/tenacity", "python"),
    ("pytest-dev/iniconfig", "python"),
    ("pypa/packaging", "python"),
    ("mahmoud/boltons", "python"),
    ("marshmallow-code/marshmallow", "python"),
    ("python-attrs/attrs", "python"),
    ("pyparsing/pyparsing", "python"),
    ("benjaminp/six", "python"),
    ("jazzband/prettytable", "python"),
    ("Textualize/rich", "python"),
    # JavaScript
    ("jshttp/mime-types", "node"),
    ("jshttp/cookie", "node"),
    ("expressjs/cors", "node"),
    ("isaacs/node-semver", "node"),
    ("sindresorhus/escape-string-regexp", "node"),
    ("lukeed/clsx", "node"),
    ("ai/nanoid", "node"),
    # Rust, Go
    ("rust-lang/cfg-if", "rust"),
    ("google/uuid", "go"),
]
"""``(owner/name, language)``: small repositories with tests, fetched by the user."""


def find_clone(root: Path, repo: str) -> Path | None:
    """The clone of ``owner/name`` under ``root``: ``owner__name``, ``owner/name`` or ``name``."""
    owner, name = repo.split("/")
    for candidate in (root / f"{owner}__{name}", root / owner / name, root / name):
        if (candidate / ".git").exists() or (candidate / "HEAD").is_file():
            return candidate
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, help="folder holding the clones")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--at", default="HEAD", help="the ref checked in each repository")
    ap.add_argument("--years-back", type=float, default=None)
    ap.add_argument("--sandbox", default="local")
    ap.add_argument("--refresh", action="store_true", help="ignore cached check outcomes")
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument(
        "--clone-commands", action="store_true", help="print the git clone commands and exit"
    )
    args = ap.parse_args()
    if args.clone_commands:
        for repo, _ in REPOS:
            print(f"git clone -q https://github.com/{repo} {repo.replace('/', '__')}")
        return
    if args.dir is None:
        ap.error("--dir is required (or --clone-commands)")
    at = At(ref=args.at, years_back=args.years_back)
    found = {repo: find_clone(args.dir, repo) for repo, _ in REPOS}
    missing = [repo for repo, path in found.items() if path is None]
    if missing:
        print(f"not fetched ({len(missing)}, left out): {', '.join(missing)}", file=sys.stderr)
    present = [(repo, path) for repo, path in found.items() if path is not None]
    if not present:
        sys.exit(f"no clone of the listed repositories under {args.dir}; see --clone-commands")
    language = {str(path): lang for (repo, lang) in REPOS if (path := found[repo]) is not None}
    suffix = "" if at.label == "HEAD" else "-" + at.label.replace("~", "-").replace("/", "_")
    results = args.results or args.dir / f"bootstrap-bench{suffix}.jsonl"

    def on_result(result: RepoResult, finished: int, total: int) -> None:
        what = f"ok, {result.tests_collected} tests" if result.ok else f"FAIL {result.cause}"
        when = f" @ {result.commit_date[:10]}" if result.commit_date else ""
        print(
            f"[{finished}/{total}] {Path(result.repo).name}{when}: {what} ({result.seconds:.1f} s)",
            flush=True,
        )

    report = run_survey(
        [str(path) for _, path in present],
        at,
        jobs=args.jobs,
        sandbox=args.sandbox,
        refresh=args.refresh,
        results_file=results,
        resume=args.resume,
        on_result=on_result,
    )
    t = report.totals
    print(
        f"\nsetup success at {at.label}: {t['ok']}/{t['repos']} = {100 * t['success_rate']:.1f}% "
        f"({args.sandbox} sandbox, jobs={args.jobs}, {report.seconds:.0f} s wall)"
    )
    for lang in ("python", "node", "rust", "go"):
        mine = [r for r in report.results if language.get(r.repo) == lang]
        if mine:
            sub = totals(mine)
            print(f"  {lang:<7} {sub['ok']}/{sub['repos']} = {100 * sub['success_rate']:.0f}%")
    if t["causes"]:
        print("failure causes:")
        for cause, count in t["causes"].items():
            print(f"  {count:>3}  {cause}")
    steps = Counter(r.failed_step for r in report.results if not r.ok)
    if steps:
        print("failed step: " + ", ".join(f"{s} {n}" for s, n in steps.most_common()))
    seconds = [r.seconds for r in report.results if not r.cached]
    if seconds:
        print(
            f"seconds per repository (not cached): median {statistics.median(seconds):.1f}, "
            f"max {max(seconds):.1f}"
        )
    cached = sum(1 for r in report.results if r.cached)
    if cached:
        print(f"{cached} outcome(s) from the recipe cache (--refresh for cold numbers)")
    print(f"results: {results}")


if __name__ == "__main__":
    main()
