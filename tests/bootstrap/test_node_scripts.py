"""What ``npm test`` really runs: pre-test builds, wrappers of runners, launchers and env, and
collecting without a runner's own listing (old mocha, fixture modules named like tests).

Nothing here touches a registry: repositories are written in code, mocha's reporter contract is
played by a small fake runner, and the sandbox test has no dependencies to install.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repogym.bootstrap import bootstrap, detect, make_recipe
from repogym.bootstrap.check import _collect_reason, _reason_from, _sample_ids
from repogym.bootstrap.model import Recipe
from repogym.bootstrap.node import project as node
from repogym.bootstrap.node.collect import (
    MOCHA_LIST_SOURCE,
    fixture_modules,
    mocha_collect,
    vitest_exclude,
)
from repogym.bootstrap.node.scripts import pretest_replay, script_chain, split_invocation

from .conftest import local_backend_with_private_cache

MakeRepo = Callable[..., Path]
NODE = shutil.which("node")


def pkg(**fields: object) -> str:
    return json.dumps({"name": "demo", "version": "1.0.0", **fields})


@pytest.fixture(autouse=True)
def one_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node, "host_node", lambda: "20.11.1")
    monkeypatch.setattr(node, "host_nodes", lambda: ["20.11.1"])


# ------------------------------------------------------------------------------ launchers, env


def test_runner_launched_through_node_keeps_launcher_and_env(make_repo: MakeRepo) -> None:
    """uuid (2024): ``BABEL_ENV=commonjsNode node --throw-deprecation node_modules/.bin/jest
    test/unit/`` — node's flag is not a jest option, and babel needs the env."""
    script = "BABEL_ENV=commonjsNode node --throw-deprecation node_modules/.bin/jest test/unit/"
    repo = make_repo(
        {
            "package.json": pkg(
                scripts={"test": script, "pretest": "npm run build", "build": "babel src -d dist"},
                devDependencies={"jest": "^29"},
            ),
            "package-lock.json": "{}",
        }
    )
    d = detect(repo)
    assert d.node is not None
    assert (d.runner, d.node.runner_env, d.node.runner_args) == (
        "jest",
        ["BABEL_ENV=commonjsNode"],
        ["test/unit/"],
    )
    assert d.node.launcher == "node --throw-deprecation node_modules/.bin/jest"
    recipe = make_recipe(repo, d)
    exe = (
        "npm run --silent pretest >&2 && BABEL_ENV=commonjsNode"
        " node --throw-deprecation node_modules/.bin/jest"
    )
    assert recipe.test_command == f"{exe} --ci --verbose test/unit/"
    assert recipe.collect_command == f"{exe} --ci --json --testNamePattern='(?!)' test/unit/"
    assert recipe.test_command_for(["test/unit/a.test.js > x"]) == (
        f"{exe} --ci --verbose test/unit/ test/unit/a.test.js -t '^(x)$'"
    )


@pytest.mark.parametrize(
    ("words", "runner", "launcher", "args"),
    [
        (["jest", "--ci"], "jest", None, ["--ci"]),
        (["npx", "vitest", "run"], "vitest", None, ["run"]),
        (["./node_modules/.bin/mocha", "t/"], "mocha", "./node_modules/.bin/mocha", ["t/"]),
        (
            ["node", "-r", "esm", "node_modules/mocha/bin/_mocha", "t/"],
            "mocha",
            "node -r esm node_modules/mocha/bin/_mocha",
            ["t/"],
        ),
        (["node", "--test", "test/"], "node", None, ["--test", "test/"]),
        (["node", "scripts/test.js"], None, None, []),
    ],
)
def test_split_invocation(
    words: list[str], runner: str | None, launcher: str | None, args: list[str]
) -> None:
    inv = split_invocation(["A=1", "cross-env", "B=2", *words])
    assert (inv.runner, inv.launcher, inv.args) == (runner, launcher, args)
    assert inv.env == ["A=1", "B=2"]


