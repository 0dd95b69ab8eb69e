"""The example tasks are graded like generated ones: their verifier is the current templates'
(the judge outside the test process, the integrity record, the tamper scan), declared for the
clean room, with a content hash that matches (``scripts/refresh_examples.py``)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_examples_use_the_current_verifier() -> None:
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "refresh_examples.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, (
        res.stdout + res.stderr + "\nrun: .venv/bin/python scripts/refresh_examples.py"
    )
