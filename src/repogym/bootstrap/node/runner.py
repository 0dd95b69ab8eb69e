"""``node --test``: detection, and the reporter that makes its results machine-readable.

Node's built-in reporters do not name the file of a passing test (TAP and spec give names and
nesting only), so the recipe passes a small reporter of its own, inline as a ``data:`` URL (no file
to ship, works wherever ``--test-reporter`` does: Node ≥ 18.15). It prints one line per result::

    node:test {"s":"pass","id":["test/a.test.js","suite","name"]}
    node:test {"s":"fail","id":[...],"m":"first line of the error"}

``s`` is ``pass``, ``fail``, ``skip``, ``todo``, ``cancelled`` (a test its parent cancelled),
``error`` (a suite whose hook failed: the suite's id; a file that failed to load: the file's id) or
``empty`` (a file that reported no test: it has none, or it exited early); ``id`` is the file
relative to the working directory, the enclosing suites and the test name. Suites themselves are
not results. Output the test files print arrives as ``# stdout <file>: …`` / ``# stderr …`` lines,
so a test cannot print a result line of its own (the runner executes test files in child processes
and hands their output to the reporter). The run ends with ``node:test {"s":"end"}`` after Node's
summary (``# tests 3``, ``# pass 2``, …): a log without it was cut short.
"""

from __future__ import annotations

import re
from pathlib import Path

from repogym.bootstrap._files import SKIP_DIRS, read_text
from repogym.shipped.testfiles import is_node_test_candidate

REPORTER_LINES = (
    "export default async function*(source){",
    "const seen=new Map();",
    'const cwd=process.cwd()+"/";',
    'const rel=function(f){if(!f)return "";return f.startsWith(cwd)&&f.slice(cwd.length)||f};',
    'const first=function(e){if(!e)return "";',
    "const c=e.cause&&e.cause.message||e.message||String(e);",
    'const l=String(c).split("\\n").map(function(x){return x.trim()}).filter(Boolean);',
    'return (l[0]||"").slice(0,300)};',
    'const out=function(o){return "node:test "+JSON.stringify(o)+"\\n"};',
    "for await(const e of source){",
    "const d=e.data||{};",
    "const f=rel(d.file);",
    'if(e.type==="test:start"){',
    "const a=(seen.get(f)||[]).slice(0,d.nesting);a[d.nesting]=d.name;seen.set(f,a);continue}",
    'if(e.type==="test:pass"||e.type==="test:fail"){',
    "const det=d.details||{};const err=det.error;",
    "const file=d.nesting===0&&d.name===d.file;",
    "const id=file&&[f]||",
    "[f].concat((seen.get(f)||[]).slice(0,d.nesting),[d.name]).filter(Boolean);",
    'let s=e.type==="test:fail"&&"fail"||"pass";',
    'if(d.todo!==undefined)s="todo";',
    'else if(d.skip!==undefined)s="skip";',
    'else if(file)s=s==="fail"&&"error"||"empty";',
    'else if(det.type==="suite"){',
    'if(s==="pass"||err&&err.failureType==="subtestsFailed")continue;s="error"}',
    'else if(err&&err.failureType==="cancelledByParent")s="cancelled";',
    'yield out((s==="fail"||s==="error"||s==="cancelled")&&{s:s,id:id,m:first(err)}||{s:s,id:id});',
    "continue}",
    'if(e.type==="test:stdout"||e.type==="test:stderr"){',
    'for(const l of String(d.message).split("\\n"))',
    'if(l)yield "\\x23 "+e.type.slice(5)+" "+(f||"-")+": "+l+"\\n";',
    "continue}",
    'if(e.type==="test:diagnostic")yield "\\x23 "+d.message+"\\n"}',
    'yield out({s:"end"})}',
)
REPORTER_SOURCE = "".join(REPORTER_LINES)
"""The reporter module (one line, free of ``?``, ``#``, ``%``, quotes and newlines, which a
``data:`` URL or a single-quoted shell word would not carry)."""
REPORTER_URL = "data:text/javascript," + REPORTER_SOURCE
MIN_REPORTER = (18, 15)
"""Oldest Node with ``--test-reporter`` (older ones print TAP, which the parser reads too)."""

_NODE_TEST_IMPORT = re.compile(
    r"""(?:from\s*|require\s*\(\s*|import\s*\(\s*)['"]node:test['"]"""
    r"""|(?:from\s*|require\s*\(\s*)['"]test['"]"""
)
_JS_EXTS = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts")
MAX_SCANNED = 400


def reporter_flags(node_version: str | None) -> str:
    """The ``--test-reporter`` flag for the recipe's Node (empty where it is too old)."""
    m = re.match(r"^(\d+)(?:\.(\d+))?", node_version or "")
    if m and (int(m[1]), int(m[2] or 0)) < MIN_REPORTER:
        return ""
    return f"--test-reporter='{REPORTER_URL}'"


def imports_node_test(repo: Path) -> str | None:
    """The first test file (repo-relative) that imports ``node:test``, or None.

    Looks at JS/TS files named like tests or under a test folder (at most ``MAX_SCANNED``).
    """
    scanned = 0
    stack = [repo]
    while stack and scanned < MAX_SCANNED:
        folder = stack.pop(0)
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                if entry.name not in SKIP_DIRS and not entry.name.startswith("."):
                    stack.append(entry)
                continue
            rel = entry.relative_to(repo).as_posix()
            if not rel.endswith(_JS_EXTS):
                continue
            if not is_node_test_candidate(rel):
                continue
            scanned += 1
            text = read_text(entry, 65536) or ""
            if _NODE_TEST_IMPORT.search(text):
                return rel
            if scanned >= MAX_SCANNED:
                break
    return None


_RUN_SCRIPT = re.compile(r"^(?:npm\s+run(?:-script)?|pnpm(?:\s+run)?|yarn(?:\s+run)?)\s+([\w:.-]+)")


def resolve_script(scripts: dict[str, object], name: str = "test", depth: int = 3) -> str | None:
    """The ``name`` script, following ``npm run X`` / ``pnpm X`` / ``yarn X`` when it is only
    that (``"test": "npm run test:unit"`` → the ``test:unit`` script)."""
    script = scripts.get(name)
    seen = {name}
    while isinstance(script, str) and depth > 0:
        m = _RUN_SCRIPT.match(script.strip())
        if not m or m[1] in seen or not isinstance(scripts.get(m[1]), str):
            break
        rest = script.strip()[m.end() :].strip()
        if rest and not rest.startswith("--"):
            break
        seen.add(m[1])
        script = scripts[m[1]]
        depth -= 1
    return script if isinstance(script, str) else None