# ------------------------------------------------------------------------------ pre-test hooks


def test_pretest_replay_skips_linters_and_follows_the_chain() -> None:
    scripts = {
        "test": "npm run test:unit",
        "test:unit": "node --test dist/",
        "pretest": "npm run lint && npm run build",
        "pretest:unit": "tsc -p .",
        "lint": "eslint . && prettier --check .",
        "build": "tsc",
    }
    assert script_chain(scripts) == ["test", "test:unit"]
    replay = pretest_replay(scripts)
    assert replay.command == "npm exec --no -c 'npm run build' && npm run --silent pretest:unit"
    assert replay.dropped == ["npm run lint"]
    assert replay.sources == [
        "scripts.pretest ('npm run lint && npm run build')",
        "scripts.pretest:unit ('tsc -p .')",
    ]
    only_lint = {"test": "jest", "pretest": "eslint . && tsc --noEmit"}
    assert pretest_replay(only_lint).command == ""
    assert pretest_replay({"test": "jest"}).command == ""


def test_tests_of_build_output_run_after_the_pretest_build(make_repo: MakeRepo) -> None:
    """uuid (2026): tests run from ``dist-node/test/*.js``, which ``pretest`` builds; a git-hook
    ``prepare`` turns npm's lifecycle scripts off for the replay (``npm pack`` runs it)."""
    repo = make_repo(
        {
            "package.json": pkg(
                scripts={
                    "test": "node --test dist-node/test/*.js",
                    "pretest": "npm run build",
                    "build": "./scripts/build.sh",
                    "prepare": "lefthook install",
                }
            ),
            "package-lock.json": "{}",
        }
    )
    recipe = make_recipe(repo)
    pre = "npm_config_ignore_scripts=true npm run --silent pretest"
    lines = recipe.dockerfile.splitlines()
    assert (
        "# package.json scripts.pretest ('npm run build'): npm runs it before the tests"
        " (the test commands re-run it)"
    ) in lines
    assert lines.index("COPY repo/ /workspace/") < lines.index(f"RUN {pre}")
    for command in (recipe.test_command, recipe.collect_command, recipe.select_command):
        assert command.startswith(f"{pre} >&2 && node --test ")
        assert command.endswith(" dist-node/test/*.js")  # the shell expands it after the build
    assert any("lifecycle scripts off" in n for n in recipe.notes)


def test_env_values_are_quoted_as_values(make_repo: MakeRepo) -> None:
    script = "cross-env NODE_OPTIONS='--max-old-space-size=4096 --no-warnings' TZ=UTC jest"
    repo = make_repo({"package.json": pkg(scripts={"test": script})})
    recipe = make_recipe(repo)
    assert recipe.test_command == (
        "NODE_OPTIONS='--max-old-space-size=4096 --no-warnings' TZ=UTC"
        " npx --no-install jest --ci --verbose"
    )


# ------------------------------------------------------------------------------ wrappers


TS_SCRIPTS_LOCK = {
    "lockfileVersion": 2,
    "packages": {
        "": {"devDependencies": {"@borderless/ts-scripts": "^0.13.6"}},
        "node_modules/@borderless/ts-scripts": {
            "version": "0.13.6",
            "bin": {"ts-scripts": "dist/bin.js"},
            "dependencies": {"arg": "^5.0.1"},
            "peerDependencies": {"typescript": "*", "vitest": "*"},
        },
        "node_modules/vitest": {"version": "0.34.1", "bin": {"vitest": "vitest.mjs"}},
    },
}


