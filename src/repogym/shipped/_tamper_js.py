#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP035, UP045, UP031, UP032
"""The tamper scan's JavaScript / TypeScript rules: patterns over the lexed code, with string
literals read decoded (the rules are listed in ``tamper.py``).

Part of the tamper scan: standard library only, Python 3.6 to 3.13, shipped into each generated
task's ``tests/`` folder with ``tamper.py`` and ``js_lex.py``.
"""

import bisect
import re
from typing import List, Optional

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:  # in the repogym package
    from repogym.shipped._tamper_strings import Hit, make_hit, string_findings
    from repogym.shipped.js_lex import js_lex
else:  # a task's copy: the siblings beside it (tamper.py put its folder on sys.path)
    from _tamper_strings import Hit, make_hit, string_findings
    from js_lex import js_lex


# -- JavaScript / TypeScript ----------------------------------------------------------------------

_JS_NAME = r"(?<![\w$.])"
_JS_ASSIGN = r"\s*=(?![=>])"
_JS_Q = r"(['\"`])"
_JS_RUNNER_GLOBALS = frozenset(
    [
        "expect",
        "it",
        "test",
        "describe",
        "beforeEach",
        "afterEach",
        "beforeAll",
        "afterAll",
        "jest",
        "vi",
        "suite",
    ]
)
_JS_EXIT_RE = re.compile(
    _JS_NAME + r"process\s*(?:\.\s*(exit|kill|abort|reallyExit)\b|\[\s*" + _JS_Q + r")"
)
_JS_EXIT_NAMES = frozenset(["exit", "kill", "abort", "reallyExit"])
_JS_EXITCODE_RE = re.compile(_JS_NAME + r"process\s*\.\s*exitCode" + _JS_ASSIGN)
_JS_ON_EXIT_RE = re.compile(
    _JS_NAME
    + r"process\s*\.\s*(on|once|addListener|prependListener|prependOnceListener)\s*\(\s*"
    + _JS_Q
)
_JS_GLOBAL_RE = re.compile(
    _JS_NAME + r"(global|globalThis|window)\s*(?:\.\s*([A-Za-z_$][\w$]*)|\[\s*" + _JS_Q + r")"
)
_JS_WRITE_TAIL_RE = re.compile(r"(?:\s*(?:\.\s*[\w$]+|\[[^\]\n]*\]))*" + _JS_ASSIGN)
_JS_CLOSE_BRACKET_RE = re.compile(r"\s*\]")
_JS_DEFINE_RE = re.compile(
    _JS_NAME + r"Object\s*\.\s*defineProperty\s*\(\s*(global|globalThis|window)\s*,\s*" + _JS_Q
)
_JS_BARE_RE = re.compile(r"(?:^|;)[ \t]*(expect|it|test|describe)" + _JS_ASSIGN, re.M)
_JS_REQUIRE_RE = re.compile(_JS_NAME + r"require\s*\(\s*" + _JS_Q)
_JS_DYN_IMPORT_RE = re.compile(_JS_NAME + r"import\s*\(\s*" + _JS_Q)
_JS_STATIC_IMPORT_RE = re.compile(
    _JS_NAME + r"(?:import|export)\b(?:[^;'\"`()]*?\bfrom)?\s*" + _JS_Q
)
_JS_REQUIRE_CACHE_RE = re.compile(
    r"(?:\bdelete\s+require\s*\.\s*cache\b|"
    + _JS_NAME
    + r"require\s*\.\s*cache\s*(?:\[[^\]\n]*\]\s*)?=(?![=>]))"
)
_JS_MODULE_PATCH_RE = re.compile(
    _JS_NAME + r"Module\s*\.\s*(_load|_resolveFilename|_compile|_extensions)\b" + _JS_ASSIGN
)
_JS_PROTO_REQUIRE_RE = re.compile(r"\.\s*prototype\s*\.\s*(require|_compile)" + _JS_ASSIGN)
_JS_STREAM_RE = re.compile(
    _JS_NAME
    + r"(?:process\s*\.\s*(stdout|stderr)\s*\.\s*write|console\s*\.\s*(log|error|warn|info|debug))"
    + _JS_ASSIGN
)

_JS_ENV_RE = re.compile(
    _JS_NAME + r"process\s*\.\s*env\s*\.\s*(REPOGYM_|PYTEST_ADDOPTS\b|PYTEST_PLUGINS\b"
    r"|PYTEST_DISABLE_PLUGIN_AUTOLOAD\b)"
)


def _js_runner_module(spec: str) -> bool:
    return spec.startswith(("jest", "@jest/", "vitest", "@vitest/", "mocha"))


