#!/usr/bin/env python3
# ruff: noqa: UP031, UP032  (runs under the task's Python, possibly 3.6)
"""Apply a unified diff with the standard library only (for images without git or patch).

Usage: apply_patch.py PATCH [DIR]. Text hunks only (a git binary patch is refused); each hunk
must match its context exactly, searched outward from the line its header names. Nothing is
written unless every hunk of every file applies.
"""

import os
import re
import sys

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _path(header):
    name = header[4:].split("\t")[0].rstrip("\n")
    if name.startswith('"') and name.endswith('"'):
        name = (
            name[1:-1].encode("latin-1").decode("unicode_escape").encode("latin-1").decode("utf-8")
        )
    if name == "/dev/null":
        return None
    return name.split("/", 1)[1] if "/" in name else name


def parse(lines):
    files, i = [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("GIT binary patch"):
            raise ValueError("binary patches are not supported")
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            entry = {"old": _path(line), "new": _path(lines[i + 1]), "hunks": []}
            files.append(entry)
            i += 2
            continue
        m = HUNK.match(line)
        if m and files:
            old_n = int(m.group(2) or "1")
            new_n = int(m.group(4) or "1")
            hunk = {"start": int(m.group(1)), "old": [], "new": []}
            i += 1
            while (old_n > 0 or new_n > 0) and i < len(lines):
                body = lines[i]
                tag, text = body[:1], body[1:]
                if body.startswith("\\"):
                    i += 1
                    continue
                if tag in (" ", "\n", ""):
                    text = text if tag == " " else "\n"
                    hunk["old"].append(text)
                    hunk["new"].append(text)
                    old_n, new_n = old_n - 1, new_n - 1
                elif tag == "-":
                    hunk["old"].append(text)
                    old_n -= 1
                elif tag == "+":
                    hunk["new"].append(text)
                    new_n -= 1
                else:
                    raise ValueError("malformed hunk near line %d" % (i + 1))
                i += 1
                if i < len(lines) and lines[i].startswith("\\"):
                    # "\ No newline at end of file" refers to the line just read.
                    if tag in ("-", " "):
                        hunk["old"][-1] = hunk["old"][-1].rstrip("\n")
                    if tag in ("+", " "):
                        hunk["new"][-1] = hunk["new"][-1].rstrip("\n")
            entry_hunks = files[-1]["hunks"]
            entry_hunks.append(hunk)
            continue
        i += 1
    return files


def apply_hunks(content, hunks):
    lines = content.splitlines(True)
    offset = 0
    for hunk in hunks:
        want = hunk["old"]
        guess = max(0, hunk["start"] - 1 + offset) if want else hunk["start"] + offset
        found = None
        for delta in range(0, len(lines) + 1):
            for pos in (guess - delta, guess + delta):
                if 0 <= pos <= len(lines) - len(want) and lines[pos : pos + len(want)] == want:
                    found = pos
                    break
            if found is not None:
                break
        if found is None:
            raise ValueError("hunk at line %d does not apply" % hunk["start"])
        lines[found : found + len(want)] = hunk["new"]
        offset = found - (hunk["start"] - 1) + len(hunk["new"]) - len(want)
    return "".join(lines)


def main(argv):
    patch_path = argv[1]
    root = argv[2] if len(argv) > 2 else "."
    with open(patch_path, encoding="utf-8", errors="surrogateescape") as fh:
        files = parse(fh.read().splitlines(True))
    if not files:
        raise SystemExit("apply_patch: no file in the patch")
    results = []
    for entry in files:
        old, new = entry["old"], entry["new"]
        content = ""
        if old is not None:
            with open(os.path.join(root, old), encoding="utf-8", errors="surrogateescape") as fh:
                content = fh.read()
        results.append((old, new, apply_hunks(content, entry["hunks"])))
    for old, new, content in results:
        if new is None:
            os.unlink(os.path.join(root, old))
            continue
        dest = os.path.join(root, new)
        if os.path.dirname(dest) and not os.path.isdir(os.path.dirname(dest)):
            os.makedirs(os.path.dirname(dest))
        with open(dest, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(content)
        if old is not None and old != new:
            os.unlink(os.path.join(root, old))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