def test_wrapper_runner_from_the_lockfile(make_repo: MakeRepo) -> None:
    """path-to-regexp (2023): ``ts-scripts test && npm run size``, vitest only a peer of
    @borderless/ts-scripts — the lockfile says which runner the wrapper runs."""
    fields = {
        "scripts": {"test": "ts-scripts test && npm run size", "size": "size-limit"},
        "devDependencies": {"@borderless/ts-scripts": "^0.13.6", "size-limit": "^8"},
    }
    repo = make_repo(
        {"package.json": pkg(**fields), "package-lock.json": json.dumps(TS_SCRIPTS_LOCK)}
    )
    d = detect(repo)
    assert (d.runner, d.supported) == ("vitest", True)
    assert any("(@borderless/ts-scripts) runs vitest: package-lock.json" in n for n in d.notes)
    assert make_recipe(repo, d).test_command == "npx --no-install vitest run --reporter=verbose"


@pytest.mark.parametrize(
    ("files", "runner", "why"),
    [
        ({"vitest.config.mts": "export default {};\n"}, "vitest", "vitest.config.mts"),
        ({"jest.config.js": "module.exports = {};\n"}, "jest", "jest.config.js"),
        ({}, "vitest", "known wrapper"),
    ],
)
def test_wrapper_runner_without_a_lockfile(
    make_repo: MakeRepo, files: dict[str, str], runner: str, why: str
) -> None:
    fields = {
        "scripts": {"test": "ts-scripts test"},
        "devDependencies": {"@borderless/ts-scripts": "^0.15.0"},
    }
    d = detect(make_repo({"package.json": pkg(**fields), **files}))
    assert (d.runner, d.supported) == (runner, True)
    assert any(why in n for n in d.notes)


def test_wrapper_runner_from_a_plugin(make_repo: MakeRepo) -> None:
    fields = {
        "scripts": {"test": "my-tool test"},
        "devDependencies": {"my-tool": "1", "@vitest/coverage-v8": "1"},
    }
    d = detect(make_repo({"package.json": pkg(**fields)}))
    assert d.runner == "vitest"
    assert any("@vitest/coverage-v8 is a vitest plug-in" in n for n in d.notes)
    # An unknown command with no evidence of a runner stays unsupported.
    plain = {"scripts": {"test": "my-tool test"}, "devDependencies": {"my-tool": "1"}}
    d = detect(make_repo({"package.json": pkg(**plain)}))
    assert not d.supported and "no supported test runner" in d.reason


# ------------------------------------------------------------------------------ fixture modules

CASES = "export const CASES = [{ path: '/a', expected: true }];\n"
SPEC = "import { CASES } from './cases.spec';\ndescribe('x', () => { it('a', () => {}); });\n"


def test_vitest_excludes_fixture_modules(make_repo: MakeRepo) -> None:
    """path-to-regexp (2026): ``src/cases.spec.ts`` holds cases and defines no test; vitest
    fails it ("No test suite found in file") and the whole collect with it."""
    fields = {"scripts": {"test": "vitest"}, "devDependencies": {"vitest": "^3"}}
    repo = make_repo(
        {
            "package.json": pkg(**fields),
            "src/cases.spec.ts": CASES,
            "src/index.spec.ts": SPEC,
            "node_modules/x/a.spec.js": CASES,  # never looked into
        }
    )
    assert fixture_modules(repo) == ["src/cases.spec.ts"]
    recipe = make_recipe(repo)
    assert recipe.test_command == (
        "npx --no-install vitest run --reporter=verbose --exclude=src/cases.spec.ts"
    )
    assert "--exclude=src/cases.spec.ts" in recipe.collect_command
    assert vitest_exclude(["a.spec.ts", "b c.spec.ts"]) == "--exclude='{a.spec.ts,b c.spec.ts}'"
    # vitest < 1 has no --exclude: left as is, with a note.
    lock = {"packages": {"node_modules/vitest": {"version": "0.34.6"}}}
    old = make_repo(
        {
            "package.json": pkg(**fields),
            "package-lock.json": json.dumps(lock),
            "src/cases.spec.ts": CASES,
        }
    )
    d = detect(old)
    assert d.node is not None and d.node.exclude == []
    assert any("has no --exclude" in n for n in d.notes)


