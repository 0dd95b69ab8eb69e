"""The gate keeps the name of a failing test that reads it (a golden file named after the test):
renamed, it fails with the gold patch, so its renaming goes and the calibration runs again —
the task keeps its canaries and the other failing tests stay renamed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repogym.spec import GenerationInput
from repogym.workflows import generate
from tests.adversarial.repos import MONEY_V1, MONEY_V2, PYPROJECT, TEST_MONEY_V1, TEST_MONEY_V2
from tests.sources.conftest import GitRepo, pin_git_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

GOLDEN_TEST = """

def test_parse_golden(request):
    golden = Path(__file__).parent / "golden" / (request.node.name + ".txt")
    assert parse_amount(golden.read_text().strip()) == 98765400
"""


def test_a_test_that_reads_its_own_name_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_git_env(monkeypatch, ceiling=tmp_path)
    repo = GitRepo(tmp_path / "ledger")
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("ledger/__init__.py", "from ledger.money import format_amount, parse_amount\n")
    repo.write("ledger/money.py", MONEY_V1)
    repo.write("tests/test_money.py", TEST_MONEY_V1)
    repo.commit("Money amounts")
    repo.write("ledger/money.py", MONEY_V2)
    repo.write("tests/test_money.py", "from pathlib import Path\n" + TEST_MONEY_V2 + GOLDEN_TEST)
    repo.write("tests/golden/test_parse_golden.txt", "987,654.00\n")
    repo.commit(
        "Accept thousands separators in parse_amount\n\n"
        "parse_amount('1,234.50') used to fail with ValueError: amounts copied from bank\n"
        "statements use commas between groups of three digits. Accept them, and reject a\n"
        "comma that does not separate a group of three digits with ValueError.\n"
    )
    result = generate(
        GenerationInput(
            repo=str(repo.path),
            pipeline="commit_runtime",
            out=tmp_path / "ds",
            options={"reruns": 0, "verify_reruns": 0, "mutants": 0},
        )
    )
    kept = [o for o in result.outcomes if o.kept]
    assert len(kept) == 1 and kept[0].task_dir is not None, [
        (o.reason, o.detail) for o in result.outcomes
    ]
    tests = kept[0].task_dir / "tests"
    f2p = json.loads((tests / "f2p.json").read_text())
    assert "tests/test_money.py::test_parse_golden" in f2p
    data = json.loads((tests / "canaries.json").read_text())
    assert data["status"] == "confirmed" and data["pool"], data.get("pool")
    renamed = {site["title"] for site in data["disguise"]}
    assert "test_parse_golden" not in renamed
    assert {"test_parse_thousands", "test_parse_millions"} <= renamed
