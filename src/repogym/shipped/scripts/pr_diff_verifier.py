#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP031, UP035, UP045  (runs under the task's Python, 3.8+)
"""Verifier of a text-only ``pr_diff`` task (standard library only).

The agent's answer is its edits to the working directory. This script rebuilds the unified
diff of those edits against the base snapshot (``/tests/base_manifest.json`` holds the sha256
of every base file; the base bytes of a changed file are read from the pristine copy in the
environment and must match the manifest), scores it against ``/tests/oracle.patch`` with
``/tests/diff_reward.py`` and writes ``reward.txt``, ``reward.json`` (the components) and
``reward-details.json`` (notes, ``judge_status``, the files the prediction touched) to
``/logs/verifier``. The predicted diff is kept as ``/logs/verifier/prediction.diff``.

Test files (the same rule the pipeline used to leave tests out of the gold), caches, VCS
folders, symlinks, binary files and files over ``MAX_FILE_BYTES`` are not part of the answer.

Optional LLM judge (OpenAI-compatible chat API over urllib), configured by environment:
``REPOGYM_JUDGE_URL`` (base URL, e.g. ``http://host:8000/v1``), ``REPOGYM_JUDGE_MODEL``,
``REPOGYM_JUDGE_API_KEY``, ``REPOGYM_JUDGE_TIMEOUT`` (seconds, default 60). On any judge failure
the reward is still written from the other components and ``judge_status`` says what failed.

``python3 verifier.py --make-diff BASE_DIR WORK_DIR`` prints the diff this verifier would score
(used by the pipeline to build the gold).
"""

import hashlib
import json
import os
import socket
import stat
import sys
import urllib.error
import urllib.request
from typing import Dict, List, Optional, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load_siblings(*names):
    """The modules ``names`` shipped beside this file, each run from its file here. Every
    module named like a file of this folder is dropped from ``sys.modules`` first, so that
    neither these nor the siblings they import by name (``infra.py`` puts this folder first on
    ``sys.path``) can be one that code run before this verifier left there. (``test.sh`` runs
    it as ``-I -S``: no such code runs; this holds however it is started.)"""
    from importlib.util import module_from_spec, spec_from_file_location

    own = os.path.basename(__file__)
    for entry in os.listdir(_HERE):
        if entry.endswith(".py") and entry != own:
            sys.modules.pop(entry[:-3], None)
    loaded = []
    for name in names:
        spec = spec_from_file_location(name, os.path.join(_HERE, name + ".py"))
        module = sys.modules[name] = module_from_spec(spec)
        spec.loader.exec_module(module)
        loaded.append(module)
    return loaded


if os.path.isfile(os.path.join(_HERE, "infra.py")):  # in a task: repogym's rule, copied beside
    _infra, _scorer = _load_siblings("infra", "diff_reward")
    is_test_path = _infra.is_test_path
else:  # imported by the pipeline on the host (which scores with repogym.shipped.diff_reward)
    from repogym.shipped.testfiles import is_test_path  # noqa: E402

    _scorer = None

HERE = os.path.dirname(os.path.abspath(__file__))
LOGS = "/logs/verifier"
MAX_FILE_BYTES = 1000000
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".venv",
        "node_modules",
        ".idea",
        ".vscode",
    }
)
SKIP_SUFFIXES = (".pyc", ".pyo", ".egg-info")


def _skipped_dir(name: str) -> bool:
    return name in SKIP_DIRS or name.endswith(SKIP_SUFFIXES)


