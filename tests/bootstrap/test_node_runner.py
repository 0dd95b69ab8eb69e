"""``node --test`` as a runner: detection, the recipe's reporter, and a real run on the host
(and in the local sandbox) parsed into ``file > suite > name`` ids."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.bootstrap import bootstrap, detect, make_recipe
from repogym.bootstrap.node import project as node
from repogym.bootstrap.node.runner import (
    REPORTER_SOURCE,
    imports_node_test,
    reporter_flags,
    resolve_script,
)
from repogym.shipped.parsers import CUT_SHORT, ERROR, FAILED, PASSED, SKIPPED, parse_log

MakeRepo = Callable[..., Path]
NODE = shutil.which("node")

LIB = """\
function slug(text) {
  return text.toLowerCase().split(" ").join("-");
}
module.exports = { slug };
"""
TESTS = """\
const test = require("node:test");
const assert = require("node:assert");
const { describe, it } = test;
const { slug } = require("../lib/slug");

describe("slug", () => {
  it("joins words", () => {
    assert.strictEqual(slug("a b"), "a-b");
  });
  describe("spaces", () => {
    it("collapses runs", () => {
      assert.strictEqual(slug("a  b"), "a-b");
    });
    it.skip("trims", () => {});
  });
});

test("lower-cases", () => {
  assert.strictEqual(slug("AB"), "ab");
});
"""
ESM_TESTS = """\
import test from "node:test";
import assert from "node:assert";
test("esm works", () => assert.ok(true));
"""


def pkg(**fields: object) -> str:
    return json.dumps({"name": "slug", "version": "1.0.0", **fields})


@pytest.fixture(autouse=True)
def one_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node, "host_node", lambda: "20.11.1")
    monkeypatch.setattr(node, "host_nodes", lambda: ["20.11.1"])


def test_reporter_fits_a_data_url_in_single_quotes() -> None:
    assert not re.search(r"[?#%'\n]", REPORTER_SOURCE)
    assert reporter_flags("20.11.1").startswith("--test-reporter='data:text/javascript,")
    assert reporter_flags("18.14.0") == ""  # TAP by default there
    assert reporter_flags("18.15.0") != ""


@pytest.mark.parametrize(
    ("scripts", "args"),
    [
        ({"test": "node --test"}, []),
        ({"test": "node --test --test-reporter=spec test/"}, ["test/"]),
        ({"test": "node --test --test-reporter tap --test-reporter-destination out.tap"}, []),
        (
            {"test": "node --import tsx --test --watch test/*.test.ts"},
            ["--import", "tsx", "test/*.test.ts"],
        ),
        ({"test": "npm run test:unit", "test:unit": "node --test test/"}, ["test/"]),
        ({"test": "pnpm unit", "unit": "node --test --experimental-test-coverage"}, []),
        ({"test": "node --test --experimental-test-isolation=none"}, []),
    ],
)
def test_detects_node_test_scripts(make_repo: MakeRepo, scripts: dict, args: list[str]) -> None:
    d = detect(make_repo({"package.json": pkg(scripts=scripts)}))
    assert (d.runner, d.supported) == ("node", True)
    assert d.node and d.node.runner_args == args


def test_detects_node_test_imports_without_a_script(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {
            "package.json": pkg(scripts={"build": "tsc"}),
            "src/index.js": "module.exports = 1;\n",
            "test/index.test.mjs": ESM_TESTS,
        }
    )
    assert imports_node_test(repo) == "test/index.test.mjs"
    d = detect(repo)
    assert d.runner == "node" and any("imports node:test" in n for n in d.notes)
    assert imports_node_test(make_repo({"package.json": pkg(), "test/x.test.js": "it()\n"})) is None


def test_resolve_script_follows_run_indirections() -> None:
    scripts = {"test": "npm run t1 -- --bail", "t1": "yarn t2", "t2": "node --test"}
    assert resolve_script(scripts) == "node --test"
    assert resolve_script({"test": "npm run lint && node --test"}) == "npm run lint && node --test"
    assert resolve_script({"test": "npm run missing"}) == "npm run missing"
    assert resolve_script({"test": "npm run test"}) == "npm run test"


def test_recipe_commands(make_repo: MakeRepo) -> None:
    repo = make_repo(
        {"package.json": pkg(scripts={"test": "node --test test/*.test.js 'x/**/*.js'"})}
    )
    recipe = make_recipe(repo)
    assert recipe.runner == "node"
    flags = reporter_flags("20.11.1")
    # An unquoted glob is left to the shell (as npm's sh would); a quoted one stays quoted.
    assert recipe.test_command == f"node --test {flags} test/*.test.js 'x/**/*.js'"
    assert recipe.collect_command == (
        f"node --test {flags} --test-name-pattern='(?!)' test/*.test.js 'x/**/*.js'"
    )


def write_project(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


@pytest.mark.skipif(NODE is None, reason="needs node")
def test_recipe_command_on_the_host_gives_file_suite_name_ids(tmp_path: Path) -> None:
    repo = write_project(
        tmp_path / "slug",
        {
            "package.json": pkg(scripts={"test": "node --test"}),
            "lib/slug.js": LIB,
            "test/slug.test.js": TESTS
            + 'console.log("node:test {\\"s\\":\\"pass\\",\\"id\\":[\\"fake\\"]}");\n',
            "test/esm.test.mjs": ESM_TESTS,
            "test/broken.test.js": 'require("./missing");\n',
        },
    )
    recipe = make_recipe(repo)
    run = subprocess.run(
        ["bash", "-c", recipe.test_command], cwd=repo, capture_output=True, text=True, timeout=120
    )
    parsed = parse_log(run.stdout + run.stderr, "node")
    assert parsed.status == "ok", run.stdout[-2000:]
    assert parsed.tests == {
        "test/broken.test.js": ERROR,
        "test/esm.test.mjs > esm works": PASSED,
        "test/slug.test.js > slug > joins words": PASSED,
        "test/slug.test.js > slug > spaces > collapses runs": FAILED,
        "test/slug.test.js > slug > spaces > trims": SKIPPED,
        "test/slug.test.js > lower-cases": PASSED,
    }
    assert "fake" not in parsed.tests  # printed by a test: a "# stdout" line, not a result
    assert parsed.failures["test/slug.test.js > slug > spaces > collapses runs"].startswith(
        "Expected values to be strictly equal"
    )
    assert parsed.failures["test/broken.test.js"].startswith("Error: Cannot find module")
    assert parsed.warnings == []
    assert parse_log(run.stdout).runner == "node"  # detected without being told
    collect = subprocess.run(
        ["bash", "-c", recipe.collect_command], cwd=repo, capture_output=True, text=True
    )
    assert recipe.count_collected(collect.stdout) == 6  # 5 tests and the broken file


def test_a_run_cut_short_keeps_results_and_says_why() -> None:
    log = (
        'node:test {"s":"pass","id":["test/a.test.js","first"]}\n'
        'node:test {"s":"empty","id":["test/exit.test.js"]}\n'
    )
    parsed = parse_log(log, "node")
    assert parsed.status == "ok" and parsed.tests == {"test/a.test.js > first": PASSED}
    assert any(w.startswith(CUT_SHORT) for w in parsed.warnings)
    assert any("test/exit.test.js reported no test" in w for w in parsed.warnings)


@pytest.mark.slow
@pytest.mark.skipif(NODE is None, reason="needs node")
def test_bootstrap_checks_a_node_test_project_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.undo()  # the host's real node
    repo = write_project(
        tmp_path / "slug",
        {
            "package.json": pkg(scripts={"test": "node --test"}),
            "lib/slug.js": LIB,
            "test/slug.test.js": TESTS,
        },
    )
    result = bootstrap(repo, check=True, use_cache=False)
    assert result.recipe.runner == "node"
    assert result.check is not None and result.check.ok, result.check
    assert result.check.tests_collected == 4


def test_every_runner_table_knows_node(tmp_path: Path) -> None:
    """What keys on runner names downstream accepts ``node`` (the issue: ``ValueError: unknown
    runner 'node'`` after a successful bootstrap)."""
    from repogym.bootstrap.model import count_collected, select_tests
    from repogym.pipelines._harness.emit import record_step
    from repogym.pipelines._harness.runtime import target_ids
    from repogym.pipelines._selection.select import find_test_files
    from repogym.shipped.parsers import RUNNERS

    assert "node" in RUNNERS
    assert parse_log('node:test {"s":"end"}\n', "node").status == "empty"
    assert count_collected("node", "# tests 7\n") == 7
    assert "--test-name-pattern" in select_tests("node", "node --test", ["suite > name"])
    assert target_ids("node", ["test/a.test.js"]) == []  # the whole suite
    repo = write_project(tmp_path / "r", {"test/a.test.mjs": ESM_TESTS, "lib/a.js": LIB})
    assert find_test_files(repo, "node") == ["test/a.test.mjs"]
    step = record_step("/workspace", "k3y", "node")
    assert "node /usr/lib/repogym/record.mjs --record k3y /workspace node" in step
