"""Mutants of a gold patch (``repogym.verify.mutants``), checked on real git repositories.

Every case builds a small repository with a base commit and a fix commit, takes the real
``git diff`` as the gold patch, builds the mutants and checks each one with
:func:`check_mutants`: it passes ``git apply --check`` and applies with ``git apply`` on an
export of the base tree, the mutated file differs from the gold, the other files of the gold
come out as in the gold, some code file differs from the base, and the mutated file still
compiles (Python: when the gold does on this interpreter; JavaScript: ``node --check``).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from repogym.sources.patches import decode_patch, encode_patch, files_in_patch, parse_patch
from repogym.verify.mutants import (
    KINDS,
    Mutant,
    build_mutants,
    default_is_code,
    is_release_notes,
    select_mutants,
)

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not on PATH")

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Ada Tester",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_NAME": "Ada Tester",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}


# --------------------------------------------------------------------------- helpers


def git(cwd: Path, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_ENV, GIT_CEILING_DIRECTORIES=str(cwd.parent))
    proc = subprocess.run(
        ["git", "-c", "user.name=x", "-c", "user.email=x@y", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        env=env,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def git_apply(workdir: Path, patch: str, *, check: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_ENV, GIT_CEILING_DIRECTORIES=str(workdir.parent))
    args = ["git", "apply", "--whitespace=nowarn"] + (["--check"] if check else [])
    return subprocess.run(
        args, cwd=workdir, input=encode_patch(patch), capture_output=True, env=env, check=False
    )


def compiles(data: bytes, path: str = "<mutant>") -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(data, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def node_ok(data: bytes) -> str | None:
    """The suffix (.js = CommonJS, .mjs = module) under which ``node --check`` passes."""
    assert NODE is not None
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "package.json").write_text('{"type": "commonjs"}\n')
        for suffix in (".js", ".mjs"):
            p = Path(tmp, "f" + suffix)
            p.write_bytes(data)
            if subprocess.run([NODE, "--check", str(p)], capture_output=True).returncode == 0:
                return suffix
    return None


def node_passes(data: bytes, suffix: str) -> bool:
    assert NODE is not None
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "package.json").write_text('{"type": "commonjs"}\n')
        p = Path(tmp, "f" + suffix)
        p.write_bytes(data)
        return subprocess.run([NODE, "--check", str(p)], capture_output=True).returncode == 0


Content = str | bytes


def _bytes(c: Content) -> bytes:
    return c.encode() if isinstance(c, str) else c


@dataclass
class Case:
    root: Path
    repo: Path
    base: str
    head: str
    gold: str

    def show(self, rev: str, path: str) -> bytes | None:
        spec = f"{rev}:{path}".encode("utf-8", "surrogateescape")
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(GIT_ENV)
        proc = subprocess.run(
            [b"git", b"cat-file", b"blob", spec], cwd=self.repo, capture_output=True, env=env
        )
        return proc.stdout if proc.returncode == 0 else None

    def read_base(self, path: str) -> str | None:
        data = self.show(self.base, path)
        return None if data is None else decode_patch(data)

    def export_base(self, dest: Path) -> None:
        data = git(self.repo, "archive", "--format=tar", self.base)
        dest.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest, filter="data")

    def mutants(self, **kw: object) -> list[Mutant]:
        return build_mutants(self.gold, self.read_base, **kw)  # type: ignore[arg-type]


def make_case(
    root: Path,
    base: dict[str, Content],
    head: dict[str, Content | None],
    *,
    modes: dict[str, int] | None = None,
) -> Case:
    """A repository whose second commit applies ``head`` (None deletes) over ``base``."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")

    def put(files: dict[str, Content | None]) -> None:
        for rel, content in files.items():
            p = Path(os.fsdecode(os.path.join(os.fsencode(repo), os.fsencode(rel))))
            if content is None:
                p.unlink()
                continue
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(_bytes(content))

    put(dict(base))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "base")
    base_sha = git(repo, "rev-parse", "HEAD").decode().strip()
    put(head)
    for rel, mode in (modes or {}).items():
        os.chmod(repo / rel, mode)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "fix")
    head_sha = git(repo, "rev-parse", "HEAD").decode().strip()
    gold = decode_patch(git(repo, "diff", "--binary", base_sha, head_sha))
    return Case(root, repo, base_sha, head_sha, gold)


def _read(root: Path, rel: str) -> bytes | None:
    p = os.path.join(os.fsencode(root), os.fsencode(rel))
    if not os.path.isfile(p):
        return None
    with open(p, "rb") as f:
        return f.read()


