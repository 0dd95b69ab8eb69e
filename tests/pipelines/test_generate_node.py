"""generate on a Node project tested with mocha (installed from the npm registry in the build)."""

from __future__ import annotations

import json

import pytest

from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.workflows import generate
from tests.sources.conftest import GitRepo

pytestmark = pytest.mark.slow

PACKAGE = {
    "name": "strutil",
    "version": "1.0.0",
    "private": True,
    "scripts": {"test": "mocha"},
    "devDependencies": {"mocha": "^10.2.0"},
}
LIB_V1 = """\
function capitalize(word) {
  return word.charAt(0).toUpperCase() + word.slice(1);
}

function words(text) {
  return text.split(" ");
}

module.exports = { capitalize, words };
"""
TEST_V1 = """\
const assert = require("assert");
const { capitalize, words } = require("../lib/strutil");

describe("capitalize", function () {
  it("upper-cases the first letter", function () {
    assert.strictEqual(capitalize("hello"), "Hello");
  });
});

describe("words", function () {
  it("splits on spaces", function () {
    assert.deepStrictEqual(words("a b"), ["a", "b"]);
  });
});
"""


def test_mocha_project(make_repo, tmp_path) -> None:
    repo: GitRepo = make_repo("strutil")
    repo.write("package.json", json.dumps(PACKAGE, indent=2) + "\n")
    repo.write("lib/strutil.js", LIB_V1)
    repo.write("test/strutil.test.js", TEST_V1)
    repo.commit("Initial string utilities")
    repo.write(
        "lib/strutil.js", LIB_V1.replace('text.split(" ")', "text.split(/\\s+/).filter(Boolean)")
    )
    repo.write(
        "test/strutil.test.js",
        TEST_V1.replace(
            '    assert.deepStrictEqual(words("a b"), ["a", "b"]);\n  });\n',
            '    assert.deepStrictEqual(words("a b"), ["a", "b"]);\n  });\n\n'
            '  it("ignores repeated whitespace", function () {\n'
            '    assert.deepStrictEqual(words(" a\\t b "), ["a", "b"]);\n  });\n',
        ),
    )
    fix = repo.commit(
        "Split words on any run of whitespace\n\nwords() returned empty strings for repeated spaces and tabs."
    )
    result = generate(
        GenerationInput(repo=str(repo.path), pipeline="commit_runtime", out=tmp_path / "out")
    )
    report = json.loads(result.report.read_text())
    assert report["yield"]["kept"] == 1, report["outcomes"]
    task = load_task(tmp_path / "out" / "tasks" / f"local__strutil-{fix[:12]}")
    sub = task.config.metadata["repo2env"]["commit_runtime"]
    assert sub["runner"] == "mocha"
    # Graded from mocha's JSON report (written to a file by mocha's main process), whose ids
    # name the spec file.
    assert sub["fail_to_pass"] == ["test/strutil.test.js > words > ignores repeated whitespace"]
    assert sub["pass_to_pass"] == [
        "test/strutil.test.js > capitalize > upper-cases the first letter",
        "test/strutil.test.js > words > splits on spaces",
    ]
    assert json.loads((task.tests_dir / "config.json").read_text())["json_report"] is True
    assert task.config.metadata["repo2env"]["evaluation"]["status"] == "verified"


def test_mocha_new_export_is_named_in_the_instruction(make_repo, tmp_path) -> None:
    """A JS change whose tests import a function the module does not export yet: the
    instruction names it (with its signature), with the failure mocha saw before the fix."""
    repo: GitRepo = make_repo("strutil")
    repo.write("package.json", json.dumps(PACKAGE, indent=2) + "\n")
    repo.write("lib/strutil.js", LIB_V1)
    repo.write("test/strutil.test.js", TEST_V1)
    repo.commit("Initial string utilities")
    lib = LIB_V1.replace(
        "module.exports = { capitalize, words };",
        'function slugify(text, sep = "-") {\n'
        "  return words(text.toLowerCase()).join(sep);\n}\n\n"
        "module.exports = { capitalize, words, slugify };",
    )
    repo.write("lib/strutil.js", lib)
    repo.write(
        "test/slug.test.js",
        'const assert = require("assert");\n'
        'const { slugify } = require("../lib/strutil");\n\n'
        'describe("slugify", function () {\n'
        '  it("joins lower-cased words with dashes", function () {\n'
        '    assert.strictEqual(slugify("Hello World"), "hello-world");\n  });\n});\n',
    )
    fix = repo.commit("Add a helper for URL slugs")
    opts = {"mutants": 0, "reruns": 0, "verify_reruns": 0, "adversarial": False}
    result = generate(
        GenerationInput(
            repo=str(repo.path), pipeline="commit_runtime", out=tmp_path / "out", options=opts
        )
    )
    report = json.loads(result.report.read_text())
    assert report["yield"]["kept"] == 1, report["outcomes"]
    task = load_task(tmp_path / "out" / "tasks" / f"local__strutil-{fix[:12]}")
    text = task.instruction()
    interface = text.split("## Required interface", 1)[1]
    assert 'slugify(text, sep = "-")' in interface or "slugify(text, sep=" in interface
    assert "slugify: joins lower-cased words with dashes" in text
    assert "is not a function" in text  # what mocha saw before the fix
    assert "words(text.toLowerCase())" not in text
    record = task.config.metadata["repogym"]["instruction"]
    assert record["spec_coverage"] == 1.0 and "slugify" in " ".join(record["required"])
