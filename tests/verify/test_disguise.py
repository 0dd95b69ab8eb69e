"""The judge renames the fail-to-pass tests in every run (``canaries.json`` ``disguise``): the
names the instruction gives them exist in no run, the new names look like the canaries', and
the outcomes come back under the graded ids."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from repogym import shipped
from repogym.verify import canaries

GO_TEST = """package money

import "testing"

func TestParsePlain(t *testing.T) {
\tif got, _ := ParseAmount("12.34"); got != 1234 {
\t\tt.Fatal(got)
\t}
}

func TestParseThousands(t *testing.T) {
\tfor _, c := range []string{"1,234.50"} {
\t\tt.Run(c, func(t *testing.T) {
\t\t\tif got, _ := ParseAmount(c); got != 123450 {
\t\t\t\tt.Fatal(got)
\t\t\t}
\t\t})
\t}
}
"""
F2P = ["TestParseThousands", "TestParseThousands/1,234.50"]
P2P = ["TestParsePlain"]


@pytest.fixture()
def judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The shipped verifier, loaded from a task's ``tests/`` folder as the judge runs it."""
    folder = tmp_path / "tests"
    folder.mkdir()
    for name in (*shipped.GRADED, "verifier.py"):
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(shipped.read(name))
    monkeypatch.setenv("REPOGYM_VERIFIER_LOGS", str(tmp_path / "logs"))
    spec = importlib.util.spec_from_file_location("judge_under_test", folder / "verifier.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    for name in ("infra", "parsers", "reports", "tamper", "rust_tests"):
        sys.modules.pop(name, None)


def _pool() -> dict:
    return canaries.build({"money_test.go": GO_TEST.encode()}, F2P, P2P, "go").to_json()


def test_the_failing_test_is_found_where_it_is_named() -> None:
    (site,) = _pool()["disguise"]
    assert site["title"] == "TestParseThousands"
    line = GO_TEST.split("\n")[site["line"]]
    assert line[site["col"] :].startswith("TestParseThousands(")
    assert sorted(i for i, _at in site["ids"]) == sorted(F2P)
    assert all(n.startswith("TestParseThousands_") for n in site["names"])


def test_every_run_renames_the_failing_tests_and_grades_them_by_their_ids(
    judge: ModuleType, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    source = work / "money_test.go"
    config = {"workdir": str(work), "command": "go test -json ./..."}
    names = set()
    for _ in range(12):
        source.write_text(GO_TEST)
        back, taken = judge.disguise_tests(config, _pool(), set(F2P + P2P))
        text = source.read_text()
        (name,) = taken
        names.add(name)
        assert "func TestParseThousands(" not in text and f"func {name}(" in text
        assert text.count("\n") == GO_TEST.count("\n")  # canaries are planted by line after
        assert back == {name: F2P[0], f"{name}/1,234.50": F2P[1]}
        result = {
            "tests": {"TestParsePlain": "PASSED", name: "FAILED", f"{name}/1,234.50": "FAILED"},
            "failures": {name: "got 0"},
        }
        assert judge.unmask(result, back) == []
        assert result["tests"] == {
            "TestParsePlain": "PASSED",
            "TestParseThousands": "FAILED",
            "TestParseThousands/1,234.50": "FAILED",
        }
        assert result["failures"] == {"TestParseThousands": "got 0"}
    assert len(names) > 1  # the judge's own randomness, afresh for each run


def test_a_test_reported_under_its_old_name_is_a_tamper(judge: ModuleType, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "money_test.go").write_text(GO_TEST)
    config = {"workdir": str(work), "command": "go test ./..."}
    back, _taken = judge.disguise_tests(config, _pool(), set(F2P + P2P))
    result = {"tests": {"TestParseThousands": "PASSED", "TestParsePlain": "PASSED"}}
    reasons = judge.unmask(result, back)
    assert reasons and "TestParseThousands" in reasons[0]
    assert "TestParseThousands" not in result["tests"]


def test_canaries_never_take_a_renamed_test_s_name(judge: ModuleType, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    source = work / "money_test.go"
    pool = _pool()
    pool["status"] = "confirmed"
    (Path(judge.HERE) / "canaries.json").write_text(json.dumps(pool))
    config = {"workdir": str(work), "command": "go test ./..."}
    for _ in range(12):
        source.write_text(GO_TEST)
        back, taken = judge.disguise_tests(config, pool, set(F2P + P2P))
        planted = judge.plant_canaries(config, set(F2P + P2P) | set(back), taken)
        assert planted is not None
        for name in planted["planted"]:
            assert not any(t.endswith(name) or name.endswith(t) for t in taken)
        text = source.read_text()
        assert text.count("func TestParseThousands") == 1 + sum(
            n.startswith("TestParseThousands_") for n in planted["planted"]
        )


def test_a_command_that_names_the_test_keeps_it(judge: ModuleType, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "money_test.go").write_text(GO_TEST)
    config = {"workdir": str(work), "command": "go test -run 'TestParseThousands' ./..."}
    assert judge.disguise_tests(config, _pool(), set(F2P + P2P)) == ({}, [])
    assert (work / "money_test.go").read_text() == GO_TEST


def test_python_and_junit_sites() -> None:
    py = "import pytest\n\n\n@pytest.mark.parametrize('x', [1])\ndef test_big(x):\n    assert f(x) == 2\n"
    pool = canaries.build(
        {"tests/test_a.py": py.encode()}, ["tests/test_a.py::test_big[1]"], [], "pytest"
    )
    (site,) = pool.disguise
    assert (site["line"], site["col"], site["ids"]) == (
        4,
        4,
        [["tests/test_a.py::test_big[1]", 17]],
    )
    java = (
        "package demo;\n\nclass MoneyTest {\n    @Test\n    void parsesThousands() {\n"
        '        assertEquals(123450, Money.parse("1,234.50"));\n    }\n}\n'
    )
    pool = canaries.build(
        {"src/test/java/demo/MoneyTest.java": java.encode()},
        ["demo.MoneyTest#parsesThousands"],
        [],
        "maven",
    )
    (site,) = pool.disguise
    assert (site["line"], site["col"]) == (4, 9)
    assert site["ids"] == [["demo.MoneyTest#parsesThousands", 15]]


def test_a_site_that_no_longer_matches_is_left_alone(judge: ModuleType, tmp_path: Path) -> None:
    """A hidden file that is not what generation read (the name is not where the site says, or
    the file is gone) is not touched and renames nothing."""
    work = tmp_path / "work"
    work.mkdir()
    moved = GO_TEST.replace("func TestParseThousands(", "func  TestParseThousands(")
    (work / "money_test.go").write_text(moved)
    config = {"workdir": str(work), "command": "go test ./..."}
    assert judge.disguise_tests(config, _pool(), set(F2P + P2P)) == ({}, [])
    assert (work / "money_test.go").read_text() == moved
    (work / "money_test.go").unlink()
    assert judge.disguise_tests(config, _pool(), set(F2P + P2P)) == ({}, [])
    assert not (work / "money_test.go").exists()


def test_copies_of_the_failing_tests_are_planted_first(judge: ModuleType, tmp_path: Path) -> None:
    """Code that answers every test named like the ones the instruction names is caught only by
    a canary copying one of those: every run plants them before copies of other tests."""
    work = tmp_path / "work"
    work.mkdir()
    source = work / "money_test.go"
    pool = _pool()
    assert {c["origin"] for c in pool["pool"]} == {"f2p", "p2p"}
    pool.update(status="confirmed", per_run=1)
    (Path(judge.HERE) / "canaries.json").write_text(json.dumps(pool))
    config = {"workdir": str(work), "command": "go test ./..."}
    for _ in range(20):
        source.write_text(GO_TEST)
        planted = judge.plant_canaries(config, set(F2P + P2P))
        [(index, _ident)] = planted["planted"].values()
        assert pool["pool"][index]["origin"] == "f2p"