def check_mutants(case: Case, mutants: list[Mutant]) -> None:
    """Every mutant applies at the base and gives a different, still-compiling file."""
    gold_paths = files_in_patch(case.gold)
    gold_sections = {fp.path: fp.text for fp in parse_patch(case.gold)}
    for n, m in enumerate(mutants):
        assert m.kind in KINDS
        assert "\n" not in m.description and m.description
        assert m.line >= 1
        work = case.root / f"apply-{n}"
        case.export_base(work)
        chk = git_apply(work, m.patch, check=True)
        assert chk.returncode == 0, (m.description, m.patch, chk.stderr.decode(errors="replace"))
        done = git_apply(work, m.patch)
        assert done.returncode == 0, (m.description, done.stderr)
        state = _read(work, m.path)
        gold_state = case.show(case.head, m.path)
        base_state = case.show(case.base, m.path)
        assert state != gold_state, m.description
        for p in gold_paths:
            if p != m.path:
                assert _read(work, p) == case.show(case.head, p), (m.description, p)
        code_paths = [p for p in gold_paths if default_is_code(p)]
        assert any(_read(work, p) != case.show(case.base, p) for p in code_paths), m.description
        if state is not None and state != base_state:
            # the mutated file's section is the only one that differs from the gold
            others = {fp.path: fp.text for fp in parse_patch(m.patch) if fp.path != m.path}
            assert others == {p: t for p, t in gold_sections.items() if p != m.path}
        py = m.path.endswith(".py") and gold_state is not None
        if state is not None and py and compiles(gold_state or b"", m.path):
            assert compiles(state, m.path), (m.description, state)
        if state is not None and m.path.endswith((".js", ".mjs", ".cjs")) and NODE is not None:
            assert gold_state is not None
            suffix = node_ok(gold_state)
            if suffix is not None:
                if not m.path.endswith(".js"):
                    suffix = "." + m.path.rsplit(".", 1)[1]
                assert node_passes(state, suffix), (m.description, state)
        shutil.rmtree(work)


def kinds(mutants: list[Mutant]) -> set[str]:
    return {m.kind for m in mutants}


def mutant_text(case: Case, m: Mutant) -> bytes | None:
    work = case.root / "peek"
    if work.exists():
        shutil.rmtree(work)
    case.export_base(work)
    assert git_apply(work, m.patch).returncode == 0
    return _read(work, m.path)


# --------------------------------------------------------------------------- sources

PY_BASE = """\
import math


def area(r):
    return math.pi * r * r


def clamp(x, lo, hi):
    return x


def total(items):
    s = 0
    for it in items:
        s += it
    return s


def label(n):
    return str(n)
"""

PY_HEAD = """\
import math


def area(r):
    if r < 0:
        raise ValueError("negative radius")
    return math.pi * r * r


def clamp(x, lo, hi):
    return max(lo, min(x, hi))


def total(items):
    s = 0
    for it in items:
        s += it
    return s


def label(n):
    kind = "odd" if n % 2 else "even"
    return f"{n} ({kind})"
"""

JS_BASE = """\
'use strict';

function area(r) {
  return Math.PI * r * r;
}

function scale(v, k) {
  const out = v.map((x) => x * k);
  return out;
}

function clamp(x, lo, hi) {
  return x;
}

function total(items) {
  let s = 0;
  for (const it of items) {
    s += it;
  }
  return s;
}

module.exports = { area, clamp, total };
"""

JS_HEAD = """\
'use strict';

function area(r) {
  if (r < 0 || Number.isNaN(r)) {
    throw new Error('negative radius');
  }
  return Math.PI * r * r;
}

function scale(v, k) {
  const out = v.map((x) => x * k);
  return out;
}

function clamp(x, lo, hi) {
  const low = Math.max(lo, x);
  return Math.min(low, hi);
}

function total(items) {
  let s = 0;
  for (const it of items) {
    s += it;
  }
  return s;
}

module.exports = { area, clamp, total };
"""


# --------------------------------------------------------------------------- operators


def test_python_all_operators(tmp_path: Path) -> None:
    case = make_case(tmp_path, {"src/geo.py": PY_BASE}, {"src/geo.py": PY_HEAD})
    ms = case.mutants()
    assert kinds(ms) == set(KINDS)
    check_mutants(case, ms)
    by_desc = {m.description: m for m in ms}
    reverts = [m for m in ms if m.kind == "hunk_revert"]
    assert len(reverts) == len(parse_patch(case.gold)[0].text.split("\n@@")) - 1 >= 2
    assert any(d.startswith("revert hunk 2 of src/geo.py (@@ -") for d in by_desc)
    gold_lines = PY_HEAD.splitlines()
    for m in ms:
        if m.kind != "hunk_revert":
            # line points at an added line of the gold post-image where the mutation applies
            assert gold_lines[m.line - 1].strip() in m.description.replace("…", "")
    texts = {m.description: mutant_text(case, m) for m in ms}
    neg = [t for d, t in texts.items() if "negate condition" in d]
    assert neg == [PY_HEAD.replace("if r < 0:", "if not (r < 0):").encode()]
    tern = [t for d, t in texts.items() if "ternary" in d]
    assert tern == [PY_HEAD.replace('"odd" if n % 2 else', '"odd" if not (n % 2) else').encode()]
    rets = [t for m in ms if m.kind == "replace_return" for t in [texts[m.description]]]
    assert PY_HEAD.replace("return max(lo, min(x, hi))", "return None").encode() in rets
    assert PY_HEAD.replace('return f"{n} ({kind})"', "return None").encode() in rets
    drops = [t for m in ms if m.kind == "drop_statement" for t in [texts[m.description]]]
    raise_dropped = PY_HEAD.replace(
        '        raise ValueError("negative radius")\n', "        pass\n"
    )
    assert raise_dropped.encode() in drops
    assert PY_HEAD.replace('    kind = "odd" if n % 2 else "even"\n', "").encode() in drops
    # unchanged code (total) is never mutated; "return math.pi..." is a context line
    assert not any("s += it" in m.description or "math.pi" in m.description for m in ms)