def test_collect_reason_is_the_first_failing_file_not_the_report() -> None:
    report = {
        "numTotalTestSuites": 3,
        "numFailedTestSuites": 1,
        "numTotalTests": 2,
        "success": False,
        "testResults": [
            {
                "status": "failed",
                "message": "No test suite found in file /workspace/src/cases.spec.ts",
                "name": "/workspace/src/cases.spec.ts",
                "assertionResults": [],
            },
            {"status": "passed", "name": "/workspace/src/a.spec.ts", "assertionResults": []},
        ],
    }
    stdout = json.dumps(report) + "\n"
    recipe = Recipe("node", "vitest", "node:20-slim", "FROM node:20-slim\n", "t", "c", "s")
    assert _collect_reason(recipe, stdout, stdout, "x") == (
        "error collecting src/cases.spec.ts: No test suite found in file"
        " /workspace/src/cases.spec.ts"
    )
    jest_failed = {
        "numTotalTests": 0,
        "testResults": [
            {
                "status": "failed",
                "name": "/workspace/test/a.test.js",
                "message": "\x1b[1m● Test suite failed to run\x1b[22m\n\n    Cannot find module 'x'",
            }
        ]
        * 2,
    }
    jest = Recipe("node", "jest", "node:20-slim", "FROM node:20-slim\n", "t", "c", "s")
    out = json.dumps(jest_failed)
    assert _collect_reason(jest, out, out, "x") == (
        "error collecting test/a.test.js (+1 more): Cannot find module 'x'"
    )
    cli = (
        '\n● Unrecognized CLI Parameter:\n\n  Unrecognized option "throw-deprecation".\n\n'
        "  CLI Options Documentation:\n  https://jestjs.io/docs/cli\n"
    )
    assert _collect_reason(jest, "", cli, "x") == (
        'Unrecognized CLI Parameter: Unrecognized option "throw-deprecation".'
    )
    # A JSON document is never a reason on its own.
    assert _reason_from('{"numFailedTests":0,"error":"x"}\n', "fallback") == "fallback"


# ------------------------------------------------------------------------------ mocha, any version

FAKE_MOCHA = """
// mocha's reporter contract (every version): the runner carries the loaded suite tree when the
// reporter is constructed, and run() starts the tests afterwards.
const reporter = require(process.argv[2]);
const ran = [];
const t = (title) => ({ title, fn: () => ran.push(title) });
const suite = {
  title: "",
  tests: [t("top level")],
  suites: [
    { title: "math", tests: [t("adds"), t("adds")],
      suites: [{ title: "big", tests: [t("overflows")], suites: [] }] },
    { title: "", tests: [t("anonymous suite")], suites: [] },
  ],
};
const runner = { suite, run() { suite.tests.forEach((x) => x.fn()); } };
reporter(runner);
process.on("exit", () => { if (ran.length) console.log("RAN " + ran.join(",")); });
runner.run(() => {});
"""


