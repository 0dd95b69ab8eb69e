"""Test files read as source: fixture modules that define no test, and computed test names that
would become false fail-to-pass tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from repogym.bootstrap import make_recipe
from repogym.bootstrap.node import project as node
from repogym.bootstrap.node.testfiles import (
    computed_f2p,
    computed_test_names,
    computed_titles,
    has_test_calls,
    is_fixture_module,
    runnable_test_files,
)
from repogym.shipped.parsers import PASSED, parse_log

FIXTURE = """\
// Cases shared by the parser specs: it("…") and describe() only appear in strings here.
export const cases = [
  { input: "it('a')", output: "describe(x)" },
  { input: `test(${1})`, output: "b" },
];
"""
SPEC = """\
import { cases } from "./cases.spec";
describe("parse", () => {
  for (const c of cases) {
    it(`parses ${c.input}`, () => {});
  }
});
"""


def test_fixture_module_is_not_a_test_file() -> None:
    assert not has_test_calls(FIXTURE)
    assert is_fixture_module("src/cases.spec.ts", FIXTURE)
    assert not is_fixture_module("src/parse.spec.ts", SPEC)
    assert not is_fixture_module("src/cases.ts", FIXTURE)  # not named like a test at all
    assert has_test_calls('import test from "node:test";\n')
    assert has_test_calls("test.each([[1]])('x %i', () => {});\n")
    sources = {"src/cases.spec.ts": FIXTURE, "src/parse.spec.ts": SPEC.encode(), "src/a.ts": SPEC}
    assert runnable_test_files(sources) == ["src/parse.spec.ts"]


def test_computed_titles() -> None:
    source = """\
const { toRegex } = require("../lib");
const NAME = "static name";
describe("regex", () => {
  it(`matches ${toRegex("a*")}`, () => {});
  it("plain " + String(toRegex("b")), () => {});
  it(NAME, () => {});
  it('literal', () => {});
  it(`no placeholder`, () => {});
  test.each([[1, 2]])("adds %i + %i", () => {});
  test.each`a | b`("tagged $a", () => {});
  describe(`group ${n}`, () => { it("inner", () => {}) });
  // it(`commented ${x}`)
});
"""
    found = {(t.line, t.call, t.pattern) for t in computed_titles(source)}
    assert found == {
        (4, "it", r"matches\ .*"),
        (5, "it", r"plain\ .*"),
        (9, "test", r"adds\ .*\ \+\ .*"),
        (10, "test", r"tagged\ .*"),
        (11, "describe", r"group\ .*"),
    }
    ids = [
        "test/r.test.js > regex > matches /^a*$/",
        "test/r.test.js > regex > literal",
        "test/r.test.js > regex > group 3 > inner",
    ]
    assert computed_test_names(source, ids) == {ids[0], ids[2]}
    loop = "for (const c of cases) it(c.name, () => {});\n"
    assert [t.pattern for t in computed_titles(loop)] == [".*"]


def test_computed_f2p_needs_the_file_to_have_loaded_before() -> None:
    source = (
        'const { re } = require("../lib");\nit(`matches ${re()}`, () => {});\nit("x", () => {});\n'
    )
    f2p = ["test/r.test.js > matches /a*/", "test/r.test.js > x"]
    before = [{"test/r.test.js > matches /a+/": "FAILED", "test/r.test.js > x": "FAILED"}]
    assert computed_f2p(f2p, before, {"test/r.test.js": source}) == {
        "test/r.test.js > matches /a*/": (
            "computed test name (test/r.test.js); no such id before the fix"
        )
    }
    # The file failed to load before the fix (a new export): its tests stay fail-to-pass.
    assert computed_f2p(f2p, [{"test/r.test.js": "ERROR"}], {"test/r.test.js": source}) == {}
    # Mocha's spec ids name no file: the sources are searched, the outermost suite groups.
    spec_f2p = ["regex > matches /a*/"]
    spec_before = [{"regex > matches /a+/": "FAILED"}]
    assert computed_f2p(spec_f2p, spec_before, {"test/r.test.js": source})


LIB_V1 = 'function toRegex(glob) { return "/^" + glob.replace("*", ".+") + "$/"; }\n'
LIB_V2 = 'function toRegex(glob) { return "/^" + glob.replace("*", ".*") + "$/"; }\n'
RE_TESTS = """\
const test = require("node:test");
const assert = require("node:assert");
const { toRegex, matches } = require("../lib/glob");

test(`glob a* compiles to ${toRegex("a*")}`, () => {
  assert.ok(matches("a*", "a"));
});
test("matches the empty rest", () => {
  assert.ok(matches("ab*", "ab"));
});
test("keeps literal text", () => {
  assert.ok(matches("abc", "abc"));
});
"""
EXPORTS = (
    "function matches(glob, text) {\n"
    "  const src = toRegex(glob).slice(1, -1);\n"
    "  return new RegExp(src).test(text);\n}\n"
    "module.exports = { toRegex, matches };\n"
)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_a_generated_regex_in_a_test_name_is_not_fail_to_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(node, "host_node", lambda: "20.11.1")
    monkeypatch.setattr(node, "host_nodes", lambda: ["20.11.1"])
    repo = tmp_path / "glob"
    (repo / "lib").mkdir(parents=True)
    (repo / "test").mkdir()
    (repo / "package.json").write_text('{"name": "glob", "scripts": {"test": "node --test"}}\n')
    (repo / "test" / "glob.test.js").write_text(RE_TESTS)
    recipe = make_recipe(repo)

    def run(lib: str) -> dict[str, str]:
        (repo / "lib" / "glob.js").write_text(lib + EXPORTS)
        proc = subprocess.run(
            ["bash", "-c", recipe.test_command], cwd=repo, capture_output=True, text=True
        )
        return parse_log(proc.stdout, "node").tests

    before, after = run(LIB_V1), run(LIB_V2)
    f2p = sorted(t for t, s in after.items() if s == PASSED and before.get(t) != PASSED)
    computed = "test/glob.test.js > glob a* compiles to /^a.*$/"
    assert f2p == [computed, "test/glob.test.js > matches the empty rest"]
    dropped = computed_f2p(f2p, [before], {"test/glob.test.js": RE_TESTS})
    assert list(dropped) == [computed]