@needs_node
def test_js_all_operators(tmp_path: Path) -> None:
    case = make_case(tmp_path, {"lib/geo.js": JS_BASE}, {"lib/geo.js": JS_HEAD})
    ms = case.mutants()
    assert kinds(ms) == set(KINDS)
    check_mutants(case, ms)
    texts = {m.description: mutant_text(case, m) for m in ms}
    assert (
        JS_HEAD.replace(
            "if (r < 0 || Number.isNaN(r))", "if (!(r < 0 || Number.isNaN(r)))"
        ).encode()
        in texts.values()
    )
    assert JS_HEAD.replace("return Math.min(low, hi);", "return undefined;").encode() in (
        texts.values()
    )
    assert JS_HEAD.replace("  const low = Math.max(lo, x);\n", "").encode() in texts.values()
    # throw and the 'use strict' directive are never dropped
    assert not any("throw" in d or "use strict" in d for d in texts if "drop" in d)


def test_js_operators_without_syntax_check(tmp_path: Path) -> None:
    case = make_case(tmp_path, {"lib/geo.js": JS_BASE}, {"lib/geo.js": JS_HEAD})
    ms = case.mutants(check_syntax=False)
    assert kinds(ms) == set(KINDS)
    check_mutants(case, ms)


def test_methods_named_if_in_an_object_literal_are_not_conditions(tmp_path: Path) -> None:
    """``{ if (y) { … } }`` in an object literal is a method called ``if``: negating its
    "condition" would not parse (found by the property test below)."""
    base = "function f(x) {\n  const o = {\n    a: 0,\n  };\n  return o;\n}\n"
    head = base.replace("    a: 0,\n", "    a: 0,\n    if (y) { y = 0; }\n")
    head += "function g(y) {\n  if (y) { y = 0; }\n  return y;\n}\n"
    case = make_case(tmp_path, {"lib/o.js": base}, {"lib/o.js": head})
    negated = [m.description for m in case.mutants(check_syntax=False) if "negate" in m.description]
    assert negated == ["negate condition at lib/o.js:9: if (y) { y = 0; }"]


def test_one_hunk_gold_has_no_hunk_revert(tmp_path: Path) -> None:
    base = "def f(x):\n    return x\n"
    head = "def f(x):\n    if x is None:\n        x = 0\n    return x + 1\n"
    case = make_case(tmp_path, {"pkg/m.py": base}, {"pkg/m.py": head})
    ms = case.mutants()
    assert "hunk_revert" not in kinds(ms)
    assert kinds(ms) == {"negate_condition", "drop_statement", "replace_return"}
    check_mutants(case, ms)


def test_two_files_one_hunk_each_revert_a_whole_file(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        {"a.py": "A = 1\n", "b.py": "B = 1\n"},
        {"a.py": "A = 2\n", "b.py": "B = 2\n"},
    )
    ms = case.mutants()
    reverts = [m for m in ms if m.kind == "hunk_revert"]
    assert [m.path for m in reverts] == ["a.py", "b.py"]
    check_mutants(case, ms)
    # reverting a.py leaves b.py as in the gold and a.py as in the base
    assert mutant_text(case, reverts[0]) == b"A = 1\n"


def test_release_notes_are_never_counted_mutated_or_reverted(tmp_path: Path) -> None:
    base = {
        "CHANGELOG.md": "# Changes\n",
        "docs/changelog.rst": "Changes\n=======\n",
        "changelog.d/12.fix.py": "x = 1\n",
        "src/m.py": "def f(x):\n    return x\n",
    }
    head = {
        "CHANGELOG.md": "# Changes\n\n- f handles None\n",
        "docs/changelog.rst": "Changes\n=======\n\n* f handles None\n",
        "changelog.d/12.fix.py": "if x:\n    y = 2\nreturn 3\n",
        "src/m.py": "def f(x):\n    if x is None:\n        return 0\n    return x\n",
    }
    case = make_case(tmp_path, base, head)
    for is_code in (None, lambda p: True):
        ms = case.mutants(is_code=is_code)
        assert ms
        assert "hunk_revert" not in kinds(ms)  # one code hunk only
        assert {m.path for m in ms} == {"src/m.py"}
        check_mutants(case, ms)
        for m in ms:
            for fp in parse_patch(m.patch):
                if is_release_notes(fp.path):
                    assert fp.text in case.gold


def test_gold_touching_only_a_changelog_has_no_mutants(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        {"CHANGELOG.md": "# Changes\n", "NEWS.rst": "News\n"},
        {"CHANGELOG.md": "# Changes\n\n- fix\n", "NEWS.rst": "News\n\n* if x: y\n"},
    )
    assert case.mutants() == []
    assert case.mutants(is_code=lambda p: True) == []


def test_release_notes_hunks_do_not_enable_hunk_revert(tmp_path: Path) -> None:
    """One code hunk + several changelog hunks: reverting the code hunk would leave only the
    changelog edit, the empty solution in disguise."""
    notes = "".join(f"line {i}\n" for i in range(40))
    case = make_case(
        tmp_path,
        {"HISTORY.rst": notes, "m.py": "X = 1\n"},
        {"HISTORY.rst": "top\n" + notes + "bottom\n", "m.py": "X = 1\nY = 2\n"},
    )
    assert case.mutants() == []


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("CHANGELOG.md", True),
        ("CHANGELOG", True),
        ("ChangeLog", True),
        ("pkg/CHANGES.rst", True),
        ("HISTORY.txt", True),
        ("NEWS", True),
        ("RELEASE_NOTES.md", True),
        ("release-notes.md", True),
        ("RELEASES.md", True),
        ("changelog.d/123.bugfix", True),
        ("newsfragments/45.feature.rst", True),
        (".changeset/brave-lions.md", True),
        ("changes/100.fix.md", True),
        ("docs/source/changelog.rst", True),
        ("docs/release_notes/v2.md", True),
        ("doc/source/whatsnew/v2.0.0.rst", True),
        ("docs/releases/4.2.txt", True),
        ("docs/guide/index.md", False),
        ("docs/conf.py", False),
        ("RELEASE-2.0-NOTES.txt", True),
        ("docs/user/release-notes-2.0.rst", True),
        ("src/pkg/history.py", False),
        ("src/pkg/changes.js", False),
        ("src/newsfeed.md", False),
        ("src/pkg/changes/model.py", False),
        ("src/app.py", False),
        ("README.md", False),
        ("", False),
    ],
)
def test_is_release_notes(path: str, expected: bool) -> None:
    assert is_release_notes(path) is expected


