"""History mining throughput of ``LocalGitSource`` on a large synthetic repository.

    python benchmarks/mine.py [--commits 10400] [--merge-prs 600] [--squash-prs 600]
                              [--seed 7] [--dir PATH] [--rebuild]

Builds once (cached under the temp dir, keyed by the parameters) a repository with
``git fast-import``: ~900 files in 40 packages (sources, tests, docs, a few binaries), plain
commits, squash-merged PRs (``Title (#N)``) and PR branches of 1-4 commits merged with
``Merge pull request #N from user/branch`` (main sometimes moves while a PR is open), plus
renames and deletions. Then prints:

* commits/s for ``iter_commits`` over the whole history and over the first-parent line,
* PRs found and PRs/s for ``iter_pull_requests``,
* the time for ``diff`` + ``split_patch`` of 100 commits, and of one snapshot export.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

from repogym.sources.local import _LOG_FILES, _LOG_FLAGS, LocalGitSource
from repogym.sources.patches import split_patch

VERBS = ["parse", "load", "save", "cache", "retry", "merge", "split", "render", "index", "query"]
NOUNS = ["token", "buffer", "stream", "config", "option", "user", "session", "error", "worker"]
WORDS = VERBS + NOUNS + ["schema", "model", "field", "layout", "event", "hook", "plugin", "client"]
AUTHORS = [(f"Dev {i}", f"dev{i}@example.com") for i in range(30)]
EPOCH = 1_500_000_000


class Builder:
    """Generates a fast-import stream while tracking file contents in memory."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.mark = 0
        self.time = EPOCH
        self.files: dict[str, list[str] | bytes] = {}
        self.out: list[bytes] = []
        self.commits = 0
        self.pr = 0
        packages = [f"pkg{i:02d}" for i in range(40)]
        for pkg in packages:
            for j in range(10):
                self.files[f"src/{pkg}/mod{j}.py"] = self._lines(40)
                self.files[f"tests/{pkg}/test_mod{j}.py"] = self._lines(30)
            self.files[f"docs/{pkg}.md"] = self._lines(20)
        for k in range(20):
            self.files[f"assets/img{k}.png"] = rng.randbytes(2048)

    # -- content

    def _line(self) -> str:
        r = self.rng
        return f"    {r.choice(WORDS)}_{r.randrange(999)} = {r.choice(WORDS)}({r.randrange(99)})\n"

    def _lines(self, n: int) -> list[str]:
        return [self._line() for _ in range(n)]

    def _edit(self, state: dict[str, list[str] | bytes], path: str) -> None:
        old = state[path]
        if isinstance(old, bytes):
            state[path] = self.rng.randbytes(len(old))
            return
        lines = list(old)
        for _ in range(self.rng.randint(1, 4)):
            i = self.rng.randrange(len(lines) + 1)
            if self.rng.random() < 0.5 and i < len(lines):
                lines[i] = self._line()
            else:
                lines.insert(i, self._line())
        state[path] = lines

    def _pick(self, state: dict[str, list[str] | bytes], avoid: Collection[str] = ()) -> str:
        while True:
            path = self.rng.choice(list(state))
            if path not in avoid:
                return path

    # -- stream

    def _data(self, payload: bytes) -> None:
        self.out.append(b"data %d\n" % len(payload))
        self.out.append(payload)
        self.out.append(b"\n")

    def commit(
        self,
        ref: str,
        message: str,
        changes: Mapping[str, list[str] | bytes | None],
        *,
        parent: int | None = None,
        merge: int | None = None,
    ) -> int:
        self.mark += 1
        self.commits += 1
        self.time += self.rng.randint(60, 7200)
        name, email = self.rng.choice(AUTHORS)
        who = f"{name} <{email}> {self.time} +0000".encode()
        self.out.append(f"commit {ref}\nmark :{self.mark}\n".encode())
        self.out.append(b"author " + who + b"\ncommitter " + who + b"\n")
        self._data(message.encode())
        if parent is not None:
            self.out.append(f"from :{parent}\n".encode())
        if merge is not None:
            self.out.append(f"merge :{merge}\n".encode())
        for path, content in changes.items():
            if content is None:
                self.out.append(f"D {path}\n".encode())
                continue
            blob = content if isinstance(content, bytes) else "".join(content).encode()
            self.out.append(f"M 100644 inline {path}\n".encode())
            self._data(blob)
        return self.mark

    def title(self) -> str:
        words = self.rng.sample(WORDS, 4)
        return f"{words[0].capitalize()} {words[1]} {words[2]} for {words[3]}"


