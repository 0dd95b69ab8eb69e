"""Run one repogym command against a full or read-only file system, and report what it did.

Executed as ``unshare --user --map-root-user --mount python -m tests.faults.fsfault SPEC``: in
its own mount namespace it mounts a small tmpfs at ``SPEC["mount"]``, copies the example tasks
to ``<mount>/ds`` (and an indexed copy of them to ``<mount>/indexed``), then fills the file
system (``full``) or remounts it read-only (``readonly``), runs ``python -m repogym.cli`` with
``SPEC["argv"]`` (``{mnt}`` replaced by the mount point) and prints one JSON object: exit code,
stderr, and every path under the mount before and after (with sizes), so the caller can tell
what was left behind. Nothing outside the namespace sees the tmpfs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "tasks"


def listing(root: Path) -> dict[str, int]:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = -1 if p.is_dir() else p.lstat().st_size
    return out


def fill(root: Path) -> None:
    """Write until the file system refuses another page."""
    with open(root / ".fill", "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    try:  # leave no partial page free either
        with open(root / ".fill-tail", "wb") as fh:
            while True:
                fh.write(b"\0")
                fh.flush()
    except OSError:
        pass


def main() -> None:
    spec = json.loads(sys.argv[1])
    mnt = Path(spec["mount"])
    mnt.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={spec.get('size', '4m')}", "tmpfs", mnt], check=True
    )
    shutil.copytree(EXAMPLES, mnt / "ds")
    shutil.copytree(EXAMPLES, mnt / "indexed")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **spec.get("env", {})}
    cli = [sys.executable, "-m", "repogym.cli"]
    subprocess.run(
        [*cli, "dataset", "index", str(mnt / "indexed")], check=True, env=env, capture_output=True
    )
    if spec["kind"] == "full":
        fill(mnt)
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
    before = listing(mnt)
    argv = [a.replace("{mnt}", str(mnt)) for a in spec["argv"]]
    res = subprocess.run([*cli, *argv], capture_output=True, text=True, env=env, timeout=600)
    print(
        json.dumps(
            {
                "rc": res.returncode,
                "stdout": res.stdout,
                "stderr": res.stderr,
                "before": before,
                "after": listing(mnt),
            }
        )
    )


if __name__ == "__main__":
    main()