def test_default_is_code() -> None:
    assert default_is_code("src/a.py")
    assert default_is_code("web/app.tsx")
    assert not default_is_code("tests/test_a.py")
    assert not default_is_code("README.md")
    assert not default_is_code("changelog.d/1.py")


# --------------------------------------------------------------------------- text handling


def test_crlf_file_keeps_crlf(tmp_path: Path) -> None:
    base = PY_BASE.replace("\n", "\r\n")
    head = PY_HEAD.replace("\n", "\r\n")
    case = make_case(tmp_path, {"win.py": base}, {"win.py": head})
    ms = case.mutants()
    assert kinds(ms) == set(KINDS)
    check_mutants(case, ms)
    for m in ms:
        data = mutant_text(case, m)
        assert data is not None
        assert data.count(b"\n") == data.count(b"\r\n"), m.description


@needs_node
def test_crlf_js_file(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        {"a.js": JS_BASE.replace("\n", "\r\n")},
        {"a.js": JS_HEAD.replace("\n", "\r\n")},
    )
    ms = case.mutants()
    assert kinds(ms) == set(KINDS)
    check_mutants(case, ms)
    for m in ms:
        data = mutant_text(case, m)
        assert data is not None and data.count(b"\n") == data.count(b"\r\n")


def test_no_newline_at_end_of_file(tmp_path: Path) -> None:
    base = "def f(x):\n    y = x\n    return y"
    head = "def f(x):\n    y = x * 2\n    return y + 1"
    case = make_case(tmp_path, {"m.py": base}, {"m.py": head})
    assert "\\ No newline at end of file" in case.gold
    ms = case.mutants()
    assert kinds(ms) == {"drop_statement", "replace_return"}
    check_mutants(case, ms)
    ret = next(m for m in ms if m.kind == "replace_return")
    assert mutant_text(case, ret) == b"def f(x):\n    y = x * 2\n    return None"
    assert ret.line == 3


def test_newline_added_at_end_of_file(tmp_path: Path) -> None:
    base = "def f(x):\n    return x"
    head = "def f(x):\n    x += 1\n    return x\n"
    case = make_case(tmp_path, {"m.py": base}, {"m.py": head})
    ms = case.mutants()
    # "    return x" gained its newline, so it is a changed line too
    assert [m.kind for m in ms] == ["drop_statement", "replace_return"]
    check_mutants(case, ms)
    assert mutant_text(case, ms[0]) == b"def f(x):\n    return x\n"
    assert mutant_text(case, ms[1]) == b"def f(x):\n    x += 1\n    return None\n"


def test_non_utf8_bytes_round_trip(tmp_path: Path) -> None:
    base = b"# -*- coding: latin-1 -*-\nNAME = '\xe9t\xe9'\n\n\ndef f(x):\n    return x\n"
    head = (
        b"# -*- coding: latin-1 -*-\nNAME = '\xe9t\xe9'\n\n\ndef f(x):\n"
        b"    if x == '\xe0':\n        x = '\xe7a'\n    return x + '\xff'\n"
    )
    case = make_case(tmp_path, {"lat.py": base}, {"lat.py": head})
    ms = case.mutants()
    assert kinds(ms) == {"negate_condition", "drop_statement", "replace_return"}
    check_mutants(case, ms)
    texts = [mutant_text(case, m) for m in ms]
    assert head.replace(b"if x == '\xe0':", b"if not (x == '\xe0'):") in texts
    assert all(t is not None and t.startswith(b"# -*- coding: latin-1") for t in texts)


def test_non_utf8_without_cookie_skips_the_check_not_the_mutants(tmp_path: Path) -> None:
    base = b"def f(x):\n    return x + 'caf\xe9'\n"
    head = b"def f(x):\n    x = x * 2  # caf\xe9\n    x -= 1\n    return x + 'caf\xe9'\n"
    case = make_case(tmp_path, {"m.py": base}, {"m.py": head})
    ms = case.mutants()
    assert not compiles(head)
    assert kinds(ms) == {"drop_statement"}
    check_mutants(case, ms)


def test_old_python_syntax_is_mutated_unchecked(tmp_path: Path) -> None:
    base = 'def f(x):\n    print "x"\n    return x\n'
    head = 'def f(x):\n    print "x"\n    if x > 1:\n        x = 1\n    return x * 2\n'
    case = make_case(tmp_path, {"py2.py": base}, {"py2.py": head})
    ms = case.mutants()
    assert kinds(ms) == {"negate_condition", "drop_statement", "replace_return"}
    check_mutants(case, ms)


# --------------------------------------------------------------------------- file statuses


