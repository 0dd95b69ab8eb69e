"""Red-team candidates built from a gold patch: which functions, which bodies, valid diffs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from repogym.verify.redteam import KINDS, SPOOF_CLASS, build_candidates

BASE = '''\
"""Shapes."""


def area(w, h):
    return w + h


def unit():
    return 0


class Box:
    def __init__(self, w):
        self.w = w

    def __eq__(self, other):
        return isinstance(other, Box) and other.w == self.w

    def grow(self, by):
        self.w = self.w
        return self

    def short(self): return self.w
'''

GOLD = (
    BASE.replace("return w + h", "return w * h")
    .replace("self.w = self.w", "self.w = self.w + by")
    .replace("return isinstance(other, Box) and other.w == self.w", "return isinstance(other, Box)")
)
GOLD = GOLD.replace("def unit():\n    return 0", "def unit():\n    return 1")
GOLD = GOLD.replace("def short(self): return self.w", "def short(self): return self.w * 1")


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "r"
    (repo / "shapes").mkdir(parents=True)
    (repo / "shapes" / "geo.py").write_text(BASE)
    git = ["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (repo / "shapes" / "geo.py").write_text(GOLD)
    (repo / "shapes" / "new.py").write_text("def twice(x):\n    return 2 * x\n")
    subprocess.run([*git, "add", "-A"], check=True)
    gold = subprocess.run(
        [*git, "diff", "--cached"], check=True, capture_output=True, text=True
    ).stdout
    subprocess.run([*git, "reset", "-q", "--hard"], check=True)
    subprocess.run([*git, "clean", "-qfd"], check=True)
    return repo, gold


def _applied(repo: Path, patch: str) -> dict[str, str]:
    subprocess.run(["git", "-C", str(repo), "apply", "-"], input=patch.encode(), check=True)
    try:
        return {
            p.relative_to(repo).as_posix(): p.read_text() for p in (repo / "shapes").glob("*.py")
        }
    finally:
        subprocess.run(["git", "-C", str(repo), "reset", "-q", "--hard"], check=True)
        subprocess.run(["git", "-C", str(repo), "clean", "-qfd"], check=True)


def test_every_kind_rewrites_each_touched_function_and_applies(tmp_path: Path) -> None:
    repo, gold = _repo(tmp_path)
    cands = build_candidates(
        gold, lambda p: (repo / p).read_text() if (repo / p).exists() else None
    )
    assert [c.kind for c in cands] == [
        k for k in KINDS if k != "exit"
    ]  # exit: compiled languages only
    touched = {
        "shapes/geo.py:area",
        "shapes/geo.py:unit",
        "shapes/geo.py:Box.__eq__",
        "shapes/geo.py:Box.grow",
        "shapes/new.py:twice",
    }
    for cand in cands:
        # __init__ and one-line definitions keep their bodies; every other touched one changes
        # (__eq__ too: a dunder is an answer like any function).
        assert set(cand.functions) == touched, cand.kind
        files = _applied(repo, cand.patch)
        geo, new = files["shapes/geo.py"], files["shapes/new.py"]
        compile(geo, "geo.py", "exec")
        assert "self.w = w" in geo and "return self.w * 1" in geo
        assert "return isinstance(other, Box)" not in geo
        assert "return w * h" not in geo and "return 2 * x" not in new
    by_kind = {c.kind: _applied(repo, c.patch) for c in cands}
    assert "def area(w, h):\n    return w\n" in by_kind["identity"]["shapes/geo.py"]
    assert "def grow(self, by):\n        return by\n" in by_kind["identity"]["shapes/geo.py"]
    # unit() has no argument: identity leaves it as the gold wrote it.
    assert "def unit():\n    return 1\n" in by_kind["identity"]["shapes/geo.py"]
    assert "raise NotImplementedError" in by_kind["raise"]["shapes/new.py"]


def test_the_spoof_is_equal_to_anything_and_survives_any_use(tmp_path: Path) -> None:
    repo, gold = _repo(tmp_path)
    cands = build_candidates(
        gold, lambda p: (repo / p).read_text() if (repo / p).exists() else None
    )
    spoof = next(c for c in cands if c.kind == "spoof")
    namespace: dict[str, object] = {}
    exec(compile(_applied(repo, spoof.patch)["shapes/geo.py"], "geo.py", "exec"), namespace)
    value = namespace["area"](2, 3)  # type: ignore[operator]
    assert type(value).__name__ == SPOOF_CLASS
    assert value == 6 and value == "anything" and value.__ne__(6) is False and value
    assert list(value) == [] and value.attribute.call()[0] == 1 and 3 in value


def test_odd_input_gives_no_candidates() -> None:
    assert build_candidates("not a patch", lambda p: None) == []
    docs_only = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\n"
    assert build_candidates(docs_only, lambda p: "a\n") == []
    # A change outside any function (a module constant) has no function to hollow.
    const = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n"
    assert build_candidates(const, lambda p: "X = 1\n") == []


JS_BASE = """\
"use strict";

function slugify(text) {
  return text.toLowerCase();
}

class Shelf {
  constructor(items) {
    this.items = items;
  }

  count(kind) {
    return this.items.length;
  }
}

const twice = (x) => {
  return x + x;
};

module.exports = { slugify, Shelf, twice };
"""
JS_GOLD = (
    JS_BASE.replace("return text.toLowerCase();", 'return text.toLowerCase().replace(/ +/g, "-");')
    .replace("return this.items.length;", "return this.items.filter((i) => i === kind).length;")
    .replace("return x + x;", "return 2 * x; // } not a brace")
)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is needed to check JavaScript")
def test_javascript_functions_get_every_kind_but_the_spoof(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    (repo / "lib").mkdir(parents=True)
    (repo / "lib" / "s.js").write_text(JS_BASE)
    git = ["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (repo / "lib" / "s.js").write_text(JS_GOLD)
    gold = subprocess.run([*git, "diff"], check=True, capture_output=True, text=True).stdout
    subprocess.run([*git, "checkout", "-q", "."], check=True)
    cands = build_candidates(gold, lambda p: (repo / p).read_text())
    assert [c.kind for c in cands] == [k for k in KINDS if k not in ("spoof", "exit")]
    for cand in cands:
        assert set(cand.functions) == {"lib/s.js:slugify", "lib/s.js:count", "lib/s.js:<anonymous>"}
        subprocess.run(
            ["git", "-C", str(repo), "apply", "-"], input=cand.patch.encode(), check=True
        )
        text = (repo / "lib" / "s.js").read_text()
        subprocess.run([*git, "checkout", "-q", "."], check=True)
        # The constructor keeps its body; the gold's lines are gone.
        assert "this.items = items;" in text and "filter" not in text and "replace" not in text
        if cand.kind == "identity":
            assert "function slugify(text) {\n  return text;\n}" in text
            assert "count(kind) {\n    return kind;\n  }" in text
            assert "const twice = (x) => {\n  return x;\n};" in text
