"""Listing JavaScript tests without running them, on every runner version.

* **mocha**: ``--dry-run`` only exists from mocha 9 on. The collect command instead loads the
  suite with a small reporter of its own (``--reporter <file>`` works on every mocha): mocha
  hands a reporter the runner after loading every test file and before running anything, so
  the reporter walks ``runner.suite``, prints one ``REPOGYM-COLLECT-ID suite > … > test`` line per
  test (mocha's spec-reporter ids) and a ``REPOGYM-COLLECT {"collected": N}`` summary, and
  replaces ``runner.run`` so that no test or hook runs. A file that fails to load makes mocha
  exit with its error before the reporter exists. The reporter is written to a temporary file by
  the collect command itself (no file in the image).
* **Fixture modules** (``src/cases.spec.ts`` holding cases other specs import, see
  :mod:`repogym.bootstrap.node.testfiles`): vitest and jest take every file named like a test
  as one and fail it ("No test suite found in file"); :func:`fixture_modules` finds them so the
  recipe can exclude them.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from repogym.bootstrap._files import SKIP_DIRS, read_text
from repogym.bootstrap.model import COLLECT_MARK
from repogym.bootstrap.node.testfiles import has_test_calls
from repogym.shipped.testfiles import JS_TEST_FILE

MOCHA_LIST_LINES = (
    '"use strict";',
    "module.exports=function(runner){",
    "var ids=[];",
    "var walk=function(suite,path){",
    "var here=suite.title?path.concat([suite.title]):path;",
    '(suite.tests||[]).forEach(function(t){ids.push(here.concat([t.title]).join(" > "))});',
    "(suite.suites||[]).forEach(function(s){walk(s,here)})};",
    "runner.run=function(){",
    "walk(runner.suite,[]);",
    'var out=ids.map(function(i){return "' + COLLECT_MARK + '-ID "+i+"\\n"}).join("");',
    'out+="' + COLLECT_MARK + ' "+JSON.stringify({collected:ids.length})+"\\n";',
    "process.stdout.write(out,function(){process.exit(0)});",
    "return runner}};",
)
MOCHA_LIST_SOURCE = "".join(MOCHA_LIST_LINES)
"""The list reporter (one line without single quotes, so one quoted shell word carries it)."""
MOCHA_LIST_FILE = '"${TMPDIR:-/tmp}/repogym-mocha-list.cjs"'
MAX_SCANNED = 4000


def mocha_collect(select: str) -> str:
    """The collect command for a mocha ``select`` command (``npx mocha --reporter spec …``)."""
    base = select.replace(" --reporter spec", "", 1)
    write = f"printf '%s\\n' {shlex.quote(MOCHA_LIST_SOURCE)} > {MOCHA_LIST_FILE}"
    return f"{write} && {base} --reporter {MOCHA_LIST_FILE}"


def fixture_modules(repo: Path) -> list[str]:
    """Files of ``repo`` named like JS/TS tests that define no test (sorted, repo-relative)."""
    out: list[str] = []
    scanned = 0
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        rel_dir = Path(dirpath).relative_to(repo).as_posix()
        for name in sorted(filenames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if not JS_TEST_FILE.search(rel):
                continue
            scanned += 1
            if scanned > MAX_SCANNED:
                return out
            text = read_text(Path(dirpath) / name, 2_000_000)
            if text is not None and not has_test_calls(text):
                out.append(rel)
    return sorted(out)


def vitest_exclude(files: list[str]) -> str:
    """One ``--exclude`` glob for ``files`` (repeating the flag only works from vitest 1.6.1)."""
    if not files:
        return ""
    glob = files[0] if len(files) == 1 else "{" + ",".join(files) + "}"
    return f"--exclude={shlex.quote(glob)}"