def test_new_file_in_gold(tmp_path: Path) -> None:
    new = "def helper(x):\n    if x:\n        x = -x\n    return x * 3\n"
    case = make_case(
        tmp_path,
        {"pkg/core.py": PY_BASE},
        {"pkg/core.py": PY_HEAD, "pkg/helper.py": new},
    )
    calls: list[str] = []

    def read_base(path: str) -> str | None:
        calls.append(path)
        return case.read_base(path)

    ms = build_mutants(case.gold, read_base)
    assert "pkg/helper.py" not in calls  # a new file: no base to read
    new_ms = [m for m in ms if m.path == "pkg/helper.py"]
    assert kinds(new_ms) == set(KINDS)
    check_mutants(case, ms)
    revert = next(m for m in new_ms if m.kind == "hunk_revert")
    assert mutant_text(case, revert) is None  # the file is not created


def test_only_a_new_file(tmp_path: Path) -> None:
    case = make_case(tmp_path, {"README": "r\n"}, {"m.py": "X = 1\nY = 2\n"})
    ms = case.mutants()
    assert [m.kind for m in ms] == ["drop_statement", "drop_statement"]
    check_mutants(case, ms)


def test_deleted_file_in_gold(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        {"pkg/old.py": "def legacy():\n    return 1\n", "pkg/geo.py": PY_BASE},
        {"pkg/old.py": None, "pkg/geo.py": PY_HEAD},
    )
    ms = case.mutants()
    check_mutants(case, ms)
    dels = [m for m in ms if m.path == "pkg/old.py"]
    assert [m.kind for m in dels] == ["hunk_revert"]
    assert mutant_text(case, dels[0]) == b"def legacy():\n    return 1\n"
    # the deletion section stays in every other mutant
    for m in ms:
        if m.path != "pkg/old.py":
            assert "deleted file mode" in m.patch


def test_renamed_and_mode_changed_files(tmp_path: Path) -> None:
    body = "".join(f"X{i} = {i}\n" for i in range(20))
    case = make_case(
        tmp_path,
        {"pkg/a.py": body, "pkg/run.py": "def main():\n    return 0\n"},
        {
            "pkg/a.py": None,
            "pkg/b.py": body.replace("X3 = 3", "X3 = 33").replace("X15 = 15", "X15 = 1 + 14"),
            "pkg/run.py": "def main():\n    return 1\n",
        },
        modes={"pkg/run.py": 0o755},
    )
    assert "rename from pkg/a.py" in case.gold and "new mode 100755" in case.gold
    ms = case.mutants()
    assert {m.path for m in ms} == {"pkg/b.py", "pkg/run.py"}
    check_mutants(case, ms)
    for m in ms:
        work = tmp_path / "modes"
        case.export_base(work)
        assert git_apply(work, m.patch).returncode == 0
        assert (work / "pkg/run.py").stat().st_mode & 0o100
        assert not (work / "pkg/a.py").exists() and (work / "pkg/b.py").exists()
        shutil.rmtree(work)


def test_binary_files_are_carried_along(tmp_path: Path) -> None:
    blob = bytes(range(256)) * 4
    case = make_case(
        tmp_path,
        {"logo.png": blob, "m.py": "def f():\n    return 1\n"},
        {"logo.png": blob[::-1], "m.py": "def f():\n    v = 2\n    return v\n"},
    )
    assert "GIT binary patch" in case.gold
    ms = case.mutants()
    assert kinds(ms) == {"drop_statement", "replace_return"}
    check_mutants(case, ms)


def test_typescript_gets_hunk_revert_only(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        {"web/geo.ts": JS_BASE, "web/view.tsx": "export const A = 1;\n"},
        {"web/geo.ts": JS_HEAD, "web/view.tsx": "export const A = 2;\n"},
    )
    ms = case.mutants()
    assert kinds(ms) == {"hunk_revert"}
    assert len(ms) == len([m for m in ms if m.kind == "hunk_revert"]) >= 3
    check_mutants(case, ms)


def test_custom_is_code_limits_mutation(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        {"a.py": PY_BASE, "vendored/b.py": PY_BASE},
        {"a.py": PY_HEAD, "vendored/b.py": PY_HEAD},
    )
    ms = case.mutants(is_code=lambda p: not p.startswith("vendored/"))
    assert {m.path for m in ms} == {"a.py"}
    check_mutants(case, ms)


# --------------------------------------------------------------------------- validity


def test_only_statement_of_a_block_becomes_pass(tmp_path: Path) -> None:
    base = "def f(x):\n    return x\n"
    head = (
        "def f(x):\n"
        "    if x > 3:\n"
        "        x = 3\n"
        "        # capped\n"
        "    else:\n"
        "        x += 1\n"
        "    for _ in range(2):\n"
        "        x *= 2\n"
        "    return x\n"
    )
    case = make_case(tmp_path, {"m.py": base}, {"m.py": head})
    ms = case.mutants()
    check_mutants(case, ms)
    drops = [mutant_text(case, m) for m in ms if m.kind == "drop_statement"]
    assert head.replace("        x = 3\n", "        pass\n").encode() in drops
    assert head.replace("        x += 1\n", "        pass\n").encode() in drops
    assert head.replace("        x *= 2\n", "        pass\n").encode() in drops