def list_files(root: str) -> Dict[str, int]:
    """Regular files under ``root`` (relative path → size); symlinks are never followed."""
    out: Dict[str, int] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not _skipped_dir(d))
        for name in filenames:
            if name.endswith(SKIP_SUFFIXES):
                continue
            full = os.path.join(dirpath, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if not is_test_path(rel):
                out[rel] = st.st_size
    return out


def read_regular(path: str) -> Optional[bytes]:
    """Bytes of a regular file, or None (missing, a symlink, not a regular file)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def as_text(data: Optional[bytes]) -> Tuple[bool, Optional[str]]:
    """(is_text, text): None stays None; binary or oversized bytes are not text."""
    if data is None:
        return True, None
    if len(data) > MAX_FILE_BYTES or b"\0" in data:
        return False, None
    try:
        return True, data.decode("utf-8")
    except UnicodeDecodeError:
        return False, None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_of(root: str) -> Dict[str, str]:
    """sha256 of every answer-relevant file under ``root``."""
    out = {}
    for rel in list_files(root):
        data = read_regular(os.path.join(root, rel))
        if data is not None:
            out[rel] = sha256(data)
    return out


def collect_changes(
    base_dir: str, work_dir: str, manifest: Dict[str, str]
) -> Tuple[List[Tuple[str, Optional[str], Optional[str]]], List[str], List[str]]:
    """(text changes, binary paths skipped, tampered base paths) between base and work."""
    changes: List[Tuple[str, Optional[str], Optional[str]]] = []
    skipped: List[str] = []
    tampered: List[str] = []
    work = list_files(work_dir)
    for rel in sorted(set(work) | set(manifest)):
        new = read_regular(os.path.join(work_dir, rel)) if rel in work else None
        if new is not None and manifest.get(rel) == sha256(new):
            continue
        old: Optional[bytes] = None
        if rel in manifest:
            old = read_regular(os.path.join(base_dir, rel))
            if old is None or sha256(old) != manifest[rel]:
                tampered.append(rel)
                continue
        if old is None and new is None:
            continue
        ok_old, old_text = as_text(old)
        ok_new, new_text = as_text(new)
        if not (ok_old and ok_new):
            skipped.append(rel)
            continue
        changes.append((rel, old_text, new_text))
    return changes, skipped, tampered


def _load_scorer():
    return _scorer  # diff_reward.py, shipped beside this file


# ----------------------------------------------------------------------------- judge


def _redact(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def call_judge(messages: List[Dict[str, str]], environ=os.environ) -> Tuple[Optional[str], str]:
    """(answer text, status) from the configured OpenAI-compatible endpoint."""
    url = (environ.get("REPOGYM_JUDGE_URL") or "").strip().rstrip("/")
    if not url:
        return None, "off"
    key = (environ.get("REPOGYM_JUDGE_API_KEY") or "").strip()
    model = (environ.get("REPOGYM_JUDGE_MODEL") or "").strip() or "judge"
    try:
        timeout = float(environ.get("REPOGYM_JUDGE_TIMEOUT") or 60)
    except ValueError:
        timeout = 60.0
    body = json.dumps(
        {"model": model, "messages": messages, "temperature": 0, "max_tokens": 300}
    ).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    if not url.endswith("/chat/completions"):
        url += "/chat/completions"
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read(1 << 20)
    except urllib.error.HTTPError as exc:
        return None, "error: HTTP %d" % exc.code
    except TimeoutError:
        return None, "error: timeout after %gs" % timeout
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return None, "error: timeout after %gs" % timeout
        return None, _redact("error: cannot connect (%s)" % str(reason)[:120], key)
    except Exception as exc:  # noqa: BLE001 - any failure of the judge only turns it off
        return None, _redact("error: %s: %s" % (type(exc).__name__, str(exc)[:120]), key)
    try:
        data = json.loads(raw.decode("utf-8"))
        text = data["choices"][0]["message"]["content"]
        if not isinstance(text, str):
            raise TypeError
    except (ValueError, KeyError, IndexError, TypeError):
        return None, "error: unexpected response shape"
    return text, "ok"


# ----------------------------------------------------------------------------- main


def _write(name: str, data: str) -> None:
    with open(os.path.join(LOGS, name), "w", encoding="utf-8") as fh:
        fh.write(data)


def verify() -> int:
    with open(os.path.join(HERE, "config.json"), encoding="utf-8") as fh:
        config = json.load(fh)
    with open(os.path.join(HERE, "base_manifest.json"), encoding="utf-8") as fh:
        manifest = json.load(fh)
    with open(os.path.join(HERE, "oracle.patch"), encoding="utf-8") as fh:
        gold = fh.read()
    instruction = ""
    if os.path.isfile(os.path.join(HERE, "instruction.md")):
        with open(os.path.join(HERE, "instruction.md"), encoding="utf-8") as fh:
            instruction = fh.read()
    scorer = _load_scorer()
    work_dir, base_dir = config["workdir"], config["base_dir"]
    details = {"judge_status": "off", "notes": []}  # type: dict
    if os.path.islink(work_dir) or not os.path.isdir(work_dir):
        changes, skipped, tampered = [], [], [work_dir]
    else:
        changes, skipped, tampered = collect_changes(base_dir, work_dir, manifest)
    predicted = scorer.tree_diff(changes)
    _write("prediction.diff", predicted)
    if tampered:
        # The base snapshot was changed, so the edits cannot be measured: nothing earned.
        result = scorer.score_diff("", gold)
        details["notes"].append("base snapshot modified: %s" % ", ".join(tampered[:5]))
        details["judge_status"] = "skipped (base snapshot modified)"
    else:
        judge = None
        result = scorer.score_diff(predicted, gold)
        judge_on = bool((os.environ.get("REPOGYM_JUDGE_URL") or "").strip())
        if not result["format_valid"]:
            if judge_on:
                details["judge_status"] = "skipped (no valid diff to judge)"
        elif predicted.strip() == gold.strip():
            # The reference change itself: nothing for a judge to add (and no call to pay for).
            if judge_on:
                details["judge_status"] = "skipped (prediction identical to the gold)"
        else:
            messages = scorer.judge_messages(predicted, gold, instruction)
            answer, status = call_judge(messages)
            if answer is not None:
                try:
                    judge = scorer.parse_judge_score(answer)
                except ValueError as exc:
                    status = "error: unparseable answer (%s)" % exc
            details["judge_status"] = status
            if judge is not None:
                result = scorer.score_diff(predicted, gold, judge=judge)
    reward = float(result["reward"])
    details.update(
        {
            "reward": reward,
            "format_valid": result["format_valid"],
            "capped": result["capped"],
            "weights": result["weights"],
            "notes": details["notes"] + result["notes"],
            "files_changed": [c[0] for c in changes],
            "binary_or_large_skipped": skipped,
        }
    )
    components = dict(result["components"])
    components["reward"] = reward
    _write("reward-details.json", json.dumps(details, indent=2, sort_keys=True) + "\n")
    _write("reward.json", json.dumps(components, indent=2, sort_keys=True) + "\n")
    _write("reward.txt", "%s\n" % reward)
    print("reward %s (judge: %s)" % (reward, details["judge_status"]))
    return 0


def main(argv: List[str]) -> int:
    if len(argv) == 4 and argv[1] == "--make-diff":
        base, work = argv[2], argv[3]
        changes, _skipped, _ = collect_changes(base, work, manifest_of(base))
        sys.stdout.write(_load_scorer().tree_diff(changes))
        return 0
    if len(argv) != 1:
        sys.stderr.write("usage: verifier.py [--make-diff BASE_DIR WORK_DIR]\n")
        return 2
    return verify()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
