"""Candidate canaries built from a task's hidden tests, and the gate's confirmation of them."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from repogym.verify import canaries
from repogym.verify.canaries import MARK
from tests.adversarial.repos import TEST_MONEY_V2, TEST_V2

F2P = [
    "tests/test_money.py::test_parse_thousands",
    "tests/test_money.py::test_parse_millions",
    "tests/test_money.py::test_parse_misplaced_separator",
]
P2P = ["tests/test_money.py::test_parse_plain", "tests/test_money.py::test_round_trip[0]"]


def planted(c: canaries.Candidate, text: str, name: str, where: str = "after") -> str:
    """The file as the judge writes it with ``c`` planted under ``name``."""
    lines = text.splitlines(keepends=True)
    code = c.code.replace(MARK, name)
    gap = "\n" * c.gap
    at, block = (c.after, gap + code) if where == "after" else (c.before, code + gap)
    return "".join(lines[:at] + [block] + lines[at:])


def test_python_candidates_contradict_one_expectation_each() -> None:
    pool = canaries.build({"tests/test_money.py": TEST_MONEY_V2.encode()}, F2P, P2P, "pytest")
    assert pool.status == "candidates"
    by_source = {c.source: c for c in pool.pool}
    # every F2P test gives one; the parametrized P2P test gives none (several ids)
    assert set(F2P) <= set(by_source)
    assert not any("[" in c.source for c in pool.pool)
    assert [c.origin for c in pool.pool][:3] == ["f2p"] * 3
    thousands = by_source[F2P[0]]
    assert thousands.change in ("123450 -> 123451", "123450 -> 123449")
    assert by_source[F2P[2]].change == "ValueError -> KeyError"
    existing = {
        n.name for n in ast.walk(ast.parse(TEST_MONEY_V2)) if isinstance(n, ast.FunctionDef)
    }
    for c in pool.pool:
        assert c.names and not set(c.names) & existing
        name = c.names[0]
        for where in ("before", "after"):
            text = planted(c, TEST_MONEY_V2, name, where)
            tree = ast.parse(text)  # still valid Python, with one more test of that name
            names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
            assert names.count(name) == 1 and len(names) == len(existing) + 1
        assert c.ident(name) == c.source.rsplit("::", 1)[0] + "::" + name


def test_unittest_ids_and_methods() -> None:
    text = (
        "import unittest\n\nfrom pkg import add\n\n\nclass TestAdd(unittest.TestCase):\n"
        "    def test_small(self):\n        self.assertEqual(add(1, 2), 3)\n\n"
        "    def test_text(self):\n        self.assertEqual(add('a', 'b'), 'ab')\n"
    )
    ids = ["tests.test_add.TestAdd.test_small", "tests.test_add.TestAdd.test_text"]
    pool = canaries.build({"tests/test_add.py": text.encode()}, ids, [], "unittest")
    assert {c.source for c in pool.pool} == set(ids)
    text_canary = next(c for c in pool.pool if c.source == ids[1])
    assert "'ab'" not in text_canary.code and (
        "'abb'" in text_canary.code or "'a'" in text_canary.code
    )
    assert text_canary.code.startswith("    def " + MARK + "(self):")
    tree = ast.parse(planted(text_canary, text, text_canary.names[0]))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert text_canary.names[0] in [n.name for n in cls.body if isinstance(n, ast.FunctionDef)]
    assert text_canary.ident("x") == "tests.test_add.TestAdd.x"


def test_javascript_candidates_keep_the_block_and_quote() -> None:
    ids = ["slugify collapses runs of separators", "slugify trims separators at the ends"]
    pool = canaries.build(
        {"test/slugs.test.js": TEST_V2.encode()}, ids, ["slugify lower-cases words"], "mocha"
    )
    assert {c.source for c in pool.pool} == set(ids) | {"slugify lower-cases words"}
    c = next(c for c in pool.pool if c.source == ids[0])
    assert c.code.startswith('  it("' + MARK + '", function () {') and c.code.rstrip().endswith(
        "});"
    )
    assert '"a-b")' not in c.code
    name = c.names[0]
    assert name.startswith("collapses runs of separators ") and c.ident(name) == "slugify " + name
    text = planted(c, TEST_V2, name)
    assert text.count("it(") == TEST_V2.count("it(") + 1


def test_no_candidates_from_tests_without_a_literal_expectation(tmp_path: Path) -> None:
    text = "def test_truthy():\n    assert compute()\n"
    pool = canaries.build(
        {"t/test_a.py": text.encode()}, ["t/test_a.py::test_truthy"], [], "pytest"
    )
    assert pool.pool == []
    canaries.write(tmp_path, pool)
    # No canary, but the failing test is still renamed in every run (its site is kept).
    data = json.loads((tmp_path / "canaries.json").read_text())
    assert data["pool"] == []
    assert [(d["title"], d["line"], d["col"]) for d in data["disguise"]] == [("test_truthy", 0, 4)]
    canaries.write(tmp_path, canaries.Pool(status="candidates"))
    assert not (tmp_path / "canaries.json").exists()


def test_confirm_keeps_candidates_failing_with_gold_and_not_passing_without(tmp_path: Path) -> None:
    """Gold: each must fail. Original code: none may pass (one that never ran, its module
    failing to load without the fix, is kept)."""
    pool = canaries.build({"tests/test_money.py": TEST_MONEY_V2.encode()}, F2P, P2P, "pytest")
    canaries.write(tmp_path, pool)
    n = len(pool.pool)
    gold = {"outcomes": {str(i): "FAILED" for i in range(n)} | {"1": "PASSED", "3": None}}
    base = {"outcomes": {str(i): "FAILED" for i in range(n)} | {"2": "PASSED", "0": None}}
    assert canaries.confirm(tmp_path, gold, base)[0] == n - 3
    data = json.loads((tmp_path / "canaries.json").read_text())
    assert data["status"] == "confirmed" and len(data["pool"]) == n - 3
    assert [c["source"] for c in data["pool"]] == [
        c.source for i, c in enumerate(pool.pool) if i not in (1, 2, 3)
    ]
    assert canaries.confirm(tmp_path, gold, base) is None  # confirmed once, for good


def test_confirm_without_write_leaves_the_candidates(tmp_path: Path) -> None:
    pool = canaries.build({"tests/test_money.py": TEST_MONEY_V2.encode()}, F2P, P2P, "pytest")
    canaries.write(tmp_path, pool)
    before = (tmp_path / "canaries.json").read_bytes()
    failed = {"outcomes": {str(i): "FAILED" for i in range(len(pool.pool))}}
    kept, data = canaries.confirm(tmp_path, failed, failed, write=False) or (None, None)
    assert kept == len(pool.pool) and data and data["status"] == "confirmed"
    assert (tmp_path / "canaries.json").read_bytes() == before


def test_confirm_with_nothing_kept_keeps_only_the_renaming(tmp_path: Path) -> None:
    pool = canaries.build({"tests/test_money.py": TEST_MONEY_V2.encode()}, F2P, P2P, "pytest")
    canaries.write(tmp_path, pool)
    assert canaries.confirm(tmp_path, {"outcomes": {}}, {"outcomes": {}})[0] == 0
    data = json.loads((tmp_path / "canaries.json").read_text())
    assert data["status"] == "confirmed" and data["pool"] == []
    assert sorted(d["title"] for d in data["disguise"]) == sorted(t.split("::")[-1] for t in F2P)
    pool.disguise = []
    canaries.write(tmp_path, pool)
    assert canaries.confirm(tmp_path, {"outcomes": {}}, {"outcomes": {}})[0] == 0
    assert not (tmp_path / "canaries.json").exists()


def test_javascript_titles_used_under_several_blocks_are_found_by_name() -> None:
    """mocha/jest ids hold the enclosing blocks' titles, and one title may be used under many
    blocks: such candidates are matched by their (new) name after the run."""
    text = (
        'describe("a", () => {\n  it("works", () => {\n    assert.equal(f("a"), "A");\n  });\n});\n'
        'describe("b", () => {\n  it("works", () => {\n    assert.equal(f("b"), "B");\n  });\n});\n'
    )
    ids = ["a works", "b works"]
    pool = canaries.build({"test/f.test.js": text.encode()}, ids, [], "mocha")
    assert [c.before for c in pool.pool] == [1, 6]
    assert all(c.match == "suffix" for c in pool.pool)
    assert 'f("a"), "AA");' in pool.pool[0].code  # one letter: doubled, never emptied


def test_python_containers_of_literals_are_contradicted_in_their_last_item() -> None:
    text = (
        "import unittest\n\n\nclass T(unittest.TestCase):\n"
        "    def test_table(self):\n        self.assertEqual(load('a = 1'), {'a': 1})\n\n"
        "    def test_list(self):\n        assert split('x y') == ['x', 'y']\n"
    )
    ids = ["tests.test_m.T.test_table", "tests.test_m.T.test_list"]
    pool = canaries.build({"tests/test_m.py": text.encode()}, ids, [], "unittest")
    changes = {c.source: c.change for c in pool.pool}
    assert changes[ids[0]] in ("1 -> 2", "1 -> 0")
    assert changes[ids[1]] == "'y' -> 'yy'"


def test_data_driven_tasks_take_their_canaries_from_the_base_test_files(tmp_path: Path) -> None:
    """A fail-to-pass test with no literal to contradict (it reads its cases from data files):
    the candidates come from the pass-to-pass tests' own file in the base, which then gets a
    hidden copy (the same bytes) for the judge to plant them in."""
    from repogym.pipelines._harness.emit import stage_canaries

    tests, base = tmp_path / "tests", tmp_path / "repo"
    (tests / "files" / "tests").mkdir(parents=True)
    (tests / "files" / "tests" / "test_data.py").write_text(
        "def test_valid():\n    for case in load_cases():\n        check(case)\n"
    )
    (tests / "config.json").write_text(json.dumps({"restore": ["tests/test_data.py"]}))
    misc = "def test_load():\n    assert load('a = 1') == {'a': 1}\n"
    (base / "tests").mkdir(parents=True)
    (base / "tests" / "test_misc.py").write_text(misc)
    f2p = ["tests/test_data.py::test_valid"]
    stage_canaries(tests, base, f2p, ["tests/test_misc.py::test_load"], "pytest", "t")
    data = json.loads((tests / "canaries.json").read_text())
    assert [c["file"] for c in data["pool"]] == ["tests/test_misc.py"]
    assert (tests / "files" / "tests" / "test_misc.py").read_text() == misc
    assert json.loads((tests / "config.json").read_text())["restore"] == [
        "tests/test_data.py",
        "tests/test_misc.py",
    ]