def test_multiline_python_constructs_are_skipped(tmp_path: Path) -> None:
    base = "def f(a, b):\n    return a\n"
    head = (
        "@decorate\n"
        "def f(a, b):\n"
        '    """Doc."""\n'
        "    if (a and\n"
        "            b):\n"
        "        a = (1 +\n"
        "             2)\n"
        "    values = [\n"
        "        a,\n"
        "        b,\n"
        "    ]\n"
        "    return (a,\n"
        "            b)\n"
    )
    case = make_case(tmp_path, {"m.py": base}, {"m.py": head})
    ms = case.mutants()
    check_mutants(case, ms)
    assert "negate_condition" not in kinds(ms)
    assert "drop_statement" not in kinds(ms)
    # a multi-line return whose lines are all added is replaced as a whole
    rets = [m for m in ms if m.kind == "replace_return"]
    assert len(rets) == 1 and rets[0].line == 12
    text = mutant_text(case, rets[0])
    assert text is not None and text.endswith(b"    ]\n    return None\n")


@needs_node
def test_multiline_js_condition_is_skipped(tmp_path: Path) -> None:
    base = "function f(a, b) {\n  return a;\n}\nmodule.exports = f;\n"
    head = (
        "function f(a, b) {\n"
        "  if (a &&\n"
        "      b) {\n"
        "    a = b;\n"
        "  }\n"
        "  const s = `x ${a}\n"
        "  y;`;\n"
        "  while (a > b) a -= 1;\n"
        "  return a;\n"
        "}\n"
        "module.exports = f;\n"
    )
    case = make_case(tmp_path, {"f.js": base}, {"f.js": head})
    ms = case.mutants()
    check_mutants(case, ms)
    negs = [m for m in ms if m.kind == "negate_condition"]
    assert [m.line for m in negs] == [8]
    drops = sorted(m.line for m in ms if m.kind == "drop_statement")
    assert drops == [4]  # not the template literal lines


def test_js_callbacks_and_esm(tmp_path: Path) -> None:
    base = "import fs from 'node:fs';\n\nexport function f(p) {\n  return 1;\n}\n"
    head = (
        "import fs from 'node:fs';\n"
        "\n"
        "export function f(p) {\n"
        "  const out = [];\n"
        "  [1, 2].forEach((x) => {\n"
        "    out.push(x / 2); // half\n"
        "  });\n"
        "  return fs.existsSync(p) ? out : /a[/]b/.test(p);\n"
        "}\n"
    )
    case = make_case(tmp_path, {"src/f.js": base}, {"src/f.js": head})
    ms = case.mutants()
    assert kinds(ms) == {"drop_statement", "replace_return"}
    assert sorted(m.line for m in ms if m.kind == "drop_statement") == [4, 6]
    check_mutants(case, ms)


def test_js_without_semicolons(tmp_path: Path) -> None:
    base = "function f(a, b) {\n  return a\n}\n\nmodule.exports = f\n"
    head = (
        "function f(a, b) {\n"
        "  const c = a + b\n"  # dropped
        "  log(c)\n"  # dropped
        "  const d = c\n"  # not dropped: the next line continues the expression
        "    .toString()\n"
        "  let e = d\n"  # dropped: the next line guards itself with ";"
        "  ;(e || []).push(1)\n"  # dropped
        "  let h = e\n"  # not dropped: the next line starts with "[" (an index into e)
        "  [0].push(h)\n"
        "  return d +\n"  # a multi-line return: not replaced
        "    e\n"
        "}\n"
        "\n"
        "function g(x) {\n"
        "  if (x) return x\n"
        "  return -x\n"  # replaced
        "}\n"
        "\n"
        "module.exports = f\n"
    )
    case = make_case(tmp_path, {"f.js": base}, {"f.js": head})
    ms = case.mutants()
    assert sorted((m.kind, m.line) for m in ms if m.kind != "hunk_revert") == [
        ("drop_statement", 2),
        ("drop_statement", 3),
        ("drop_statement", 6),
        ("drop_statement", 7),
        ("negate_condition", 15),
        ("replace_return", 16),
    ]
    check_mutants(case, ms)
    if NODE is not None:
        check_mutants(case, case.mutants(check_syntax=False))


@needs_node
def test_jsx_in_a_js_file_gets_hunk_revert_only(tmp_path: Path) -> None:
    base = "export function A() {\n  return <div>a</div>;\n}\n" + "\n" * 10 + "const B = 1;\n"
    head = (
        "export function A() {\n  const x = 1;\n  return <div>{x}</div>;\n}\n"
        + "\n" * 10
        + "const B = 2;\n"
    )
    case = make_case(tmp_path, {"ui/a.js": base}, {"ui/a.js": head})
    ms = case.mutants()
    assert kinds(ms) == {"hunk_revert"} and len(ms) == 2
    assert len(case.mutants(check_syntax=False)) > 2


def test_syntax_check_drops_mutants_that_do_not_compile(tmp_path: Path) -> None:
    """Reverting either half of a triple-quoted string the gold opens and closes in two
    hunks leaves an unterminated string."""
    middle = "".join(f"z{i} = {i}\n" for i in range(10))
    base = "x = 1\n" + middle + "y = 2\n"
    head = 'x = """\n' + middle + '"""\n'
    case = make_case(tmp_path, {"m.py": base}, {"m.py": head})
    unchecked = case.mutants(check_syntax=False)
    assert [m.kind for m in unchecked] == ["hunk_revert", "hunk_revert"]
    assert case.mutants() == []


@needs_node
def test_node_check_drops_mutants_that_do_not_parse(tmp_path: Path) -> None:
    middle = "".join(f"const z{i} = {i};\n" for i in range(10))
    base = "const x = 1;\n" + middle + "const y = 2;\n"
    head = "const x = `\n" + middle + "`;\n"
    case = make_case(tmp_path, {"m.js": base}, {"m.js": head})
    assert [m.kind for m in case.mutants(check_syntax=False)] == ["hunk_revert", "hunk_revert"]
    assert case.mutants() == []