class _JsScan:
    """The rules over one JS/TS file, run on its lexed code (see :func:`js_lex`)."""

    def __init__(self, text: str) -> None:
        self.code, self.strings = js_lex(text)
        self.by_start = {s[0]: s for s in self.strings}
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.hits = []  # type: List[Hit]

    def line_at(self, offset: int) -> int:
        return bisect.bisect_left(self.newlines, offset) + 1

    def add(self, rule: str, offset: int, sig: str, detail: str) -> None:
        self.hits.append(make_hit(rule, self.line_at(offset), sig, detail))

    def string_at(self, offset: int) -> Optional[str]:
        s = self.by_start.get(offset)
        return None if s is None else s[2]

    def run(self) -> List[Hit]:
        self.process_hits()
        self.global_hits()
        self.import_hits()
        self.stream_hits()
        for start, _end, value in self.strings:
            for rule, sig, offset, detail in string_findings(value):
                line = self.line_at(start) + value.count("\n", 0, offset)
                self.hits.append(make_hit(rule, line, sig, detail))
        return self.hits

    def process_hits(self) -> None:
        """``process.exit`` and its kin, ``process.exitCode =``, exit handlers."""
        code, add = self.code, self.add
        for m in _JS_EXIT_RE.finditer(code):
            name = m.group(1) or self.string_at(m.start(2))  # process.exit or process["exit"]
            if name not in _JS_EXIT_NAMES:
                continue
            name = "process." + name
            add("exit-call", m.start(), "exit-call:" + name, "uses %s" % name)
        for m in _JS_EXITCODE_RE.finditer(code):
            add("exit-call", m.start(), "exit-call:process.exitCode", "sets process.exitCode")
        for m in _JS_ON_EXIT_RE.finditer(code):
            event = self.string_at(m.start(2))
            if event in ("exit", "beforeExit"):
                add(
                    "exit-call",
                    m.start(),
                    "exit-call:process.%s:%s" % (m.group(1), event),
                    "registers a process '%s' handler" % event,
                )

    def global_hits(self) -> None:
        """Writes to the test runner's globals (``global.expect = …``, ``it = …``)."""
        code, add = self.code, self.add
        for m in _JS_GLOBAL_RE.finditer(code):
            owner, name, end = m.group(1), m.group(2), m.end()
            if name is None:
                lit = self.by_start.get(m.start(3))
                if lit is None:
                    continue
                name = lit[2]
                close = _JS_CLOSE_BRACKET_RE.match(code, lit[1])
                if close is None:
                    continue
                end = close.end()
            if name in _JS_RUNNER_GLOBALS and _JS_WRITE_TAIL_RE.match(code, end):
                add(
                    "runner-global",
                    m.start(),
                    "runner-global:%s.%s" % (owner, name),
                    "writes test-runner global %s.%s" % (owner, name),
                )
        for m in _JS_DEFINE_RE.finditer(code):
            name = self.string_at(m.start(2))
            if name in _JS_RUNNER_GLOBALS:
                add(
                    "runner-global",
                    m.start(),
                    "runner-global:define:%s.%s" % (m.group(1), name),
                    "defines test-runner global %s.%s" % (m.group(1), name),
                )
        for m in _JS_BARE_RE.finditer(code):
            add(
                "runner-global",
                m.start(1),
                "runner-global:%s=" % m.group(1),
                "assigns test-runner global %s" % m.group(1),
            )

    def import_hits(self) -> None:
        """Imports of the runners' modules, writes to ``require.cache`` and the module loader."""
        code, add = self.code, self.add
        for rx in (_JS_REQUIRE_RE, _JS_DYN_IMPORT_RE, _JS_STATIC_IMPORT_RE):
            for m in rx.finditer(code):
                spec = self.string_at(m.start(1))
                if spec is not None and _js_runner_module(spec):
                    add(
                        "runner-import",
                        m.start(),
                        "runner-import:" + spec[:80],
                        "imports test-runner module %s" % spec,
                    )
        for m in _JS_REQUIRE_CACHE_RE.finditer(code):
            add("runner-import", m.start(), "runner-import:require.cache", "writes require.cache")
        for m in _JS_MODULE_PATCH_RE.finditer(code):
            add(
                "runner-import",
                m.start(),
                "runner-import:Module.%s" % m.group(1),
                "patches the module loader (Module.%s)" % m.group(1),
            )
        for m in _JS_PROTO_REQUIRE_RE.finditer(code):
            add(
                "runner-import",
                m.start(),
                "runner-import:Module.prototype.%s" % m.group(1),
                "patches the module loader (prototype.%s)" % m.group(1),
            )

    def stream_hits(self) -> None:
        """Replaced output streams, and reads of the verifier's settings."""
        code, add = self.code, self.add
        for m in _JS_STREAM_RE.finditer(code):
            name = "process.%s.write" % m.group(1) if m.group(1) else "console.%s" % m.group(2)
            add("stream-patch", m.start(), "stream-patch:" + name, "replaces %s" % name)
        for m in _JS_ENV_RE.finditer(code):
            add(
                "verifier-path",
                m.start(),
                "verifier-path:" + m.group(1),
                "reads the verifier's setting process.env.%s" % m.group(1),
            )


def scan_js(text: str) -> List[Hit]:
    return _JsScan(text).run()