def build(dest: Path, commits: int, merge_prs: int, squash_prs: int, seed: int) -> None:
    """Write the synthetic repository into ``dest`` (a new directory)."""
    rng = random.Random(seed)
    b = Builder(rng)
    main = b.commit("refs/heads/main", "Initial import\n", dict(b.files))
    events = ["merge"] * merge_prs + ["squash"] * squash_prs
    # each merge PR adds ~4 commits; fill the rest with plain commits
    plain = max(0, commits - 1 - squash_prs - 4 * merge_prs)
    events += ["plain"] * plain + ["move"] * (plain // 50)
    rng.shuffle(events)
    for event in events:
        if event == "plain":
            changes: dict[str, list[str] | bytes | None] = {}
            for _ in range(rng.randint(1, 4)):
                path = b._pick(b.files)
                b._edit(b.files, path)
                changes[path] = b.files[path]
            main = b.commit("refs/heads/main", b.title() + "\n", changes, parent=main)
        elif event == "move":  # a rename (with a small edit) and a deletion
            old = b._pick(b.files)
            content = b.files.pop(old)
            new = old.replace(".py", "_v2.py").replace(".md", "_v2.md").replace(".png", "_2.png")
            b.files[new] = content
            b._edit(b.files, new)
            gone = b._pick(b.files, {new})
            del b.files[gone]
            changes = {old: None, new: b.files[new], gone: None}
            main = b.commit("refs/heads/main", f"Move {old}\n", changes, parent=main)
        elif event == "squash":
            b.pr += 1
            changes = {}
            for _ in range(rng.randint(1, 6)):
                path = b._pick(b.files)
                b._edit(b.files, path)
                changes[path] = b.files[path]
            msg = f"{b.title()} (#{b.pr})\n\n* {b.title()}\n* {b.title()}\n"
            main = b.commit("refs/heads/main", msg, changes, parent=main)
        else:  # merge PR: a branch of 1-4 commits, main may move meanwhile, then merge
            b.pr += 1
            branch = f"refs/heads/pr/{b.pr}"
            state = dict(b.files)
            touched: dict[str, list[str] | bytes] = {}
            tip = main
            for _ in range(rng.randint(1, 4)):
                changes = {}
                for _ in range(rng.randint(1, 4)):
                    path = b._pick(state)
                    b._edit(state, path)
                    changes[path] = touched[path] = state[path]
                tip = b.commit(branch, b.title() + "\n", changes, parent=tip)
            if rng.random() < 0.5:  # main moves on files the PR does not touch
                path = b._pick(b.files, set(touched))
                b._edit(b.files, path)
                main = b.commit(
                    "refs/heads/main", b.title() + "\n", {path: b.files[path]}, parent=main
                )
            b.files.update(touched)
            msg = f"Merge pull request #{b.pr} from dev/pr-{b.pr}\n\n{b.title()}\n"
            main = b.commit("refs/heads/main", msg, touched, parent=main, merge=tip)
    tmp = dest.with_name(dest.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp)], check=True)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=tmp, input=b"".join(b.out), check=True)
    subprocess.run(["git", "reset", "-q", "--hard"], cwd=tmp, check=True)
    (tmp / ".git" / "bench-complete").write_text(f"{b.commits} commits, {b.pr} PRs\n")
    tmp.rename(dest)


def timed(label: str, fn, unit: str | None = None) -> object:
    t0 = time.perf_counter()
    result = fn()
    dt = time.perf_counter() - t0
    if unit is not None:
        print(f"{label:<44} {result:>7} {unit} in {dt:6.2f} s  = {result / dt:9.0f} {unit}/s")
    else:
        print(f"{label:<44} {dt:6.2f} s")
    return result


def _count(it: Iterator[object]) -> int:
    return sum(1 for _ in it)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", type=int, default=10_400)
    ap.add_argument("--merge-prs", type=int, default=600)
    ap.add_argument("--squash-prs", type=int, default=600)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dir", type=Path, default=None, help="where to cache the repository")
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()

    key = hashlib.sha256(
        f"v2-{args.commits}-{args.merge_prs}-{args.squash_prs}-{args.seed}".encode()
    ).hexdigest()[:12]
    repo = args.dir or Path(tempfile.gettempdir()) / f"repogym-bench-mine-{key}"
    if args.rebuild or not (repo / ".git" / "bench-complete").exists():
        shutil.rmtree(repo, ignore_errors=True)
        timed(
            f"build with git fast-import ({repo.name})",
            lambda: build(repo, args.commits, args.merge_prs, args.squash_prs, args.seed),
        )
    print(f"repository: {repo} ({(repo / '.git' / 'bench-complete').read_text().strip()})")

    src = LocalGitSource(repo)

    def git_only() -> int:
        cmd = ["git", "log", *_LOG_FLAGS, *_LOG_FILES, "HEAD"]
        subprocess.run(cmd, cwd=repo, stdout=subprocess.DEVNULL, check=True)
        return int(subprocess.check_output(["git", "rev-list", "--count", "HEAD"], cwd=repo))

    timed("baseline: git log alone (same flags)", git_only, "commits")
    timed(
        "iter_commits, whole history",
        lambda: _count(src.iter_commits(first_parent=False)),
        "commits",
    )
    timed("iter_commits, first parent", lambda: _count(src.iter_commits()), "commits")
    t0 = time.perf_counter()
    prs = list(src.iter_pull_requests())
    dt = time.perf_counter() - t0
    merges = sum(p.kind == "merge" for p in prs)
    print(
        f"{'iter_pull_requests':<44} {len(prs):>7} PRs     in {dt:6.2f} s  = {len(prs) / dt:9.0f}"
        f" PRs/s  ({merges} merge, {len(prs) - merges} squash)"
    )

    plain = [c for c in src.iter_commits() if len(c.parents) == 1]
    step = max(1, len(plain) // 100)
    sample = plain[::step][:100]

    def diff_split() -> int:
        size = 0
        for c in sample:
            source, tests = split_patch(src.diff(c.parents[0], c.sha))
            size += len(source) + len(tests)
        return size

    t0 = time.perf_counter()
    size = diff_split()
    dt = time.perf_counter() - t0
    print(
        f"{'diff + split_patch, 100 commits':<44} {dt:6.2f} s  ({dt * 10:.1f} ms/commit, "
        f"{size / 1e6:.1f} MB of patch)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        timed(
            f"export_snapshot HEAD ({len(src.list_files('HEAD'))} files)",
            lambda: src.export_snapshot("HEAD", Path(tmp) / "snap"),
        )
    src.close()


if __name__ == "__main__":
    main()