def test_identical_trees_are_deduplicated(tmp_path: Path) -> None:
    base = "def f(n):\n    return n\n"
    head = "def f(n):\n    n += 1\n    n += 1\n    return n\n"
    case = make_case(tmp_path, {"m.py": base}, {"m.py": head})
    ms = case.mutants()
    assert [m.kind for m in ms] == ["drop_statement"]  # either line: the same tree
    check_mutants(case, ms)


def test_mutant_equal_to_base_is_dropped(tmp_path: Path) -> None:
    # dropping the one added line gives back the base: the empty solution
    case = make_case(
        tmp_path,
        {"m.py": "def f(n):\n    return n\n"},
        {"m.py": "def f(n):\n    n.sort()\n    return n\n"},
    )
    assert case.mutants() == []


def test_trivial_returns_are_not_replaced(tmp_path: Path) -> None:
    base = "def f(n):\n    pass\n"
    head = "def f(n):\n    if n:\n        return\n    return None\n"
    case = make_case(tmp_path, {"m.py": base}, {"m.py": head})
    assert "replace_return" not in kinds(case.mutants())


def test_odd_inputs_never_raise() -> None:
    def boom(path: str) -> str | None:
        raise OSError(path)

    odd = [
        "",
        "not a patch at all\n",
        "diff --git a/x b/x\nold mode 100644\nnew mode 100755\n",
        "diff --git a/x.py b/y.py\nsimilarity index 100%\nrename from x.py\nrename to y.py\n",
        "diff --git a/b.bin b/b.bin\nBinary files a/b.bin and b/b.bin differ\n",
        "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n x = 1\n-y\n",  # truncated hunk
        "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n",
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -5,1 +5,1 @@\n-a\n+b = 1\n",
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,1 +1,1 @@\n-\udce9\n+\udce9 = (\n",
    ]
    for patch in odd:
        assert build_mutants(patch, boom) == []
        build_mutants(patch, lambda p: "x = 1\n")
        build_mutants(patch, lambda p: None, is_code=lambda p: 1 / 0 > 0)  # type: ignore[arg-type]


def test_plain_unified_diff_gold(tmp_path: Path) -> None:
    """A gold without ``diff --git`` lines still gives git-style mutants that apply."""
    case = make_case(tmp_path, {"src/geo.py": PY_BASE}, {"src/geo.py": PY_HEAD})
    plain = "".join(
        line
        for line in case.gold.splitlines(keepends=True)
        if not line.startswith(("diff ", "index "))
    )
    case.gold = plain
    ms = case.mutants()
    assert kinds(ms) == set(KINDS)
    assert all(m.patch.startswith("diff --git a/src/geo.py b/src/geo.py\n") for m in ms)
    check_mutants(case, ms)


# --------------------------------------------------------------------------- selection


def _fake(kind: str, i: int) -> Mutant:
    return Mutant(kind, f"f{i}.py", i + 1, f"{kind} {i}", f"patch {kind} {i}\n")


def test_select_round_robin_over_kinds() -> None:
    pool = [_fake(kind, i) for kind in KINDS for i in range(5)]
    four = select_mutants(pool, 4, "task-a")
    assert sorted(m.kind for m in four) == sorted(KINDS)
    eight = select_mutants(pool, 8, "task-a")
    assert all(sum(m.kind == kind for m in eight) == 2 for kind in KINDS)
    assert eight[:4] == four
    assert select_mutants(pool, 100, "task-a") != pool
    assert sorted(select_mutants(pool, 100, "task-a"), key=pool.index) == pool
    assert select_mutants(pool, 0, "x") == [] and select_mutants([], 3, "x") == []


def test_select_exhausted_kinds_are_skipped() -> None:
    pool = [_fake("hunk_revert", 0)] + [_fake("drop_statement", i) for i in range(1, 6)]
    got = select_mutants(pool, 4, "s")
    assert sum(m.kind == "hunk_revert" for m in got) == 1
    assert len(got) == 4


def test_select_is_deterministic_and_seed_dependent() -> None:
    pool = [_fake(kind, i) for kind in KINDS for i in range(6)]
    a = select_mutants(pool, 6, "seed-1")
    assert a == select_mutants(list(pool), 6, "seed-1")
    results = {
        tuple(m.description for m in select_mutants(pool, 6, f"seed-{i}")) for i in range(20)
    }
    assert len(results) > 1


def test_select_one_of_each_kind_from_a_real_patch(tmp_path: Path) -> None:
    case = make_case(tmp_path, {"src/geo.py": PY_BASE}, {"src/geo.py": PY_HEAD})
    ms = case.mutants()
    for seed in ("a", "b", "c"):
        assert sorted(m.kind for m in select_mutants(ms, 4, seed)) == sorted(KINDS)


# --------------------------------------------------------------------------- property

_STMTS = [
    "x = {v}",
    "y = x + {v}",
    "x += {v}",
    "x = x * {v} if y else x - {v}",
    "assert x != {v}",
    "print(x, {v})",
    "values.append({v})",
]
_BLOCKS = [
    ["if x > {v}:", "    x = {v}"],
    ["while x > {v}:", "    x -= 1"],
    ["for i in range({v}):", "    y += i", "    x -= i"],
    ["if y:", "    y = None", "elif x < {v}:", "    y = {v}"],
]
_EDITS = [
    "x = {v}",
    "y = x - {v}",
    "return x + {v}",
    "return y if x else {v}",
    "if x == {v}: x = 0",
    "x = (x, {v})",
    "del values[:{v}]",
    "raise ValueError({v})",
    "pass",
    "# note {v}",
    "",
]


@st.composite
def python_change(draw: st.DrawFn) -> tuple[str, str]:
    funcs = []
    for fn in range(draw(st.integers(1, 3))):
        body: list[str] = []
        for _ in range(draw(st.integers(1, 5))):
            v = draw(st.integers(0, 9))
            if draw(st.booleans()):
                body.append(draw(st.sampled_from(_STMTS)).format(v=v))
            else:
                body += [line.format(v=v) for line in draw(st.sampled_from(_BLOCKS))]
        body.append("return x")
        funcs.append([f"def f{fn}(x, y, values):"] + ["    " + line for line in body])
    base_lines = [line for fn in funcs for line in (fn + ["", ""])][:-2]
    head_lines = list(base_lines)
    for _ in range(draw(st.integers(1, 3))):
        candidates = [i for i, line in enumerate(head_lines) if line.startswith("    ")]
        i = draw(st.sampled_from(candidates))
        indent = head_lines[i][: len(head_lines[i]) - len(head_lines[i].lstrip())]
        new = indent + draw(st.sampled_from(_EDITS)).format(v=draw(st.integers(0, 9)))
        if draw(st.booleans()):
            head_lines[i] = new.rstrip()
        else:
            head_lines.insert(i + draw(st.integers(0, 1)), new.rstrip())
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    base = eol.join(base_lines) + (eol if draw(st.booleans()) else "")
    head = eol.join(head_lines) + (eol if draw(st.booleans()) else "")
    return base, head


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(change=python_change())
def test_property_every_mutant_applies_and_compiles(change: tuple[str, str]) -> None:
    base, head = change
    assume(base != head and compiles(base.encode()) and compiles(head.encode()))
    with tempfile.TemporaryDirectory() as tmp:
        case = make_case(Path(tmp), {"pkg/mod.py": base}, {"pkg/mod.py": head})
        ms = case.mutants()
        check_mutants(case, ms)
        assert len({m.patch for m in ms}) == len(ms)


_JS_STMTS = [
    "x = {v};",
    "y = x + {v};",
    "s = 'a(' + x + \"]{{\";",
    "x = /a\\/b[/)]/.test(s) ? {v} : y / {v};",
    "s += `t(${{x + {v}}}`;",
    "values.push({{ k: {v} }});",
]
_JS_BLOCKS = [
    ["if (x > {v}) {{", "  x = {v};", "}} else if (y) {{", "  y = 0;", "}}"],
    ["while (x > {v}) {{", "  x -= 1;", "}}"],
    ["for (let i = 0; i < {v}; i++) {{", "  y += i;", "}}"],
    ["values.forEach((w) => {{", "  y += w;", "}});"],
    ["const o = {{", "  a: {v},", "  b: [x, y],", "}};"],
]
_JS_EDITS = [
    "x = {v};",
    "return x + {v};",
    "return;",
    "if (x === {v}) x = 0;",
    "throw new Error('{v})');",
    "y = [x, {v}];",
    "// note {v}",
    "while (x > {v}) x--;",
    "if (y) {{ y = {v}; }}",
    "",
]


@st.composite
def js_change(draw: st.DrawFn) -> tuple[str, str]:
    funcs = []
    for fn in range(draw(st.integers(1, 3))):
        body: list[str] = []
        for _ in range(draw(st.integers(1, 4))):
            v = draw(st.integers(0, 9))
            if draw(st.booleans()):
                body.append(draw(st.sampled_from(_JS_STMTS)).format(v=v))
            else:
                body += [line.format(v=v) for line in draw(st.sampled_from(_JS_BLOCKS))]
        body.append("return x;")
        funcs.append(
            [f"function f{fn}(x, y, s, values) {{"] + ["  " + line for line in body] + ["}"]
        )
    base_lines = [line for fn in funcs for line in (fn + [""])] + ["module.exports = {};"]
    head_lines = list(base_lines)
    for _ in range(draw(st.integers(1, 3))):
        candidates = [i for i, line in enumerate(head_lines) if line.startswith("  ")]
        i = draw(st.sampled_from(candidates))
        indent = head_lines[i][: len(head_lines[i]) - len(head_lines[i].lstrip())]
        new = indent + draw(st.sampled_from(_JS_EDITS)).format(v=draw(st.integers(0, 9)))
        if draw(st.booleans()) and not head_lines[i].rstrip().endswith(("{", "}", "});", "},")):
            head_lines[i] = new.rstrip()
        else:
            head_lines.insert(i + 1, new.rstrip())
    if draw(st.booleans()):  # semicolon-less style
        base_lines = [line.removesuffix(";") for line in base_lines]
        head_lines = [line.removesuffix(";") for line in head_lines]
    return "\n".join(base_lines) + "\n", "\n".join(head_lines) + "\n"


@needs_node
@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(change=js_change())
def test_property_js_mutants_apply_and_pass_node_check(change: tuple[str, str]) -> None:
    base, head = change
    assume(base != head and node_ok(head.encode()) == ".js")
    with tempfile.TemporaryDirectory() as tmp:
        case = make_case(Path(tmp), {"lib/mod.js": base}, {"lib/mod.js": head})
        check_mutants(case, case.mutants())
        check_mutants(case, case.mutants(check_syntax=False))
