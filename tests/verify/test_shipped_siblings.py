"""Attack: a task's shipped judge modules load their siblings (``testfiles.py``, ``_log_*.py``)
from their own read-only folder. A module of the same name in a folder earlier on ``sys.path``
(the working tree, an agent-made site folder) must not be taken instead."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import repogym.shipped.infra as infra
import repogym.shipped.parsers as parsers
import repogym.shipped.testfiles as testfiles

HOSTILE = "def is_test_path(path):\n    return False\n"


def _run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_infra_takes_its_own_testfiles_over_one_earlier_on_the_path(tmp_path: Path) -> None:
    judge, hostile = tmp_path / "tests", tmp_path / "workspace"
    judge.mkdir()
    hostile.mkdir()
    shutil.copy(infra.__file__, judge / "infra.py")
    shutil.copy(testfiles.__file__, judge / "testfiles.py")
    (hostile / "testfiles.py").write_text(HOSTILE)
    code = (
        f"import sys; sys.path[:0] = [{str(hostile)!r}, {str(judge)!r}]\n"
        "import infra; print(infra.is_test_path('tests/test_a.py'))"
    )
    assert _run(code) == "True"


def test_parsers_take_their_own_modules_over_ones_earlier_on_the_path(tmp_path: Path) -> None:
    judge, hostile = tmp_path / "tests", tmp_path / "workspace"
    judge.mkdir()
    hostile.mkdir()
    here = Path(parsers.__file__).parent
    shutil.copy(here / "__init__.py", judge / "parsers.py")
    for part in here.glob("_log_*.py"):
        shutil.copy(part, judge / part.name)
    (hostile / "_log_pytest.py").write_text("def parse_pytest(*a, **k):\n    raise SystemExit(7)\n")
    code = (
        f"import sys; sys.path[:0] = [{str(hostile)!r}, {str(judge)!r}]\n"
        "import parsers, _log_pytest; print(_log_pytest.__file__)"
    )
    assert _run(code) == str(judge / "_log_pytest.py")