@pytest.mark.skipif(NODE is None, reason="needs node")
def test_mocha_list_reporter_lists_without_running(tmp_path: Path) -> None:
    (tmp_path / "fake-mocha.js").write_text(FAKE_MOCHA)
    (tmp_path / "list.cjs").write_text(MOCHA_LIST_SOURCE + "\n")
    run = subprocess.run(
        [NODE or "node", "fake-mocha.js", str(tmp_path / "list.cjs")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "REPOGYM-COLLECT-ID top level",
        "REPOGYM-COLLECT-ID math > adds",
        "REPOGYM-COLLECT-ID math > adds",
        "REPOGYM-COLLECT-ID math > big > overflows",
        "REPOGYM-COLLECT-ID anonymous suite",
        'REPOGYM-COLLECT {"collected":5}',
    ]
    recipe = Recipe("node", "mocha", "node:20-slim", "FROM x\n", "t", "c", "s")
    assert recipe.count_collected(run.stdout) == 5


@pytest.mark.skipif(NODE is None, reason="needs node")
def test_mocha_collect_command_writes_its_reporter(tmp_path: Path) -> None:
    """The collect command carries the reporter itself (mocha < 9 has no ``--dry-run``)."""
    (tmp_path / "fake-mocha.js").write_text(
        FAKE_MOCHA.replace("process.argv[2]", "process.argv[process.argv.length - 1]")
    )
    command = mocha_collect(f"{NODE} fake-mocha.js --reporter spec test/")
    assert "--dry-run" not in command and "--reporter spec" not in command
    run = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == 'REPOGYM-COLLECT {"collected":5}'
    assert (tmp_path / "repogym-mocha-list.cjs").read_text() == MOCHA_LIST_SOURCE + "\n"


def test_mocha_recipe_collects_with_the_list_reporter(make_repo: MakeRepo) -> None:
    repo = make_repo({"package.json": pkg(scripts={"test": "mocha"})})
    recipe = make_recipe(repo)
    assert recipe.test_command == "npx --no-install mocha --reporter spec"
    assert recipe.collect_command.endswith(
        '&& npx --no-install mocha --reporter "${TMPDIR:-/tmp}/repogym-mocha-list.cjs"'
    )


# ------------------------------------------------------------------------------ in the sandbox


@pytest.fixture(scope="module")
def local_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield from local_backend_with_private_cache(tmp_path_factory, "node-scripts-sandbox-cache")


BUILD_JS = """\
const fs = require("fs");
fs.mkdirSync("dist/test", { recursive: true });
for (const f of fs.readdirSync("src/test")) {
  fs.copyFileSync("src/test/" + f, "dist/test/" + f);
}
fs.copyFileSync("src/lib.js", "dist/lib.js");
"""


@pytest.mark.slow
@pytest.mark.skipif(NODE is None, reason="needs node")
def test_bootstrap_builds_before_collecting_tests_of_build_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_backend: None
) -> None:
    monkeypatch.undo()  # the host's real node
    repo = tmp_path / "built"
    files = {
        "package.json": pkg(
            scripts={
                "test": "node --test dist/test/*.test.js",
                "pretest": "npm run lint && npm run build",
                "lint": "eslint .",
                "build": "node build.js",
            }
        ),
        "build.js": BUILD_JS,
        "src/lib.js": "exports.one = () => 1;\n",
        "src/test/one.test.js": (
            'const test = require("node:test");\nconst assert = require("node:assert");\n'
            'const { one } = require("../lib");\n'
            'test("one", () => assert.strictEqual(one(), 1));\n'
            'test("two", () => assert.strictEqual(one() + one(), 2));\n'
        ),
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    result = bootstrap(repo, check=True, use_cache=False)
    assert "RUN npm exec --no -c 'npm run build'" in result.recipe.dockerfile
    assert result.check is not None and result.check.ok, result.check
    assert result.check.tests_collected == 2


def test_sample_ids_from_pretty_reports_and_node_test_lines() -> None:
    """vitest < 1 pretty-prints its JSON report; ``node --test`` ids come from repogym's
    reporter lines (what the parsers name them)."""
    report = {
        "numTotalTests": 1,
        "testResults": [
            {
                "name": "/workspace/src/index.spec.ts",
                "status": "passed",
                "assertionResults": [
                    {"ancestorTitles": ["", "lib", "parse"], "title": "works"},
                ],
            }
        ],
    }
    vitest = Recipe("node", "vitest", "node:20-slim", "FROM x\n", "t", "c", "s")
    assert _sample_ids(vitest, "noise\n" + json.dumps(report, indent=2)) == [
        "src/index.spec.ts > lib > parse > works"
    ]
    lines = (
        'node:test {"s":"skip","id":["dist/test/a.test.js","v4","works"]}\n'
        '# stdout dist/test/a.test.js: node:test {"s":"pass","id":["fake"]}\n'
        'node:test {"s":"end"}\n'
    )
    node_recipe = Recipe("node", "node", "node:20-slim", "FROM x\n", "t", "c", "s")
    assert _sample_ids(node_recipe, lines) == ["dist/test/a.test.js > v4 > works"]
