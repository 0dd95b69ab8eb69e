"""The repositories the adversarial suite generates tasks from (built in code, never fetched).

``ledger`` (Python, pytest): a fix to ``parse_amount`` that must accept thousands separators,
with tests of the changed module and of a second module that uses it. ``slugs`` (JavaScript,
mocha from the npm registry): a fix to ``slugify`` that must collapse runs of separators.
"""

from __future__ import annotations

import json

from tests.sources.conftest import GitRepo

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "ledger"
version = "1.0.0"
requires-python = ">=3.8"

[project.optional-dependencies]
test = ["pytest>=7"]

[tool.setuptools]
packages = ["ledger"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

MONEY_V1 = '''\
"""Amounts of money as integer cents."""


def parse_amount(text):
    """'12.50' -> 1250; a leading '-' makes it negative."""
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("-")
    whole, _, frac = text.partition(".")
    frac = (frac + "00")[:2]
    return sign * (int(whole) * 100 + int(frac))


def format_amount(cents):
    """1250 -> '12.50'."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"
'''

MONEY_V2 = MONEY_V1.replace(
    """    text = text.lstrip("-")
    whole, _, frac = text.partition(".")""",
    """    text = text.lstrip("-")
    if "," in text:
        groups = text.split(".")[0].split(",")
        if any(len(g) != 3 for g in groups[1:]):
            raise ValueError(f"misplaced thousands separator in {text!r}")
        text = text.replace(",", "")
    whole, _, frac = text.partition(".")""",
)

REPORT = '''\
"""A plain-text statement of transactions."""

from ledger.money import format_amount, parse_amount


def total(lines):
    return sum(parse_amount(line.split()[-1]) for line in lines if line.strip())


def statement(lines):
    return "\\n".join([*(line.strip() for line in lines), "total " + format_amount(total(lines))])
'''

TEST_MONEY_V1 = """\
import pytest

from ledger.money import format_amount, parse_amount


def test_parse_plain():
    assert parse_amount("12.50") == 1250


def test_parse_negative():
    assert parse_amount("-3.05") == -305


def test_parse_whole():
    assert parse_amount("7") == 700


def test_format():
    assert format_amount(1250) == "12.50"


def test_format_negative():
    assert format_amount(-5) == "-0.05"


@pytest.mark.parametrize("cents", [0, 1, 99, 100, 123456])
def test_round_trip(cents):
    assert parse_amount(format_amount(cents)) == cents
"""

TEST_MONEY_V2 = (
    TEST_MONEY_V1
    + """

def test_parse_thousands():
    assert parse_amount("1,234.50") == 123450


def test_parse_millions():
    assert parse_amount("-2,000,000") == -200000000


def test_parse_misplaced_separator():
    with pytest.raises(ValueError):
        parse_amount("12,34.00")
"""
)

TEST_REPORT = """\
from ledger.report import statement, total


def test_total():
    assert total(["coffee 3.50", "book 12.00", ""]) == 1550


def test_statement():
    assert statement(["a 1.00", "b 2.25"]).splitlines()[-1] == "total 3.25"
"""


def ledger_repo(repo: GitRepo, *, addopts: str = "") -> GitRepo:
    pyproject = PYPROJECT + (f'addopts = "{addopts}"\n' if addopts else "")
    repo.write("pyproject.toml", pyproject)
    repo.write("ledger/__init__.py", "from ledger.money import format_amount, parse_amount\n")
    repo.write("ledger/money.py", MONEY_V1)
    repo.write("ledger/report.py", REPORT)
    repo.write("tests/test_money.py", TEST_MONEY_V1)
    repo.write("tests/test_report.py", TEST_REPORT)
    repo.commit("Money amounts and statements")
    repo.write("ledger/money.py", MONEY_V2)
    repo.write("tests/test_money.py", TEST_MONEY_V2)
    repo.commit(
        "Accept thousands separators in parse_amount\n\n"
        "parse_amount('1,234.50') used to fail with ValueError: amounts copied from bank\n"
        "statements use commas between groups of three digits. Accept them, and reject a\n"
        "comma that does not separate a group of three digits with ValueError.\n"
    )
    return repo


PACKAGE = {
    "name": "slugs",
    "version": "1.0.0",
    "private": True,
    "scripts": {"test": "mocha"},
    "devDependencies": {"mocha": "^10.2.0"},
}
SLUG_V1 = """\
function slugify(text) {
  return text.trim().toLowerCase().replace(/[^a-z0-9]/g, "-");
}

function title(slug) {
  return slug.split("-").map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join(" ");
}

module.exports = { slugify, title };
"""
SLUG_V2 = SLUG_V1.replace(
    'return text.trim().toLowerCase().replace(/[^a-z0-9]/g, "-");',
    'return text.trim().toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");',
)
TEST_V1 = """\
const assert = require("assert");
const { slugify, title } = require("../lib/slugs");

describe("slugify", function () {
  it("lower-cases words", function () {
    assert.strictEqual(slugify("Hello"), "hello");
  });
  it("joins words with dashes", function () {
    assert.strictEqual(slugify("a b"), "a-b");
  });
});

describe("title", function () {
  it("capitalizes each word", function () {
    assert.strictEqual(title("hello-world"), "Hello World");
  });
});
"""
TEST_V2 = TEST_V1.replace(
    """    assert.strictEqual(slugify("a b"), "a-b");
  });
""",
    """    assert.strictEqual(slugify("a b"), "a-b");
  });
  it("collapses runs of separators", function () {
    assert.strictEqual(slugify("a  --  b"), "a-b");
  });
  it("trims separators at the ends", function () {
    assert.strictEqual(slugify(" (a) "), "a");
  });
""",
)


def slugs_repo(repo: GitRepo) -> GitRepo:
    repo.write("package.json", json.dumps(PACKAGE, indent=2) + "\n")
    repo.write("lib/slugs.js", SLUG_V1)
    repo.write("test/slugs.test.js", TEST_V1)
    repo.commit("String slugs")
    repo.write("lib/slugs.js", SLUG_V2)
    repo.write("test/slugs.test.js", TEST_V2)
    repo.commit(
        "Collapse runs of separators in slugify\n\n"
        "slugify('a  --  b') gives 'a-----b' and slugify(' (a) ') gives '-a-'. A slug should\n"
        "have single dashes between words and none at either end.\n"
    )
    return repo
