"""Submit a set of file changes to a repogym task as one real trial, and read the reward.

The third-party auditors in ``test_auditors.py`` each run in a virtualenv of their own, so they
reach repogym only through this file, run as a script with repogym's interpreter (standard
library only; it shells out to ``repogym run``):

``python trials.py submit --task DIR --changes FILE.json``
    FILE.json is ``{"files": {path: text or null}, "commands": [shell, ...]}``: a relative path is
    under the task's working directory, an absolute one is written as it is, ``null`` deletes.
    Prints ``{"reward": float or null, "error": ..., "details": {...}}`` as JSON (details: the
    verifier's tamper flags and test counts from ``reward-details.json``).

``python trials.py grade --task DIR --pristine TREE --workspace TREE``
    gradecheck's grade command: the differences between the starting tree and the submitted one
    are the changes; prints ``REWARD: <milli>/1000`` and ``RESULT: PASS`` when the reward is 1.

Either way the changes are made by a ``command:`` agent (``repogym run TASK --agent
command:'…' --json``), which lays them down in the task's sandbox as a base64 tar archive: the
sandbox cannot see the host's files. The task's verifier then decides the reward, exactly as
for any other agent.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# repogym's command line: $REPOGYM_BIN, else beside this interpreter (run this file with
# repogym's), else the checkout's .venv.
REPOGYM = os.environ.get("REPOGYM_BIN") or next(
    (
        str(p)
        for p in (Path(sys.executable).parent / "repogym", ROOT / ".venv" / "bin" / "repogym")
        if p.exists()
    ),
    "repogym",
)
WORKDIR = "/workspace"


def _bytes(text: str) -> bytes:
    """The bytes of a file's text: raw bytes read with surrogateescape come back as they were, and
    a lone surrogate (a probe may send one) is written as its UTF-8-like encoding, not refused."""
    for errors in ("strict", "surrogateescape", "surrogatepass"):
        try:
            return text.encode("utf-8", errors)
        except UnicodeEncodeError:
            continue
    return text.encode("utf-8", "replace")


def _archive(members: dict[str, str], mode: int) -> str:
    """A gzipped tar archive of these files (with this mode), base64-encoded."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, text in sorted(members.items()):
            data = _bytes(text)
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def agent_command(
    files: dict[str, str | None], commands: list[str] = (), workdir: str = WORKDIR
) -> str:
    """The shell command of a ``command:`` agent that makes these changes, then runs ``commands``."""
    lines = [f"cd {shlex.quote(workdir)}"]
    deleted = [p for p, text in files.items() if text is None]
    if deleted:
        lines.append("rm -rf -- " + " ".join(shlex.quote(p) for p in sorted(deleted)))
    written = {p: t for p, t in files.items() if t is not None}
    # Relative paths are extracted under the workdir, absolute ones under / (stored without
    # their leading slash, and executable: they may stand in for a program): one archive each.
    for root, absolute in (("/", True), (".", False)):
        members = {p.lstrip("/"): t for p, t in written.items() if p.startswith("/") == absolute}
        if members:
            lines.append(
                f"printf %s {_archive(members, 0o755 if absolute else 0o644)} | base64 -d | tar -xzf - -C {root} --no-same-owner"
            )
    lines.extend(commands)
    return "\n".join(lines) + "\n"


def submit(
    task: Path,
    files: dict[str, str | None],
    commands: list[str] = (),
    *,
    verification: str | None = None,
) -> dict:
    """Run one trial of ``task`` with an agent that makes these changes; the trial's reward."""
    out = Path(tempfile.mkdtemp(prefix="repogym-external-"))
    try:
        argv = [
            REPOGYM,
            "run",
            str(task),
            "--agent",
            "command:" + agent_command(files, list(commands)),
        ]
        argv += ["--json", "--out", str(out / "job"), "--overwrite"]
        if verification:
            argv += ["--verification", verification]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        try:
            trial = json.loads(proc.stdout)["trials"][0]
        except (ValueError, KeyError, IndexError):
            return {
                "reward": None,
                "error": f"repogym run exited {proc.returncode}: {proc.stderr[-2000:]}",
            }
        details = {}
        try:
            result = json.loads(Path(trial["result"]).read_text())
            details = (result.get("verifier_result") or {}).get("details") or {}
        except (OSError, ValueError, KeyError, TypeError):
            pass
        keep = (
            "tampered",
            "tamper",
            "f2p_passed",
            "f2p_total",
            "p2p_passed",
            "p2p_total",
            "resolved",
        )
        return {
            "reward": trial.get("reward"),
            "error": trial.get("error"),
            "details": {k: details[k] for k in keep if k in details},
        }
    finally:
        shutil.rmtree(out, ignore_errors=True)


def tree_changes(pristine: Path, workspace: Path) -> dict[str, str | None]:
    """Files of ``workspace`` that differ from ``pristine`` (their text), and those it lacks (None)."""

    def files(root: Path) -> dict[str, Path]:
        return {
            p.relative_to(root).as_posix(): p
            for p in root.rglob("*")
            if p.is_file() or p.is_symlink()
        }

    before, after = files(pristine), files(workspace)
    changes: dict[str, str | None] = {rel: None for rel in before.keys() - after.keys()}
    for rel, path in after.items():
        data = path.read_bytes()
        if rel not in before or before[rel].read_bytes() != data:
            changes[rel] = data.decode("utf-8", errors="surrogateescape")
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trials.py")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("submit")
    s.add_argument("--task", type=Path, required=True)
    s.add_argument("--changes", type=Path, required=True)
    s.add_argument("--verification")
    g = sub.add_parser("grade")
    g.add_argument("--task", type=Path, required=True)
    g.add_argument("--pristine", type=Path, required=True)
    g.add_argument("--workspace", type=Path, required=True)
    g.add_argument("--log", type=Path, help="append one JSON line per grading here")
    args = parser.parse_args(argv)
    if args.cmd == "submit":
        spec = json.loads(args.changes.read_text())
        res = submit(
            args.task,
            spec.get("files", {}),
            spec.get("commands", []),
            verification=args.verification,
        )
        print(json.dumps(res))
        return 0
    changes = tree_changes(args.pristine, args.workspace)
    res = submit(args.task, changes)
    if args.log:
        with args.log.open("a") as fh:
            fh.write(
                json.dumps(
                    {
                        "written": sorted(k for k, v in changes.items() if v is not None),
                        "deleted": sorted(k for k, v in changes.items() if v is None),
                        **res,
                    }
                )
                + "\n"
            )
    reward = res["reward"]
    print(f"trial: {json.dumps(res)}")
    if reward is None:
        print("RESULT: ERROR")
        return 1
    print(f"REWARD: {round(reward * 1000)}/1000")
    if reward >= 1.0:
        print("RESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
